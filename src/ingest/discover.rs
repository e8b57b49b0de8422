//! Stage 1: find every thread directory under a corpus root.
//!
//! A thread directory has an all-ASCII-digit name and is claimed by a
//! [layout](super::layout) (PHEME's claim: a `source-tweets/`, or in older
//! releases `source-tweet/`, folder); it may sit at any depth.
//! The walk is parallel (a task per directory on a rayon pool) and does not
//! descend into a thread's own tweet folders: the workers list those themselves, so the walk only has to
//! read the directories above the tweets.
//!
//! Threads come back ordered by numeric source id (then by path), whatever
//! order the file system lists directories in. A source id found in two places
//! is kept once (the first by path) and the other places are reported.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use rustix::fs::Dir;

use super::layout::{
    LAYOUTS, Layout, MAX_LAYOUTS, SIDE_FILES, file_bit, folder_bit, folder_bits, side_bit,
    source_bits,
};
use crate::error::BuildError;
use crate::schema::ReactionKind;

type Result<T, E = BuildError> = std::result::Result<T, E>;
use crate::format::report::BadInput;

/// A thread directory found by [`discover`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadDir {
    /// The numeric source tweet id (the directory name).
    pub source_id: u64,
    /// Full path of the thread directory.
    pub path: PathBuf,
    /// Path relative to the corpus root, `/`-separated (for reports).
    pub rel: String,
    /// The parent directory's name (`rumours`, `non-rumours`, or anything else).
    pub label: String,
    /// The grandparent directory's name (the event).
    pub event: String,
    /// Which tweet folders and side files exist, as a mask of its layout's
    /// names (see [`Layout`]; from the walk's own listing, so workers need
    /// not stat them).
    pub entries: u16,
    /// Its layout: an index into [`LAYOUTS`], in this process only (what
    /// plans and fingerprints store is the layout's name).
    pub layout: u8,
    /// Whether its folder was listed. A plan's walk (`Scope::Plan`)
    /// takes a thread in a label folder by its name and its source folder
    /// without listing it: then `entries` holds that source folder only
    /// and `layout` is the first that has one so named, a guess the
    /// partition that lists the thread checks (see `plan.rs`).
    pub listed: bool,
}

impl ThreadDir {
    /// Its layout.
    pub fn layout(&self) -> &'static dyn Layout {
        LAYOUTS[usize::from(self.layout)]
    }

    /// The name of the source folder (the layout's preferred one first).
    pub fn source_dir(&self) -> Option<&'static str> {
        self.layout()
            .source_dirs()
            .iter()
            .enumerate()
            .find(|(i, _)| self.entries & (1 << i) != 0)
            .map(|(_, n)| *n)
    }

    /// The reaction folders that exist, with their kind.
    pub fn reaction_dirs(&self) -> impl Iterator<Item = (&'static str, ReactionKind)> + '_ {
        let skip = self.layout().source_dirs().len();
        self.layout()
            .reaction_dirs()
            .iter()
            .enumerate()
            .filter(move |(i, _)| self.entries & (1 << (skip + i)) != 0)
            .map(|(_, d)| *d)
    }

    /// The name of its side file of role `role` ([`STRUCTURE_FILE`](super::layout::STRUCTURE_FILE),
    /// ...), if it has one.
    pub fn side_file(&self, role: usize) -> Option<&'static str> {
        let layout = self.layout();
        (self.entries & side_bit(layout, role) != 0)
            .then(|| layout.side_files()[role])
            .flatten()
    }

    /// The side files it has, by role.
    pub fn side_files(&self) -> impl Iterator<Item = &'static str> + '_ {
        (0..SIDE_FILES).filter_map(|role| self.side_file(role))
    }

    /// The event, as its layout names it (PHEME: the grandparent folder
    /// when the parent is a label folder, else the parent, without the
    /// `-all-rnr-threads` suffix, so one event has one name across datasets).
    pub fn event_name(&self) -> &str {
        self.layout().event_name(self)
    }
}

/// What [`discover`] found.
#[derive(Debug, Default)]
pub struct Discovery {
    /// Thread directories, ordered by source id, without duplicates.
    pub threads: Vec<ThreadDir>,
    /// Directories that could not be read, duplicate ids, ids out of range.
    pub bad: Vec<BadInput>,
}

