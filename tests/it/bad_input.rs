//! Bad input: every kind of broken file or thread is skipped with one report
//! line naming its path and the reason, the rest of the thread is kept, and
//! `strict` stops at the first one without touching an existing cache.

use std::fs;
use std::path::{Path, PathBuf};

use crate::common::*;
use serde_json::{Value, json};
use socialctx::ThreadSource;
use socialctx::{BuildError, Cache};
use socialctx::{BuildOptions, NoProgress, build};

const THREAD: &str = "tests/fixtures/real/pheme-rnr/corpus/charliehebdo/rumours/552783238415265792";

fn real_tweet() -> Value {
    let dir = repo(THREAD).join("reactions");
    let first = fs::read_dir(dir).unwrap().next().unwrap().unwrap().path();
    serde_json::from_slice(&fs::read(first).unwrap()).unwrap()
}

fn real_source() -> Value {
    let path = repo(THREAD).join("source-tweet/552783238415265792.json");
    serde_json::from_slice(&fs::read(path).unwrap()).unwrap()
}

/// A corpus with one thread `ev/rumours/100` whose reactions are `files`.
struct Corpus {
    _tmp: tempfile::TempDir,
    root: PathBuf,
}

impl Corpus {
    fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("corpus");
        let c = Corpus { _tmp: tmp, root };
        c.source(100, &real_source());
        c
    }
    fn thread(&self, id: u64) -> PathBuf {
        self.root.join("ev/rumours").join(id.to_string())
    }
    fn source(&self, id: u64, v: &Value) {
        self.raw(
            &self.thread(id).join(format!("source-tweets/{id}.json")),
            &serde_json::to_vec(v).unwrap(),
        );
    }
    fn raw(&self, path: &Path, bytes: &[u8]) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, bytes).unwrap();
    }
    fn reaction(&self, name: &str, v: &Value) {
        self.raw(
            &self.thread(100).join("reactions").join(name),
            &serde_json::to_vec(v).unwrap(),
        );
    }
    fn out(&self) -> PathBuf {
        self._tmp.path().join("cache")
    }
    fn build(&self) -> socialctx::BuildSummary {
        build_cache(&self.root, &self.out(), 2)
    }
}

fn with(mut v: Value, f: impl FnOnce(&mut Value)) -> Value {
    f(&mut v);
    v
}

