//! Stage 1: find every thread directory under a corpus root.
//!
//! A thread directory has an all-ASCII-digit name and a `source-tweets/` (or,
//! in older releases, `source-tweet/`) subdirectory; it may sit at any depth.
//! The walk is parallel ([`jwalk`]) and does not descend into a thread's own
//! tweet folders: the workers list those themselves, so the walk only has to
//! read the directories above the tweets.
//!
//! Threads come back ordered by numeric source id (then by path), whatever
//! order the file system lists directories in. A source id found in two places
//! is kept once (the first by path) and the other places are reported.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use jwalk::{Parallelism, WalkDirGeneric};

use crate::error::BuildError;
use crate::schema::{Label, ReactionKind};

type Result<T, E = BuildError> = std::result::Result<T, E>;
use crate::format::report::BadInput;

/// Folder names that hold a thread's source tweet, in order of preference.
pub const SOURCE_DIRS: [&str; 2] = ["source-tweets", "source-tweet"];

/// Folder names that hold a thread's reactions, with the kind they give.
pub const REACTION_DIRS: [(&str, ReactionKind); 3] = [
    ("reactions", ReactionKind::Reply),
    ("replies", ReactionKind::Reply),
    ("retweets", ReactionKind::Retweet),
];

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
    /// Which tweet folders and thread files exist: bit `i` for
    /// `SOURCE_DIRS[i]`, bit `2 + i` for `REACTION_DIRS[i]`, bit `5 + i` for
    /// `THREAD_FILES[i]` (from the walk's own listing, so workers need not
    /// stat them).
    pub entries: u16,
}

/// Optional per-thread files read for the extended features.
pub const THREAD_FILES: [&str; 4] = [
    "structure.json",
    "annotation.json",
    "who-follows-whom.dat",
    "retweets.json",
];

/// Index of `structure.json` in [`THREAD_FILES`].
pub const STRUCTURE_FILE: usize = 0;
/// Index of `annotation.json` in [`THREAD_FILES`].
pub const ANNOTATION_FILE: usize = 1;
/// Index of `who-follows-whom.dat` in [`THREAD_FILES`].
pub const FOLLOWS_FILE: usize = 2;
/// Index of `retweets.json` (retweets as JSON Lines) in [`THREAD_FILES`].
pub const RETWEETS_FILE: usize = 3;

impl ThreadDir {
    /// The name of the source folder (`source-tweets` preferred).
    pub fn source_dir(&self) -> Option<&'static str> {
        SOURCE_DIRS
            .iter()
            .enumerate()
            .find(|(i, _)| self.entries & (1 << i) != 0)
            .map(|(_, n)| *n)
    }

    /// The reaction folders that exist, with their kind.
    pub fn reaction_dirs(&self) -> impl Iterator<Item = (&'static str, ReactionKind)> + '_ {
        REACTION_DIRS
            .iter()
            .enumerate()
            .filter(|(i, _)| self.entries & (1 << (2 + i)) != 0)
            .map(|(_, d)| *d)
    }

    /// Whether the thread has `THREAD_FILES[i]`.
    pub fn has_file(&self, i: usize) -> bool {
        self.entries & (1 << (5 + i)) != 0
    }

    /// The event, from the layout: the grandparent folder when the parent
    /// is a label folder (`rumours`, `non-rumours`: PHEME), else the parent
    /// (RumourEval's `<event>/<id>`, the journalism release's
    /// `<lang>/<event>/<id>`); PHEME's `-all-rnr-threads` suffix removed, so
    /// one event has one name across datasets.
    pub fn event_name(&self) -> &str {
        let raw = match Label::from_folder(&self.label) {
            Label::Rumour | Label::NonRumour => &self.event,
            Label::Unknown => &self.label,
        };
        raw.strip_suffix("-all-rnr-threads")
            .filter(|e| !e.is_empty())
            .unwrap_or(raw)
    }
}

/// The `entries` bit of a thread file name, if it is one.
fn file_bit(name: &OsStr) -> Option<u16> {
    THREAD_FILES
        .iter()
        .position(|s| name == *s)
        .map(|i| 1 << (5 + i))
}

