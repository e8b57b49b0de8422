//! A thread's fingerprint: an xxh3 of what its files are, by metadata (or
//! by content), so that a later look tells whether any of them changed.
//! Incremental builds compare fingerprints with the old cache's; a plan
//! pins the corpus it was made of with them.

use std::fs;
use std::os::fd::{AsFd, BorrowedFd};

use xxhash_rust::xxh3::Xxh3Default;

use super::discover::ThreadDir;
use super::layout::Layout;
use super::layout::pheme::Pheme;

/// What a fingerprint covers of each file (always its name and size, and
/// which of the thread's folders exist).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum How {
    /// mtime and ctime (ns), inode and device: on this machine, any change
    /// (ctime catches an in-place edit that restores the mtime).
    Local,
    /// The content's xxh3, not the times (`--verify`).
    Content,
}

/// A thread's fingerprint, the newest mtime/ctime among its files (ns),
/// whether any of their mtimes has a sub-second part, and the device its
/// files are on (`None`: on several, or none).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Fp {
    pub(crate) hash: u64,
    pub(crate) newest: i128,
    pub(crate) subsec: bool,
    pub(crate) dev: Option<u64>,
}

const SECOND: i128 = 1_000_000_000;

/// The timestamp precision of the file systems a corpus spans, judged per
/// device (git's racy-clean rule judges each file against its own file
/// system's precision): a device on which some file has a sub-second
/// mtime keeps nanoseconds; on any other (ext4 with 128-byte inodes, HFS+,
/// some NFS servers, one event folder bind-mounted from one of them) times
/// are whole seconds, and an edit in the second a build read a file is
/// stored as that second. A thread spanning devices counts as coarse (the
/// safe side: read again, waited for longer).
pub(crate) struct Precision {
    fine: std::collections::HashSet<u64>,
}

impl Precision {
    pub(crate) fn of(fps: &[Fp]) -> Precision {
        Precision {
            fine: fps
                .iter()
                .filter(|f| f.subsec)
                .filter_map(|f| f.dev)
                .collect(),
        }
    }

    fn coarse(&self, fp: &Fp) -> bool {
        fp.dev.is_none_or(|d| !self.fine.contains(&d))
    }

    /// The racy-clean bound for `fp`'s files: a build started at `started`
    /// (ns) may have read a file stamped at or after this before a change.
    pub(crate) fn racy_from(&self, started: i128, fp: &Fp) -> i128 {
        if self.coarse(fp) {
            started - started.rem_euclid(SECOND)
        } else {
            started
        }
    }

    /// The file-system time a build must wait for before reading, so that
    /// any later change of a fingerprinted file gets a time of its own:
    /// past every time seen, in each file's own precision. `None` with no
    /// time seen.
    pub(crate) fn settled_at(&self, fps: &[Fp]) -> Option<i128> {
        fps.iter()
            .filter(|f| f.newest != i128::MIN)
            .map(|f| {
                if self.coarse(f) {
                    f.newest - f.newest.rem_euclid(SECOND) + SECOND
                } else {
                    f.newest + 1
                }
            })
            .max()
    }
}

/// A thread's [`Fp`].
///
/// Every file is looked at relative to its open folder (`statat` on a
/// descriptor, as discovery walks): no path is built and the kernel does
/// not resolve the thread's path again per file, which is most of an
/// incremental build's time when little changed.
pub(crate) fn fingerprint(td: &ThreadDir, how: How) -> Fp {
    fingerprint_counted(td, how).0
}

