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

use std::fs::{self, File, TryLockError};
use std::path::{Path, PathBuf};

use crate::error::BuildError;
use crate::format::layout::{CacheLayout, MANIFEST_FILE};

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
    _lock: File,
    published: bool,
}

impl Staging {
    /// Locks `target`, cleans up after interrupted builds and creates the
    /// staging directory.
    ///
    /// Fails if another build holds the lock, or if `target` exists and is
    /// neither a cache nor an empty directory (it would be replaced).
    pub fn begin(target: &Path) -> Result<Staging> {
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
            _lock: lock,
            published: false,
        })
    }

    /// The staging directory being written.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Swaps the (complete, synced) staging directory in as the cache.
    pub fn publish(mut self) -> Result<()> {
        let target = self.layout.target().to_path_buf();
        let parent = self.layout.parent().to_path_buf();
        sync_dir(&self.dir)?;
        if target.exists() {
            if !exchange(&self.dir, &target)? {
                // No atomic exchange on this system or file system: two
                // renames, with the old cache parked beside the target in
                // between.
                let old = self.layout.parked_dir(std::process::id());
                io(&target, fs::rename(&target, &old))?;
                io(&target, fs::rename(&self.dir, &target))?;
                self.published = true;
                io(&old, fs::remove_dir_all(&old))?;
                return sync_dir(&parent);
            }
            // The old cache now sits at the staging path.
            self.published = true;
            io(&self.dir, fs::remove_dir_all(&self.dir))?;
        } else {
            io(&target, fs::rename(&self.dir, &target))?;
            self.published = true;
        }
        sync_dir(&parent)
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        if !self.published {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}

/// Atomically swaps two directories. `Ok(false)` when the system cannot.
#[cfg(target_os = "linux")]
fn exchange(a: &Path, b: &Path) -> Result<bool> {
    use rustix::fs::{CWD, RenameFlags, renameat_with};
    use rustix::io::Errno;
    match renameat_with(CWD, a, CWD, b, RenameFlags::EXCHANGE) {
        Ok(()) => Ok(true),
        Err(Errno::INVAL | Errno::NOSYS | Errno::OPNOTSUPP) => Ok(false),
        Err(e) => Err(BuildError::io(b, e.into())),
    }
}

#[cfg(not(target_os = "linux"))]
fn exchange(_a: &Path, _b: &Path) -> Result<bool> {
    Ok(false)
}