/// Each case: file name, content, and a word the reason must contain.
fn bad_cases() -> Vec<(&'static str, Vec<u8>, &'static str)> {
    let t = real_tweet();
    let j = |v: Value| serde_json::to_vec(&v).unwrap();
    let full = j(t.clone());
    vec![
        ("truncated.json", full[..full.len() / 2].to_vec(), "JSON"),
        ("empty.json", Vec::new(), "empty"),
        (
            "latin1.json",
            {
                let mut b = full.clone();
                let at = b.windows(6).position(|w| w == b"\"text\"").unwrap() + 9;
                b.insert(at, 0xff);
                b
            },
            "UTF-8",
        ),
        ("array.json", b"[1, 2]".to_vec(), "array"),
        (
            "no_created_at.json",
            j(with(t.clone(), |v| {
                v.as_object_mut().unwrap().remove("created_at");
            })),
            "created_at",
        ),
        (
            "bad_date.json",
            j(with(t.clone(), |v| {
                v["created_at"] = "Sun Feb 29 10:00:00 +0000 2015".into()
            })),
            "created_at",
        ),
        (
            "not_a_date.json",
            j(with(t.clone(), |v| v["created_at"] = "not a date".into())),
            "created_at",
        ),
        (
            "hour24.json",
            j(with(t.clone(), |v| {
                v["created_at"] = "Wed Jan 07 24:00:00 +0000 2015".into()
            })),
            "created_at",
        ),
        (
            "user_date.json",
            j(with(t.clone(), |v| v["user"]["created_at"] = 5.into())),
            "user.created_at",
        ),
        (
            "no_user.json",
            j(with(t.clone(), |v| {
                v.as_object_mut().unwrap().remove("user");
            })),
            "user",
        ),
        (
            "null_user.json",
            j(with(t.clone(), |v| v["user"] = Value::Null)),
            "user",
        ),
        (
            "null_count.json",
            j(with(t.clone(), |v| {
                v["user"]["statuses_count"] = Value::Null
            })),
            "statuses_count",
        ),
        (
            "float_count.json",
            j(with(t.clone(), |v| {
                v["user"]["followers_count"] = json!(1.5)
            })),
            "followers_count",
        ),
        (
            "string_count.json",
            j(with(t.clone(), |v| v["retweet_count"] = "3".into())),
            "retweet_count",
        ),
        (
            "no_name.json",
            j(with(t.clone(), |v| {
                v["user"].as_object_mut().unwrap().remove("name");
            })),
            "user.name",
        ),
        (
            "desc_number.json",
            j(with(t.clone(), |v| v["user"]["description"] = 7.into())),
            "description",
        ),
        (
            "no_entities.json",
            j(with(t.clone(), |v| {
                v.as_object_mut().unwrap().remove("entities");
            })),
            "entities",
        ),
        (
            "urls_string.json",
            j(with(t.clone(), |v| v["entities"]["urls"] = "x".into())),
            "entities.urls",
        ),
        (
            "no_text.json",
            j(with(t.clone(), |v| {
                v.as_object_mut().unwrap().remove("text");
            })),
            "text",
        ),
        (
            "no_id.json",
            j(with(t.clone(), |v| {
                v.as_object_mut().unwrap().remove("id_str");
            })),
            "id_str",
        ),
        (
            "bad_id.json",
            j(with(t.clone(), |v| v["id_str"] = "12a".into())),
            "id_str",
        ),
        (
            "no_verified.json",
            j(with(t.clone(), |v| {
                v["user"].as_object_mut().unwrap().remove("verified");
            })),
            "verified",
        ),
        (
            "big_int.json",
            {
                let s = String::from_utf8(full.clone()).unwrap();
                s.replacen(
                    "\"retweet_count\":",
                    "\"retweet_count\":123456789012345678901234567890,\"x\":",
                    1,
                )
                .into_bytes()
            },
            "JSON",
        ),
    ]
}

