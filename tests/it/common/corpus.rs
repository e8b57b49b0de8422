//! Corpora on disk: their thread directories, and copies to edit.

use std::path::{Path, PathBuf};

/// Thread directories under `root` (a directory with a source folder),
/// sorted (a directory that cannot be read is skipped).
pub fn thread_dirs(root: &Path) -> Vec<PathBuf> {
    fn walk(d: &Path, out: &mut Vec<PathBuf>) {
        let Ok(rd) = std::fs::read_dir(d) else { return };
        for e in rd {
            let p = e.unwrap().path();
            if p.is_dir() {
                if p.join("source-tweets").is_dir() || p.join("source-tweet").is_dir() {
                    out.push(p);
                } else {
                    walk(&p, out);
                }
            }
        }
    }
    let mut out = Vec::new();
    walk(root, &mut out);
    out.sort();
    out
}

/// Copies the tree at `src` to `dst` (a corpus has no links).
pub fn copy_tree(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).unwrap();
    for e in std::fs::read_dir(src).unwrap() {
        let e = e.unwrap();
        let to = dst.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &to);
        } else {
            std::fs::copy(e.path(), &to).unwrap();
        }
    }
}

/// The first file of `dir` by name (a reply to edit, a source to delete).
pub fn first_file(dir: &Path) -> PathBuf {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    v.sort();
    v.remove(0)
}

/// The thread folders under `root` in a plan's order (by source id, the
/// folder's name).
pub fn by_source_id(root: &Path) -> Vec<PathBuf> {
    let mut all = thread_dirs(root);
    all.sort_by_key(|t| {
        t.file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .parse::<u64>()
            .unwrap()
    });
    all
}
