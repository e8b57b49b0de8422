//! What plans that pin files (`Plan::create_pinned`) and their partitions
//! look at of a thread's files (issue 47).
//!
//! Such a plan takes each thread's [`Listing`]: the names in its tweet folders
//! (hidden names aside, as the workers skip them) hashed with its folders,
//! side files and layout, and their count (which balances partitions): one
//! `getdents` per folder, no file `stat`ted or read. A partition takes a
//! [`Pin`] of each of its own threads just before it reads them and again
//! after: the listing and a `stat` of every entry (name, type, size, mtime,
//! change time, inode, device, each relative to its open folder), so that
//! an edit during its read is refused, an in-place one that put the mtime
//! back included (the change time moves). Both pins are taken on the same
//! machine in the same run, so the local inode numbers and change times
//! may count: a copy of the corpus (`cp -a`) is never compared with the
//! original's metadata.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use xxhash_rust::xxh3::Xxh3Default;

use super::discover::ThreadDir;
use super::layout::Layout;
use super::layout::pheme::Pheme;

/// A thread's listing: what a plan records of its files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Listing {
    /// xxh3 of its layout, folders, side files and tweet-folder names.
    pub(crate) digest: u64,
    /// Visible entries in its tweet folders (balances partitions).
    pub(crate) files: u64,
}

/// A partition's pin of one of its threads: its listing and the `stat` of
/// every file in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Pin {
    pub(crate) listing: Listing,
    /// xxh3 of every entry's metadata (hidden ones too: an edit of any
    /// file in a tweet folder during the read is refused).
    pub(crate) stat: u64,
}

/// `td`'s listing (no `stat`).
pub(crate) fn listing(td: &ThreadDir) -> Listing {
    look(td, false).listing
}

/// `td`'s pin: its listing and its files' metadata.
pub(crate) fn pin(td: &ThreadDir) -> Pin {
    look(td, true)
}

/// Pins of `list`, on `threads` threads (serially if a pool cannot start).
pub(crate) fn pins(list: &[ThreadDir], threads: usize) -> Vec<Pin> {
    use rayon::prelude::*;
    match rayon::ThreadPoolBuilder::new().num_threads(threads).build() {
        Ok(pool) => pool.install(|| list.par_iter().map(pin).collect()),
        Err(_) => list.iter().map(pin).collect(),
    }
}

/// Adds `name` (length first) to `h`.
fn name_to(h: &mut Xxh3Default, name: &[u8]) {
    h.update(&(name.len() as u64).to_le_bytes());
    h.update(name);
}

/// Adds the metadata of `name` in `dir` (following a symlink, as the
/// workers' `openat` does) to `h`; "missing" where it cannot be `stat`ted.
fn stat_to(h: &mut Xxh3Default, dir: Option<BorrowedFd<'_>>, name: &[u8]) {
    use rustix::fs::{AtFlags, statat};
    name_to(h, name);
    match dir.and_then(|d| statat(d, name, AtFlags::empty()).ok()) {
        // The fields' types differ between platforms.
        #[allow(clippy::unnecessary_cast)]
        Some(m) => {
            for v in [
                u64::from(m.st_mode),
                m.st_size as u64,
                m.st_mtime as u64,
                m.st_mtime_nsec as u64,
                m.st_ctime as u64,
                m.st_ctime_nsec as u64,
                m.st_ino,
                m.st_dev,
            ] {
                h.update(&v.to_le_bytes());
            }
        }
        None => h.update(b"missing"),
    }
}