#[test]
fn every_bad_reaction_is_skipped_and_reported_and_the_rest_kept() {
    let c = Corpus::new();
    let good = real_tweet();
    c.reaction("good.json", &good);
    c.reaction(
        "good2.json",
        &with(good.clone(), |v| {
            v["id_str"] = "7".into();
            v["favorite_count"] = Value::Null;
            v["user"]["verified"] = Value::Null;
            v["user"]["description"] = Value::Null;
            v["entities"]["urls"] = Value::Null;
        }),
    );
    let cases = bad_cases();
    for (name, bytes, _) in &cases {
        c.raw(&c.thread(100).join("reactions").join(name), bytes);
    }
    // Ignored without a report line: hidden files.
    c.raw(&c.thread(100).join("reactions/.DS_Store"), b"\0\0junk");
    // A directory and a dangling symlink where a file should be.
    fs::create_dir_all(c.thread(100).join("reactions/subdir.json")).unwrap();
    std::os::unix::fs::symlink(
        "/nonexistent/x.json",
        c.thread(100).join("reactions/dangling.json"),
    )
    .unwrap();
    // A file over the size cap.
    c.raw(
        &c.thread(100).join("reactions/huge.json"),
        &vec![b' '; 2 * 1024 * 1024],
    );

    let opts = BuildOptions::default().max_file_bytes(1024 * 1024);
    let summary = build(&c.root, c.out(), &opts, &NoProgress).unwrap();
    let cache = Cache::open(c.out()).unwrap();
    assert_eq!(cache.len(), 1);
    let t = cache.get(100).unwrap();
    assert_eq!(t.reaction_count(), 2, "the two good reactions are kept");
    let r = t.reactions().find(|r| r.id() == 7).unwrap();
    assert_eq!(r.features()[17], 0.0, "favorite_count null -> 0");
    assert_eq!(r.features()[8], 0.0, "verified null -> 0");
    assert_eq!(r.features()[13], 0.0, "description null -> 0 words");
    assert_eq!(r.features()[27], 0.0, "description null -> no description");
    assert_eq!(r.features()[21], 0.0, "urls null -> no urls");
    assert_eq!(r.user_description(), None);

    let report = &summary.report;
    for (name, _, word) in &cases {
        let path = format!("ev/rumours/100/reactions/{name}");
        let line = report
            .iter()
            .find(|b| b.path == path)
            .unwrap_or_else(|| panic!("{name} reported"));
        assert!(
            line.reason.contains(word),
            "{name}: reason {:?} should mention {word:?}",
            line.reason
        );
    }
    for (name, word) in [
        ("subdir.json", "directory"),
        ("dangling.json", "open"),
        ("huge.json", "limit"),
    ] {
        let path = format!("ev/rumours/100/reactions/{name}");
        let line = report
            .iter()
            .find(|b| b.path == path)
            .unwrap_or_else(|| panic!("{name} reported"));
        assert!(line.reason.contains(word), "{name}: {:?}", line.reason);
    }
    assert_eq!(
        report.len(),
        cases.len() + 3,
        "one line per bad file, nothing for .DS_Store: {report:#?}"
    );

    // With a generous cap the large (blank) file is rejected as JSON instead: the cap is what rejected it before.
    let summary = build_cache(&c.root, &c.out(), 1);
    let huge = summary
        .report
        .iter()
        .find(|b| b.path.ends_with("huge.json"))
        .unwrap();
    assert!(!huge.reason.contains("limit"), "{huge:?}");
}

#[test]
fn size_cap_gives_a_clear_reason() {
    let c = Corpus::new();
    c.reaction("a.json", &real_tweet());
    let opts = BuildOptions::default().max_file_bytes(100);
    let summary = build(&c.root, c.out(), &opts, &NoProgress).unwrap();
    // The source tweet is over the cap too: the whole thread is skipped.
    assert_eq!(summary.report.len(), 1);
    assert_eq!(summary.report[0].path, "ev/rumours/100");
    assert!(
        summary.report[0].reason.contains("100-byte limit"),
        "{:?}",
        summary.report[0]
    );
}

#[test]
fn bad_or_missing_source_skips_the_thread_only() {
    let c = Corpus::new();
    c.reaction("a.json", &real_tweet());
    // 200: truncated source; 300: only stray files in source-tweets/; 400: source without user.
    c.raw(
        &c.thread(200).join("source-tweets/200.json"),
        b"{\"text\": \"unterminated",
    );
    c.raw(&c.thread(300).join("source-tweets/.DS_Store"), b"x");
    c.raw(&c.thread(300).join("source-tweets/notes.csv"), b"a,b");
    c.source(
        400,
        &with(real_source(), |v| {
            v.as_object_mut().unwrap().remove("user");
        }),
    );
    c.raw(
        &c.thread(400).join("reactions/1.json"),
        &serde_json::to_vec(&real_tweet()).unwrap(),
    );
    // 500: fine, with a *.csv beside the source (ignored) and no reactions folder.
    c.source(500, &real_source());
    c.raw(&c.thread(500).join("source-tweets/zzz.csv"), b"a,b");
    // Not threads at all: a non-digit name, a digit name without source folder.
    c.raw(&c.root.join("ev/rumours/abc/source-tweets/1.json"), b"{}");
    c.raw(&c.root.join("ev/rumours/600/reactions/1.json"), b"{}");

    let summary = c.build();
    let cache = Cache::open(c.out()).unwrap();
    let ids: Vec<u64> = cache.iter().map(|t| t.source_id()).collect();
    assert_eq!(ids, vec![100, 500]);
    assert_eq!(cache.get(500).unwrap().reaction_count(), 0);
    let paths: Vec<&str> = summary.report.iter().map(|b| b.path.as_str()).collect();
    assert_eq!(
        paths,
        vec!["ev/rumours/200", "ev/rumours/300", "ev/rumours/400"]
    );
    assert!(
        summary.report[0]
            .reason
            .contains("source tweet source-tweets/200.json")
    );
    assert!(summary.report[1].reason.contains("no source tweet file"));
    assert!(summary.report[2].reason.contains("user"));
}

