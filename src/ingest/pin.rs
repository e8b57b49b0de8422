//! A plan's pin of one thread: the same hashes as
//! [`fingerprint`](super::fingerprint::fingerprint) with
//! [`How::Portable`](super::fingerprint::How), and its file count, from one
//! listing per tweet folder and a `stat` per file relative to that folder's
//! descriptor. The full-path `stat` of every file (a path walk each, then a
//! second listing to count the files) was most of a plan's time and every
//! partition's check; this is the same answer for a third of the kernel work.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

use rustix::fd::{AsFd, OwnedFd};
use rustix::fs::{AtFlags, CWD, Dir, Mode, OFlags, Stat, openat, statat};
use xxhash_rust::xxh3::Xxh3Default;

use super::discover::ThreadDir;
use super::layout::Layout;
use super::layout::pheme::Pheme;

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

const DIR: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::CLOEXEC);

/// `td`'s pin. Hashes exactly as `fingerprint(td, How::Portable)` does
/// (a unit test holds them equal), so a plan's pins did not change format.
pub(crate) fn pin(td: &ThreadDir) -> Pin {
    let mut h = Xxh3Default::new();
    let (mut hi, mut hc) = (Xxh3Default::new(), Xxh3Default::new());
    h.update(&td.entries.to_le_bytes());
    let layout = td.layout().name();
    if layout != Pheme.name() {
        h.update(&(layout.len() as u64).to_le_bytes());
        h.update(layout.as_bytes());
    }
    let mut add = |name: &[u8], st: Option<Stat>| {
        h.update(&(name.len() as u64).to_le_bytes());
        h.update(name);
        match st {
            Some(m) => {
                let mtime = i128::from(m.st_mtime) * 1_000_000_000 + i128::from(m.st_mtime_nsec);
                let ctime = i128::from(m.st_ctime) * 1_000_000_000 + i128::from(m.st_ctime_nsec);
                h.update(&(m.st_size as u64).to_le_bytes());
                hi.update(&m.st_ino.to_le_bytes());
                hc.update(&m.st_ino.to_le_bytes());
                hc.update(&ctime.to_le_bytes());
                h.update(&mtime.to_le_bytes());
            }
            None => h.update(b"missing"),
        }
    };
    // Followed links, as `fs::metadata` (the fingerprint's) follows them.
    let stat = |fd: Option<&OwnedFd>, name: &[u8]| {
        fd.and_then(|fd| statat(fd.as_fd(), OsStr::from_bytes(name), AtFlags::empty()).ok())
    };
    let thread = openat(CWD, &td.path, DIR, Mode::empty()).ok();
    let mut files = 0u64;
    let dirs = td
        .source_dir()
        .into_iter()
        .chain(td.reaction_dirs().map(|(d, _)| d));
    for dir in dirs {
        add(dir.as_bytes(), stat(thread.as_ref(), dir.as_bytes()));
        let folder = thread
            .as_ref()
            .and_then(|t| openat(t.as_fd(), dir, DIR, Mode::empty()).ok());
        let mut names: Vec<Vec<u8>> = Vec::new();
        if let Some(mut listing) = folder.as_ref().and_then(|f| Dir::read_from(f).ok()) {
            // A listing error ends it, as `read_dir(..).flatten()` would skip on.
            while let Some(Ok(entry)) = listing.read() {
                let name = entry.file_name().to_bytes();
                if name != b"." && name != b".." {
                    names.push(name.to_vec());
                }
            }
        }
        names.sort_unstable();
        files += names.len() as u64;
        for n in &names {
            add(n, stat(folder.as_ref(), n));
        }
    }
    for name in td.side_files() {
        add(name.as_bytes(), stat(thread.as_ref(), name.as_bytes()));
    }
    Pin {
        hash: h.digest(),
        inodes: hi.digest(),
        changes: hc.digest(),
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