fn look(td: &ThreadDir, stat: bool) -> Pin {
    use rustix::fs::{CWD, Dir, Mode, OFlags, openat};
    let mut h = Xxh3Default::new();
    let mut s = Xxh3Default::new();
    h.update(&td.entries.to_le_bytes());
    let layout = td.layout().name();
    if layout != Pheme.name() {
        name_to(&mut h, layout.as_bytes());
    }
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let thread: Option<OwnedFd> = openat(CWD, &td.path, flags, Mode::empty()).ok();
    let dirs = td
        .source_dir()
        .into_iter()
        .chain(td.reaction_dirs().map(|(d, _)| d));
    // One buffer of names for every folder (sorted: the listing's order is
    // the file system's).
    let mut bytes: Vec<u8> = Vec::new();
    let mut names: Vec<std::ops::Range<usize>> = Vec::new();
    let mut files = 0u64;
    for dir in dirs {
        name_to(&mut h, dir.as_bytes());
        if stat {
            stat_to(&mut s, thread.as_ref().map(AsFd::as_fd), dir.as_bytes());
        }
        let mut folder = thread
            .as_ref()
            .and_then(|t| openat(t, dir, flags, Mode::empty()).ok())
            .and_then(|fd| Dir::new(fd).ok());
        bytes.clear();
        names.clear();
        match folder.as_mut() {
            Some(listing) => {
                while let Some(entry) = listing.read() {
                    let Ok(e) = entry else {
                        h.update(b"unreadable");
                        break;
                    };
                    let n = e.file_name().to_bytes();
                    if n != b"." && n != b".." {
                        names.push(bytes.len()..bytes.len() + n.len());
                        bytes.extend_from_slice(n);
                    }
                }
            }
            None => h.update(b"unlisted"),
        }
        names.sort_unstable_by(|a, b| bytes[a.clone()].cmp(&bytes[b.clone()]));
        let fd = folder.as_ref().and_then(|f| f.fd().ok());
        for n in &names {
            let name = &bytes[n.clone()];
            if !name.starts_with(b".") {
                name_to(&mut h, name);
                files += 1;
            }
            if stat {
                stat_to(&mut s, fd, name);
            }
        }
        // The end of this folder's names.
        h.update(&[0xff]);
    }
    if stat {
        for name in td.side_files() {
            stat_to(&mut s, thread.as_ref().map(AsFd::as_fd), name.as_bytes());
        }
    }
    Pin {
        listing: Listing {
            digest: h.digest(),
            files,
        },
        stat: if stat { s.digest() } else { 0 },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::discover::discover;
    use std::fs;

    /// The listing is names only: a content edit, a touch or a copy keep
    /// it, a file added or removed (not a hidden one) changes it; the pin's
    /// metadata changes with any edit, a touch, a hidden file or an in-place
    /// edit that put the mtime back.
    #[test]
    fn a_listing_is_names_and_a_pin_is_metadata() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("c");
        let sample = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("data-samples/corpus");
        let cp = |from: &std::path::Path, to: &std::path::Path| {
            let status = std::process::Command::new("cp")
                .args(["-a", "--"])
                .arg(from)
                .arg(to)
                .status()
                .unwrap();
            assert!(status.success());
        };
        cp(&sample, &root);
        let td = discover(&root, 1).unwrap().threads.remove(0);
        let (l0, p0) = (listing(&td), pin(&td));
        assert_eq!(p0.listing, l0);
        assert_eq!(pin(&td), p0, "a pin is stable");
        let count: u64 = td
            .source_dir()
            .into_iter()
            .chain(td.reaction_dirs().map(|(d, _)| d))
            .map(|d| fs::read_dir(td.path.join(d)).map_or(0, |r| r.count() as u64))
            .sum();
        assert_eq!(l0.files, count);

        let copy = tmp.path().join("copy");
        cp(&root, &copy);
        let mut tc = td.clone();
        tc.path = copy.join(&td.rel);
        assert_eq!(listing(&tc), l0, "a copy lists the same");
        assert_ne!(pin(&tc).stat, p0.stat, "a copy has other inodes");

        let src = td.path.join(td.source_dir().unwrap());
        let file = fs::read_dir(&src).unwrap().next().unwrap().unwrap().path();
        let mtime = fs::metadata(&file).unwrap().modified().unwrap();
        let mut text = fs::read(&file).unwrap();
        let at = text.iter().position(u8::is_ascii_digit).unwrap();
        text[at] = if text[at] == b'9' { b'8' } else { text[at] + 1 };
        std::thread::sleep(std::time::Duration::from_millis(20));
        fs::write(&file, &text).unwrap();
        fs::File::options()
            .write(true)
            .open(&file)
            .unwrap()
            .set_modified(mtime)
            .unwrap();
        let p1 = pin(&td);
        assert_eq!(p1.listing, l0, "a content edit keeps the listing");
        assert_ne!(p1.stat, p0.stat, "an in-place edit, mtime put back");

        fs::write(src.join(".hidden"), b"x").unwrap();
        let p2 = pin(&td);
        assert_eq!(p2.listing, l0, "hidden names are not listed");
        assert_ne!(p2.stat, p1.stat);

        fs::write(src.join("9.json"), b"{}").unwrap();
        assert_ne!(listing(&td), l0, "a file added");
        assert_eq!(listing(&td).files, count + 1);
    }
}
