//! Incremental builds: after each kind of change, the cache an incremental
//! build publishes is byte-identical to a full build of the same corpus
//! state, and only changed threads are read.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use crate::common::corpus::{copy_tree, first_file, thread_dirs as threads};
use crate::common::*;
use socialctx::ThreadSource;
use socialctx::{BuildOptions, NoProgress, build, build_incremental};

/// The cache's own files (not derived/).
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().unwrap().is_file())
        .map(|e| {
            (
                e.file_name().into_string().unwrap(),
                fs::read(e.path()).unwrap(),
            )
        })
        .collect()
}

/// Asserts that two caches have the same files, naming those that differ
/// (and showing differing reports) instead of printing bytes.
fn assert_same_files(a: &Path, b: &Path, what: &str) {
    let (fa, fb) = (files(a), files(b));
    let differ: Vec<&String> = fa
        .keys()
        .chain(fb.keys())
        .filter(|k| fa.get(*k) != fb.get(*k))
        .collect();
    if !differ.is_empty() {
        let report = |f: &BTreeMap<String, Vec<u8>>| {
            String::from_utf8_lossy(f.get("report.jsonl").map_or(&[][..], |v| v)).into_owned()
        };
        panic!(
            "{what}: files differ: {differ:?}\nincremental report:\n{}\nfull report:\n{}",
            report(&fa),
            report(&fb)
        );
    }
}

struct Setup {
    _tmp: tempfile::TempDir,
    corpus: PathBuf,
    cache: PathBuf,
    full: PathBuf,
}

fn opts() -> BuildOptions {
    BuildOptions::default().threads(2).shard_bytes(256 << 10)
}

impl Setup {
    fn new(fixture: &str) -> Setup {
        let tmp = tempfile::tempdir().unwrap();
        let corpus = tmp.path().join("corpus");
        copy_tree(&repo(fixture), &corpus);
        let cache = tmp.path().join("cache");
        let full = tmp.path().join("full");
        let s = build_incremental(&corpus, &cache, &opts(), &NoProgress).unwrap();
        assert!(
            s.incremental.as_deref().unwrap().starts_with("full build"),
            "{:?}",
            s.incremental
        );
        Setup {
            _tmp: tmp,
            corpus,
            cache,
            full,
        }
    }

    /// Runs an incremental build and a full one, compares them, and returns
    /// (threads reused, the summary's note).
    fn check(&self, what: &str) -> (u64, String) {
        let (reused, note, _) = self.check_reads(what);
        (reused, note)
    }

    /// As `check`, also returning the files the incremental build read.
    fn check_reads(&self, what: &str) -> (u64, String, u64) {
        let s = build_incremental(&self.corpus, &self.cache, &opts(), &NoProgress)
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        let full = build(&self.corpus, &self.full, &opts(), &NoProgress).unwrap();
        assert_same_files(&self.cache, &self.full, what);
        assert!(s.files_read <= full.files_read, "{what}");
        (s.reused, s.incremental.unwrap(), s.files_read)
    }
}

