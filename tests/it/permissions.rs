//! Directories the build may not read or list, at every level of the corpus.
//!
//! Each case copies the golden corpus, takes away permission on one
//! directory and runs `precache` as an unprivileged user (uid/gid 65534,
//! `nobody`, when the tests run as root: root is never denied anything; as
//! the current user otherwise). The denied directory must be one report line
//! naming it with the OS error, no thread may vanish (threads in the cache +
//! threads reported = threads on disk), and `--strict` must fail naming it.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::common::*;
use serde_json::Value;

const NOBODY: u32 = 65534;

fn is_root() -> bool {
    // SAFETY: getuid has no preconditions and cannot fail.
    unsafe { libc::getuid() == 0 }
}

/// The files `bin` was built from: cargo's dep-info file beside it (only
/// what the binary compiles, so an edit of a test-only module does not make
/// it stale), or every source of the crate and the examples without one.
fn sources_of(bin: &Path) -> Vec<PathBuf> {
    let Ok(info) = fs::read_to_string(bin.with_extension("d")) else {
        let mut all = Vec::new();
        for dir in [repo("src"), repo("examples")] {
            collect(&dir, &mut all);
        }
        return all;
    };
    let deps = info.split_once(": ").map_or("", |(_, d)| d);
    // Paths are separated by spaces; a space inside one is escaped.
    deps.replace("\\ ", "\0")
        .split_whitespace()
        .map(|p| PathBuf::from(p.replace('\0', " ")))
        .collect()
}

/// Every file under `dir`.
fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            collect(&e.path(), out);
        } else {
            out.push(e.path());
        }
    }
}

/// `precache` run as an unprivileged user.
fn precache_unprivileged() -> Command {
    let mut cmd = example("precache");
    // `cargo test --test it permissions::` does not rebuild the examples: refuse
    // to test a stale binary.
    let exe = std::env::current_exe().unwrap();
    let bin = exe
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("examples/precache");
    let built = fs::metadata(&bin).unwrap().modified().unwrap();
    let stale = sources_of(&bin).into_iter().find(|p| {
        fs::metadata(p)
            .and_then(|m| m.modified())
            .is_ok_and(|t| t > built)
    });
    assert!(
        stale.is_none(),
        "{} is older than {}: run `cargo build --release --examples` \
         (or `cargo test --release` without --test), which rebuilds it",
        bin.display(),
        stale.unwrap_or_default().display()
    );
    if is_root() {
        cmd.uid(NOBODY).gid(NOBODY);
    } else {
        eprintln!("not root: running precache as the current user, who is already unprivileged");
    }
    cmd
}

fn set_mode(path: &Path, mode: u32) {
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
        .unwrap_or_else(|e| panic!("chmod {mode:o} {}: {e}", path.display()));
}

/// Copies `from` to `to`: directories 0755, files 0644, so that any user may
/// read the copy.
fn copy_tree(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    set_mode(to, 0o755);
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let dst = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &dst);
        } else {
            fs::copy(entry.path(), &dst).unwrap();
            set_mode(&dst, 0o644);
        }
    }
}

/// Thread directories on disk (an all-digit name with a source folder), as
/// paths relative to `root`, `/`-separated.
fn threads_on_disk(root: &Path, dir: &Path, out: &mut Vec<String>) {
    let mut entries: Vec<_> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().unwrap().is_dir())
        .collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let name = e.file_name().to_string_lossy().into_owned();
        let path = e.path();
        let is_thread = !name.is_empty()
            && name.bytes().all(|b| b.is_ascii_digit())
            && (path.join("source-tweets").is_dir() || path.join("source-tweet").is_dir());
        if is_thread {
            let rel = path.strip_prefix(root).unwrap();
            out.push(rel.to_string_lossy().replace('\\', "/"));
        } else {
            threads_on_disk(root, &path, out);
        }
    }
}

fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A copy of the golden corpus without its bad inputs, readable by everyone,
/// and an output directory writable by everyone.
struct Setup {
    _tmp: tempfile::TempDir,
    corpus: PathBuf,
    out: PathBuf,
    /// Threads on disk, before anything is denied.
    threads: Vec<String>,
}

