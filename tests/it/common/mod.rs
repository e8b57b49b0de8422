//! Helpers shared by the integration tests.
#![allow(dead_code)]

pub mod cache_files;
pub mod corpus;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use socialctx::{BuildOptions, BuildSummary, NoProgress, build};

/// A path under the repository root.
pub fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// Builds `corpus` into `out` with small shards (to exercise several shards).
pub fn build_cache(corpus: &Path, out: &Path, threads: usize) -> BuildSummary {
    let opts = BuildOptions::default()
        .threads(threads)
        .shard_bytes(256 * 1024);
    build(corpus, out, &opts, &NoProgress).expect("build succeeds")
}

/// Parses JSON Lines.
pub fn jsonl(text: &str) -> Vec<Value> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("valid JSON line"))
        .collect()
}

/// The oracle's bad paths from its stderr report (`{"bad": path, "why": ...}`).
pub fn oracle_bad_paths(path: &Path) -> BTreeSet<String> {
    let text = std::fs::read_to_string(path).expect("bad list readable");
    jsonl(&text)
        .into_iter()
        .map(|v| v["bad"].as_str().expect("bad is a string").to_string())
        .collect()
}

/// Asserts that `ours` (our dump) equals `expected` (the oracle's output):
/// same threads, same reactions in the same order, and every feature equal
/// bit for bit after rounding the oracle's double to f32.
pub fn assert_same_features(ours: &[Value], expected: &[Value], what: &str) {
    assert_eq!(ours.len(), expected.len(), "{what}: number of threads");
    let mut checked = 0usize;
    for (o, e) in ours.iter().zip(expected) {
        let sid = e["source_id"].as_str().unwrap();
        assert_eq!(o["source_id"], e["source_id"], "{what}: thread order");
        assert_eq!(o["label"], e["label"], "{what}: label of {sid}");
        let (or, er) = (
            o["reactions"].as_array().unwrap(),
            e["reactions"].as_array().unwrap(),
        );
        assert_eq!(or.len(), er.len(), "{what}: reactions of {sid}");
        for (a, b) in or.iter().zip(er) {
            let id = b["id"].as_str().unwrap();
            assert_eq!(a["id"], b["id"], "{what}: reaction order in {sid}");
            assert_eq!(a["kind"], b["kind"], "{what}: kind of {id}");
            assert_eq!(
                a["created_at"], b["created_at"],
                "{what}: created_at of {id}"
            );
            let (af, bf) = (
                a["features"].as_array().unwrap(),
                b["features"].as_array().unwrap(),
            );
            assert_eq!(af.len(), 28, "{what}: feature count of {id}");
            assert_eq!(bf.len(), 28, "{what}: oracle feature count of {id}");
            for (i, (x, y)) in af.iter().zip(bf).enumerate() {
                let ours = x.as_f64().unwrap() as f32;
                let want = y.as_f64().unwrap() as f32;
                assert_eq!(
                    ours.to_bits(),
                    want.to_bits(),
                    "{what}: feature {} ({}) of reaction {id} in thread {sid}: ours {ours:?}, oracle {want:?}",
                    i,
                    socialctx::Feature::NAMES[i]
                );
                checked += 1;
            }
        }
    }
    assert!(
        checked > 0
            || expected
                .iter()
                .all(|e| e["reactions"].as_array().unwrap().is_empty())
    );
}

/// An example binary built by `cargo test` next to this test binary.
pub fn example(name: &str) -> Command {
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().unwrap().parent().unwrap();
    let path: PathBuf = profile_dir.join("examples").join(name);
    assert!(
        path.exists(),
        "example binary {} (cargo test builds it)",
        path.display()
    );
    Command::new(path)
}

/// The directory called `name` somewhere under `root` (empty if none).
pub fn walk_find(root: &Path, name: &str) -> PathBuf {
    for e in std::fs::read_dir(root).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            if p.file_name().unwrap() == name {
                return p;
            }
            let found = walk_find(&p, name);
            if !found.as_os_str().is_empty() {
                return found;
            }
        }
    }
    PathBuf::new()
}

/// Writes an edited manifest as a writer would (the typed manifest's own
/// bytes, sealed with its checksum): readers refuse any other bytes, so a
/// test that edits a field must write it this way to reach the check it
/// is about.
pub fn write_manifest(path: &Path, edited: Value) {
    let mut m: socialctx::Manifest = serde_json::from_value(edited).unwrap();
    m.seal();
    std::fs::write(path, m.to_bytes().unwrap()).unwrap();
}
