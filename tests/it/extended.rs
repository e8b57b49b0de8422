//! The extended features on real PHEME data, with expectations checked by
//! hand against the files (structure.json, annotation.json,
//! who-follows-whom.dat, retweets.json) and on small constructed corpora.

use std::fs;
use std::path::{Path, PathBuf};

use crate::common::*;
use serde_json::Value;
use socialctx::Cache;
use socialctx::ThreadSource;
use socialctx::dump::{DumpOptions, write_cache};
use socialctx::{Annotated, Veracity};
use socialctx::{BuildOptions, NoProgress, build};

fn cache_of(corpus: &str, tmp: &Path) -> Cache {
    let out = tmp.join("c");
    build_cache(&repo(corpus), &out, 2);
    Cache::open(&out).unwrap()
}

/// `(column value)` of reaction `id` in thread `sid`.
fn value(cache: &Cache, sid: u64, id: u64, column: &str) -> f32 {
    let t = cache.get(sid).expect("thread");
    let c = cache.reaction_column(column).expect("column exists");
    let i = t
        .reaction_records()
        .position(|r| r.id == id)
        .expect("reaction");
    t.column(c)[i]
}

fn thread_value(cache: &Cache, sid: u64, column: &str) -> f32 {
    let t = cache.get(sid).unwrap();
    t.thread_value(cache.thread_column(column).unwrap())
        .unwrap()
}

#[test]
fn depth_and_labels_on_pheme_veracity() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = cache_of("tests/fixtures/real/pheme-veracity/corpus", tmp.path());
    let sid = 521310417696858112; // ebola-essien, the structure.json with curly quotes
    assert_eq!(value(&cache, sid, 521313949351178240, "depth"), 1.0);
    assert_eq!(value(&cache, sid, 521319270534635522, "depth"), 1.0);
    assert_eq!(value(&cache, sid, 521319584117567488, "depth"), 2.0);
    assert_eq!(value(&cache, sid, 521332014365294592, "depth"), 3.0);
    assert_eq!(value(&cache, sid, 521332279248162816, "depth"), 2.0);
    // These three ids sit inside one key with curly quotes: not ids, so unknown.
    for id in [521311862118711296, 521313155004497920, 521313840416714752] {
        assert!(value(&cache, sid, id, "depth").is_nan(), "{id}");
    }
    // "misinformation": "1" (a string) -> false.
    assert_eq!(
        thread_value(&cache, sid, "veracity"),
        Veracity::False.code()
    );
    assert_eq!(
        thread_value(&cache, sid, "annotated_rumour"),
        Annotated::Rumour.code()
    );
    // "misinformation": 0, "true": "1" -> true.
    assert_eq!(
        thread_value(&cache, 580882302621843456, "veracity"),
        Veracity::True.code()
    );
    // The one "unclear" thread.
    assert_eq!(
        thread_value(&cache, 580319983676313601, "annotated_rumour"),
        Annotated::Unclear.code()
    );
    // Non-rumours: no veracity.
    let nr = cache
        .iter()
        .find(|t| {
            t.label() == "non-rumours" && t.thread_value(1) == Some(Annotated::NonRumour.code())
        })
        .unwrap();
    assert!(nr.thread_value(0).unwrap().is_nan());
    // Every thread with reactions has the source's direct replies at depth 1 somewhere.
    let depth = cache.reaction_column("depth").unwrap();
    let with_depth = cache
        .iter()
        .filter(|t| t.column(depth).contains(&1.0))
        .count();
    assert!(with_depth > 100, "{with_depth}");
}

#[test]
fn follow_relations_and_persistence_on_pheme_journalism() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = cache_of("tests/fixtures/real/pheme-journalism/corpus", tmp.path());
    let sid = 536826600512581632; // de/gurlitt; source author 24157295
    // who-follows-whom.dat has 2301712239 -> 24157295 and 24157295 -> 2301712239.
    let r = 536828437961646080;
    assert_eq!(value(&cache, sid, r, "follows_source"), 1.0);
    assert_eq!(value(&cache, sid, r, "followed_by_source"), 1.0);
    assert_eq!(value(&cache, sid, r, "reciprocal_follow"), 1.0);
    // 248419931 follows the source author, not the other way round.
    let r2 = 536829722500808704;
    assert_eq!(value(&cache, sid, r2, "follows_source"), 1.0);
    assert_eq!(value(&cache, sid, r2, "followed_by_source"), 0.0);
    assert_eq!(value(&cache, sid, r2, "reciprocal_follow"), 0.0);
    // 2301712239 wrote two of the thread's tweets, 248419931 one.
    assert_eq!(value(&cache, sid, r, "persistence"), 2.0);
    assert_eq!(value(&cache, sid, 536830632266321920, "persistence"), 2.0);
    assert_eq!(value(&cache, sid, r2, "persistence"), 1.0);
    // en/germanwings-crash/580321156508577792 has no who-follows-whom.dat: unknown.
    let t = cache.get(580321156508577792).unwrap();
    let c = cache.reaction_column("follows_source").unwrap();
    assert!(t.reaction_count() > 0 && t.column(c).iter().all(|v| v.is_nan()));
}

