//! Publishing a cache atomically: the build writes a staging directory
//! beside the target and swaps it in at the end, so a reader sees either the
//! old cache or the new one, never a mixture.
//!
//! Protocol (names: [`CacheLayout`]):
//! 1. take an exclusive lock on `.<name>.lock` beside the target (a second
//!    builder fails with [`BuildError::Locked`]; the OS drops the lock if the
//!    process dies, so there are no stale locks);
//! 2. put back an old cache parked by a build killed mid-publish, then remove
//!    leftovers of interrupted builds (`.<name>.tmp-<pid>`, our names only);
//! 3. the writer fills `.<name>.tmp-<pid>` and `fsync`s each file and the
//!    directory;
//! 4. swap it with the target in one `renameat2(RENAME_EXCHANGE)` (or rename
//!    it into place when there is no target yet), delete the old cache, and
//!    `fsync` the parent.
//!
//! Dropping a [`Staging`] before [`Staging::publish`] removes the staging
//! directory and leaves any existing cache untouched.
//!
//! What the user had is kept: a symlinked CACHE_DIR stays a symlink (the new
//! cache replaces its target), and entries of the old cache directory that
//! the cache did not write (notes, `derived/` files such as statistics) are
//! moved into the new one just before the swap.

use std::fs::{self, File, TryLockError};
use std::path::{Path, PathBuf};

use crate::error::BuildError;
use crate::format::layout::{CacheLayout, MANIFEST_FILE, REPORT_FILE};
use crate::format::manifest::Manifest;

type Result<T, E = BuildError> = std::result::Result<T, E>;

pub(super) fn io<T>(path: &Path, r: std::io::Result<T>) -> Result<T> {
    r.map_err(|e| BuildError::io(path, e))
}

pub(super) fn sync_dir(dir: &Path) -> Result<()> {
    io(dir, File::open(dir).and_then(|d| d.sync_all()))
}

/// A locked staging directory that becomes the cache when published.
#[derive(Debug)]
pub struct Staging {
    layout: CacheLayout,
    dir: PathBuf,
    /// Held (flock) for the whole build; released explicitly on drop.
    lock: File,
    published: bool,
}

impl Staging {
    /// Locks `target`, cleans up after interrupted builds and creates the
    /// staging directory.
    ///
    /// Fails if another build holds the lock, or if `target` exists and is
    /// neither a cache nor an empty directory (it would be replaced).
    pub fn begin(target: &Path) -> Result<Staging> {
        let target = &resolve_symlinks(target)?;
        let layout = CacheLayout::new(target).map_err(|e| BuildError::io(target, e))?;
        let parent = layout.parent();
        io(parent, fs::create_dir_all(parent))?;
        let lock_file = layout.lock();
        let lock = io(
            &lock_file,
            File::options()
                .create(true)
                .truncate(false)
                .write(true)
                .open(&lock_file),
        )?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                return Err(BuildError::Locked {
                    cache: target.to_path_buf(),
                    lock: lock_file,
                });
            }
            Err(TryLockError::Error(e)) => return Err(BuildError::io(&lock_file, e)),
        }

        // We hold the lock, so any staging directory is a dead build's. A
        // build killed between the two renames of the fallback publish (no
        // atomic exchange) left no target and the old cache parked: put it
        // back first.
        let ours = |layout: &CacheLayout| -> Result<Vec<(String, PathBuf)>> {
            Ok(io(parent, fs::read_dir(parent))?
                .flatten()
                .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
                .filter(|(name, _)| layout.is_temp_name(name))
                .collect())
        };
        for (name, path) in ours(&layout)? {
            if layout.is_parked_name(&name)
                && !target.exists()
                && path.join(MANIFEST_FILE).is_file()
            {
                io(target, fs::rename(&path, target))?;
            }
        }
        for (_, path) in ours(&layout)? {
            io(&path, fs::remove_dir_all(&path))?;
        }

        if target.exists() {
            let is_cache = target.join(MANIFEST_FILE).is_file();
            let is_empty_dir = fs::read_dir(target).is_ok_and(|mut d| d.next().is_none());
            if !is_cache && !is_empty_dir {
                return Err(BuildError::io(
                    target,
                    std::io::Error::new(
                        std::io::ErrorKind::AlreadyExists,
                        "exists and is not a socialctx cache; refusing to replace it",
                    ),
                ));
            }
        }

        let dir = layout.temp_dir(std::process::id());
        io(&dir, fs::create_dir(&dir))?;
        Ok(Staging {
            layout,
            dir,
            lock,
            published: false,
        })
    }

    /// The staging directory being written.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The cache directory this publishes to (symlinks followed).
    pub fn target(&self) -> &Path {
        self.layout.target()
    }

    /// Swaps the (complete, synced) staging directory in as the cache,
    /// carrying over what the old cache directory held that the cache did
    /// not write.
    pub fn publish(mut self) -> Result<()> {
        let target = self.layout.target().to_path_buf();
        let parent = self.layout.parent().to_path_buf();
        if target.is_dir() {
            for name in foreign_entries(&target)? {
                let (from, to) = (target.join(&name), self.dir.join(&name));
                if fs::symlink_metadata(&to).is_ok() {
                    return Err(BuildError::io(
                        &from,
                        std::io::Error::new(
                            std::io::ErrorKind::AlreadyExists,
                            "not written by socialctx, and the new cache has a file of that name; move it away",
                        ),
                    ));
                }
                io(&from, fs::rename(&from, &to))?;
            }
        }
        sync_dir(&self.dir)?;
        match swap_dir(&self.dir, &target) {
            Ok(false) => self.published = true,
            Ok(true) => {
                // The old cache now sits at the staging path.
                self.published = true;
                io(&self.dir, fs::remove_dir_all(&self.dir))?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Unsupported => {
                // No atomic exchange on this system or file system: two
                // renames, with the old cache parked beside the target in
                // between.
                let old = self.layout.parked_dir(std::process::id());
                io(&target, fs::rename(&target, &old))?;
                io(&target, fs::rename(&self.dir, &target))?;
                self.published = true;
                io(&old, fs::remove_dir_all(&old))?;
            }
            Err(e) => return Err(BuildError::io(&target, e)),
        }
        sync_dir(&parent)
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        if !self.published {
            let _ = fs::remove_dir_all(&self.dir);
        }
        // Unlocked explicitly, not by closing: a child forked meanwhile (a
        // DataLoader worker, or any spawn between its fork and exec) shares
        // the lock's open file, and closing our descriptor alone would
        // leave the cache locked for as long as that child lives.
        let _ = self.lock.unlock();
    }
}

