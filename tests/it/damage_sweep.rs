//! Issue 26's acceptance sweep: every file a cache owns (manifest, numbers
//! shard, text shard, bad-input report), each damaged fifteen ways, is
//! refused by both readers with an error naming that file: 60 of 60
//! trials. The finer cases (which footer byte, which manifest field) live
//! beside each format's own tests; this one guards the whole cache at once.

use std::fs;
use std::path::Path;

use crate::common::*;
use socialctx::ThreadSource;
use socialctx::{Cache, LazyCache, OpenError};

/// How a file is damaged: a name and the damaged bytes (None: deleted).
fn damages(pristine: &[u8]) -> Vec<(String, Option<Vec<u8>>)> {
    let n = pristine.len();
    let mut out: Vec<(String, Option<Vec<u8>>)> = vec![
        ("deleted".into(), None),
        ("emptied".into(), Some(Vec::new())),
        ("cut to 1 byte".into(), Some(pristine[..1].to_vec())),
        ("cut in half".into(), Some(pristine[..n / 2].to_vec())),
        ("last byte cut".into(), Some(pristine[..n - 1].to_vec())),
        ("a byte appended".into(), Some([pristine, b"\n"].concat())),
    ];
    for pos in [0, 1, n / 4, n / 2, 3 * n / 4, n - 33, n - 9, n - 2, n - 1] {
        let mut b = pristine.to_vec();
        b[pos] ^= 0x01;
        out.push((format!("bit 0 of byte {pos} flipped"), Some(b)));
    }
    out
}

fn names(e: &OpenError, file: &str) -> bool {
    match e {
        OpenError::Corrupt { path, .. }
        | OpenError::Io { path, .. }
        | OpenError::UnsupportedVersion { path, .. } => path.ends_with(file),
        // No manifest: the directory is not a cache (and says so).
        OpenError::CacheMissing(_) => file == "manifest.json" && e.to_string().contains(file),
        _ => false,
    }
}

/// Everything a lazy reader can be asked for: the first error, if any.
fn read_all_lazily(dir: &Path) -> Result<(), OpenError> {
    let cache = LazyCache::open(dir)?;
    for i in 0..cache.len() {
        cache.thread(i)?;
    }
    cache.report()?;
    Ok(())
}

#[test]
fn every_damage_to_every_cache_file_is_detected_by_both_readers() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("cache");
    build_cache(&repo("data-samples/corpus"), &out, 2);
    let mut files: Vec<String> = fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().unwrap().is_file())
        .map(|e| e.file_name().into_string().unwrap())
        .collect();
    files.sort();
    assert_eq!(
        files,
        [
            "manifest.json",
            "report.jsonl",
            "shard-00000.rkyv",
            "text-00000.rkyv"
        ],
        "the files a cache owns"
    );
    let (mut trials, mut missed) = (0, Vec::new());
    for file in &files {
        let path = out.join(file);
        let pristine = fs::read(&path).unwrap();
        assert!(pristine.len() > 40, "{file} is big enough to damage");
        for (what, bytes) in damages(&pristine) {
            match &bytes {
                None => fs::remove_file(&path).unwrap(),
                Some(b) => fs::write(&path, b).unwrap(),
            }
            trials += 1;
            let full = Cache::open(&out).err();
            let lazy = read_all_lazily(&out).err();
            match (&full, &lazy) {
                (Some(a), Some(b)) if names(a, file) && names(b, file) => {}
                _ => missed.push(format!("{file}, {what}: open {full:?}, lazy {lazy:?}")),
            }
            fs::write(&path, &pristine).unwrap();
        }
    }
    assert_eq!(trials, 60);
    assert!(
        missed.is_empty(),
        "{} of {trials} damages went undetected:\n{}",
        missed.len(),
        missed.join("\n")
    );
    Cache::open(&out).expect("restored, the cache opens again");
}