#[test]
fn every_kind_of_change_gives_the_full_builds_bytes() {
    let s = Setup::new("tests/fixtures/real/pheme-veracity/corpus");
    let all = threads(&s.corpus);
    let n = socialctx::Cache::open(&s.cache).unwrap().len() as u64;

    let (reused, note, read) = s.check_reads("no change");
    assert_eq!(reused, n, "{note}");
    assert_eq!(read, 0, "a no-change rebuild reads no tweet file");
    assert!(note.starts_with("incremental"), "{note}");

    // A reply edited.
    let reply = first_file(&all[3].join("reactions"));
    let text = fs::read_to_string(&reply).unwrap();
    fs::write(
        &reply,
        text.replacen("\"retweet_count\": ", "\"retweet_count\": 1", 1),
    )
    .unwrap();
    let (reused, note, read) = s.check_reads("reply edited");
    assert_eq!(reused, n - 1, "{note}");
    let in_thread = fs::read_dir(all[3].join("reactions")).unwrap().count() as u64;
    assert!(
        read >= in_thread && read <= in_thread + 4,
        "only that thread is read: {read}"
    );

    // Edited in place: same size, mtime restored (ctime still moves).
    let reply = first_file(&all[5].join("reactions"));
    let before = fs::metadata(&reply).unwrap();
    let text = fs::read_to_string(&reply).unwrap();
    let i = text.find("\"favorite_count\": ").unwrap() + "\"favorite_count\": ".len();
    let mut bytes = text.into_bytes();
    bytes[i] = if bytes[i] == b'7' { b'8' } else { b'7' };
    fs::write(&reply, &bytes).unwrap();
    let mtime = filetime(&before);
    set_mtime(&reply, mtime);
    assert_eq!(fs::metadata(&reply).unwrap().len(), before.len());
    let (reused, note) = s.check("reply edited in place, mtime restored");
    assert_eq!(reused, n - 1, "{note}");

    // A reply added, one deleted.
    let dir = all[7].join("reactions");
    let src = first_file(&dir);
    fs::copy(&src, dir.join("999999999999999999.json")).unwrap();
    fs::remove_file(first_file(&all[9].join("reactions"))).unwrap();
    s.check("reply added and another deleted");

    // Thread files: structure.json and annotation.json edited.
    let structure = all[11].join("structure.json");
    fs::write(&structure, "{}").unwrap();
    let annotation = all[12].join("annotation.json");
    let a = fs::read_to_string(&annotation).unwrap();
    fs::write(
        &annotation,
        a.replace("\"true\": \"0\"", "\"true\": \"1\"")
            .replace("\"true\": 0", "\"true\": 1"),
    )
    .unwrap();
    s.check("structure.json and annotation.json edited");

    // A source tweet edited (a non-rumour, so the rumour index is unchanged).
    let nonrumour = all
        .iter()
        .find(|t| t.parent().unwrap().ends_with("non-rumours"))
        .unwrap();
    let source = first_file(&nonrumour.join("source-tweets"));
    let text = fs::read_to_string(&source).unwrap();
    fs::write(
        &source,
        text.replacen("\"text\": \"", "\"text\": \"edited ", 1),
    )
    .unwrap();
    let (reused, note) = s.check("source tweet edited");
    assert!(reused >= n - 2, "{note}");

    // A thread removed, one renamed (moved to another label folder).
    fs::remove_dir_all(&all[20]).unwrap();
    let moved = &all[21];
    let label = moved.parent().unwrap();
    let other = if label.ends_with("rumours") && !label.ends_with("non-rumours") {
        label.with_file_name("non-rumours")
    } else {
        label.with_file_name("rumours")
    };
    fs::create_dir_all(&other).unwrap();
    fs::rename(moved, other.join(moved.file_name().unwrap())).unwrap();
    let (_, note) = s.check("thread removed and another moved between labels");
    // Moving a thread between labels can change who is a rumour source.
    assert!(
        note.starts_with("incremental") || note.contains("rumour sources"),
        "{note}"
    );

    // A thread added (a copy of another under a new id).
    let copy_from = &all[30];
    let new_id = "999999999999999990";
    copy_tree(copy_from, &copy_from.with_file_name(new_id));
    s.check("thread added");

    // A rumour source's time changed: user_reliability of reactions in
    // other, unchanged threads changes. First make a reply elsewhere by the
    // same author, dated before the source (so not yet "unreliable").
    let rumour = threads(&s.corpus)
        .into_iter()
        .find(|t| t.parent().unwrap().file_name().unwrap() == "rumours")
        .unwrap();
    let source = first_file(&rumour.join("source-tweets"));
    let mut tweet: serde_json::Value = serde_json::from_slice(&fs::read(&source).unwrap()).unwrap();
    let author = tweet["user"]["id_str"].as_str().unwrap().to_string();
    let other = threads(&s.corpus)
        .into_iter()
        .find(|t| *t != rumour && t.join("reactions").is_dir())
        .unwrap();
    let reply_file = first_file(&other.join("reactions"));
    let mut reply: serde_json::Value =
        serde_json::from_slice(&fs::read(&reply_file).unwrap()).unwrap();
    reply["user"]["id_str"] = author.clone().into();
    reply["user"]["created_at"] = "Mon Jan 01 00:00:00 +0000 2001".into();
    reply["created_at"] = "Mon Jan 01 00:00:00 +0000 2007".into();
    let reply_id: u64 = reply["id_str"].as_str().unwrap().parse().unwrap();
    fs::write(&reply_file, serde_json::to_vec(&reply).unwrap()).unwrap();
    s.check("a reply by a rumour source's author");
    let reliability = |cache: &Path| {
        let c = socialctx::Cache::open(cache).unwrap();
        let col = c.reaction_column("user_reliability").unwrap();
        let t = c
            .iter()
            .find(|t| t.reactions().any(|r| r.id() == reply_id))
            .unwrap();
        let i = t.reactions().position(|r| r.id() == reply_id).unwrap();
        t.column(col)[i]
    };
    assert_eq!(
        reliability(&s.cache),
        1.0,
        "the source is later than the reply"
    );
    tweet["created_at"] = "Mon Jan 01 00:00:00 +0000 2001".into();
    fs::write(&source, serde_json::to_vec(&tweet).unwrap()).unwrap();
    let (reused, note) = s.check("rumour source time changed");
    // Recomputed from stored author keys for the unchanged thread.
    assert!(note.contains("user_reliability recomputed"), "{note}");
    assert!(reused > 0, "{note}");
    assert_eq!(
        reliability(&s.cache),
        0.0,
        "now the author had posted a rumour before"
    );

    // Other options: a full build, said so.
    let o = build_incremental(
        &s.corpus,
        &s.cache,
        &opts().shard_bytes(1 << 20),
        &NoProgress,
    )
    .unwrap();
    assert!(o.incremental.unwrap().contains("other options"));
}