/// `target` with symlinks in its last component followed (a chain of them,
/// relative ones resolved against their own directory), so that the new
/// cache goes where the link points and the link stays.
fn resolve_symlinks(target: &Path) -> Result<PathBuf> {
    let mut p = target.to_path_buf();
    for _ in 0..40 {
        match fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => {
                let link = io(&p, fs::read_link(&p))?;
                p = match p.parent() {
                    Some(dir) if link.is_relative() => dir.join(link),
                    _ => link,
                };
            }
            _ => return Ok(p),
        }
    }
    Err(BuildError::io(
        target,
        std::io::Error::other("too many levels of symbolic links"),
    ))
}

/// Entries of the cache directory `dir` that the cache did not write: not
/// the manifest, the report, or a shard or text file (by the old
/// manifest's names and by the names a cache uses).
fn foreign_entries(dir: &Path) -> Result<Vec<std::ffi::OsString>> {
    let mut ours: Vec<String> = vec![MANIFEST_FILE.into(), REPORT_FILE.into()];
    if let Ok(bytes) = fs::read(dir.join(MANIFEST_FILE))
        && let Ok(m) = serde_json::from_slice::<Manifest>(&bytes)
    {
        ours.push(m.report.file);
        for s in m.shards {
            ours.push(s.numbers.file);
            ours.push(s.text.file);
        }
    }
    let cache_name = |n: &str| {
        ["shard-", "text-"].iter().any(|prefix| {
            n.strip_prefix(prefix)
                .and_then(|rest| rest.strip_suffix(".rkyv"))
                .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
        })
    };
    let mut out = Vec::new();
    for entry in io(dir, fs::read_dir(dir))? {
        let name = io(dir, entry)?.file_name();
        let s = name.to_string_lossy();
        if !ours.iter().any(|o| *o == s) && !cache_name(&s) {
            out.push(name);
        }
    }
    out.sort();
    Ok(out)
}

/// Puts the complete directory `staging` at `target` atomically, for caches
/// and embedding stores alike: a rename that never replaces a `target`
/// that exists (`RENAME_NOREPLACE`), else an exchange of the two
/// (`RENAME_EXCHANGE`), after which `staging` holds the old directory for
/// the caller to remove. Readers see the old directory or the new, never a
/// mixture or nothing. Returns whether an old directory was exchanged out.
/// Where the system or file system cannot exchange atomically, the error is
/// of kind [`Unsupported`](std::io::ErrorKind::Unsupported) and nothing
/// moved.
pub fn swap_dir(staging: &Path, target: &Path) -> std::io::Result<bool> {
    #[cfg(target_os = "linux")]
    {
        use rustix::fs::{CWD, RenameFlags, renameat_with};
        use rustix::io::Errno;
        match renameat_with(CWD, staging, CWD, target, RenameFlags::NOREPLACE) {
            Ok(()) => return Ok(false),
            Err(Errno::EXIST) => {}
            // No NOREPLACE here (some file systems): a target that does not
            // exist is renamed onto.
            Err(Errno::INVAL | Errno::NOSYS | Errno::OPNOTSUPP) if !target.exists() => {
                fs::rename(staging, target)?;
                return Ok(false);
            }
            Err(Errno::INVAL | Errno::NOSYS | Errno::OPNOTSUPP) => {}
            Err(e) => return Err(e.into()),
        }
        match renameat_with(CWD, staging, CWD, target, RenameFlags::EXCHANGE) {
            Ok(()) => Ok(true),
            Err(Errno::INVAL | Errno::NOSYS | Errno::OPNOTSUPP) => Err(no_exchange()),
            Err(e) => Err(e.into()),
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        if target.exists() {
            return Err(no_exchange());
        }
        fs::rename(staging, target).map(|()| false)
    }
}

fn no_exchange() -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::Unsupported,
        "no atomic directory exchange (renameat2 RENAME_EXCHANGE) here",
    )
}

/// Creates (if need be) and exclusively locks `path` without waiting: the
/// lock of caches and embedding stores alike. `None` when another process
/// holds it; the OS drops it when the holder dies, so there are no stale
/// locks. Unlock explicitly before dropping the file (a child forked
/// meanwhile shares it).
pub(crate) fn try_lock(path: &Path) -> std::io::Result<Option<File>> {
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)?;
    match file.try_lock() {
        Ok(()) => Ok(Some(file)),
        Err(TryLockError::WouldBlock) => Ok(None),
        Err(TryLockError::Error(e)) => Err(e),
    }
}
