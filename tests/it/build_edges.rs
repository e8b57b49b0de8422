//! Clear errors at the build's edges, before anything is written (issue
//! 35, items 9 and 12): a path through a file, a mount point, a parent that
//! cannot be written; and a refused or failed build leaves no lock file
//! beside a path that never became a cache.

use std::fs;
use std::path::Path;

use crate::common::example;

fn precache(corpus: &Path, cache: &Path, args: &[&str]) -> (Option<i32>, String) {
    let o = example("precache")
        .arg(corpus)
        .arg(cache)
        .arg("-q")
        .args(args)
        .output()
        .unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn corpus(dir: &Path) -> std::path::PathBuf {
    let c = dir.join("corpus");
    gen_corpus::generate(&c, &gen_corpus::Options::new(4)).unwrap();
    c
}

#[test]
fn a_path_through_a_file_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    let c = corpus(tmp.path());
    let afile = tmp.path().join("afile");
    fs::write(&afile, b"x").unwrap();
    let (code, err) = precache(&c, &afile.join("sub"), &[]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains(&format!("{}: is a file, not a directory", afile.display())),
        "{err}"
    );
    assert!(!err.contains("os error 17"), "{err}");
    assert_eq!(fs::read(&afile).unwrap(), b"x");
}

/// A volume mounted at the cache path: refused before the build starts,
/// saying to use a directory inside it (was: the whole build, then "Device
/// or resource busy"). `/proc` is a mount point on every Linux.
#[test]
fn a_mount_point_is_refused_before_the_build() {
    let tmp = tempfile::tempdir().unwrap();
    let c = corpus(tmp.path());
    let (code, err) = precache(&c, Path::new("/proc"), &[]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("is a mount point") && err.contains("use a directory inside it"),
        "{err}"
    );
    assert!(!Path::new("/.proc.lock").exists());
}

/// A parent nobody may write (sysfs): the error names that directory and
/// says it must be writable, not `.cache.lock`, which the user never typed.
#[test]
fn an_unwritable_parent_is_named_as_the_directory_that_must_be_writable() {
    let tmp = tempfile::tempdir().unwrap();
    let c = corpus(tmp.path());
    let (code, err) = precache(&c, Path::new("/sys/socialctx-cache"), &[]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("/sys: ") && err.contains("must be writable") && !err.contains(".lock"),
        "{err}"
    );
}