#[test]
fn retweets_and_retweets_json_changes() {
    let s = Setup::new("data-samples/corpus");
    // A thread skipped for a bad source is skipped again without reading it.
    let (_, note, read) = s.check_reads("no change, with skipped threads");
    assert!(note.contains("nothing changed"), "{note}");
    assert_eq!(read, 0);
    let all = threads(&s.corpus);
    let with_retweets = all.iter().find(|t| t.join("retweets").is_dir()).unwrap();
    let rt = first_file(&with_retweets.join("retweets"));
    let text = fs::read_to_string(&rt).unwrap();
    fs::write(
        &rt,
        text.replacen("\"retweet_count\": ", "\"retweet_count\": 2", 1),
    )
    .unwrap();
    let (reused, note) = s.check("retweet edited");
    assert!(note.starts_with("incremental") && reused > 0, "{note}");
    if let Some(t) = all.iter().find(|t| t.join("retweets.json").is_file()) {
        let p = t.join("retweets.json");
        let text = fs::read_to_string(&p).unwrap();
        let first = text.lines().next().unwrap_or("").to_string();
        fs::write(&p, format!("{text}{first}\n")).unwrap();
        s.check("retweets.json grew");
    }
}

fn filetime(m: &fs::Metadata) -> (i64, i64) {
    use std::os::unix::fs::MetadataExt;
    (m.mtime(), m.mtime_nsec())
}

fn set_mtime(p: &Path, (secs, nsec): (i64, i64)) {
    let f = fs::File::options().write(true).open(p).unwrap();
    let t = std::fs::FileTimes::new()
        .set_modified(std::time::UNIX_EPOCH + std::time::Duration::new(secs as u64, nsec as u32));
    f.set_times(t).unwrap();
}

/// With --verify, contents decide: an edit that keeps size, mtime and (as far
/// as a test can) everything but the bytes is still seen; a touch alone is not.
#[test]
fn verify_compares_contents() {
    let tmp = tempfile::tempdir().unwrap();
    let corpus = tmp.path().join("corpus");
    copy_tree(&repo("tests/fixtures/golden/corpus"), &corpus);
    let (cache, full) = (tmp.path().join("cache"), tmp.path().join("full"));
    let v = opts().verify(true);
    let s = build_incremental(&corpus, &cache, &v, &NoProgress).unwrap();
    assert!(s.incremental.unwrap().starts_with("full build"));
    // Without --verify the fingerprints do not match: a full build, said so.
    let s = build_incremental(&corpus, &cache, &opts(), &NoProgress).unwrap();
    let note = s.incremental.unwrap();
    assert!(note.contains("--verify"), "{note}");
    let s = build_incremental(&corpus, &cache, &v, &NoProgress).unwrap();
    assert!(s.incremental.unwrap().contains("no content hashes"));
    // Threads reused count every thread directory, skipped ones included.
    let n = threads(&corpus).len() as u64;
    // Touch every file: contents unchanged. Touched since the last build
    // started, they are read once more (the racy-clean rule holds with
    // --verify too: a build may have read a file between an edit and its
    // revert); after that, the unchanged contents decide.
    let all = threads(&corpus);
    for t in &all {
        let dir = ["source-tweets", "source-tweet"].map(|d| t.join(d));
        let f = first_file(dir.iter().find(|d| d.is_dir()).unwrap());
        let bytes = fs::read(&f).unwrap();
        fs::write(&f, bytes).unwrap();
    }
    let s = build_incremental(&corpus, &cache, &v, &NoProgress).unwrap();
    assert_eq!(s.reused, 0, "{:?}", s.incremental);
    let s = build_incremental(&corpus, &cache, &v, &NoProgress).unwrap();
    assert_eq!(s.reused, n, "{:?}", s.incremental);
    // A real edit is seen and the cache equals a full build.
    let reply = first_file(&all[2].join("reactions"));
    let text = fs::read_to_string(&reply).unwrap();
    fs::write(
        &reply,
        text.replacen("\"retweet_count\": ", "\"retweet_count\": 3", 1),
    )
    .unwrap();
    let s = build_incremental(&corpus, &cache, &v, &NoProgress).unwrap();
    assert_eq!(s.reused, n - 1);
    build(&corpus, &full, &opts(), &NoProgress).unwrap();
    assert_eq!(files(&cache), files(&full));
}