/// True for names made only of ASCII digits (and not empty).
pub fn is_thread_name(name: &OsStr) -> bool {
    let b = name.as_encoded_bytes();
    !b.is_empty() && b.iter().all(u8::is_ascii_digit)
}

/// `path` relative to `root`, `/`-separated, lossy for non-UTF-8 names.
pub fn relative(root: &Path, path: &Path) -> String {
    let rel = path.strip_prefix(root).unwrap_or(path);
    let mut out = String::new();
    for (i, c) in rel.components().enumerate() {
        if i > 0 {
            out.push('/');
        }
        out.push_str(&c.as_os_str().to_string_lossy());
    }
    if out.is_empty() {
        out.push('.');
    }
    out
}

fn name_of(path: Option<&Path>) -> String {
    path.and_then(Path::file_name)
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// What [`discover_with`] computes for each thread directory as it finds it
/// (on the walk's pool): `hook(thread, worker)`, `worker` being the index of
/// the walk thread (below the thread count), for per-thread scratch state.
pub(crate) type Hook<'h, E> = &'h (dyn Fn(&ThreadDir, usize) -> E + Sync);

/// A partition's walk (issue 47): for a directory's path relative to the
/// root, whether another partition reads a thread there, which the walk
/// then neither lists nor records (the skip keeps account; its own
/// partition lists it and refuses what changed).
pub(crate) type Skip<'h> = &'h (dyn Fn(&str) -> bool + Sync);

/// What a walk lists.
#[derive(Clone, Copy)]
pub(crate) enum Scope<'h> {
    /// Every folder down to the threads (a build's walk).
    All,
    /// A plan's walk (issue 47: listing every thread folder was most of a
    /// plan): an all-digit folder in a label folder (`rumours`,
    /// `non-rumours`) with a source folder of some layout is taken as a
    /// thread by its name, unlisted ([`ThreadDir::listed`]); one without
    /// is listed as any folder. Its partition lists it and refuses a plan
    /// that took it wrongly.
    Plan,
    /// A partition's walk: the folders [`Skip`] names are not listed.
    Partition(Skip<'h>),
}

/// One walk's shared results.
struct Walk<'a, 'h, E> {
    root: &'a Path,
    /// Thread directories found, each with what the hook said of it.
    found: Mutex<Vec<(ThreadDir, E)>>,
    bad: Mutex<Vec<BadInput>>,
    hook: Hook<'h, E>,
    scope: Scope<'h>,
}

impl<E> Walk<'_, '_, E> {
    fn report(&self, dir: &Path, reason: String) {
        self.bad
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(BadInput::new(relative(self.root, dir), reason));
    }

    /// Records thread `td` with what the hook says of it.
    fn found(&self, td: ThreadDir) {
        let worker = rayon::current_thread_index().unwrap_or(0);
        let e = (self.hook)(&td, worker);
        self.found
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((td, e));
    }

    /// Thread folder `dir` taken without listing it ([`Scope::Plan`]):
    /// where its parent is a label folder and it has a source folder of
    /// some layout (a `stat` through `parent`, the link followed as the
    /// listing follows it), the first such folder in [`LAYOUTS`] order.
    /// `None`: list it (no such folder, or one that cannot be `stat`ted,
    /// which the listing reports).
    fn unlisted(&self, parent: &Dir, dir: &Path) -> Option<ThreadDir> {
        use rustix::fs::{AtFlags, FileType, statat};
        let label = dir.parent().and_then(Path::file_name)?.to_str()?;
        if crate::schema::Label::from_folder(label) == crate::schema::Label::Unknown {
            return None;
        }
        let fd = parent.fd().ok()?;
        let name = dir.file_name()?;
        let mut path = PathBuf::with_capacity(name.len() + 16);
        for (k, layout) in LAYOUTS.iter().enumerate() {
            for (bit, folder) in layout.source_dirs().iter().enumerate() {
                path.clear();
                path.push(name);
                path.push(folder);
                match statat(fd, &path, AtFlags::empty()) {
                    Ok(st) if FileType::from_raw_mode(st.st_mode).is_dir() => {
                        let mut td = thread_dir(self.root, dir, 1 << bit, k as u8).ok()?;
                        td.listed = false;
                        return Some(td);
                    }
                    Err(rustix::io::Errno::NOENT) => {}
                    _ => return None,
                }
            }
        }
        None
    }

    /// Lists `dir`, records it if it is a thread directory, and pushes the
    /// subdirectories to walk onto `subdirs`, each with this directory open
    /// (`dir` is opened relative to `parent`, its parent directory, when
    /// that is given: no lookup of the whole path per directory). A
    /// directory that cannot be opened or listed is reported, not fatal.
    fn visit(&self, parent: Option<&Dir>, dir: &Path, subdirs: &mut Vec<Pending>) {
        use rustix::fs::{AtFlags, CWD, FileType, Mode, OFlags, openat, statat};
        use std::os::unix::ffi::OsStrExt;
        let thread_name = is_thread_name(dir.file_name().unwrap_or_default());
        match self.scope {
            Scope::Partition(skip) if thread_name && skip(&relative(self.root, dir)) => return,
            Scope::Plan if thread_name => {
                if let Some(td) = parent.and_then(|p| self.unlisted(p, dir)) {
                    return self.found(td);
                }
            }
            _ => {}
        }
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let opened = match (parent.and_then(|p| p.fd().ok()), dir.file_name()) {
            (Some(parent), Some(name)) => openat(parent, name, flags, Mode::empty()),
            _ => openat(CWD, dir, flags, Mode::empty()),
        };
        let fd = match opened {
            Ok(fd) => fd,
            Err(e) => {
                let e = std::io::Error::from(e);
                return self.report(dir, format!("cannot list directory: {e}"));
            }
        };
        // Per layout (in `LAYOUTS` order), the entries found.
        let mut entries = [0u16; MAX_LAYOUTS];
        let mut children: Vec<PathBuf> = Vec::new();
        // Tweet folders of a thread are not walked (the workers list them),
        // so they are kept apart until the listing says whether `dir` is one.
        let mut tweet_dirs = Vec::new();
        // Entries named as a tweet folder or thread file that are not one
        // (a file named source-tweets, a directory or FIFO named
        // structure.json): reported, not silently absent.
        let mut odd: Vec<(PathBuf, &'static str, usize, u16)> = Vec::new();
        // The folder's path relative to the root and its length with a
        // slash, then each child's appended in place (partition walks).
        let mut child_rel: Option<(String, usize)> = None;
        let mut listing = match Dir::new(fd) {
            Ok(listing) => listing,
            Err(e) => {
                let e = std::io::Error::from(e);
                return self.report(dir, format!("cannot list directory: {e}"));
            }
        };
        while let Some(entry) = listing.read() {
            let entry = match entry {
                Ok(entry) => entry,
                Err(e) => {
                    let e = std::io::Error::from(e);
                    self.report(dir, format!("cannot read directory: {e}"));
                    break;
                }
            };
            let name = entry.file_name().to_bytes();
            if name.starts_with(b".") {
                continue;
            }
            let Ok(fd) = listing.fd() else { break };
            // Some file systems do not fill in d_type: ask, without
            // following a symlink (symlinked directories are not walked).
            let file_type = match entry.file_type() {
                FileType::Unknown => statat(fd, entry.file_name(), AtFlags::SYMLINK_NOFOLLOW)
                    .map_or(FileType::Unknown, |st| FileType::from_raw_mode(st.st_mode)),
                t => t,
            };
            let name = OsStr::from_bytes(name);
            let is_dir = file_type == FileType::Directory;
            if thread_name {
                // A symlink to a directory counts as a tweet folder (the
                // workers follow it), not as a thread file.
                let is_dir_or_link = || {
                    is_dir
                        || (file_type == FileType::Symlink
                            && statat(fd, entry.file_name(), AtFlags::empty())
                                .is_ok_and(|st| FileType::from_raw_mode(st.st_mode).is_dir()))
                };
                let mut folder = false;
                for (k, layout) in LAYOUTS.iter().enumerate() {
                    if let Some(bit) = folder_bit(*layout, name) {
                        folder = true;
                        if is_dir_or_link() {
                            entries[k] |= bit;
                        } else {
                            odd.push((dir.join(name), kind_of(fd, &entry, file_type), k, bit));
                        }
                    } else if let Some(bit) = file_bit(*layout, name) {
                        // A side file must be a regular file (or a link to
                        // one): a FIFO would read as empty, a directory not at all.
                        let regular = file_type == FileType::RegularFile
                            || (file_type == FileType::Symlink
                                && statat(fd, entry.file_name(), AtFlags::empty())
                                    .is_ok_and(|st| FileType::from_raw_mode(st.st_mode).is_file()));
                        if regular {
                            entries[k] |= bit;
                        } else {
                            odd.push((dir.join(name), kind_of(fd, &entry, file_type), k, bit));
                        }
                    }
                }
                if folder {
                    if is_dir {
                        tweet_dirs.push(dir.join(name));
                    }
                    continue;
                }
            }
            if is_dir {
                // Another partition's thread is skipped here, by its name,
                // rather than queued, opened as a path and skipped there
                // (two thirds of a corpus's folders, for each of three
                // partitions).
                if let Scope::Partition(skip) = self.scope
                    && is_thread_name(name)
                {
                    let parent = child_rel.get_or_insert_with(|| {
                        let rel = relative(self.root, dir);
                        let len = if rel == "." { 0 } else { rel.len() + 1 };
                        (rel, len)
                    });
                    let (buf, len) = parent;
                    if *len == 0 {
                        buf.clear();
                    } else {
                        buf.truncate(*len - 1);
                        buf.push('/');
                    }
                    buf.push_str(&name.to_string_lossy());
                    if skip(buf) {
                        continue;
                    }
                }
                children.push(dir.join(name));
            } else if file_type == FileType::Symlink {
                // Not walked (as the reference's `os.walk`), but said: a
                // linked event, label or thread folder would otherwise be
                // missing without a word. A link to a file is no folder.
                match statat(fd, entry.file_name(), AtFlags::empty()) {
                    Ok(st) if !FileType::from_raw_mode(st.st_mode).is_dir() => {}
                    Ok(_) => self.report(&dir.join(name), LINKED_DIR.into()),
                    Err(e) => self.report(
                        &dir.join(name),
                        format!("{BROKEN_LINK} ({})", std::io::Error::from(e)),
                    ),
                }
            }
        }
        // The thread's layout: the one that claims it most strongly.
        let mut claims = [0u8; MAX_LAYOUTS];
        for (k, layout) in LAYOUTS.iter().enumerate() {
            claims[k] = layout.claim(entries[k]);
        }
        let (found, tie) = match choose(&claims) {
            Ok(found) => (found, None),
            Err((a, b)) => (
                None,
                Some(format!(
                    "claimed alike by the {} and {} layouts: skipped (registration order may not choose; give one a stronger claim)",
                    LAYOUTS[a].name(),
                    LAYOUTS[b].name()
                )),
            ),
        };
        if let Some(why) = tie {
            self.report(dir, why);
            // Its tweet folders are nobody's to walk into.
            tweet_dirs.clear();
        }
        if found.is_some() {
            // Every layout's, not only the chosen one's: a layout's own file
            // that is a FIFO or a folder is why it did not claim the thread
            // (another did), which must not pass in silence. Once a path.
            let mut said: Vec<&PathBuf> = Vec::new();
            for (path, kind, k, bit) in &odd {
                if said.contains(&path) {
                    continue;
                }
                said.push(path);
                let want = if bit & folder_bits(LAYOUTS[*k]) != 0 {
                    "folder"
                } else {
                    "file"
                };
                self.report(path, format!("{kind}, not a {want}: ignored"));
            }
        } else if let Some((path, kind, _, _)) = odd
            .iter()
            .find(|(_, _, k, bit)| bit & source_bits(LAYOUTS[*k]) != 0)
        {
            // An all-digit folder whose source folder is not one: the
            // thread cannot be read, and says so.
            self.report(
                path,
                format!(
                    "{kind}, not a folder: the thread has no source tweet folder and is skipped"
                ),
            );
        }
        if let Some(k) = found {
            match thread_dir(self.root, dir, entries[k], k as u8) {
                Ok(td) => self.found(td),
                Err(bad) => self
                    .bad
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(bad),
            }
        } else {
            // Not a thread after all: its tweet-folder-named directories are
            // walked like any other.
            children.append(&mut tweet_dirs);
        }
        if !children.is_empty() {
            let listing = Arc::new(listing);
            subdirs.extend(
                children
                    .into_iter()
                    .map(|c| (Some(Arc::clone(&listing)), c)),
            );
        }
    }
}

/// The layout that claims a thread, from each layout's claim (by index in
/// [`LAYOUTS`]): the strongest, `None` where none claims it, `Err` with two
/// that claim it alike (the order they are registered in must not choose).
fn choose(claims: &[u8]) -> Result<Option<usize>, (usize, usize)> {
    let Some((best, &strongest)) = claims.iter().enumerate().max_by_key(|(_, c)| **c) else {
        return Ok(None);
    };
    if strongest == 0 {
        return Ok(None);
    }
    match claims.iter().position(|&c| c == strongest) {
        Some(first) if first != best => Err((first, best)),
        _ => Ok(Some(best)),
    }
}

/// The report's reason for a symbolic link to a directory in the corpus:
/// discovery does not follow links (a link loop cannot make it walk
/// forever, and the corpus reads as the reference's `os.walk` reads it),
/// and says so for each.
pub const LINKED_DIR: &str = "a symbolic link to a directory: not followed (the corpus is walked without following links, as the reference's os.walk does); put the folder itself here, or build from the link's target";

/// How the report's reason for a folder whose source id was found
/// elsewhere first begins (the folder found first is kept).
pub(crate) const DUPLICATE_ID: &str = "duplicate source id";

/// The report's reason for a symbolic link that does not resolve (a loop,
/// a missing target), followed by the system's error.
pub const BROKEN_LINK: &str = "a symbolic link that does not resolve: not followed";

/// What a directory entry is, in words, for a report (a symlink is
/// followed: a link to a FIFO is "a FIFO").
fn kind_of(
    dir: rustix::fd::BorrowedFd<'_>,
    entry: &rustix::fs::DirEntry,
    file_type: rustix::fs::FileType,
) -> &'static str {
    use rustix::fs::{AtFlags, FileType, statat};
    let t = match file_type {
        FileType::Symlink | FileType::Unknown => statat(dir, entry.file_name(), AtFlags::empty())
            .map_or(FileType::Unknown, |st| FileType::from_raw_mode(st.st_mode)),
        t => t,
    };
    match t {
        FileType::RegularFile => "a regular file",
        FileType::Directory => "a directory",
        FileType::Fifo => "a FIFO",
        FileType::Socket => "a socket",
        FileType::CharacterDevice => "a character device",
        FileType::BlockDevice => "a block device",
        _ => "a broken symlink or an unreadable entry",
    }
}

/// A directory still to walk, with its parent directory open.
type Pending = (Option<Arc<Dir>>, PathBuf);

/// Walks `dir` on the pool behind `scope`: each subdirectory is a task.
fn walk_parallel<'s, E: Send>(
    scope: &rayon::Scope<'s>,
    walk: &'s Walk<'_, '_, E>,
    (parent, dir): Pending,
) {
    let mut subdirs = Vec::new();
    walk.visit(parent.as_deref(), &dir, &mut subdirs);
    drop(parent);
    for sub in subdirs {
        scope.spawn(move |s| walk_parallel(s, walk, sub));
    }
}