/// A thread's [`Fp`] and the entries of its tweet folders.
fn fingerprint_counted(td: &ThreadDir, how: How) -> (Fp, u64) {
    use rustix::fs::{AtFlags, CWD, Dir, Mode, OFlags, openat, statat};
    let mut h = Xxh3Default::new();
    let mut newest = i128::MIN;
    let mut subsec = false;
    // (None, first) before any file; Some(None) once two devices were seen.
    let mut dev: Option<Option<u64>> = None;
    h.update(&td.entries.to_le_bytes());
    // The layout by name, never by its place in `LAYOUTS` (not hashed for
    // PHEME's: its fingerprints stay as they were).
    let layout = td.layout().name();
    if layout != Pheme.name() {
        h.update(&(layout.len() as u64).to_le_bytes());
        h.update(layout.as_bytes());
    }
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    // A thread folder that cannot be opened: each of its files "missing",
    // as a failed stat of its path said before.
    let thread = openat(CWD, &td.path, flags, Mode::empty()).ok();
    // `statat` follows symlinks, as `fs::metadata` of the path did, so the
    // fingerprints are the same bytes as before this change.
    let mut add = |name: &[u8], dir: Option<BorrowedFd<'_>>| {
        h.update(&(name.len() as u64).to_le_bytes());
        h.update(name);
        let stat = dir.and_then(|d| statat(d, name, AtFlags::empty()).ok());
        match stat {
            Some(m) => {
                let mtime = i128::from(m.st_mtime) * SECOND + i128::from(m.st_mtime_nsec);
                let ctime = i128::from(m.st_ctime) * SECOND + i128::from(m.st_ctime_nsec);
                newest = newest.max(mtime).max(ctime);
                subsec |= m.st_mtime_nsec != 0;
                let (ino, device) = (m.st_ino, m.st_dev);
                dev = match dev {
                    None => Some(Some(device)),
                    Some(Some(d)) if d == device => Some(Some(d)),
                    _ => Some(None),
                };
                h.update(&(m.st_size as u64).to_le_bytes());
                match how {
                    How::Local => {
                        h.update(&ino.to_le_bytes());
                        h.update(&device.to_le_bytes());
                        h.update(&mtime.to_le_bytes());
                        h.update(&ctime.to_le_bytes());
                    }
                    // With content hashes, the contents decide, not the times.
                    How::Content
                        if rustix::fs::FileType::from_raw_mode(m.st_mode)
                            == rustix::fs::FileType::RegularFile =>
                    {
                        match dir.map(|d| read_at(d, name)) {
                            Some(Ok(bytes)) => {
                                h.update(&xxhash_rust::xxh3::xxh3_64(&bytes).to_le_bytes())
                            }
                            _ => h.update(b"unreadable"),
                        }
                    }
                    How::Content => {}
                }
            }
            None => h.update(b"missing"),
        }
    };
    let dirs = td
        .source_dir()
        .into_iter()
        .chain(td.reaction_dirs().map(|(d, _)| d));
    // One buffer of names for every folder, no allocation per file (sorted:
    // the listing's order is the file system's).
    let mut bytes: Vec<u8> = Vec::new();
    let mut names: Vec<std::ops::Range<usize>> = Vec::new();
    let mut files = 0u64;
    for dir in dirs {
        add(dir.as_bytes(), thread.as_ref().map(AsFd::as_fd));
        let mut folder = thread
            .as_ref()
            .and_then(|t| openat(t, dir, flags, Mode::empty()).ok())
            .and_then(|fd| Dir::new(fd).ok());
        bytes.clear();
        names.clear();
        if let Some(listing) = folder.as_mut() {
            while let Some(Ok(e)) = listing.read() {
                let n = e.file_name().to_bytes();
                if n != b"." && n != b".." {
                    names.push(bytes.len()..bytes.len() + n.len());
                    bytes.extend_from_slice(n);
                }
            }
        }
        names.sort_unstable_by(|a, b| bytes[a.clone()].cmp(&bytes[b.clone()]));
        files += names.len() as u64;
        let fd = folder.as_ref().and_then(|f| f.fd().ok());
        for n in &names {
            add(&bytes[n.clone()], fd);
        }
    }
    for name in td.side_files() {
        add(name.as_bytes(), thread.as_ref().map(AsFd::as_fd));
    }
    let fp = Fp {
        hash: h.digest(),
        newest,
        subsec,
        dev: dev.flatten(),
    };
    (fp, files)
}

/// The bytes of `name` in the folder `dir` (`O_NONBLOCK`: a FIFO cannot
/// hang the build).
fn read_at(dir: BorrowedFd<'_>, name: &[u8]) -> std::io::Result<Vec<u8>> {
    use rustix::fs::{Mode, OFlags, openat};
    use std::io::Read;
    let fd = openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK,
        Mode::empty(),
    )?;
    let mut bytes = Vec::new();
    fs::File::from(fd).read_to_end(&mut bytes)?;
    Ok(bytes)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn fp(newest: i128, subsec: bool, dev: Option<u64>) -> Fp {
        Fp {
            hash: 0,
            newest,
            subsec,
            dev,
        }
    }

    /// One event folder on a file system with whole-second times (device
    /// 2) beside the corpus's nanosecond one (device 1): the second's rule
    /// holds for the threads on device 2 only. Judged for the corpus, the
    /// sub-second times on device 1 made every thread "fine", and a
    /// same-size edit on device 2 in the second after the build read it was
    /// never seen.
    #[test]
    fn precision_is_judged_per_device() {
        let s = 5 * SECOND;
        let fine = fp(s + 100, true, Some(1));
        let fine_whole = fp(s, false, Some(1));
        let coarse = fp(s, false, Some(2));
        let spanning = fp(s + 100, true, None);
        let p = Precision::of(&[fine, fine_whole, coarse, spanning]);
        let started = s + 500;
        assert_eq!(p.racy_from(started, &fine), started);
        assert_eq!(p.racy_from(started, &fine_whole), started);
        // An edit at s + 700 after a read at s + 500 on device 2 is stamped
        // s: racy from the second's start.
        assert_eq!(p.racy_from(started, &coarse), s);
        assert_eq!(p.racy_from(started, &spanning), s);
        assert!(coarse.newest >= p.racy_from(started, &coarse));
        // The build waits past the coarse device's second.
        assert_eq!(p.settled_at(&[fine, coarse]), Some(s + SECOND));
        assert_eq!(p.settled_at(&[fine]), Some(s + 101));
        assert_eq!(p.settled_at(&[]), None);
    }
}