/// who-follows-whom.dat edits are seen (the journalism release has them).
#[test]
fn follow_graph_edits_are_seen() {
    let s = Setup::new("tests/fixtures/real/pheme-journalism/corpus");
    let dat = threads(&s.corpus)
        .into_iter()
        .map(|t| t.join("who-follows-whom.dat"))
        .find(|p| p.is_file())
        .expect("a thread with who-follows-whom.dat");
    let text = fs::read_to_string(&dat).unwrap();
    let first = text.lines().next().unwrap().to_string();
    let (a, b) = first.split_once('\t').unwrap();
    fs::write(&dat, format!("{text}{b}\t{a}\n")).unwrap();
    let (reused, note) = s.check("who-follows-whom.dat edited");
    assert!(note.starts_with("incremental") && reused > 0, "{note}");
}

/// A killed incremental build leaves the old cache as it was, and the next
/// one gives the full build's bytes.
#[test]
fn a_killed_incremental_build_keeps_the_old_cache() {
    let s = Setup::new("tests/fixtures/real/pheme-veracity/corpus");
    let before = files(&s.cache);
    let reply = first_file(&threads(&s.corpus)[4].join("reactions"));
    let text = fs::read_to_string(&reply).unwrap();
    fs::write(
        &reply,
        text.replacen("\"retweet_count\": ", "\"retweet_count\": 5", 1),
    )
    .unwrap();
    for delay in [0u64, 5, 20, 60] {
        let mut child = example("precache")
            .arg(&s.corpus)
            .arg(&s.cache)
            .args(["-q", "--incremental", "--threads", "1", "--shard-mib", "1"])
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(delay));
        let _ = child.kill();
        let status = child.wait().unwrap();
        let now = files(&s.cache);
        // The old cache, or (a kill after the publish, e.g. while the
        // fingerprints are written) the complete new one: never a mixture.
        assert!(
            now == before || socialctx::Cache::open(&s.cache).is_ok(),
            "after a kill at {delay} ms"
        );
        if status.success() {
            break;
        }
    }
    s.check("after kills");
}

/// Issue 25, defect 2: report lines that discovery gives for paths inside a
/// reused thread's directory (a nested thread-like folder) are not counted
/// again on each incremental build, and go when the folder is fixed: the
/// report (and so the manifest and content id) equals a full build's.
#[test]
fn report_lines_inside_reused_threads_are_not_repeated() {
    let s = Setup::new("tests/fixtures/real/pheme-veracity/corpus");
    let all = threads(&s.corpus);
    // A backup copy of the thread inside it (a duplicate source id), and a
    // thread-like folder whose name is no source id.
    let t = &all[2];
    let id = t.file_name().unwrap().to_str().unwrap().to_string();
    let backup = t.join("backup").join(&id);
    copy_tree(&t.join("source-tweets"), &backup.join("source-tweets"));
    let odd = all[4]
        .join("old")
        .join("99999999999999999999999")
        .join("source-tweets");
    copy_tree(&all[4].join("source-tweets"), &odd);
    for run in 1..=3 {
        let (_, note) = s.check(&format!("run {run} with nested folders"));
        let c = socialctx::Cache::open(&s.cache).unwrap();
        let inside: Vec<_> = c
            .report()
            .iter()
            .filter(|b| b.path.contains("/backup/") || b.path.contains("/old/"))
            .collect();
        assert_eq!(inside.len(), 2, "run {run} ({note}): {inside:?}");
    }
    // Fixed: the lines go.
    fs::remove_dir_all(t.join("backup")).unwrap();
    fs::remove_dir_all(all[4].join("old")).unwrap();
    for run in 1..=2 {
        s.check(&format!("run {run} after the fix"));
    }
    let c = socialctx::Cache::open(&s.cache).unwrap();
    assert!(
        !c.report()
            .iter()
            .any(|b| b.path.contains("/backup/") || b.path.contains("/old/")),
        "{:?}",
        c.report()
    );
}

