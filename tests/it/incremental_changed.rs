//! Incremental builds with a change list (`--changed FILE`, issue 47 item
//! 2): a list that truthfully names what changed gives the bytes of a full
//! build of the same corpus state, without a walk; a bad list is refused
//! with the list's name and the reason; what the list cannot settle is
//! walked, and the summary says why.

use std::fs;
use std::path::{Path, PathBuf};

use crate::common::corpus::{copy_tree, first_file, thread_dirs};
use crate::common::*;
use proptest::prelude::*;
use socialctx::{BuildError, BuildOptions, NoProgress, build, build_incremental};

fn opts() -> BuildOptions {
    BuildOptions::default().threads(2).shard_bytes(256 << 10)
}

/// The cache's own files (not derived/), by name.
fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<_> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().unwrap().is_file())
        .map(|e| {
            let name = e.file_name().into_string().unwrap();
            (name, fs::read(e.path()).unwrap())
        })
        .collect();
    v.sort();
    v
}

struct Setup {
    tmp: tempfile::TempDir,
    corpus: PathBuf,
    cache: PathBuf,
}

impl Setup {
    fn new() -> Setup {
        let tmp = tempfile::tempdir().unwrap();
        let corpus = tmp.path().join("corpus");
        copy_tree(&repo("tests/fixtures/golden/corpus"), &corpus);
        let cache = tmp.path().join("cache");
        build_incremental(&corpus, &cache, &opts(), &NoProgress).unwrap();
        Setup { tmp, corpus, cache }
    }

    /// Writes `lines` as the change list and runs the incremental build
    /// with it.
    fn with_list(&self, lines: &[String]) -> Result<socialctx::BuildSummary, BuildError> {
        self.with_list_of(&self.corpus, lines)
    }

    /// [`with_list`](Self::with_list), the corpus named as `corpus` (a
    /// link to it, say).
    fn with_list_of(
        &self,
        corpus: &Path,
        lines: &[String],
    ) -> Result<socialctx::BuildSummary, BuildError> {
        let list = self.tmp.path().join("changed.txt");
        fs::write(&list, lines.join("\n")).unwrap();
        build_incremental(
            corpus,
            &self.cache,
            &opts().changed(Some(list)),
            &NoProgress,
        )
    }

    /// Asserts the cache is a full build's of the corpus as it is now.
    fn assert_full(&self, what: &str) {
        let full = self.tmp.path().join("full");
        build(&self.corpus, &full, &opts(), &NoProgress).unwrap();
        let (a, b) = (files(&self.cache), files(&full));
        let differ: Vec<&String> = a
            .iter()
            .zip(&b)
            .filter(|(x, y)| x != y)
            .map(|(x, _)| &x.0)
            .collect();
        assert!(
            a.len() == b.len() && differ.is_empty(),
            "{what}: files differ: {differ:?}"
        );
    }

    fn rel(&self, p: &Path) -> String {
        p.strip_prefix(&self.corpus)
            .unwrap()
            .to_string_lossy()
            .into_owned()
    }
}

/// The thread's source folder (`source-tweets/`, or `source-tweet/` as
/// some PHEME threads have it).
fn source(thread: &Path) -> PathBuf {
    let plural = thread.join("source-tweets");
    if plural.is_dir() {
        plural
    } else {
        thread.join("source-tweet")
    }
}

