//! Publishing a cache atomically: the build writes a staging directory
//! beside the target and swaps it in at the end, so a reader sees either the
//! old cache or the new one, never a mixture.
//!
//! Protocol (names: [`CacheFiles`]):
//! 1. check the target's place before anything is written (a file on the
//!    way, a mount point, a parent that is not writable are refused with
//!    what to do), then take an exclusive lock on `.<name>.lock` beside the
//!    target (a second builder fails with [`BuildError::Locked`]; the OS
//!    drops the lock if the process dies, so there are no stale locks);
//! 2. recover what an interrupted build left: put back an old cache parked
//!    by a two-rename publish, then retire each `.<name>.tmp-<pid>` (our
//!    names only);
//! 3. the writer fills `.<name>.tmp-<pid>` and `fsync`s each file and the
//!    directory;
//! 4. move the old cache's entries that the cache did not write (notes,
//!    `derived/`) into the staging directory, swap it with the target in one
//!    `renameat2(RENAME_EXCHANGE)` (or rename it into place when there is no
//!    target yet), retire the old cache, and `fsync` the parent.
//!
//! **Nothing that socialctx did not write is ever deleted.** A temporary
//! directory is never removed with its contents: it is *retired* — the
//! cache's own files (by their names) are unlinked, every other entry is
//! moved back into the cache directory, and only the then empty directory
//! is removed. So at every instant each of the user's files is either in
//! the cache directory or in one of the cache's temporary directories, and
//! the next build (or the failing one, on its way out) retires those back.
//! An entry that cannot go back (the cache directory has one of that name)
//! stays where it is and the build says where.
//!
//! Once the swap has happened the build has succeeded: what fails after it
//! (retiring the old cache, the parent's `fsync`) is a warning, and the
//! next build retires what was left.
//!
//! Every file-system step here goes through [`step`], the test hook that
//! injects an error or a `SIGKILL` at the n-th step (see [`FAULT_ENV`]).

use std::fs::{self, File, TryLockError};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::BuildError;
use crate::format::files::{CacheFiles, DERIVED_DIR, MANIFEST_FILE, REPORT_FILE, fingerprints_id};

type Result<T, E = BuildError> = std::result::Result<T, E>;

pub(crate) fn io<T>(path: &Path, r: std::io::Result<T>) -> Result<T> {
    r.map_err(|e| BuildError::io(path, e))
}

pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    io(
        dir,
        step("fsync", dir, || File::open(dir).and_then(|d| d.sync_all())),
    )
}

/// The environment variable of the publish fault-injection hook, for this
/// repository's tests: a comma-separated list of `N:error` (the N-th
/// file-system step of publishing in this process fails with an I/O
/// error), `N:kill` (the process is killed with `SIGKILL` just before the
/// N-th step), `trace` (each step is printed to stderr as `publish step N:
/// OP PATH`), `no-exchange` (behave as on a file system without an
/// atomic exchange) and `no-link` (behave as on a file system without hard
/// links: a merge copies every shard). Read once per process. It is always compiled in: one
/// environment look-up per process costs nothing, the tests exercise the
/// very binary users run, and a cargo feature would mean a second full
/// build of the crate in CI.
pub const FAULT_ENV: &str = "SOCIALCTX_TEST_PUBLISH_FAULT";

#[derive(Default)]
struct Faults {
    at: u64,
    kill: bool,
    trace: bool,
    no_exchange: bool,
    no_link: bool,
}

fn faults() -> Option<&'static Faults> {
    static FAULTS: OnceLock<Option<Faults>> = OnceLock::new();
    FAULTS
        .get_or_init(|| {
            let spec = std::env::var(FAULT_ENV).ok()?;
            let mut f = Faults::default();
            for token in spec.split(',') {
                match token.trim() {
                    "trace" => f.trace = true,
                    "no-exchange" => f.no_exchange = true,
                    "no-link" => f.no_link = true,
                    t => {
                        if let Some((n, how)) = t.split_once(':') {
                            f.at = n.parse().unwrap_or(0);
                            f.kill = how == "kill";
                        }
                    }
                }
            }
            Some(f)
        })
        .as_ref()
}