/// Every file and directory under `root` gets its mtime cut to whole
/// seconds, as a file system with 1-second timestamps (ext4 made with
/// `-I 128`) stores them.
fn coarsen_mtimes(root: &Path) {
    use std::os::unix::fs::MetadataExt;
    for e in fs::read_dir(root).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            coarsen_mtimes(&p);
        }
        let m = fs::metadata(&p).unwrap();
        // futimens on a read-only descriptor: files and directories alike.
        let t = std::fs::FileTimes::new()
            .set_modified(std::time::UNIX_EPOCH + std::time::Duration::from_secs(m.mtime() as u64));
        fs::File::open(&p).unwrap().set_times(t).unwrap();
    }
}

/// Sleeps until just after the wall clock's next second starts; returns it.
fn next_second() -> u64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    std::thread::sleep(std::time::Duration::from_nanos(
        1_000_000_000 - u64::from(now.subsec_nanos()) + 20_000_000,
    ));
    now.as_secs() + 1
}

/// Issue 25, defect 3a: on a file system with 1-second timestamps, an edit
/// made in the second a build fingerprinted a file, after the build read
/// it, would leave size, mtime and ctime as they were. So the build reads
/// no file before that second is over: every later edit gets a later
/// second, and the next build sees it. The mtimes are cut to whole seconds
/// here as such a file system stores them.
#[test]
fn on_coarse_timestamps_a_build_reads_only_after_the_changes_second() {
    let tmp = tempfile::tempdir().unwrap();
    let corpus = tmp.path().join("corpus");
    copy_tree(&repo("tests/fixtures/golden/corpus"), &corpus);
    coarsen_mtimes(&corpus);
    let cache = tmp.path().join("cache");
    let full = tmp.path().join("full");
    let n = threads(&corpus).len() as u64;
    let reply = first_file(&threads(&corpus)[2].join("reactions"));
    let edit = |digit: u8| {
        let text = fs::read_to_string(&reply).unwrap();
        let i = text.find("\"favorite_count\": ").unwrap() + "\"favorite_count\": ".len();
        let mut bytes = text.into_bytes();
        bytes[i] = digit;
        fs::write(&reply, &bytes).unwrap();
    };
    // Edited (same size) at the start of a second, then built at once.
    let second = next_second();
    edit(b'7');
    set_mtime(&reply, (second as i64, 0));
    build_incremental(&corpus, &cache, &opts(), &NoProgress).unwrap();
    let after = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert!(
        after > second,
        "the build finished in the second of the change it fingerprinted"
    );
    // An edit now lands in a later second: seen, and the cache is right.
    edit(b'8');
    set_mtime(&reply, (after as i64, 0));
    let s = build_incremental(&corpus, &cache, &opts(), &NoProgress).unwrap();
    assert_eq!(s.reused, n - 1, "{:?}", s.incremental);
    build(&corpus, &full, &opts(), &NoProgress).unwrap();
    assert_same_files(&cache, &full, "after the second edit");
    let s = build_incremental(&corpus, &cache, &opts(), &NoProgress).unwrap();
    assert_eq!(s.reused, n, "{:?}", s.incremental);
}