#[test]
fn retweets_json_lines_are_retweet_context() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = cache_of("tests/fixtures/real/pheme-journalism/corpus", tmp.path());
    assert_eq!(
        cache.manifest().retweets,
        746,
        "all 746 statuses of the 25 retweets.json files"
    );
    let path = repo(
        "tests/fixtures/real/pheme-journalism/corpus/de/putinmissing/576358041215508480/retweets.json",
    );
    let mut want: Vec<u64> = fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["id_str"]
                .as_str()
                .unwrap()
                .parse()
                .unwrap()
        })
        .collect();
    want.sort();
    let t = cache.get(576358041215508480).unwrap();
    let mut got: Vec<u64> = t
        .reactions()
        .filter(|r| r.kind().as_str() == "retweet")
        .map(|r| r.id())
        .collect();
    got.sort();
    assert_eq!(got, want);
    for r in t.reactions().filter(|r| r.kind().as_str() == "retweet") {
        assert_eq!(r.features()[26], 0.0, "c_type of a retweet");
        assert!(r.text().starts_with("RT @"), "{}", r.text());
    }
}

#[test]
fn dump_extended_prints_the_columns() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = cache_of("tests/fixtures/real/pheme-journalism/corpus", tmp.path());
    let mut out = Vec::new();
    write_cache(
        &mut out,
        &cache,
        &DumpOptions::default().retweets(true).extended(true),
    )
    .unwrap();
    let lines = jsonl(&String::from_utf8(out).unwrap());
    assert_eq!(lines.len(), 27);
    let t = lines
        .iter()
        .find(|l| l["source_id"] == "536826600512581632")
        .unwrap();
    assert_eq!(t["annotated_rumour"], "rumour");
    assert!(t["veracity"].is_string());
    // The journalism layout is <lang>/<event>/<id>: the event is the parent.
    assert_eq!(t["event"], "gurlitt");
    let r = t["reactions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == "536828437961646080")
        .unwrap();
    assert_eq!(r["reciprocal_follow"], 1);
    assert_eq!(r["persistence"], 2);
    for key in [
        "depth",
        "follows_source",
        "followed_by_source",
        "user_reliability",
    ] {
        assert!(r.get(key).is_some(), "{key}");
    }
    // Without --extended the oracle's keys only.
    let mut plain = Vec::new();
    write_cache(
        &mut plain,
        &cache,
        &DumpOptions::default().retweets(false).extended(false),
    )
    .unwrap();
    let first = jsonl(&String::from_utf8(plain).unwrap()).remove(0);
    assert_eq!(first.as_object().unwrap().len(), 3);
}

/// A small corpus built from one real reply and one real source tweet.
struct Mini {
    tmp: tempfile::TempDir,
    reply: Value,
    source: Value,
}

impl Mini {
    fn new() -> Mini {
        let dir =
            repo("tests/fixtures/real/pheme-rnr/corpus/charliehebdo/rumours/552783238415265792");
        let first = fs::read_dir(dir.join("reactions"))
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        Mini {
            tmp: tempfile::tempdir().unwrap(),
            reply: serde_json::from_slice(&fs::read(first).unwrap()).unwrap(),
            source: serde_json::from_slice(
                &fs::read(dir.join("source-tweet/552783238415265792.json")).unwrap(),
            )
            .unwrap(),
        }
    }
    fn thread(&self, label: &str, id: u64) -> PathBuf {
        self.tmp
            .path()
            .join("corpus/ev")
            .join(label)
            .join(id.to_string())
    }
    fn write(&self, path: &Path, bytes: &[u8]) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, bytes).unwrap();
    }
    fn source(&self, label: &str, id: u64, user: &str, at: &str) {
        let mut s = self.source.clone();
        s["id_str"] = id.to_string().into();
        s["user"]["id_str"] = user.into();
        s["created_at"] = at.into();
        self.write(
            &self
                .thread(label, id)
                .join(format!("source-tweets/{id}.json")),
            &serde_json::to_vec(&s).unwrap(),
        );
    }
    fn reply(&self, label: &str, thread: u64, id: u64, user: &str, at: &str) {
        let mut r = self.reply.clone();
        r["id_str"] = id.to_string().into();
        r["user"]["id_str"] = user.into();
        r["created_at"] = at.into();
        self.write(
            &self
                .thread(label, thread)
                .join(format!("reactions/{id}.json")),
            &serde_json::to_vec(&r).unwrap(),
        );
    }
    fn build(&self, extended: bool) -> (Cache, Vec<socialctx::BadInput>) {
        let out = self.tmp.path().join("cache");
        let opts = BuildOptions::default().extended(extended);
        let s = build(self.tmp.path().join("corpus"), &out, &opts, &NoProgress).unwrap();
        (Cache::open(&out).unwrap(), s.report)
    }
}