/// Walks `root` with `threads` threads and returns its thread directories.
///
/// Hidden entries (names starting with `.`) are skipped and symbolic links
/// to directories are not followed. Every directory that cannot be read or
/// listed, at any level (the root, an event, a label, a thread), is one line
/// in [`Discovery::bad`] with the OS error, not fatal (strict builds fail on
/// it). A thread's tweet folders are not walked here: the workers list them
/// and report the ones they cannot list.
///
/// The walk is a task per directory on a rayon pool of `threads` (one
/// `getdents` listing per directory, no allocation per entry); the caller
/// blocks, it does not poll. It replaced jwalk, whose consuming iterator
/// spins on `sched_yield` while waiting for its pool, so on a 2-core
/// machine one core was busy doing nothing through the walk.
///
/// ```no_run
/// let found = socialctx::internals::discover::discover("data-samples/corpus".as_ref(), 2).unwrap();
/// println!("{} threads", found.threads.len());
/// ```
pub fn discover(root: &Path, threads: usize) -> Result<Discovery> {
    discover_with(root, threads, &|_, _| ()).map(|(found, _)| found)
}

/// [`discover`], also computing `hook` of each thread directory on the walk's
/// threads as it is found; the values come back in [`Discovery::threads`]
/// order (none for a duplicate).
pub(crate) fn discover_with<E: Send>(
    root: &Path,
    threads: usize,
    hook: Hook<'_, E>,
) -> Result<(Discovery, Vec<E>)> {
    discover_scoped(root, threads, hook, Scope::All)
}