/// Issue 25, defect 3: with --verify, a file edited and reverted after the
/// previous build started hashes as before, but the build may have read it
/// in between: it is read again.
#[test]
fn verify_rereads_a_file_edited_and_reverted_since_the_build_started() {
    let tmp = tempfile::tempdir().unwrap();
    let corpus = tmp.path().join("corpus");
    copy_tree(&repo("tests/fixtures/golden/corpus"), &corpus);
    let cache = tmp.path().join("cache");
    let v = opts().verify(true);
    build_incremental(&corpus, &cache, &v, &NoProgress).unwrap();
    let n = threads(&corpus).len() as u64;
    let reply = first_file(&threads(&corpus)[2].join("reactions"));
    let before = fs::read(&reply).unwrap();
    let mut edited = before.clone();
    let i = edited.iter().position(|b| b.is_ascii_digit()).unwrap();
    edited[i] = if edited[i] == b'7' { b'8' } else { b'7' };
    fs::write(&reply, &edited).unwrap();
    fs::write(&reply, &before).unwrap();
    let s = build_incremental(&corpus, &cache, &v, &NoProgress).unwrap();
    assert_eq!(s.reused, n - 1, "{:?}", s.incremental);
    let s = build_incremental(&corpus, &cache, &v, &NoProgress).unwrap();
    assert_eq!(s.reused, n, "{:?}", s.incremental);
}

