//! A thread's fingerprint: an xxh3 of what its files are, by metadata (or
//! by content), so that a later look tells whether any of them changed.
//! Incremental builds compare fingerprints with the old cache's; a plan
//! pins the corpus it was made of with them.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use xxhash_rust::xxh3::Xxh3Default;

use super::discover::ThreadDir;

/// What a fingerprint covers of each file (always its name and size, and
/// which of the thread's folders exist).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum How {
    /// mtime and ctime (ns), inode and device: on this machine, any change
    /// (ctime catches an in-place edit that restores the mtime).
    Local,
    /// The content's xxh3, not the times (`--verify`).
    Content,
    /// As `Local` without the device number: the same on every machine
    /// that mounts the corpus (a plan's partitions may run on any).
    Portable,
}

/// A thread's fingerprint, the newest mtime/ctime among its files (ns), and
/// whether any of their mtimes has a sub-second part.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Fp {
    pub(crate) hash: u64,
    pub(crate) newest: i128,
    pub(crate) subsec: bool,
}

/// A thread's [`Fp`].
pub(crate) fn fingerprint(td: &ThreadDir, how: How) -> Fp {
    let mut h = Xxh3Default::new();
    let mut newest = i128::MIN;
    let mut subsec = false;
    h.update(&td.entries.to_le_bytes());
    if td.layout != 0 {
        // (Not hashed for the first layout: PHEME fingerprints stay as they were.)
        h.update(&[td.layout]);
    }
    let mut add = |name: &[u8], path: &Path| {
        h.update(&(name.len() as u64).to_le_bytes());
        h.update(name);
        match fs::metadata(path) {
            Ok(m) => {
                let mtime = i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec());
                let ctime = i128::from(m.ctime()) * 1_000_000_000 + i128::from(m.ctime_nsec());
                newest = newest.max(mtime).max(ctime);
                subsec |= m.mtime_nsec() != 0;
                h.update(&m.len().to_le_bytes());
                match how {
                    How::Local | How::Portable => {
                        h.update(&m.ino().to_le_bytes());
                        if how == How::Local {
                            h.update(&m.dev().to_le_bytes());
                        }
                        h.update(&mtime.to_le_bytes());
                        h.update(&ctime.to_le_bytes());
                    }
                    // With content hashes, the contents decide, not the times.
                    How::Content if m.is_file() => match fs::read(path) {
                        Ok(bytes) => h.update(&xxhash_rust::xxh3::xxh3_64(&bytes).to_le_bytes()),
                        Err(_) => h.update(b"unreadable"),
                    },
                    How::Content => {}
                }
            }
            Err(_) => h.update(b"missing"),
        }
    };
    let dirs = td
        .source_dir()
        .into_iter()
        .chain(td.reaction_dirs().map(|(d, _)| d));
    for dir in dirs {
        let path = td.path.join(dir);
        add(dir.as_bytes(), &path);
        let mut names: Vec<_> = fs::read_dir(&path)
            .map(|r| r.flatten().map(|e| e.file_name()).collect())
            .unwrap_or_default();
        names.sort();
        for n in names {
            add(n.as_encoded_bytes(), &path.join(&n));
        }
    }
    for name in td.side_files() {
        add(name.as_bytes(), &td.path.join(name));
    }
    Fp {
        hash: h.digest(),
        newest,
        subsec,
    }
}

/// Every thread's fingerprint, on `threads` threads (serially if a pool
/// cannot start).
pub(crate) fn fingerprints(list: &[ThreadDir], threads: usize, how: How) -> Vec<Fp> {
    use rayon::prelude::*;
    let one = |td: &ThreadDir| fingerprint(td, how);
    match rayon::ThreadPoolBuilder::new().num_threads(threads).build() {
        Ok(pool) => pool.install(|| list.par_iter().map(one).collect()),
        Err(_) => list.iter().map(one).collect(),
    }
}