/// [`discover_with`], listing what `scope` says (a partition's walk takes
/// the threads its skip names as found without listing their folders, nor
/// walking below them).
pub(crate) fn discover_scoped<E: Send>(
    root: &Path,
    threads: usize,
    hook: Hook<'_, E>,
    scope: Scope<'_>,
) -> Result<(Discovery, Vec<E>)> {
    // `build` has checked that `root` is a directory before taking the lock;
    // if it vanished since, the walk reports it like any unreadable directory.
    let walk = Walk {
        root,
        found: Mutex::default(),
        bad: Mutex::default(),
        hook,
        scope,
    };
    // A pool that will not start (memory or process limits) means a serial
    // walk, never rayon's global pool, which panics when it cannot start.
    let pool = (threads > 1)
        .then(|| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .ok()
        })
        .flatten();
    match pool {
        Some(pool) => pool.scope(|s| walk_parallel(s, &walk, (None, root.to_path_buf()))),
        None => {
            let mut stack = vec![(None, root.to_path_buf())];
            while let Some((parent, dir)) = stack.pop() {
                walk.visit(parent.as_deref(), &dir, &mut stack);
            }
        }
    }

    let mut bad = walk
        .bad
        .into_inner()
        .unwrap_or_else(PoisonError::into_inner);
    let mut list = walk
        .found
        .into_inner()
        .unwrap_or_else(PoisonError::into_inner);
    list.sort_unstable_by(|(a, _), (b, _)| (a.source_id, &a.rel).cmp(&(b.source_id, &b.rel)));

    let mut kept: Vec<ThreadDir> = Vec::with_capacity(list.len());
    let mut values = Vec::with_capacity(list.len());
    for (t, e) in list {
        match kept.last() {
            Some(first) if first.source_id == t.source_id => bad.push(BadInput::new(
                t.rel,
                format!(
                    "{DUPLICATE_ID} {}: already found at {}, which is kept",
                    first.source_id, first.rel
                ),
            )),
            _ => {
                kept.push(t);
                values.push(e);
            }
        }
    }
    Ok((Discovery { threads: kept, bad }, values))
}