/// The fingerprints files in a cache's derived/.
fn fingerprint_files(cache: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(cache.join("derived"))
        .map(|r| {
            r.map(|e| e.unwrap().file_name().into_string().unwrap())
                .filter(|n| n.contains("fingerprints"))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Issue 25, defect 4: when the fingerprints cannot be written, the build
/// fails before anything is published (the old cache is kept as it was)
/// and leaves no partial file; never a new cache with a failed build.
#[test]
fn a_failed_fingerprints_write_publishes_nothing() {
    let s = Setup::new("tests/fixtures/golden/corpus");
    // A reply added.
    let dir = threads(&s.corpus)[3].join("reactions");
    fs::copy(first_file(&dir), dir.join("999999999999999999.json")).unwrap();
    // derived/ made unusable: the fingerprints cannot be written there.
    let derived = s.cache.join("derived");
    fs::remove_dir_all(&derived).unwrap();
    fs::write(&derived, "not a directory").unwrap();
    let before = files(&s.cache);
    match build_incremental(&s.corpus, &s.cache, &opts(), &NoProgress) {
        Ok(sum) => panic!("the build succeeded: {:?}", sum.incremental),
        Err(e) => {
            assert!(e.to_string().contains("derived"), "{e}")
        }
    }
    assert!(
        files(&s.cache) == before,
        "the old cache is kept, not replaced by a cache without fingerprints"
    );
    let parent: Vec<String> = fs::read_dir(s.cache.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.contains(".tmp"))
        .collect();
    assert!(parent.is_empty(), "no staging left: {parent:?}");
    fs::remove_file(&derived).unwrap();
    s.check("after the failure");
}

/// Issue 25, defect 5: fingerprints are checksummed and tied to their
/// cache content: edited fingerprints or another cache's fingerprints mean
/// a full build, said so, never reused stale data.
#[test]
fn edited_or_foreign_fingerprints_mean_a_full_build() {
    let s = Setup::new("tests/fixtures/real/pheme-veracity/corpus");
    let fp = |cache: &Path| {
        let names = fingerprint_files(cache);
        assert_eq!(names.len(), 1, "{names:?}");
        cache.join("derived").join(&names[0])
    };
    // Fingerprints edited: every thread's fingerprint changed, not resealed.
    let file = fp(&s.cache);
    let mut v: serde_json::Value = serde_json::from_slice(&fs::read(&file).unwrap()).unwrap();
    for h in v["threads"].as_object_mut().unwrap().values_mut() {
        *h = 12345u64.into();
    }
    fs::write(&file, serde_json::to_vec(&v).unwrap()).unwrap();
    let (reused, note) = s.check("fingerprints edited");
    assert!(
        note.starts_with("full build") && note.contains("fingerprints"),
        "{note}"
    );
    assert_eq!(reused, 0, "{note}");
    // A sibling cache's fingerprints (another content) under this cache's name.
    let sibling_corpus = s._tmp.path().join("sibling-corpus");
    copy_tree(&s.corpus, &sibling_corpus);
    let reply = first_file(&threads(&sibling_corpus)[6].join("reactions"));
    let text = fs::read_to_string(&reply).unwrap();
    fs::write(
        &reply,
        text.replacen("\"retweet_count\": ", "\"retweet_count\": 6", 1),
    )
    .unwrap();
    let sibling = s._tmp.path().join("sibling");
    build_incremental(&sibling_corpus, &sibling, &opts(), &NoProgress).unwrap();
    let mine = fp(&s.cache);
    fs::copy(fp(&sibling), &mine).unwrap();
    let (reused, note) = s.check("a sibling's fingerprints");
    assert!(
        note.starts_with("full build") && note.contains("fingerprints"),
        "{note}"
    );
    assert_eq!(reused, 0, "{note}");
}

/// Issue 26, item 3: after each changed night exactly one fingerprints file
/// remains in derived/, and nothing else there is touched.
#[test]
fn one_fingerprints_file_remains_and_other_derived_files_are_kept() {
    let s = Setup::new("tests/fixtures/golden/corpus");
    let derived = s.cache.join("derived");
    fs::write(derived.join("notes.txt"), "mine").unwrap();
    fs::write(derived.join("fingerprints-mine.json"), "mine too").unwrap();
    let all = threads(&s.corpus);
    for night in 0..5 {
        // A reply added each night.
        let dir = all[night + 1].join("reactions");
        fs::copy(first_file(&dir), dir.join("999999999999999999.json")).unwrap();
        s.check(&format!("night {night}"));
        let id = socialctx::Cache::open(&s.cache).unwrap().content_id();
        assert_eq!(
            fingerprint_files(&s.cache),
            vec![
                format!("fingerprints-{id}.json"),
                "fingerprints-mine.json".to_string()
            ],
            "night {night}"
        );
        assert_eq!(
            fs::read_to_string(derived.join("notes.txt")).unwrap(),
            "mine"
        );
    }
    // A plain full build of another content supersedes them too (it
    // writes none).
    let dir = all[7].join("reactions");
    fs::copy(first_file(&dir), dir.join("999999999999999999.json")).unwrap();
    build(&s.corpus, &s.cache, &opts(), &NoProgress).unwrap();
    assert_eq!(fingerprint_files(&s.cache), vec!["fingerprints-mine.json"]);
}

/// A cache of the previous format version (format 4 has no reaction
/// authors) is refused with the rebuild message, and `--incremental` over
/// it does a full build that says why and publishes a full build's bytes.
#[test]
fn an_older_format_version_means_a_full_build() {
    let s = Setup::new("tests/fixtures/golden/corpus");
    let manifest = s.cache.join(socialctx::internals::MANIFEST_FILE);
    let mut v: serde_json::Value = serde_json::from_slice(&fs::read(&manifest).unwrap()).unwrap();
    let old = socialctx::FORMAT_VERSION - 1;
    v["format_version"] = old.into();
    // A real older manifest lacks the fields its successor added (version
    // 5's checksum): the version must be read before the rest is parsed.
    v.as_object_mut().unwrap().remove("checksum");
    fs::write(&manifest, serde_json::to_vec(&v).unwrap()).unwrap();
    let err = socialctx::Cache::open(&s.cache).unwrap_err().to_string();
    assert!(
        err.contains(&format!("version {old} is not supported"))
            && err.contains("rebuild the cache"),
        "{err}"
    );
    let (reused, note) = s.check("an older format version");
    assert_eq!(reused, 0, "{note}");
    assert!(
        note.starts_with("full build: no usable old cache") && note.contains("rebuild the cache"),
        "{note}"
    );
}

/// Thread paths that JSON escapes (a quote, a backslash, a control
/// character) or writes as UTF-8 are found again in the fingerprints, which
/// are read back with the plain paths borrowed from the mapped file and the
/// escaped ones unescaped: every unchanged thread is reused, the changed
/// one re-read, and the bytes are a full build's.
#[test]
fn thread_paths_that_json_escapes_are_reused() {
    let s = Setup::new("tests/fixtures/real/pheme-veracity/corpus");
    let events: Vec<PathBuf> = fs::read_dir(&s.corpus)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    for (i, name) in ["ev \"quoted\"", "back\\slash", "tab\tand é"]
        .iter()
        .enumerate()
    {
        fs::rename(&events[i], s.corpus.join(name)).unwrap();
    }
    let n = socialctx::Cache::open(&s.cache).unwrap().len() as u64;
    let (_, note) = s.check("events renamed");
    assert!(note.starts_with("incremental"), "{note}");
    let (reused, note) = s.check("no change");
    assert_eq!(reused, n, "{note}");
    let in_quoted = threads(&s.corpus)
        .into_iter()
        .find(|t| t.to_string_lossy().contains("\"quoted\""))
        .unwrap();
    let reply = first_file(&in_quoted.join("reactions"));
    let text = fs::read_to_string(&reply).unwrap();
    fs::write(
        &reply,
        text.replacen("\"retweet_count\": ", "\"retweet_count\": 3", 1),
    )
    .unwrap();
    let (reused, note) = s.check("a reply in a quoted event edited");
    assert_eq!(reused, n - 1, "{note}");
}

/// Fingerprints resealed with a valid checksum but edited underneath (the
/// checksum guards against damage, not against a writer of its own): two
/// threads' entries swapped out of path order, or one thread's fingerprint
/// given another's. Lookups are binary searches over the file's order, so
/// the first must be refused (a full build, said so), never a thread
/// matched to another's entry; the second re-reads that thread. Each
/// cache is byte-identical to a full build's.
#[test]
fn resealed_fingerprints_out_of_order_or_swapped_never_mix_threads() {
    let s = Setup::new("tests/fixtures/real/pheme-veracity/corpus");
    let n = socialctx::Cache::open(&s.cache).unwrap().len() as u64;
    let file = || {
        let names = fingerprint_files(&s.cache);
        s.cache.join("derived").join(&names[0])
    };
    // The `threads` map's entries, as the text between its braces.
    let edit = |f: &dyn Fn(Vec<String>) -> Vec<String>| {
        let text = fs::read_to_string(file()).unwrap();
        let start = text.find("\"threads\":{").unwrap() + "\"threads\":{".len();
        let end = start + text[start..].find('}').unwrap();
        let entries: Vec<String> = text[start..end].split(',').map(str::to_owned).collect();
        let edited = format!("{}{}{}", &text[..start], f(entries).join(","), &text[end..]);
        fs::write(file(), reseal(&edited)).unwrap();
    };
    edit(&|mut e| {
        e.swap(0, 1);
        e
    });
    let (reused, note) = s.check("two threads out of order, resealed");
    assert!(
        note.starts_with("full build") && note.contains("out of order"),
        "{note}"
    );
    assert_eq!(reused, 0, "{note}");
    // Thread 1's fingerprint given to thread 0 (paths kept in order).
    edit(&|mut e| {
        let hash = e[1].rsplit_once(':').unwrap().1.to_owned();
        let key = e[0].rsplit_once(':').unwrap().0.to_owned();
        e[0] = format!("{key}:{hash}");
        e
    });
    let (reused, note) = s.check("a fingerprint given to another thread, resealed");
    assert!(note.starts_with("incremental"), "{note}");
    assert_eq!(reused, n - 1, "{note}");
}

/// Fingerprints of an earlier version mean a full build, said so: version 4
/// (which also listed every reaction's author key) and version 3. No real
/// cache pairs with a version-4 file anyway: the code that wrote it is of
/// another definition, which alone means a full build.
#[test]
fn fingerprints_of_an_earlier_version_mean_a_full_build() {
    let s = Setup::new("tests/fixtures/real/pheme-veracity/corpus");
    let file = || {
        let names = fingerprint_files(&s.cache);
        s.cache.join("derived").join(&names[0])
    };
    for version in [4, 3] {
        let text = fs::read_to_string(file()).unwrap();
        assert!(!text.contains("\"authors\""));
        let first = text.find("\"threads\":{\"").unwrap() + "\"threads\":{".len();
        let rel = &text[first..first + text[first + 1..].find('"').unwrap() + 2];
        // Where version 4 wrote them: after the fingerprints, before `bad`.
        let bad = text.find(",\"bad\":").unwrap();
        let old = format!(
            "{},\"authors\":{{{rel}:[1,2,3]}}{}",
            &text[..bad],
            &text[bad..]
        )
        .replacen("\"version\":5,", &format!("\"version\":{version},"), 1);
        fs::write(file(), reseal(&old)).unwrap();
        let (reused, note) = s.check(&format!("version {version}"));
        assert!(
            note.starts_with("full build") && note.contains(&format!("version {version}")),
            "{note}"
        );
        assert_eq!(reused, 0, "{note}");
    }
}

/// `text`, a fingerprints file's JSON, with its checksum set as the writer
/// sets it: xxh3-64 of the JSON with the field empty.
fn reseal(text: &str) -> String {
    let field = "\"xxh3\":\"";
    let at = text.find(field).unwrap() + field.len();
    let end = at + text[at..].find('"').unwrap();
    let empty = format!("{}{}", &text[..at], &text[end..]);
    let sum = xxhash_rust::xxh3::xxh3_64(empty.as_bytes());
    format!("{}{sum:016x}{}", &text[..at], &text[end..])
}