#[test]
fn duplicate_source_ids_are_reported_not_merged() {
    let c = Corpus::new();
    c.reaction("a.json", &real_tweet());
    let other = c.root.join("other/non-rumours/100");
    c.raw(
        &other.join("source-tweets/100.json"),
        &serde_json::to_vec(&real_source()).unwrap(),
    );
    let summary = c.build();
    let cache = Cache::open(c.out()).unwrap();
    assert_eq!(cache.len(), 1);
    assert_eq!(
        cache.get(100).unwrap().label(),
        "rumours",
        "the first path in order is kept"
    );
    assert_eq!(summary.report.len(), 1);
    assert_eq!(summary.report[0].path, "other/non-rumours/100");
    assert!(summary.report[0].reason.contains("duplicate source id 100"));
}

#[test]
fn strict_stops_at_the_first_bad_input_and_keeps_the_old_cache() {
    let c = Corpus::new();
    c.reaction("a.json", &real_tweet());
    c.build();
    let before: Vec<_> = fs::read_dir(c.out())
        .unwrap()
        .map(|e| fs::read(e.unwrap().path()).unwrap())
        .collect();

    c.raw(&c.thread(100).join("reactions/b.json"), b"{");
    let opts = BuildOptions::default().strict(true);
    match build(&c.root, c.out(), &opts, &NoProgress) {
        Err(BuildError::StrictBadInput { path, reason }) => {
            assert_eq!(
                path,
                std::path::Path::new("ev/rumours/100/reactions/b.json")
            );
            assert!(reason.contains("JSON"), "{reason}");
        }
        other => panic!("expected a strict-mode error, got {other:?}"),
    }
    let after: Vec<_> = fs::read_dir(c.out())
        .unwrap()
        .map(|e| fs::read(e.unwrap().path()).unwrap())
        .collect();
    assert_eq!(before, after, "old cache byte-identical");
    let leftovers: Vec<_> = fs::read_dir(c._tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        leftovers.len(),
        3,
        "corpus, cache, lock file: {leftovers:?}"
    );
}

#[test]
fn corpus_errors_are_clear() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("missing");
    let err = build(
        &missing,
        tmp.path().join("c"),
        &BuildOptions::default(),
        &NoProgress,
    )
    .unwrap_err();
    assert!(matches!(err, BuildError::CorpusMissing(_)), "{err}");

    let empty = tmp.path().join("empty");
    fs::create_dir(&empty).unwrap();
    fs::write(empty.join("readme.txt"), "x").unwrap();
    let err = build(
        &empty,
        tmp.path().join("c"),
        &BuildOptions::default(),
        &NoProgress,
    )
    .unwrap_err();
    assert!(matches!(err, BuildError::EmptyCorpus(_)), "{err}");

    let c = Corpus::new();
    let inside = c.root.join("ev/cache");
    let err = build(&c.root, &inside, &BuildOptions::default(), &NoProgress).unwrap_err();
    assert!(
        matches!(err, BuildError::OutputInsideCorpus { .. }),
        "{err}"
    );
    assert!(!inside.exists());
}