impl Setup {
    fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        set_mode(tmp.path(), 0o755);
        let corpus = tmp.path().join("corpus");
        copy_tree(&repo("tests/fixtures/golden/corpus"), &corpus);
        // Remove the golden corpus's own bad inputs, so that the denied
        // directory is the only one and `--strict` must name it.
        for _ in 0..3 {
            let summary = build_cache(&corpus, &tmp.path().join("baseline"), 2);
            if summary.report.is_empty() {
                break;
            }
            for bad in &summary.report {
                let p = corpus.join(&bad.path);
                if p.is_dir() {
                    fs::remove_dir_all(&p).unwrap();
                } else if p.exists() {
                    fs::remove_file(&p).unwrap();
                }
            }
        }
        let summary = build_cache(&corpus, &tmp.path().join("baseline"), 2);
        assert_eq!(summary.report, [], "the cleaned corpus has no bad input");
        fs::remove_dir_all(tmp.path().join("baseline")).unwrap();
        let out = tmp.path().join("out");
        fs::create_dir(&out).unwrap();
        set_mode(&out, 0o777);
        let mut threads = Vec::new();
        threads_on_disk(&corpus, &corpus, &mut threads);
        assert!(threads.len() > 50, "golden corpus has threads: {threads:?}");
        Setup {
            _tmp: tmp,
            corpus,
            out,
            threads,
        }
    }

    /// Denies `rel` (mode `mode`), runs lenient and strict builds, checks
    /// both, and restores the mode (so the temp dir can be removed).
    fn check_denied(&self, rel: &str, mode: u32) {
        let denied = self.corpus.join(rel);
        assert!(denied.is_dir(), "{rel} exists");
        set_mode(&denied, mode);
        let result = std::panic::catch_unwind(|| self.run_checks(rel));
        set_mode(&denied, 0o755);
        if let Err(e) = result {
            std::panic::resume_unwind(e);
        }
    }

    fn run_checks(&self, rel: &str) {
        // Lenient: succeeds, reports the directory, loses no thread silently.
        let cache = self.out.join("cache");
        let report = self.out.join("report.jsonl");
        let o = precache_unprivileged()
            .arg(&self.corpus)
            .arg(&cache)
            .args(["--threads", "2", "--quiet", "--report"])
            .arg(&report)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "lenient build with {rel} denied: {}",
            text(&o)
        );
        let lines = jsonl(&fs::read_to_string(&report).unwrap());
        let line = lines
            .iter()
            .find(|l| l["path"] == rel)
            .unwrap_or_else(|| panic!("no report line for {rel}: {lines:#?}"));
        let reason = line["reason"].as_str().unwrap();
        assert!(
            reason.contains("cannot list directory") && reason.contains("os error 13"),
            "reason for {rel}: {reason}"
        );
        let stored = jsonl(&fs::read_to_string(cache.join("report.jsonl")).unwrap());
        assert_eq!(stored, lines, "--report and the cache's report.jsonl agree");

        let manifest: Value =
            serde_json::from_str(&fs::read_to_string(cache.join("manifest.json")).unwrap())
                .unwrap();
        let in_cache = manifest["threads"].as_u64().unwrap() as usize;
        // A thread is reported when a line names it, or a directory above it.
        let paths: Vec<&str> = lines.iter().map(|l| l["path"].as_str().unwrap()).collect();
        let reported = self
            .threads
            .iter()
            .filter(|t| {
                paths
                    .iter()
                    .any(|p| *p == t.as_str() || *p == "." || t.starts_with(&format!("{p}/")))
            })
            .count();
        assert_eq!(
            in_cache + reported,
            self.threads.len(),
            "with {rel} denied: {in_cache} threads in the cache + {reported} reported \
             != {} on disk",
            self.threads.len()
        );

        // Strict: fails and names the directory.
        let o = precache_unprivileged()
            .arg(&self.corpus)
            .arg(self.out.join("strict-cache"))
            .args(["--threads", "2", "--quiet", "--strict"])
            .output()
            .unwrap();
        assert!(
            !o.status.success(),
            "strict build with {rel} denied: {}",
            text(&o)
        );
        assert!(
            String::from_utf8_lossy(&o.stderr).contains(rel),
            "strict error names {rel}: {}",
            text(&o)
        );
        assert!(!self.out.join("strict-cache").exists());
    }

    /// The threads under `rel` on disk.
    fn threads_under(&self, rel: &str) -> usize {
        let prefix = format!("{rel}/");
        self.threads
            .iter()
            .filter(|t| t.as_str() == rel || t.starts_with(&prefix))
            .count()
    }
}