/// The `entries` bit of a tweet folder name, if it is one.
fn subdir_bit(name: &OsStr) -> Option<u16> {
    SOURCE_DIRS
        .iter()
        .position(|s| name == *s)
        .or_else(|| {
            REACTION_DIRS
                .iter()
                .position(|(s, _)| name == *s)
                .map(|i| i + 2)
        })
        .map(|i| 1 << i)
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

type Found = Arc<Mutex<Vec<(PathBuf, u16)>>>;

/// The walk's pool, built here rather than by jwalk: when jwalk cannot
/// start its pool (memory or process limits) it falls back to rayon's global
/// pool, which then panics; a pool that will not start means a serial walk.
fn walk_parallelism(threads: usize) -> Parallelism {
    if threads <= 1 {
        return Parallelism::Serial;
    }
    match rayon::ThreadPoolBuilder::new().num_threads(threads).build() {
        Ok(pool) => Parallelism::RayonExistingPool {
            pool: Arc::new(pool),
            busy_timeout: None,
        },
        Err(_) => Parallelism::Serial,
    }
}

/// Walks `root` with `threads` threads and returns its thread directories.
///
/// Hidden entries (names starting with `.`) are skipped. Every directory
/// that cannot be read or listed, at any level (the root, an event, a label,
/// a thread), is one line in [`Discovery::bad`] with the OS error, not fatal
/// (strict builds fail on it). A thread's tweet folders are not walked here:
/// the workers list them and report the ones they cannot list.
///
/// ```no_run
/// let found = socialctx::internals::discover::discover("data-samples/corpus".as_ref(), 2).unwrap();
/// println!("{} threads", found.threads.len());
/// ```
pub fn discover(root: &Path, threads: usize) -> Result<Discovery> {
    // `build` has checked that `root` is a directory before taking the lock;
    // if it vanished since, the walk reports it like any unreadable directory.
    let found: Found = Arc::default();
    let sink = Arc::clone(&found);
    let walk = WalkDirGeneric::<((), ())>::new(root)
        .skip_hidden(true)
        .follow_links(false)
        .parallelism(walk_parallelism(threads))
        .process_read_dir(move |_depth, dir, _state, children| {
            if !is_thread_name(dir.file_name().unwrap_or_default()) {
                return;
            }
            let mut entries = 0u16;
            for c in children.iter().flatten() {
                let is_dir =
                    || c.file_type.is_dir() || (c.file_type.is_symlink() && c.path().is_dir());
                if let Some(bit) = subdir_bit(&c.file_name)
                    && is_dir()
                {
                    entries |= bit;
                } else if let Some(bit) = file_bit(&c.file_name)
                    && !c.file_type.is_dir()
                {
                    entries |= bit;
                }
            }
            if entries & 0b11 == 0 {
                return;
            }
            // The workers list the tweet folders themselves: do not walk them twice.
            for c in children.iter_mut().flatten() {
                if subdir_bit(&c.file_name).is_some() {
                    c.read_children = None;
                }
            }
            sink.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push((dir.to_path_buf(), entries));
        });

    let mut bad = Vec::new();
    for entry in walk {
        match entry {
            Err(e) => {
                let path = e
                    .path()
                    .map(|p| relative(root, p))
                    .unwrap_or_else(|| ".".into());
                let reason = match e.io_error() {
                    Some(io) => format!("cannot read directory: {io}"),
                    None => format!("cannot walk: {e}"),
                };
                bad.push(BadInput::new(path, reason));
            }
            // jwalk does not yield an `Err` for a directory it cannot list
            // (no read permission, or `x` without `r`): it keeps the error on
            // that directory's own entry. Without this, everything below it
            // would vanish without a report line.
            Ok(dir) => {
                if let Some(e) = dir.read_children.as_ref().and_then(|rc| rc.error()) {
                    let reason = match e.io_error() {
                        Some(io) => format!("cannot list directory: {io}"),
                        None => format!("cannot list directory: {e}"),
                    };
                    bad.push(BadInput::new(relative(root, &dir.path()), reason));
                }
            }
        }
    }

    let paths = std::mem::take(&mut *found.lock().unwrap_or_else(PoisonError::into_inner));
    let mut list = Vec::with_capacity(paths.len());
    for (path, entries) in paths {
        let rel = relative(root, &path);
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        let Ok(source_id) = name.parse::<u64>() else {
            bad.push(BadInput::new(
                rel,
                format!("thread directory name {name} is not a source id that fits in 64 bits"),
            ));
            continue;
        };
        let parent = path.parent();
        list.push(ThreadDir {
            source_id,
            label: name_of(parent),
            event: name_of(parent.and_then(Path::parent)),
            path,
            rel,
            entries,
        });
    }
    list.sort_by(|a, b| (a.source_id, &a.rel).cmp(&(b.source_id, &b.rel)));

    let mut threads: Vec<ThreadDir> = Vec::with_capacity(list.len());
    for t in list {
        match threads.last() {
            Some(kept) if kept.source_id == t.source_id => bad.push(BadInput::new(
                t.rel,
                format!(
                    "duplicate source id {}: already found at {}, which is kept",
                    kept.source_id, kept.rel
                ),
            )),
            _ => threads.push(t),
        }
    }
    Ok(Discovery { threads, bad })
}