/// The [`ThreadDir`] of thread directory `path` (whose listing gave
/// `entries`), or why its name is no source id.
pub(crate) fn thread_dir(
    root: &Path,
    path: &Path,
    entries: u16,
    layout: u8,
) -> Result<ThreadDir, BadInput> {
    let rel = relative(root, path);
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let Ok(source_id) = name.parse::<u64>() else {
        return Err(BadInput::new(
            rel,
            format!("thread directory name {name} is not a source id that fits in 64 bits"),
        ));
    };
    let parent = path.parent();
    Ok(ThreadDir {
        source_id,
        label: name_of(parent),
        event: name_of(parent.and_then(Path::parent)),
        path: path.to_path_buf(),
        rel,
        entries,
        layout,
        listed: true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn mkdir(root: &Path, rel: &str) {
        fs::create_dir_all(root.join(rel)).unwrap();
    }

    fn touch(root: &Path, rel: &str) {
        let p = root.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, b"{}").unwrap();
    }

    /// `(rel, entries)` of every thread found, and the report lines, the
    /// same whatever the thread count.
    fn found(root: &Path) -> (Vec<(String, u16)>, Vec<String>) {
        let mut all = [1, 2, 5].map(|n| {
            let d = discover(root, n).unwrap();
            let threads: Vec<_> = d
                .threads
                .iter()
                .map(|t| (t.rel.clone(), t.entries))
                .collect();
            let mut bad: Vec<_> = d
                .bad
                .iter()
                .map(|b| format!("{}: {}", b.path, b.reason))
                .collect();
            bad.sort();
            (threads, bad)
        });
        assert!(
            all.iter().all(|a| *a == all[0]),
            "serial and parallel walks differ: {all:?}"
        );
        std::mem::take(&mut all[0])
    }

    const SRC: u16 = 1;
    const REACTIONS: u16 = 1 << 2;
    const STRUCTURE: u16 = 1 << 5;

    #[test]
    fn threads_at_any_depth_in_source_id_order() {
        let tmp = tempfile::tempdir().unwrap();
        let r = tmp.path();
        touch(r, "ev/rumours/30/source-tweets/30.json");
        touch(r, "ev/rumours/30/reactions/31.json");
        touch(r, "ev/rumours/30/structure.json");
        touch(r, "deep/a/b/c/d/20/source-tweet/20.json");
        // A digit-named folder without a source folder is walked into.
        touch(r, "ev/non-rumours/99/10/source-tweets/10.json");
        // Tweet-folder names under a folder that is not a thread are walked too.
        touch(r, "x/reactions/5/source-tweets/5.json");
        let (threads, bad) = found(r);
        assert_eq!(
            threads,
            [
                ("x/reactions/5".to_string(), SRC),
                ("ev/non-rumours/99/10".to_string(), SRC),
                ("deep/a/b/c/d/20".to_string(), 2),
                ("ev/rumours/30".to_string(), SRC | REACTIONS | STRUCTURE),
            ]
        );
        assert!(bad.is_empty(), "{bad:?}");
    }

    #[test]
    fn what_counts_in_a_thread_folder() {
        let tmp = tempfile::tempdir().unwrap();
        let r = tmp.path();
        touch(r, "ev/rumours/1/source-tweets/1.json");
        // A directory named like a thread file is no thread file, and is
        // reported (issue 35: it was silently "absent"); so is a FIFO.
        mkdir(r, "ev/rumours/1/structure.json");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            r.join("ev/rumours/1/annotation.json"),
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o644),
            0,
        )
        .unwrap();
        // A thread whose source-tweets is a regular file is reported, not
        // silently left out; a reactions file likewise.
        touch(r, "ev/rumours/5/source-tweets");
        touch(r, "ev/rumours/1/replies");
        // Hidden entries do not count, and are not walked.
        touch(r, "ev/rumours/1/.reactions/2.json");
        touch(r, "ev/.hidden/7/source-tweets/7.json");
        // The tweet folders of a thread are not walked, other folders are.
        touch(r, "ev/rumours/1/reactions/3/source-tweets/3.json");
        touch(r, "ev/rumours/1/other/4/source-tweets/4.json");
        // A symlinked tweet folder counts (the workers follow it); a
        // symlinked directory is not walked.
        touch(r, "store/8/source-tweets/8.json");
        mkdir(r, "ev/rumours/6");
        std::os::unix::fs::symlink(
            r.join("store/8/source-tweets"),
            r.join("ev/rumours/6/source-tweets"),
        )
        .unwrap();
        std::os::unix::fs::symlink(r.join("store"), r.join("ev/linked")).unwrap();
        let (threads, bad) = found(r);
        assert_eq!(
            threads,
            [
                ("ev/rumours/1".to_string(), SRC | REACTIONS),
                ("ev/rumours/1/other/4".to_string(), SRC),
                ("ev/rumours/6".to_string(), SRC),
                ("store/8".to_string(), SRC),
            ]
        );
        assert_eq!(
            bad,
            [
                "ev/linked: a symbolic link to a directory: not followed (the corpus is walked without following links, as the reference's os.walk does); put the folder itself here, or build from the link's target",
                "ev/rumours/1/annotation.json: a FIFO, not a file: ignored",
                "ev/rumours/1/replies: a regular file, not a folder: ignored",
                "ev/rumours/1/structure.json: a directory, not a file: ignored",
                "ev/rumours/5/source-tweets: a regular file, not a folder: the thread has no source tweet folder and is skipped",
            ]
        );
        // The root itself may be a thread.
        let (threads, _) = found(&r.join("store/8"));
        assert_eq!(threads, [(".".to_string(), SRC)]);
    }

    /// Links are never followed, so a loop cannot make the walk run
    /// forever; each link to a directory, or that does not resolve, is a
    /// report line (the threads behind it are not silently missing).
    #[test]
    fn symlinked_folders_and_link_loops_are_reported_not_walked() {
        use std::os::unix::fs::symlink;
        let tmp = tempfile::tempdir().unwrap();
        let r = tmp.path();
        touch(r, "ev/rumours/1/source-tweets/1.json");
        touch(r, "elsewhere/non-rumours/2/source-tweets/2.json");
        touch(r, "ev/notes.txt");
        symlink(r.join("elsewhere/non-rumours"), r.join("ev/non-rumours")).unwrap();
        symlink(r.join("elsewhere/non-rumours/2"), r.join("ev/rumours/3")).unwrap();
        symlink(r.join("ev/notes.txt"), r.join("ev/notes-link")).unwrap();
        // A loop through an ancestor, and a link to itself.
        symlink("..", r.join("ev/rumours/up")).unwrap();
        symlink("self", r.join("ev/self")).unwrap();
        let (threads, bad) = found(r);
        assert_eq!(
            threads,
            [
                ("ev/rumours/1".to_string(), SRC),
                ("elsewhere/non-rumours/2".to_string(), SRC),
            ]
        );
        assert_eq!(bad.len(), 4, "{bad:#?}");
        for (line, path) in bad
            .iter()
            .zip(["ev/non-rumours", "ev/rumours/3", "ev/rumours/up"])
        {
            assert_eq!(line, &format!("{path}: {LINKED_DIR}"));
        }
        assert!(
            bad[3].starts_with(&format!("ev/self: {BROKEN_LINK} (")),
            "{}",
            bad[3]
        );
    }

    #[test]
    fn duplicates_and_ids_out_of_range_are_reported() {
        let tmp = tempfile::tempdir().unwrap();
        let r = tmp.path();
        touch(r, "b/42/source-tweets/42.json");
        touch(r, "a/42/source-tweets/42.json");
        touch(r, "a/99999999999999999999/source-tweets/1.json");
        let (threads, bad) = found(r);
        assert_eq!(threads, [("a/42".to_string(), SRC)]);
        assert_eq!(bad.len(), 2, "{bad:?}");
        assert!(
            bad[0].starts_with("a/9999") && bad[0].contains("fits in 64 bits"),
            "{bad:?}"
        );
        assert!(
            bad[1].starts_with("b/42: duplicate source id 42: already found at a/42"),
            "{bad:?}"
        );
    }

    /// The strongest claim takes a thread wherever its layout is
    /// registered; a tie is refused, never settled by order.
    #[test]
    fn the_strongest_claim_chooses_and_a_tie_is_refused() {
        assert_eq!(choose(&[0, 0, 0]), Ok(None));
        assert_eq!(choose(&[1, 0]), Ok(Some(0)));
        assert_eq!(choose(&[1, 2]), Ok(Some(1)));
        assert_eq!(choose(&[2, 1, 0]), Ok(Some(0)));
        assert_eq!(choose(&[1, 2, 2]), Err((1, 2)));
        assert_eq!(choose(&[1, 0, 1]), Err((0, 2)));
    }

    /// The toy layout (unit tests only) shares PHEME's source folder: its
    /// label file makes a thread its own, wherever it is registered.
    #[test]
    fn a_layout_sharing_phemes_folders_claims_by_its_own_file() {
        let tmp = tempfile::tempdir().unwrap();
        let r = tmp.path();
        touch(r, "ev/threads/1/source-tweets/1.json");
        touch(r, "ev/threads/1/toy.json");
        touch(r, "ev/threads/2/source-tweets/2.json");
        touch(r, "ev/threads/2/structure.json");
        let d = discover(r, 2).unwrap();
        let names: Vec<_> = d
            .threads
            .iter()
            .map(|t| (t.source_id, t.layout().name()))
            .collect();
        assert_eq!(names, [(1, "toy"), (2, "pheme")]);
        assert!(d.bad.is_empty(), "{:?}", d.bad);
    }

    /// A layout's own file that is no file cannot make its claim; the
    /// thread goes to the layout whose folders it has, and the entry is
    /// reported, not silently passed over.
    #[test]
    fn a_layouts_own_file_that_is_no_file_is_reported() {
        let tmp = tempfile::tempdir().unwrap();
        let r = tmp.path();
        touch(r, "ev/threads/1/source-tweets/1.json");
        mkdir(r, "ev/threads/1/toy.json");
        let (threads, bad) = found(r);
        assert_eq!(threads, [("ev/threads/1".to_string(), SRC)]);
        assert_eq!(
            bad,
            ["ev/threads/1/toy.json: a directory, not a file: ignored"]
        );
    }

    #[test]
    fn a_missing_root_is_one_report_line() {
        let tmp = tempfile::tempdir().unwrap();
        let (threads, bad) = found(&tmp.path().join("gone"));
        assert!(threads.is_empty());
        assert_eq!(bad.len(), 1, "{bad:?}");
        assert!(
            bad[0].contains("cannot list directory") && bad[0].contains("os error 2"),
            "{bad:?}"
        );
    }
}
