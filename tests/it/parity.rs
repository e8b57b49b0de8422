//! Parity with the RPDNN oracle: build a cache from each fixture corpus, dump
//! it in the oracle's format, and compare every feature bit for bit (after
//! rounding the oracle's doubles to f32). The expected files were produced by
//! `rpdnn_oracle.py` and are committed under tests/fixtures/.

use std::collections::BTreeSet;

use crate::common::*;
use socialctx::Cache;
use socialctx::dump::{DumpOptions, write_cache};

fn dump(cache: &Cache, retweets: bool) -> Vec<serde_json::Value> {
    let mut out = Vec::new();
    write_cache(&mut out, cache, &DumpOptions::default().retweets(retweets)).unwrap();
    jsonl(&String::from_utf8(out).unwrap())
}

fn expected(rel: &str) -> Vec<serde_json::Value> {
    jsonl(&std::fs::read_to_string(repo(rel)).unwrap())
}

fn check_corpus(corpus: &str, replies: &str, all: Option<&str>, bad: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("cache");
    let summary = build_cache(&repo(corpus), &out, 2);
    let cache = Cache::open(&out).unwrap();
    assert_same_features(&dump(&cache, false), &expected(replies), replies);
    if let Some(all) = all {
        assert_same_features(&dump(&cache, true), &expected(all), all);
    }
    let ours: BTreeSet<String> = summary.report.iter().map(|b| b.path.clone()).collect();
    assert_eq!(
        ours,
        oracle_bad_paths(&repo(bad)),
        "{corpus}: bad-input paths"
    );
    assert_eq!(
        summary.report.len(),
        ours.len(),
        "one report line per bad path"
    );
    assert_eq!(
        cache.report(),
        &summary.report[..],
        "report stored in the cache"
    );
}

#[test]
fn golden_corpus_matches_oracle() {
    check_corpus(
        "tests/fixtures/golden/corpus",
        "tests/fixtures/golden/features-replies.jsonl",
        Some("tests/fixtures/golden/features.jsonl"),
        "tests/fixtures/golden/bad.jsonl",
    );
}

#[test]
fn pheme_veracity_sample_matches_oracle() {
    check_corpus(
        "tests/fixtures/real/pheme-veracity/corpus",
        "tests/fixtures/real/pheme-veracity/expected.jsonl",
        None,
        "tests/fixtures/real/pheme-veracity/bad.jsonl",
    );
}

#[test]
fn pheme_rnr_sample_matches_oracle() {
    check_corpus(
        "tests/fixtures/real/pheme-rnr/corpus",
        "tests/fixtures/real/pheme-rnr/expected.jsonl",
        None,
        "tests/fixtures/real/pheme-rnr/bad.jsonl",
    );
}

#[test]
fn pheme_journalism_sample_matches_oracle() {
    check_corpus(
        "tests/fixtures/real/pheme-journalism/corpus",
        "tests/fixtures/real/pheme-journalism/expected.jsonl",
        None,
        "tests/fixtures/real/pheme-journalism/bad.jsonl",
    );
}

#[test]
fn rumoureval2017_sample_matches_oracle() {
    check_corpus(
        "tests/fixtures/real/rumoureval2017/corpus",
        "tests/fixtures/real/rumoureval2017/expected.jsonl",
        None,
        "tests/fixtures/real/rumoureval2017/bad.jsonl",
    );
}

#[test]
fn shipped_sample_matches_oracle() {
    check_corpus(
        "data-samples/corpus",
        "data-samples/expected-replies.jsonl",
        Some("data-samples/expected.jsonl"),
        "data-samples/bad.jsonl",
    );
}