/// Edits the first JSON reply of `thread` (by name; hidden files are not
/// replies) and returns its path.
fn edit_first_reply(thread: &Path) -> PathBuf {
    let mut replies: Vec<PathBuf> = fs::read_dir(thread.join("reactions"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    replies.sort();
    let reply = replies.remove(0);
    let text = fs::read_to_string(&reply).unwrap();
    let edited = text.replacen("\"retweet_count\": ", "\"retweet_count\": 7", 1);
    fs::write(&reply, edited).unwrap();
    reply
}

/// A reply edited, a reply added, a thread deleted and a thread added,
/// each named by the list (as files, a folder, absolute and relative):
/// the full build's bytes, with only those threads looked at.
#[test]
fn a_truthful_list_gives_the_full_builds_bytes() {
    let s = Setup::new();
    let all = thread_dirs(&s.corpus);
    let n = all.len() as u64;
    // An empty list: nothing changed, nothing read.
    let sum = s.with_list(&[]).unwrap();
    assert_eq!(sum.files_read, 0);
    assert!(sum.incremental.unwrap().contains("nothing changed"));

    let reply = &edit_first_reply(&all[3]);
    let added = all[5].join("reactions").join("999999999999999999.json");
    fs::copy(first_file(&all[5].join("reactions")), &added).unwrap();
    fs::remove_dir_all(&all[7]).unwrap();
    let new_thread = all[9].with_file_name("1");
    copy_tree(&all[9], &new_thread);
    let lines = vec![
        reply.display().to_string(),
        s.rel(&added),
        format!("./{}/", s.rel(&all[7])),
        s.rel(&source(&new_thread)),
    ];
    let sum = s.with_list(&lines).unwrap();
    let note = sum.incremental.unwrap();
    assert!(
        note.contains("change list") && !note.contains("not used"),
        "{note}"
    );
    assert_eq!(sum.reused, n - 3, "{note}");
    s.assert_full("edited, added, deleted, new thread");
}

/// Paths outside the corpus and an unreadable list are refused, naming
/// the list and the reason; nothing is built.
#[test]
fn bad_lists_are_refused() {
    let s = Setup::new();
    let before = files(&s.cache);
    for (line, says) in [
        ("/etc/passwd", "outside the corpus root"),
        ("../corpus/x", "outside the corpus root"),
        ("a/../../b", "outside the corpus root"),
    ] {
        let e = s.with_list(&[line.to_string()]).unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, BuildError::BadChangeList { .. }), "{msg}");
        assert!(msg.contains("changed.txt") && msg.contains(says), "{msg}");
        assert!(msg.contains("line 1"), "{msg}");
    }
    let missing = s.tmp.path().join("no-such-list");
    let e = build_incremental(
        &s.corpus,
        &s.cache,
        &opts().changed(Some(missing)),
        &NoProgress,
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("no-such-list") && e.to_string().contains("cannot read"),
        "{e}"
    );
    assert_eq!(files(&s.cache), before, "nothing was published");
    // The command: exit status 1, the message on stderr.
    let list = s.tmp.path().join("bad.txt");
    fs::write(&list, "/etc/passwd\n").unwrap();
    let out = example("precache")
        .args([&s.corpus, &s.cache])
        .args(["--incremental", "--quiet", "--changed"])
        .arg(&list)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("bad change list") && err.contains("bad.txt"),
        "{err}"
    );
}

/// How a path is spelt does not decide what it names (red team D3, D4): a
/// `..` that stays inside the corpus is the path it leads to; the corpus
/// reached through a link to it, given either way round, is the corpus; a
/// `..` stepping back out of a link inside the corpus is refused (the file
/// system would go elsewhere than the walk). Each was refused as "outside".
#[test]
fn a_path_is_what_it_names_however_it_is_spelt() {
    let s = Setup::new();
    let all = thread_dirs(&s.corpus);
    let link = s.tmp.path().join("link");
    std::os::unix::fs::symlink(&s.corpus, &link).unwrap();
    let up = "../".repeat(s.rel(&all[1]).split('/').count());
    type Spell<'a> = Box<dyn Fn(&Path) -> String + 'a>;
    let cases: [(&Path, Spell); 3] = [
        (
            &s.corpus,
            Box::new(|p| format!("{}/{up}{}", s.rel(&all[1]), s.rel(p))),
        ),
        (
            &s.corpus,
            Box::new(|p| link.join(s.rel(p)).display().to_string()),
        ),
        (&link, Box::new(|p| p.display().to_string())),
    ];
    for (i, (corpus, spell)) in cases.iter().enumerate() {
        let reply = edit_first_reply(&all[3 + i]);
        let sum = s.with_list_of(corpus, &[spell(&reply)]).unwrap();
        let note = sum.incremental.unwrap();
        assert!(
            note.contains("change list") && !note.contains("not used"),
            "case {i}: {note}"
        );
        assert_eq!(sum.reused, all.len() as u64 - 1, "case {i}: {note}");
        s.assert_full(&format!("case {i}"));
    }
    // Out of a link inside the corpus and back: refused, naming the link.
    let inner = all[1].join("away");
    std::os::unix::fs::symlink(s.tmp.path(), &inner).unwrap();
    let line = format!("{}/away/../reactions/1.json", s.rel(&all[1]));
    let e = s.with_list(&[line]).unwrap_err().to_string();
    assert!(e.contains("symbolic link") && e.contains("away"), "{e}");
}

/// `--changed -` with no standard input (closed, which Rust reopens as
/// /dev/null, or /dev/null itself) is refused, not read as "nothing
/// changed" (red team D5: a cron job without stdin kept every edit out).
#[test]
fn a_missing_standard_input_is_not_an_empty_list() {
    let s = Setup::new();
    let all = thread_dirs(&s.corpus);
    edit_first_reply(&all[2]);
    let before = files(&s.cache);
    for closed in [false, true] {
        let mut cmd = example("precache");
        cmd.args([&s.corpus, &s.cache])
            .args(["--incremental", "--quiet", "--changed", "-"]);
        if closed {
            // The shell's `<&-`.
            let mut sh = std::process::Command::new("sh");
            sh.arg("-c")
                .arg("exec \"$@\" <&-")
                .arg("sh")
                .arg(cmd.get_program())
                .args(cmd.get_args());
            cmd = sh;
        } else {
            cmd.stdin(std::process::Stdio::null());
        }
        let out = cmd.output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "closed {closed}: {err}");
        assert!(err.contains("standard input is /dev/null"), "{err}");
        assert_eq!(files(&s.cache), before, "nothing was published");
    }
}

