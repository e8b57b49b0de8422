//! A plan's pin of one thread: its portable fingerprint
//! ([`How::Portable`](super::fingerprint::How)) and its file count, from
//! one listing per tweet folder and a `stat` per file relative to that
//! folder's descriptor (`fingerprint_counted`). The full-path `stat` of
//! every file (a path walk each, then a second listing to count the files)
//! was most of a plan's time and every partition's check.

use super::discover::ThreadDir;
use super::fingerprint::{How, fingerprint_counted};

/// What a plan pins of a thread (see [`PlanThread`](super::plan)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Pin {
    /// The portable fingerprint: names, sizes, mtimes.
    pub(crate) hash: u64,
    /// Inode numbers; inode numbers and change times (an in-place edit that
    /// put the mtime back, on the machine that made the plan).
    pub(crate) inodes: u64,
    pub(crate) changes: u64,
    /// Entries in its tweet folders (balances partitions).
    pub(crate) files: u64,
}

/// `td`'s pin: its portable fingerprint and the entries of its tweet
/// folders, from one listing per folder (`fingerprint_counted`).
pub(crate) fn pin(td: &ThreadDir) -> Pin {
    let (fp, files) = fingerprint_counted(td, How::Portable);
    Pin {
        hash: fp.hash,
        inodes: fp.inodes,
        changes: fp.changes,
        files,
    }
}

/// Pins of `list`, on `threads` threads (serially if a pool cannot start).
pub(crate) fn pins(list: &[ThreadDir], threads: usize) -> Vec<Pin> {
    use rayon::prelude::*;
    match rayon::ThreadPoolBuilder::new().num_threads(threads).build() {
        Ok(pool) => pool.install(|| list.par_iter().map(pin).collect()),
        Err(_) => list.iter().map(pin).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::discover::discover;
    use crate::ingest::fingerprint::{How, fingerprint};

    /// The pin hashes as the portable fingerprint, over the sample corpus
    /// and with a folder missing, a dot file and a dangling link.
    #[test]
    fn a_pin_hashes_as_the_portable_fingerprint() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("c");
        let sample = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("data-samples/corpus");
        let status = std::process::Command::new("cp")
            .args(["-a", "--"])
            .arg(&sample)
            .arg(&root)
            .status()
            .unwrap();
        assert!(status.success());
        let list = discover(&root, 1).unwrap().threads;
        assert!(list.len() > 3);
        let dirs: Vec<_> = list[0].reaction_dirs().map(|(d, _)| d).collect();
        std::fs::write(list[1].path.join(dirs[0]).join(".hidden"), b"x").unwrap();
        std::os::unix::fs::symlink("nowhere", list[2].path.join(dirs[0]).join("9.json")).unwrap();
        if let Some(src) = list[3].source_dir() {
            std::fs::remove_dir_all(list[3].path.join(src)).unwrap();
        }
        for td in &list {
            let (p, f) = (pin(td), fingerprint(td, How::Portable));
            assert_eq!(
                (p.hash, p.inodes, p.changes),
                (f.hash, f.inodes, f.changes),
                "{}",
                td.rel
            );
            let count: u64 = td
                .source_dir()
                .into_iter()
                .chain(td.reaction_dirs().map(|(d, _)| d))
                .map(|d| std::fs::read_dir(td.path.join(d)).map_or(0, |r| r.count() as u64))
                .sum();
            assert_eq!(p.files, count, "{}", td.rel);
        }
    }
}