#[test]
fn symlink_loops_do_not_hang_the_walk() {
    let c = Corpus::new();
    c.reaction("a.json", &real_tweet());
    std::os::unix::fs::symlink(&c.root, c.root.join("ev/loop")).unwrap();
    std::os::unix::fs::symlink("reactions", c.thread(100).join("replies")).unwrap();
    let summary = c.build();
    let cache = Cache::open(c.out()).unwrap();
    assert_eq!(cache.len(), 1);
    // `replies` -> `reactions`: the same files seen twice, both kept as replies
    // (the reference reads both folders too).
    assert_eq!(cache.get(100).unwrap().reaction_count(), 2);
    // The loop is not walked, and said (issue 44: a linked folder was
    // skipped without a word).
    let lines: Vec<_> = summary
        .report
        .iter()
        .map(|b| (b.path.as_str(), b.reason.as_str()))
        .collect();
    assert_eq!(
        lines,
        [("ev/loop", socialctx::internals::discover::LINKED_DIR)],
        "{:?}",
        summary.report
    );
}

#[test]
fn stray_files_non_utf8_names_and_deep_json() {
    use std::os::unix::ffi::OsStrExt;
    let c = Corpus::new();
    let good = real_tweet();
    c.reaction("1.json", &good);
    let reactions = c.thread(100).join("reactions");
    // Editors' backups and other strays: reported, never read as tweets.
    c.raw(
        &reactions.join("1.json~"),
        &serde_json::to_vec(&good).unwrap(),
    );
    c.raw(&reactions.join("#2.json#"), b"{}");
    c.raw(&reactions.join("notes.txt"), b"hello");
    // A backup of the source that sorts after it must not replace it.
    c.raw(&c.thread(100).join("source-tweets/100.json.bak"), b"{}");
    // A non-UTF-8 file name: read like any other, reported lossily when bad.
    let odd = std::ffi::OsStr::from_bytes(b"bad-\xff.json");
    c.raw(&reactions.join(odd), b"{\"truncated");
    let odd_good = std::ffi::OsStr::from_bytes(b"good-\xfe.json");
    c.raw(
        &reactions.join(odd_good),
        &serde_json::to_vec(&with(good.clone(), |v| v["id_str"] = "9".into())).unwrap(),
    );
    // Deeply nested JSON: rejected without a stack overflow.
    let deep = format!("{}{}", "[".repeat(200_000), "]".repeat(200_000));
    c.raw(&reactions.join("deep.json"), deep.as_bytes());
    let deep_obj = format!("{}1{}", "{\"a\":".repeat(100_000), "}".repeat(100_000));
    c.raw(&reactions.join("deep-object.json"), deep_obj.as_bytes());

    let summary = c.build();
    let cache = Cache::open(c.out()).unwrap();
    let t = cache.get(100).unwrap();
    assert_eq!(
        t.reaction_count(),
        2,
        "1.json and the non-UTF-8-named good file"
    );
    assert!(t.reactions().any(|r| r.id() == 9));
    assert_eq!(
        t.source_text(),
        real_source()["text"].as_str().unwrap(),
        "the real source was used"
    );
    let reason = |suffix: &str| {
        summary
            .report
            .iter()
            .find(|b| b.path.ends_with(suffix))
            .unwrap_or_else(|| panic!("{suffix} reported: {:#?}", summary.report))
            .reason
            .clone()
    };
    for stray in [
        "reactions/1.json~",
        "reactions/#2.json#",
        "reactions/notes.txt",
        "source-tweets/100.json.bak",
    ] {
        assert!(reason(stray).contains("not a .json file"), "{stray}");
    }
    assert!(reason("reactions/bad-\u{fffd}.json").contains("JSON"));
    assert!(!reason("reactions/deep.json").is_empty());
    assert!(!reason("reactions/deep-object.json").is_empty());
    assert_eq!(summary.report.len(), 7, "{:#?}", summary.report);
}