/// What only a walk can settle (a new folder above threads, a path in no
/// thread) is walked, said so, and still the full build's bytes.
#[test]
fn what_a_list_cannot_settle_is_walked() {
    let s = Setup::new();
    let all = thread_dirs(&s.corpus);
    let event = s.corpus.join("new-event-all-rnr-threads/rumours");
    fs::create_dir_all(&event).unwrap();
    copy_tree(&all[2], &event.join("2"));
    let sum = s
        .with_list(&["new-event-all-rnr-threads".to_string()])
        .unwrap();
    let note = sum.incremental.unwrap();
    assert!(
        note.contains("not used") && note.contains("walked"),
        "{note}"
    );
    s.assert_full("a new event folder");
}

/// A path that is in no thread and does not exist under the corpus root
/// is walked, never ignored: a crawler printing paths relative to its own
/// folder (`corpus/event/…/reply.json`) named no thread of the corpus, and
/// the edited thread was kept as it was ("nothing changed"), silently.
#[test]
fn a_path_that_names_nothing_is_walked_not_ignored() {
    let s = Setup::new();
    let all = thread_dirs(&s.corpus);
    let reply = &edit_first_reply(&all[3]);
    // Relative to the folder above the corpus, as a crawler's cwd gives it.
    let from_cwd = format!("corpus/{}", s.rel(reply));
    let sum = s.with_list(&[from_cwd]).unwrap();
    let note = sum.incremental.unwrap();
    assert!(
        note.contains("not used") && note.contains("does not exist"),
        "{note}"
    );
    s.assert_full("a path relative to another folder");
    // Nothing changed since: still walked, and the summary says why.
    let sum = s
        .with_list(&["corpus/x/1/reactions/2.json".to_string()])
        .unwrap();
    let note = sum.incremental.unwrap();
    assert!(
        note.contains("nothing changed") && note.contains("not used"),
        "{note}"
    );
}

/// One step of the state machine.
#[derive(Clone, Debug)]
enum Step {
    Edit(usize),
    AddReply(usize),
    DeleteReply(usize),
    DeleteThread(usize),
    CopyThread(usize, u32),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0..200usize).prop_map(Step::Edit),
        (0..200usize).prop_map(Step::AddReply),
        (0..200usize).prop_map(Step::DeleteReply),
        (0..200usize).prop_map(Step::DeleteThread),
        (0..200usize, 1..50u32).prop_map(|(i, id)| Step::CopyThread(i, id)),
    ]
}

/// Applies `step` to the corpus and returns the paths a crawler would list.
fn apply(s: &Setup, step: &Step, serial: &mut u64) -> Vec<String> {
    let all = thread_dirs(&s.corpus);
    let pick = |i: usize| &all[i % all.len()];
    *serial += 1;
    match *step {
        Step::Edit(i) => {
            let f = first_file(&source(pick(i)));
            let text = fs::read_to_string(&f).unwrap();
            fs::write(
                &f,
                text.replacen("\"retweet_count\": ", "\"retweet_count\": 3", 1),
            )
            .unwrap();
            vec![s.rel(&f)]
        }
        Step::AddReply(i) => {
            let d = pick(i).join("reactions");
            let Ok(_) = fs::read_dir(&d) else {
                return vec![];
            };
            let to = d.join(format!("{}.json", 900_000_000_000_000_000 + *serial));
            fs::copy(first_file(&source(pick(i))), &to).unwrap();
            vec![s.rel(&to)]
        }
        Step::DeleteReply(i) => {
            let d = pick(i).join("reactions");
            match fs::read_dir(&d).map(|mut r| r.next()) {
                Ok(Some(e)) => {
                    let p = e.unwrap().path();
                    fs::remove_file(&p).unwrap();
                    vec![s.rel(&p)]
                }
                _ => vec![],
            }
        }
        Step::DeleteThread(i) if all.len() > 2 => {
            let t = pick(i).clone();
            fs::remove_dir_all(&t).unwrap();
            vec![s.rel(&t)]
        }
        Step::DeleteThread(_) => vec![],
        Step::CopyThread(i, id) => {
            let to = pick(i).with_file_name(id.to_string());
            if to.exists() {
                return vec![];
            }
            copy_tree(pick(i), &to);
            vec![s.rel(&to)]
        }
    }
}