/// Makes `to` (in a staging directory) a hard link to the open file
/// `from`: the very file opened, whatever its path names now (through
/// `/proc/self/fd`, which needs no privilege, unlike `AT_EMPTY_PATH`).
/// One step of publishing ([`step`]); fails on a file system without hard
/// links, across file systems, without `/proc`, or when the file was
/// deleted since it was opened, and the caller then copies it.
pub(crate) fn link_open_file(from: &File, to: &Path) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    step("link", to, || {
        if faults().is_some_and(|f| f.no_link) {
            return Err(std::io::Error::from_raw_os_error(
                rustix::io::Errno::XDEV.raw_os_error(),
            ));
        }
        let proc = format!("/proc/self/fd/{}", from.as_raw_fd());
        rustix::fs::linkat(
            rustix::fs::CWD,
            proc.as_str(),
            rustix::fs::CWD,
            to,
            rustix::fs::AtFlags::SYMLINK_FOLLOW,
        )
        .map_err(std::io::Error::from)
    })
}

/// Runs `op`, one file-system step of publishing (`what` on `path`),
/// through the fault-injection hook ([`FAULT_ENV`]).
fn step<T>(what: &str, path: &Path, op: impl FnOnce() -> std::io::Result<T>) -> std::io::Result<T> {
    if let Some(f) = faults() {
        static STEPS: AtomicU64 = AtomicU64::new(0);
        let n = STEPS.fetch_add(1, Ordering::SeqCst) + 1;
        if f.trace {
            eprintln!("publish step {n}: {what} {}", path.display());
        }
        if n == f.at {
            if f.kill {
                let _ = rustix::process::kill_process(
                    rustix::process::getpid(),
                    rustix::process::Signal::KILL,
                );
            }
            return Err(std::io::Error::other(format!(
                "injected fault at publish step {n} ({what})"
            )));
        }
    }
    op()
}

fn exists(p: &Path) -> bool {
    fs::symlink_metadata(p).is_ok()
}

/// A locked staging directory that becomes the cache when published.
#[derive(Debug)]
pub struct Staging {
    files: CacheFiles,
    dir: PathBuf,
    /// Held (flock) for the whole build; released explicitly on drop.
    lock: File,
    published: bool,
}

impl Staging {
    /// Checks where the cache goes, locks `target`, recovers what
    /// interrupted builds left and creates the staging directory.
    ///
    /// Fails if another build holds the lock, or if `target` exists and is
    /// neither a cache nor an empty directory (it would be replaced), is a
    /// mount point, or cannot be written beside.
    pub fn begin(target: &Path) -> Result<Staging> {
        let target = &resolve_symlinks(target)?;
        let files = CacheFiles::new(target).map_err(|e| BuildError::io(target, e))?;
        // Refusals before the lock file is made, so that a refused build
        // leaves nothing behind; checked again under the lock.
        check_place(&files)?;
        let parent = files.parent();
        io(parent, step("mkdir", parent, || fs::create_dir_all(parent)))
            .map_err(|e| explain_parent(&files, e))?;
        let lock_file = files.lock();
        let lock = lock(&lock_file, target).map_err(|e| explain_parent(&files, e))?;
        // Held from here: a refusal below drops it (unlocking, and
        // removing the lock file when there is no cache).
        let mut staging = Staging {
            files,
            dir: PathBuf::new(),
            lock,
            published: false,
        };
        staging.recover()?;
        check_target(target)?;
        let dir = staging.files.temp_dir(std::process::id());
        // Owner-only while built when it replaces a cache: publish gives
        // it the old one's mode and group, and until then (or after a
        // kill) a `chmod 750` cache's texts are not readable by others in
        // the staging directory beside it.
        let mut mkdir = fs::DirBuilder::new();
        if target.is_dir() {
            std::os::unix::fs::DirBuilderExt::mode(&mut mkdir, 0o700);
        }
        io(&dir, step("mkdir", &dir, || mkdir.create(&dir)))?;
        staging.dir = dir;
        Ok(staging)
    }

