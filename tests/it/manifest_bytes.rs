//! Every byte of `manifest.json` is checked (issue 35, defect 3): a
//! one-byte change anywhere, the build options included, is refused when
//! the cache is opened, with an error naming `manifest.json`.

use std::fs;

use crate::common::*;
use socialctx::{Cache, LazyCache};

#[test]
fn a_change_of_any_byte_of_the_manifest_is_a_typed_error_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    build_cache(&repo("data-samples/corpus"), &cache, 2);
    let path = cache.join("manifest.json");
    let good = fs::read(&path).unwrap();
    let text = String::from_utf8(good.clone()).unwrap();
    // The edits: each build option, one digit or word.
    for (from, to) in [
        ("\"shard_bytes\": 262144", "\"shard_bytes\": 262145"),
        (
            "\"max_file_bytes\": 16777216",
            "\"max_file_bytes\": 16777215",
        ),
        ("\"strict\": false", "\"strict\": true "),
    ] {
        assert!(text.contains(from), "{from}");
        fs::write(&path, text.replacen(from, to, 1)).unwrap();
        let err = Cache::open(&cache).expect_err(to).to_string();
        assert!(err.contains("manifest.json"), "{to}: {err}");
    }
    // Every byte: replaced by each of a few others (a digit, a letter, a
    // space, its neighbour).
    let mut tried = 0;
    for i in 0..good.len() {
        for b in [b'0', b'7', b'a', b' ', good[i] ^ 1] {
            if b == good[i] {
                continue;
            }
            let mut bad = good.clone();
            bad[i] = b;
            fs::write(&path, &bad).unwrap();
            tried += 1;
            match Cache::open(&cache) {
                Ok(_) => panic!(
                    "byte {i} ({:?} -> {:?}) accepted",
                    good[i] as char, b as char
                ),
                Err(e) => {
                    let msg = e.to_string();
                    assert!(msg.contains("manifest.json"), "byte {i}: {msg}");
                }
            }
            assert!(LazyCache::open(&cache).is_err(), "byte {i} (lazy)");
        }
    }
    fs::write(&path, &good).unwrap();
    Cache::open(&cache).unwrap();
    eprintln!(
        "{tried} one-byte changes of a {}-byte manifest, each refused",
        good.len()
    );
}