#[test]
fn user_reliability_uses_rumour_sources_anywhere_in_the_corpus() {
    let m = Mini::new();
    // User 77 posts a rumour source at 12:00 and a non-rumour source at 09:00.
    m.source("rumours", 100, "77", "Wed Jan 07 12:00:00 +0000 2015");
    m.source("non-rumours", 200, "77", "Wed Jan 07 09:00:00 +0000 2015");
    m.source("non-rumours", 300, "1", "Wed Jan 07 08:00:00 +0000 2015");
    m.reply(
        "non-rumours",
        300,
        301,
        "77",
        "Wed Jan 07 11:59:59 +0000 2015",
    );
    m.reply(
        "non-rumours",
        300,
        302,
        "77",
        "Wed Jan 07 12:00:00 +0000 2015",
    );
    m.reply(
        "non-rumours",
        300,
        303,
        "78",
        "Wed Jan 07 13:00:00 +0000 2015",
    );
    m.reply(
        "non-rumours",
        300,
        304,
        "77",
        "Thu Jan 08 12:00:00 +0000 2015",
    );
    let (cache, report) = m.build(true);
    assert!(report.is_empty(), "{report:?}");
    assert_eq!(
        value(&cache, 300, 301, "user_reliability"),
        1.0,
        "before the rumour"
    );
    assert_eq!(
        value(&cache, 300, 302, "user_reliability"),
        0.0,
        "at the rumour's time"
    );
    assert_eq!(
        value(&cache, 300, 303, "user_reliability"),
        1.0,
        "another user"
    );
    assert_eq!(value(&cache, 300, 304, "user_reliability"), 0.0, "after it");
    // Persistence counts the user's tweets in this thread only: three replies by 77.
    assert_eq!(value(&cache, 300, 301, "persistence"), 3.0);
    assert_eq!(value(&cache, 300, 303, "persistence"), 1.0);
    // No structure.json, annotation.json or who-follows-whom.dat: unknown.
    for col in [
        "depth",
        "follows_source",
        "followed_by_source",
        "reciprocal_follow",
    ] {
        assert!(value(&cache, 300, 301, col).is_nan(), "{col}");
    }
    assert!(thread_value(&cache, 300, "veracity").is_nan());
}

#[test]
fn malformed_thread_files_are_reported_and_the_thread_kept() {
    let m = Mini::new();
    m.source("rumours", 100, "5", "Wed Jan 07 12:00:00 +0000 2015");
    m.reply("rumours", 100, 101, "6", "Wed Jan 07 12:01:00 +0000 2015");
    let t = m.thread("rumours", 100);
    m.write(&t.join("structure.json"), b"{\"100\": {\"101\": [");
    m.write(&t.join("annotation.json"), b"[1, 2]");
    m.write(&t.join("who-follows-whom.dat"), b"6\t5\nnot an edge\n");
    m.write(&t.join("retweets.json"), b"{\"truncated\n\n");
    let (cache, report) = m.build(true);
    let paths: Vec<(&str, &str)> = report
        .iter()
        .map(|b| (b.path.as_str(), b.reason.as_str()))
        .collect();
    assert_eq!(report.len(), 4, "{paths:?}");
    assert!(
        paths
            .iter()
            .any(|(p, r)| p.ends_with("structure.json") && r.contains("JSON"))
    );
    assert!(
        paths
            .iter()
            .any(|(p, r)| p.ends_with("annotation.json") && r.contains("not a JSON object"))
    );
    assert!(
        paths
            .iter()
            .any(|(p, r)| p.ends_with("who-follows-whom.dat") && r.contains("line 2"))
    );
    assert!(
        paths
            .iter()
            .any(|(p, r)| p.ends_with("retweets.json") && r.contains("line 1"))
    );
    assert_eq!(
        cache.get(100).unwrap().reaction_count(),
        1,
        "the thread is kept"
    );
    assert_eq!(
        value(&cache, 100, 101, "follows_source"),
        1.0,
        "good lines still count"
    );
    assert!(value(&cache, 100, 101, "depth").is_nan());

    // Without extended features only structure.json is read (every build
    // reads it for the parents: FEATURES.md, "Propagation tree") and reported.
    let (cache, report) = m.build(false);
    assert_eq!(report.len(), 1, "{report:?}");
    assert!(report[0].path.ends_with("structure.json"), "{report:?}");
    assert!(cache.manifest().reaction_columns.is_empty());
    assert!(cache.reaction_column("depth").is_none());
}