#[test]
fn refused_and_failed_first_builds_leave_no_lock_file() {
    let tmp = tempfile::tempdir().unwrap();
    let c = corpus(tmp.path());
    // Not a cache: refused.
    let notes = tmp.path().join("notes");
    fs::create_dir(&notes).unwrap();
    fs::write(notes.join("a.txt"), b"mine").unwrap();
    let (code, err) = precache(&c, &notes, &[]);
    assert_eq!(code, Some(1), "{err}");
    assert!(!tmp.path().join(".notes.lock").exists());
    assert_eq!(fs::read(notes.join("a.txt")).unwrap(), b"mine");
    // A first build that fails after taking the lock (strict, a bad file).
    let bad = c.join("bad-event/rumours/42/source-tweets");
    fs::create_dir_all(&bad).unwrap();
    fs::write(bad.join("42.json"), b"{not json").unwrap();
    let out = tmp.path().join("cache");
    let (code, err) = precache(&c, &out, &["--strict"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(!out.exists() && !tmp.path().join(".cache.lock").exists());
    // A published cache keeps its lock file (a build may hold it).
    let (code, err) = precache(&c, &out, &[]);
    assert_eq!(code, Some(0), "{err}");
    assert!(tmp.path().join(".cache.lock").exists());
}

/// `dump CACHE | head -1`: the reader going away ends the output quietly,
/// as grep and ripgrep do (issue 35, item 11: "error: writing output:
/// Broken pipe", exit 1). Five times, as the failure was intermittent.
#[test]
fn dump_into_a_closed_pipe_ends_quietly() {
    let tmp = tempfile::tempdir().unwrap();
    let c = tmp.path().join("corpus");
    gen_corpus::generate(&c, &gen_corpus::Options::new(40)).unwrap();
    let out = tmp.path().join("cache");
    let (code, err) = precache(&c, &out, &[]);
    assert_eq!(code, Some(0), "{err}");
    let dump = example("dump");
    let dump = dump.get_program().to_string_lossy().into_owned();
    for _ in 0..5 {
        let o = std::process::Command::new("bash")
            .arg("-c")
            .arg(format!(
                "set -o pipefail; '{dump}' '{}' --retweets | head -1",
                out.display()
            ))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!((o.status.code(), stderr.as_ref()), (Some(0), ""));
        assert_eq!(o.stdout.iter().filter(|&&b| b == b'\n').count(), 1);
    }
}

/// The reproduction without fault injection: in a sticky shared
/// directory, a cache written by one user and rebuilt by another. The swap
/// fails ("Operation not permitted"); the notes and `derived/` moved into
/// the staging directory before it were deleted with it. Now they are
/// back in the cache, and the error says why and what to do. Needs a
/// second user: run as root, it builds as root and rebuilds as `nobody`.
#[test]
fn a_failed_swap_in_a_sticky_directory_keeps_the_users_files() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    // SAFETY: getuid has no preconditions and cannot fail.
    if unsafe { libc::getuid() } != 0 {
        eprintln!(
            "not root: no second user to rebuild as (tests/publish_faults.rs fails the swap instead)"
        );
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let shared = tmp.path();
    fs::set_permissions(shared, fs::Permissions::from_mode(0o1777)).unwrap();
    let c = corpus(shared);
    let cache = shared.join("cache");
    let (code, err) = precache(&c, &cache, &[]);
    assert_eq!(code, Some(0), "{err}");
    let mode = |p: &Path, m: u32| fs::set_permissions(p, fs::Permissions::from_mode(m)).unwrap();
    fs::write(cache.join("notes.txt"), b"my notes").unwrap();
    fs::create_dir(cache.join("derived")).unwrap();
    fs::write(cache.join("derived/e.npy"), [3u8; 64]).unwrap();
    for (p, m) in [
        (cache.clone(), 0o777),
        (cache.join("derived"), 0o777),
        (cache.join("notes.txt"), 0o666),
        (cache.join("derived/e.npy"), 0o666),
        (shared.join(".cache.lock"), 0o666),
    ] {
        mode(&p, m);
    }
    let before: Vec<_> = ["manifest.json", "notes.txt", "derived/e.npy"]
        .iter()
        .map(|n| fs::read(cache.join(n)).unwrap())
        .collect();
    let o = example("precache")
        .arg(&c)
        .arg(&cache)
        .arg("-q")
        .uid(65534)
        .gid(65534)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("Operation not permitted") && err.contains("sticky"),
        "{err}"
    );
    let after: Vec<_> = ["manifest.json", "notes.txt", "derived/e.npy"]
        .iter()
        .map(|n| fs::read(cache.join(n)).unwrap())
        .collect();
    assert!(after == before, "the cache or the user's files changed");
    let left: Vec<_> = fs::read_dir(shared)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// A build asked for more threads than any machine has starts at most
/// 1,024 (`workers=65535` from Python ran the machine out of memory; the
/// command refuses it as a usage error). The plan's walk is capped alike.
#[test]
fn a_build_asked_for_65535_workers_starts_at_most_1024() {
    let tmp = tempfile::tempdir().unwrap();
    let corpus = corpus(tmp.path());
    let opts = socialctx::BuildOptions::default()
        .threads(65535)
        .io_depth(65535);
    let summary =
        socialctx::build(&corpus, tmp.path().join("c"), &opts, &socialctx::NoProgress).unwrap();
    assert!(summary.workers <= 1024, "{} workers", summary.workers);
    let plan = socialctx::Plan::create(&corpus, &opts).unwrap();
    assert!(!plan.is_empty());
}
