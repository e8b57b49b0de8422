//! One test per finding of the fuzz targets in `fuzz/` (see `fuzz/README.md`).

use std::fs;
use std::path::Path;

use crate::common::*;
use socialctx::OpenError;
use socialctx::{Cache, LazyCache};

fn edit_manifest(out: &Path, f: impl FnOnce(&mut serde_json::Value)) {
    let path = out.join("manifest.json");
    let mut m: serde_json::Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
    f(&mut m);
    fs::write(&path, serde_json::to_vec_pretty(&m).unwrap()).unwrap();
}

fn assert_corrupt_manifest<T>(r: Result<T, OpenError>) {
    match r {
        Err(OpenError::Corrupt { path, reason }) => {
            assert!(
                path.ends_with("manifest.json"),
                "{}: {reason}",
                path.display()
            );
            assert!(reason.contains("totals"), "{reason}");
        }
        Err(e) => panic!("expected a corrupt manifest, got {e}"),
        Ok(_) => panic!("a manifest with overflowing counts was accepted"),
    }
}

/// open_cache, finding 1: the reader summed the manifest's per-shard thread
/// and reaction counts with `+`, so counts near `u64::MAX` panicked with
/// overflow checks on, and without them wrapped around to a sum equal to the
/// manifest's totals: the manifest passed its check, `LazyCache::open`
/// succeeded with shard offsets that wrapped too, and only the first shard's
/// validation caught the lie (with an error naming the shard, not the
/// manifest). The sums are now checked.
#[test]
fn per_shard_counts_that_overflow_are_a_corrupt_manifest() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("cache");
    build_cache(&repo("tests/fixtures/golden/corpus"), &out, 2);
    let pristine = fs::read(out.join("manifest.json")).unwrap();
    for field in ["threads", "reactions"] {
        fs::write(out.join("manifest.json"), &pristine).unwrap();
        edit_manifest(&out, |m| {
            let shards = m["shards"].as_array_mut().unwrap();
            assert!(shards.len() >= 2);
            let first = shards[0][field].as_u64().unwrap();
            let second = shards[1][field].as_u64().unwrap();
            // u64::MAX + (second + first + 1) wraps to first + second: the
            // same total as before.
            shards[0][field] = u64::MAX.into();
            shards[1][field] = (second + first + 1).into();
        });
        assert_corrupt_manifest(LazyCache::open(&out));
        assert_corrupt_manifest(Cache::open(&out));
    }
    fs::write(out.join("manifest.json"), &pristine).unwrap();
    Cache::open(&out).expect("the pristine manifest opens");
}