/// `retweets.json` is streamed: a file far larger than any one-file cap
/// (it used to be read whole, capped at 64 × `max_file_bytes`) is read to
/// the end; one over-long line is reported with its number and skipped.
#[test]
fn retweets_json_is_streamed_line_by_line_whatever_its_size() {
    let m = Mini::new();
    m.source("rumours", 100, "5", "Wed Jan 07 12:00:00 +0000 2015");
    let t = m.thread("rumours", 100);
    let mut status = m.reply.clone();
    let one = serde_json::to_vec(&status).unwrap().len();
    let max = (one as u64) * 2; // each status fits, the whole file does not
    let mut lines = Vec::new();
    let n = 300u64;
    for i in 0..n {
        status["id_str"] = (1000 + i).to_string().into();
        status["created_at"] = "Wed Jan 07 12:05:00 +0000 2015".into();
        if i == 7 {
            // Line 8: one status padded past the cap.
            status["text"] = "x".repeat(max as usize).into();
        } else {
            status["text"] = format!("retweet {i}").into();
        }
        lines.extend(serde_json::to_vec(&status).unwrap());
        lines.push(b'\n');
    }
    assert!(
        lines.len() as u64 > 64 * max,
        "bigger than the old whole-file cap"
    );
    m.write(&t.join("retweets.json"), &lines);
    let out = m.tmp.path().join("cache");
    let opts = BuildOptions::default().max_file_bytes(max);
    let s = build(m.tmp.path().join("corpus"), &out, &opts, &NoProgress).unwrap();
    let cache = Cache::open(&out).unwrap();
    assert_eq!(s.report.len(), 1, "{:?}", s.report);
    assert!(s.report[0].path.ends_with("retweets.json"));
    assert!(
        s.report[0].reason.starts_with("line 8: ") && s.report[0].reason.contains("limit"),
        "{}",
        s.report[0].reason
    );
    let thread = cache.get(100).unwrap();
    assert_eq!(thread.reaction_count() as u64, n - 1);
    let ids: Vec<u64> = thread.reactions().map(|r| r.id()).collect();
    assert!(!ids.contains(&1007) && ids.contains(&1008) && ids.contains(&(1000 + n - 1)));
}

/// Events and label codes follow the layout: PHEME's `<event>-all-rnr-threads/
/// <label>/<id>` (suffix dropped), RumourEval's `<event>/<id>`, the
/// journalism release's `<lang>/<event>/<id>` with labels from
/// annotation.json, with and without the extended features.
#[test]
fn events_and_labels_follow_the_layout() {
    use socialctx::Label;
    for extended in [true, false] {
        let tmp = tempfile::tempdir().unwrap();
        let build = |corpus: &str| {
            let out = tmp.path().join(corpus.replace('/', "_"));
            let opts = BuildOptions::default().extended(extended);
            build(repo(corpus), &out, &opts, &NoProgress).unwrap();
            Cache::open(&out).unwrap()
        };
        let journalism = build("tests/fixtures/real/pheme-journalism/corpus");
        for t in journalism.iter() {
            let dir = walk_find(
                &repo("tests/fixtures/real/pheme-journalism/corpus"),
                &t.source_id().to_string(),
            );
            assert_eq!(
                t.event(),
                dir.parent().unwrap().file_name().unwrap().to_str().unwrap()
            );
            let annotation: serde_json::Value =
                serde_json::from_slice(&std::fs::read(dir.join("annotation.json")).unwrap())
                    .unwrap();
            let want = match annotation["is_rumour"].as_str() {
                Some("rumour") => Label::Rumour,
                Some("nonrumour") => Label::NonRumour,
                _ => Label::Unknown,
            };
            assert_eq!(
                t.label_code(),
                want.code(),
                "{} extended={extended}",
                t.source_id()
            );
        }
        assert!(journalism.iter().any(|t| t.label_code() == 1));
        let rumoureval = build("tests/fixtures/real/rumoureval2017/corpus");
        let events: std::collections::BTreeSet<&str> =
            rumoureval.iter().map(|t| t.event()).collect();
        assert!(
            events.contains("charliehebdo") && events.contains("ferguson"),
            "{events:?}"
        );
        for t in rumoureval.iter() {
            assert_eq!(
                t.event(),
                t.label(),
                "RumourEval: the parent folder is the event"
            );
        }
        let veracity = build("tests/fixtures/real/pheme-veracity/corpus");
        assert!(
            veracity
                .iter()
                .all(|t| !t.event().ends_with("-all-rnr-threads"))
        );
        assert!(veracity.iter().all(|t| t.label_code() != -1));
    }
}