#[test]
fn unreadable_event_directory_is_reported() {
    let s = Setup::new();
    let rel = "ferguson-all-rnr-threads";
    assert!(s.threads_under(rel) > 0);
    s.check_denied(rel, 0o000);
}

#[test]
fn unreadable_label_directory_is_reported() {
    let s = Setup::new();
    let rel = "germanwings-crash-all-rnr-threads/rumours";
    assert!(s.threads_under(rel) > 0);
    s.check_denied(rel, 0o000);
}

#[test]
fn unreadable_thread_directory_is_reported() {
    let s = Setup::new();
    let rel = s
        .threads
        .iter()
        .find(|t| t.starts_with("charliehebdo-all-rnr-threads/"))
        .unwrap()
        .clone();
    assert_eq!(s.threads_under(&rel), 1);
    s.check_denied(&rel, 0o000);
}

#[test]
fn event_directory_that_can_be_entered_but_not_listed_is_reported() {
    let s = Setup::new();
    let rel = "ottawashooting-all-rnr-threads";
    assert!(s.threads_under(rel) > 0);
    s.check_denied(rel, 0o111);
}

#[test]
fn unreadable_reactions_folder_is_reported() {
    let s = Setup::new();
    let thread = s
        .threads
        .iter()
        .find(|t| {
            let dir = s.corpus.join(t).join("reactions");
            dir.is_dir() && fs::read_dir(&dir).unwrap().next().is_some()
        })
        .expect("a thread with reactions")
        .clone();
    // The thread itself stays in the cache (without those reactions).
    s.check_denied(&format!("{thread}/reactions"), 0o000);
}

/// Issue 25, defect 2, with the issue's own example: an unreadable folder
/// inside a thread directory (`T/images`) is one report line per build,
/// however many incremental builds reuse the thread, and the cache equals
/// a full build's each time; once the folder is readable the line goes.
#[test]
fn an_unreadable_folder_inside_a_reused_thread_is_reported_once() {
    let s = Setup::new();
    let thread = s.corpus.join(&s.threads[5]);
    let images = thread.join("images");
    fs::create_dir(&images).unwrap();
    set_mode(&images, 0o000);
    let run = |cache: &Path, incremental: bool| {
        let mut cmd = precache_unprivileged();
        cmd.arg(&s.corpus)
            .arg(cache)
            .args(["--threads", "2", "--quiet"]);
        if incremental {
            cmd.arg("--incremental");
        }
        let o = cmd.output().unwrap();
        assert!(o.status.success(), "{}", text(&o));
    };
    let cache_files = |dir: &Path| -> Vec<(String, Vec<u8>)> {
        let mut v: Vec<_> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap())
            .filter(|e| e.file_type().unwrap().is_file())
            .map(|e| {
                (
                    e.file_name().into_string().unwrap(),
                    fs::read(e.path()).unwrap(),
                )
            })
            .collect();
        v.sort();
        v
    };
    let (cache, full) = (s.out.join("cache"), s.out.join("full"));
    let result = std::panic::catch_unwind(|| {
        for night in 0..3 {
            run(&cache, true);
            run(&full, false);
            let report = fs::read_to_string(cache.join("report.jsonl")).unwrap();
            let lines = report.lines().filter(|l| l.contains("/images")).count();
            assert_eq!(lines, 1, "night {night}: {report}");
            assert!(cache_files(&cache) == cache_files(&full), "night {night}");
        }
    });
    set_mode(&images, 0o755);
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
    run(&cache, true);
    run(&full, false);
    let report = fs::read_to_string(cache.join("report.jsonl")).unwrap();
    assert!(!report.contains("/images"), "{report}");
    assert!(cache_files(&cache) == cache_files(&full));
}
