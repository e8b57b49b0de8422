//! Cache directories for the cache tests (`cache.rs`, `cache_damage.rs`).

use std::fs;
use std::path::{Path, PathBuf};

use super::{build_cache, repo};

pub fn golden() -> PathBuf {
    repo("tests/fixtures/golden/corpus")
}

/// Every file of a cache directory, by name.
pub fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<_> = fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    v.sort();
    v
}

/// A fresh small cache for damage tests.
pub fn small_cache(dir: &Path) -> PathBuf {
    let out = dir.join("cache");
    build_cache(&repo("tests/fixtures/real/pheme-rnr/corpus"), &out, 2);
    out
}

/// Copies `src` to `dst`, creating entries in sorted or reverse-sorted order
/// (on file systems that list in creation order, the listings differ).
pub fn copy_tree(src: &Path, dst: &Path, reverse: bool) {
    fs::create_dir_all(dst).unwrap();
    let mut entries: Vec<_> = fs::read_dir(src)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    if reverse {
        entries.reverse();
    }
    for p in entries {
        let to = dst.join(p.file_name().unwrap());
        if p.is_dir() {
            copy_tree(&p, &to, reverse);
        } else {
            fs::copy(&p, &to).unwrap();
        }
    }
}