proptest! {
    // Small: each step is two builds of the 150-thread golden corpus.
    #![proptest_config(ProptestConfig { cases: 6, max_shrink_iters: 20, ..ProptestConfig::default() })]

    /// Random edits, additions and deletions, each night's change list
    /// naming exactly them: the cache is always the full build's.
    #[test]
    fn a_truthful_list_is_always_a_full_build(nights in prop::collection::vec(prop::collection::vec(step(), 1..4), 1..4)) {
        let s = Setup::new();
        let mut serial = 0;
        for (n, night) in nights.iter().enumerate() {
            let mut lines = Vec::new();
            for st in night {
                lines.extend(apply(&s, st, &mut serial));
            }
            let sum = s.with_list(&lines).unwrap();
            let note = sum.incremental.unwrap_or_default();
            prop_assert!(!note.starts_with("full build"), "{}", note);
            s.assert_full(&format!("night {n}: {night:?}: {note}"));
        }
    }
}

/// The fingerprints file named in `derived/`.
fn fingerprints_file(cache: &Path) -> PathBuf {
    let names: Vec<_> = fs::read_dir(cache.join("derived"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy();
            n.starts_with("fingerprints-") && n.ends_with(".json")
        })
        .collect();
    assert_eq!(names.len(), 1, "{names:?}");
    names[0].clone()
}

/// Runs an incremental build on another thread, failing if it hangs.
fn incremental_within(s: &Setup, secs: u64) -> socialctx::BuildSummary {
    let (corpus, cache) = (s.corpus.clone(), s.cache.clone());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(build_incremental(&corpus, &cache, &opts(), &NoProgress));
    });
    rx.recv_timeout(std::time::Duration::from_secs(secs))
        .expect("the build hung")
        .unwrap()
}

/// Red team D10: a FIFO or a symlink at the fingerprints path neither
/// hangs the build nor is written through; the reason names the file.
#[test]
fn a_fifo_or_symlink_at_the_fingerprints_path() {
    let s = Setup::new();
    let fp = fingerprints_file(&s.cache);
    // A FIFO: no writer, so a blocking open would wait forever.
    fs::remove_file(&fp).unwrap();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &fp,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .unwrap();
    let sum = incremental_within(&s, 60);
    let note = sum.incremental.unwrap();
    assert!(note.starts_with("full build"), "{note}");
    assert!(
        note.contains(&fp.display().to_string()) && note.contains("not a regular file"),
        "{note}"
    );
    assert!(fs::symlink_metadata(&fp).unwrap().is_file());
    // The next build reuses again.
    let note = incremental_within(&s, 60).incremental.unwrap();
    assert!(note.contains("nothing changed"), "{note}");
    // A symlink to a file of the operator's: not read, not written.
    let precious = s.tmp.path().join("precious.txt");
    fs::write(&precious, "mine").unwrap();
    fs::remove_file(&fp).unwrap();
    std::os::unix::fs::symlink(&precious, &fp).unwrap();
    let note = incremental_within(&s, 60).incremental.unwrap();
    assert!(
        note.starts_with("full build") && note.contains("symbolic link"),
        "{note}"
    );
    assert!(note.contains(&fp.display().to_string()), "{note}");
    assert_eq!(fs::read_to_string(&precious).unwrap(), "mine");
    assert!(fs::symlink_metadata(&fp).unwrap().is_file());
}

/// A list that never comes (a FIFO whose writer is gone, a crawler that
/// hangs on `--changed -`) holds no lock, and a cancel (Ctrl-C, SIGTERM)
/// ends the wait. Red team of the change list: only SIGKILL ended such a
/// build, and every later build found the cache locked.
#[test]
fn a_list_that_never_comes_holds_no_lock_and_can_be_cancelled() {
    use std::sync::atomic::{AtomicBool, Ordering};
    struct CancelWhenSet(AtomicBool);
    impl socialctx::Progress for CancelWhenSet {
        fn cancelled(&self) -> bool {
            self.0.load(Ordering::Relaxed)
        }
    }
    let s = Setup::new();
    let fifo = s.tmp.path().join("list.fifo");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    let flag = CancelWhenSet(AtomicBool::new(false));
    let waiting = opts().changed(Some(fifo.clone()));
    std::thread::scope(|scope| {
        let stuck = scope.spawn(|| build_incremental(&s.corpus, &s.cache, &waiting, &flag));
        std::thread::sleep(std::time::Duration::from_millis(300));
        assert!(!stuck.is_finished(), "the list has no writer yet");
        // The nightly after it is not locked out.
        build_incremental(&s.corpus, &s.cache, &opts(), &NoProgress).unwrap();
        flag.0.store(true, Ordering::Relaxed);
        let got = stuck.join().unwrap();
        assert!(matches!(got, Err(BuildError::Cancelled)), "{got:?}");
    });
    // The reader left waiting gets its writer, and an end of file.
    drop(fs::OpenOptions::new().write(true).open(&fifo).unwrap());
    s.assert_full("after a cancelled wait");
}