    /// We hold the lock, so every temporary directory is a dead build's:
    /// put back an old cache a two-rename publish parked (a build killed
    /// between the two renames left no target), then retire the rest into
    /// the cache directory.
    fn recover(&self) -> Result<()> {
        let files = &self.files;
        let (parent, target) = (files.parent(), files.target());
        let ours = || -> Result<Vec<(String, PathBuf)>> {
            let mut v: Vec<_> = io(parent, fs::read_dir(parent))?
                .flatten()
                .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
                .filter(|(name, _)| files.is_temp_name(name))
                .collect();
            v.sort();
            Ok(v)
        };
        for (name, path) in ours()? {
            if files.is_parked_name(&name) && !exists(target) && path.join(MANIFEST_FILE).is_file()
            {
                io(target, step("rename", target, || fs::rename(&path, target)))?;
            }
        }
        for (_, path) in ours()? {
            let left = retire(&path, target)?;
            if !left.is_empty() {
                return Err(BuildError::io(
                    &path,
                    std::io::Error::new(
                        std::io::ErrorKind::AlreadyExists,
                        format!(
                            "an interrupted build left files here that socialctx did not write ({}), and {} already has entries of those names; move them where they belong and remove this directory",
                            list(&left),
                            target.display()
                        ),
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The staging directory being written.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The cache directory this publishes to (symlinks followed).
    pub fn target(&self) -> &Path {
        self.files.target()
    }

    /// Swaps the (complete, synced) staging directory in as the cache,
    /// carrying over what the old cache directory held that the cache did
    /// not write. Returns warnings about what failed after the new cache
    /// was published (the build has succeeded; the next build cleans up).
    pub fn publish(mut self) -> Result<Vec<String>> {
        let target = self.files.target().to_path_buf();
        let parent = self.files.parent().to_path_buf();
        let mut warnings = Vec::new();
        if target.is_dir() {
            let foreign = foreign_entries(&target)?;
            for name in &foreign {
                if exists(&self.dir.join(name)) {
                    return Err(BuildError::io(
                        target.join(name),
                        std::io::Error::new(
                            std::io::ErrorKind::AlreadyExists,
                            "not written by socialctx, and the new cache has a file of that name; move it away",
                        ),
                    ));
                }
            }
            // From here until the swap, a failure or a kill leaves some of
            // them in the staging directory: Drop (or the next build)
            // retires them back.
            for name in &foreign {
                let (from, to) = (target.join(name), self.dir.join(name));
                io(&from, step("rename", &from, || fs::rename(&from, &to)))?;
            }
            if !foreign.is_empty() {
                sync_dir(&target)?;
            }
        }
        // The new cache directory keeps what the operator set on the old
        // one (a `chmod 750` and a group keep the texts private); a first
        // build's has the umask's default.
        if let Ok(old) = fs::metadata(&target)
            && old.is_dir()
        {
            io(
                &self.dir,
                step("chmod", &self.dir, || {
                    crate::output::keep_metadata(&self.dir, &old)
                }),
            )?;
        }
        sync_dir(&self.dir)?;
        let swapped = if faults().is_some_and(|f| f.no_exchange) {
            Err(no_exchange())
        } else {
            step("rename", &target, || swap_dir(&self.dir, &target))
        };
        let retire_old = |old: &Path, warnings: &mut Vec<String>| {
            match retire(old, &target) {
            Ok(left) if left.is_empty() => {}
            Ok(left) => warnings.push(format!(
                "{}: the replaced cache held files socialctx did not write ({}) that {} also has; they were left here",
                old.display(),
                list(&left),
                target.display()
            )),
            Err(e) => warnings.push(format!(
                "the cache is published, but removing the replaced one failed ({e}); the next build removes it"
            )),
        }
        };
        match swapped {
            Ok(false) => self.published = true,
            Ok(true) => {
                // The old cache now sits at the staging path.
                self.published = true;
                let old = self.dir.clone();
                retire_old(&old, &mut warnings);
            }
            Err(e) if e.kind() == std::io::ErrorKind::Unsupported => {
                // No atomic exchange on this system or file system: two
                // renames, with the old cache parked beside the target in
                // between (a kill there: the next build puts it back).
                let old = self.files.parked_dir(std::process::id());
                io(
                    &target,
                    step("rename", &target, || fs::rename(&target, &old)),
                )?;
                if let Err(e) = step("rename", &self.dir, || fs::rename(&self.dir, &target)) {
                    // Put the old cache back (or leave it parked for the
                    // next build), then Drop retires the staging directory.
                    let _ = step("rename", &old, || fs::rename(&old, &target));
                    return Err(BuildError::io(&target, e));
                }
                self.published = true;
                retire_old(&old, &mut warnings);
            }
            Err(e) => return Err(BuildError::io(&target, swap_failure(e))),
        }
        if let Err(e) = sync_dir(&parent) {
            warnings.push(format!(
                "the cache is published, but making the swap durable failed ({e})"
            ));
        }
        Ok(warnings)
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        let target = self.files.target();
        if !self.published && !self.dir.as_os_str().is_empty() {
            // Leaves in place what cannot go back (the next build says so).
            let _ = retire(&self.dir, target);
        }
        // A build that leaves no cache leaves no lock file either. Safe
        // while we hold the lock: a process that opened the file before
        // the unlink finds, once it has the lock, that the file is no
        // longer at the path, and starts over (see `lock`).
        if !exists(target) {
            let lock_file = self.files.lock();
            let _ = step("unlink", &lock_file, || fs::remove_file(&lock_file));
        }
        // Unlocked explicitly, not by closing: a child forked meanwhile (a
        // DataLoader worker, or any spawn between its fork and exec) shares
        // the lock's open file, and closing our descriptor alone would
        // leave the cache locked for as long as that child lives.
        let _ = self.lock.unlock();
    }
}

/// Opens and locks the lock file, starting over if the file we locked was
/// unlinked meanwhile (a build that left no cache removes it).
fn lock(lock_file: &Path, target: &Path) -> Result<File> {
    loop {
        let file = io(
            lock_file,
            step("open", lock_file, || {
                File::options()
                    .create(true)
                    .truncate(false)
                    .write(true)
                    .open(lock_file)
            }),
        )?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                return Err(BuildError::Locked {
                    cache: target.to_path_buf(),
                    lock: lock_file.to_path_buf(),
                });
            }
            Err(TryLockError::Error(e)) => return Err(BuildError::io(lock_file, e)),
        }
        let held = io(lock_file, file.metadata())?;
        match fs::metadata(lock_file) {
            Ok(m) if m.ino() == held.ino() && m.dev() == held.dev() => return Ok(file),
            _ => continue,
        }
    }
}

/// Refuses a target that cannot become a cache, before anything is
/// written: a path through a file, a mount point (a directory swap cannot
/// replace one), and what [`check_target`] refuses.
fn check_place(files: &CacheFiles) -> Result<()> {
    let target = files.target();
    // The nearest existing ancestor of the target must be a directory.
    let mut p = files.parent().to_path_buf();
    loop {
        match fs::metadata(&p) {
            Ok(m) if !m.is_dir() => {
                return Err(BuildError::io(
                    &p,
                    std::io::Error::new(
                        std::io::ErrorKind::NotADirectory,
                        format!(
                            "is a file, not a directory, so {} cannot be made inside it",
                            target.display()
                        ),
                    ),
                ));
            }
            Ok(_) => break,
            Err(_) => match p.parent() {
                Some(up) if !up.as_os_str().is_empty() => p = up.to_path_buf(),
                _ => break,
            },
        }
    }
    if is_mount_point(target) {
        return Err(BuildError::io(
            target,
            std::io::Error::new(
                std::io::ErrorKind::ResourceBusy,
                format!(
                    "is a mount point; a cache is published by swapping directories, which cannot replace a mount point: use a directory inside it, such as {}",
                    target.join("cache").display()
                ),
            ),
        ));
    }
    check_target(target)
}

/// Refuses a `target` that exists and is neither a cache nor an empty
/// directory (it would be replaced).
fn check_target(target: &Path) -> Result<()> {
    if exists(target) {
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
    Ok(())
}

/// Whether `dir` is the root of a mount (a volume mounted at the cache
/// path): statx's mount-root attribute, else a device other than its
/// parent's.
fn is_mount_point(dir: &Path) -> bool {
    use rustix::fs::{AtFlags, CWD, StatxAttributes, StatxFlags, statx};
    if !fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir()) {
        return false;
    }
    if let Ok(r) = statx(
        CWD,
        dir,
        AtFlags::NO_AUTOMOUNT | AtFlags::SYMLINK_NOFOLLOW,
        StatxFlags::empty(),
    ) && r.stx_attributes_mask.contains(StatxAttributes::MOUNT_ROOT)
    {
        return r.stx_attributes.contains(StatxAttributes::MOUNT_ROOT);
    }
    let parent = dir.parent().filter(|p| !p.as_os_str().is_empty());
    let parent = parent.unwrap_or(Path::new("."));
    match (fs::metadata(dir), fs::metadata(parent)) {
        (Ok(a), Ok(b)) => a.dev() != b.dev(),
        _ => false,
    }
}

/// A failure to create or write in the target's parent, said as what the
/// user must fix: the directory that must be writable.
fn explain_parent(files: &CacheFiles, e: BuildError) -> BuildError {
    let BuildError::Io { source, .. } = &e else {
        return e;
    };
    let denied = matches!(
        source.kind(),
        std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::ReadOnlyFilesystem
    );
    if !denied {
        return e;
    }
    let parent = files.parent();
    BuildError::io(
        parent,
        std::io::Error::new(
            source.kind(),
            format!(
                "{source}: this directory must be writable, as the build writes the new cache here first and then swaps it in as {}",
                files.target().display()
            ),
        ),
    )
}

/// A failed swap, said with what the user can do about it.
fn swap_failure(e: std::io::Error) -> std::io::Error {
    use rustix::io::Errno;
    let hint = match e.raw_os_error() {
        Some(n) if n == Errno::PERM.raw_os_error() => {
            "; its directory does not let this user replace it (a sticky directory such as /tmp, where only the cache's owner may rename it): build as that user, or into a directory of your own"
        }
        Some(n) if n == Errno::BUSY.raw_os_error() => {
            "; it is in use as a mount point: use a directory inside it"
        }
        _ => "",
    };
    if hint.is_empty() {
        return e;
    }
    std::io::Error::new(e.kind(), format!("{e}{hint}"))
}

fn list(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Whether `name`, at the top of a cache directory, is a file the cache
/// itself writes (and so may be deleted): the manifest, the report, the
/// shards' numbers and texts. By name only: a manifest could be edited to
/// name anything.
fn is_cache_file(name: &str) -> bool {
    name == MANIFEST_FILE
        || name == REPORT_FILE
        || ["shard-", "text-"].iter().any(|prefix| {
            name.strip_prefix(prefix)
                .and_then(|rest| rest.strip_suffix(".rkyv"))
                .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
        })
}

/// Empties the temporary directory `dir` (a staging directory, a dead
/// build's, or an old cache swapped or parked out) and removes it: the
/// cache's own files are unlinked, every other entry goes back into
/// `target` (merged into a directory of the same name there; with no
/// `target`, only `derived/` fingerprints files, ours, are removed).
/// Returns the entries that could not go back, left in `dir` (which then
/// stays).
fn retire(dir: &Path, target: &Path) -> Result<Vec<PathBuf>> {
    let home = fs::metadata(target).is_ok_and(|m| m.is_dir());
    let mut left = Vec::new();
    put_back(dir, home.then_some(target), Level::Top, &mut left)?;
    if left.is_empty() {
        io(dir, step("rmdir", dir, || fs::remove_dir(dir)))?;
    }
    Ok(left)
}

#[derive(Clone, Copy, PartialEq)]
enum Level {
    Top,
    Derived,
    Below,
}

fn put_back(dir: &Path, home: Option<&Path>, level: Level, left: &mut Vec<PathBuf>) -> Result<()> {
    let mut names: Vec<_> = io(dir, fs::read_dir(dir))?
        .map(|e| e.map(|e| e.file_name()))
        .collect::<std::io::Result<_>>()
        .map_err(|e| BuildError::io(dir, e))?;
    names.sort();
    for name in names {
        let from = dir.join(&name);
        let s = name.to_string_lossy();
        let meta = io(&from, fs::symlink_metadata(&from))?;
        let to = home.map(|h| h.join(&name));
        let there = to.as_deref().and_then(|t| fs::symlink_metadata(t).ok());
        let ours = meta.is_file()
            && match level {
                Level::Top => is_cache_file(&s),
                // A fingerprints file is of one content: one of that name
                // there is the same, and with no cache it is of none.
                Level::Derived => {
                    fingerprints_id(&s).is_some() && (home.is_none() || there.is_some())
                }
                Level::Below => false,
            };
        if ours {
            io(&from, step("unlink", &from, || fs::remove_file(&from)))?;
            continue;
        }
        match (&to, &there) {
            (Some(to), None) => {
                io(&from, step("rename", &from, || fs::rename(&from, to)))?;
            }
            (Some(to), Some(t)) if t.is_dir() && meta.is_dir() => {
                let sub = if level == Level::Top && s == DERIVED_DIR {
                    Level::Derived
                } else {
                    Level::Below
                };
                let before = left.len();
                put_back(&from, Some(to), sub, left)?;
                if left.len() == before {
                    io(&from, step("rmdir", &from, || fs::remove_dir(&from)))?;
                }
            }
            (None, _) if level == Level::Top && s == DERIVED_DIR && meta.is_dir() => {
                let before = left.len();
                put_back(&from, None, Level::Derived, left)?;
                if left.len() == before {
                    io(&from, step("rmdir", &from, || fs::remove_dir(&from)))?;
                }
            }
            _ => left.push(from),
        }
    }
    Ok(())
}

/// `target` with symlinks in its last component followed, so that the
/// new cache goes where the link points and the link stays.
fn resolve_symlinks(target: &Path) -> Result<PathBuf> {
    io(target, crate::output::resolve_symlinks(target))
}

/// Entries of the cache directory `dir` that the cache did not write (by
/// [`is_cache_file`]), sorted.
fn foreign_entries(dir: &Path) -> Result<Vec<std::ffi::OsString>> {
    let mut out = Vec::new();
    for entry in io(dir, fs::read_dir(dir))? {
        let name = io(dir, entry)?.file_name();
        if !is_cache_file(&name.to_string_lossy()) {
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