/// A build whose progress says "cancelled" stops with `Cancelled`, keeps the
/// old cache byte for byte and leaves no staging directory.
#[test]
fn a_cancelled_build_keeps_the_old_cache_and_leaves_nothing() {
    use std::sync::atomic::{AtomicU64, Ordering};
    struct StopAfter(u64, AtomicU64);
    impl socialctx::Progress for StopAfter {
        fn thread_done(&self, _: u64) {
            self.1.fetch_add(1, Ordering::Relaxed);
        }
        fn cancelled(&self) -> bool {
            self.1.load(Ordering::Relaxed) >= self.0
        }
    }
    let tmp = tempfile::tempdir().unwrap();
    let corpus = crate::common::repo("tests/fixtures/golden/corpus");
    let out = tmp.path().join("cache");
    build(&corpus, &out, &BuildOptions::default(), &NoProgress).unwrap();
    let manifest = std::fs::read(out.join("manifest.json")).unwrap();
    for after in [0, 2] {
        let err = build(
            &corpus,
            &out,
            &BuildOptions::default().shard_bytes(1),
            &StopAfter(after, AtomicU64::new(0)),
        )
        .unwrap_err();
        assert!(matches!(err, BuildError::Cancelled), "{err}");
        assert_eq!(std::fs::read(out.join("manifest.json")).unwrap(), manifest);
        let leftovers: Vec<_> = std::fs::read_dir(tmp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.contains(".tmp-"))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
    }
    assert_eq!(
        Cache::open(&out).unwrap().manifest().options.shard_bytes,
        16 << 20
    );
}

/// A file the listing gives as a symlink is read to its end like any other
/// (the reader takes a short read as the end only for regular files), and a
/// tweet far larger than the reader's first buffer is read whole: a corpus
/// of symlinks to the files, with one 300 KB reaction, builds the same
/// cache as the files themselves.
#[test]
fn symlinked_and_large_tweet_files_are_read_whole() {
    let plain = Corpus::new();
    let mut big = real_tweet();
    big["user"]["description"] = json!("long words ".repeat(30_000));
    big["id_str"] = json!("700");
    plain.reaction("700.json", &big);
    for i in 0..5 {
        let t = with(real_tweet(), |v| v["id_str"] = json!(format!("71{i}")));
        plain.reaction(&format!("71{i}.json"), &t);
    }
    assert!(
        fs::metadata(plain.thread(100).join("reactions/700.json"))
            .unwrap()
            .len()
            > 300_000
    );

    let linked = Corpus::new();
    let targets = linked._tmp.path().join("elsewhere");
    for dir in ["source-tweets", "reactions"] {
        let from = plain.thread(100).join(dir);
        let to = linked.thread(100).join(dir);
        fs::create_dir_all(&to).unwrap();
        for e in fs::read_dir(&from).unwrap() {
            let name = e.unwrap().file_name();
            let real = targets.join(dir).join(&name);
            fs::create_dir_all(real.parent().unwrap()).unwrap();
            fs::copy(from.join(&name), &real).unwrap();
            let _ = fs::remove_file(to.join(&name));
            std::os::unix::fs::symlink(&real, to.join(&name)).unwrap();
        }
    }
    let (a, b) = (plain.build(), linked.build());
    assert!(a.report.is_empty(), "{:?}", a.report);
    assert!(b.report.is_empty(), "{:?}", b.report);
    assert_eq!(a.manifest.reactions, 6);
    for name in ["shard-00000.rkyv", "text-00000.rkyv"] {
        assert_eq!(
            fs::read(plain.out().join(name)).unwrap(),
            fs::read(linked.out().join(name)).unwrap(),
            "{name}"
        );
    }
    let cache = Cache::open(plain.out()).unwrap();
    let thread = cache.thread(0).unwrap();
    let longest = thread
        .reactions()
        .map(|r| r.user_description().map_or(0, str::len))
        .max();
    assert_eq!(longest, Some("long words ".len() * 30_000));
}
