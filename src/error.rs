//! Typed errors, one type per operation, each naming the file or directory
//! it is about and saying why in plain words, so that a nightly job's log is
//! enough to act on:
//!
//! - [`BuildError`]: what stops [`build`](crate::build);
//! - [`OpenError`]: what makes a cache unreadable ([`Cache::open`](crate::Cache::open),
//!   and every access of a [`LazyCache`](crate::LazyCache));
//! - [`LoadError`]: what stops training-time reads (batches, splits,
//!   statistics), a cache that turns out unreadable included.
//!
//! [`Error`] holds any of them, for callers that do several operations and
//! use `?`. Bad *input* (a broken tweet file) is not an error in lenient mode:
//! it becomes a [`BadInput`](crate::BadInput) line in the report instead.

use std::io;
use std::path::PathBuf;

/// Result alias, [`Error`] by default.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Any error of this crate: what callers doing several operations with `?`
/// hold. It displays as the error it wraps.
#[derive(thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A build failed.
    #[error(transparent)]
    Build(#[from] BuildError),
    /// A cache could not be opened or read.
    #[error(transparent)]
    Open(#[from] OpenError),
    /// A training-time read failed.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// An embedding store could not be opened.
    #[error(transparent)]
    Embedding(#[from] EmbeddingError),
}

/// Why an [`EmbeddingStore`](crate::EmbeddingStore) cannot be opened, or
/// a [`StoreWriter`](crate::StoreWriter) cannot write one.
#[derive(thiserror::Error)]
#[non_exhaustive]
pub enum EmbeddingError {
    /// No store of that name.
    #[error(
        "{path}: no embedding store {name:?} (stores of this cache: {have:?}); make it with socialctx.embed"
    )]
    Missing {
        /// Where the store would be.
        path: PathBuf,
        /// The name asked for.
        name: String,
        /// The stores the cache has.
        have: Vec<String>,
    },
    /// The store was computed for another content of the cache.
    #[error(
        "{path}: store {name:?} was computed for cache content {found}, but the cache now has \
         content {expected} (rebuilt since?); run socialctx.embed(..., name={name:?}) again"
    )]
    OtherContent {
        /// The store's directory.
        path: PathBuf,
        /// Its name.
        name: String,
        /// The content id the store records.
        found: String,
        /// The cache's content id.
        expected: String,
    },
    /// The store was made by another model than the one required
    /// ([`EmbeddingStore::require_model`](crate::EmbeddingStore::require_model)).
    #[error(
        "{path}: store {name:?} was made by {}, but model {expected:?} is required; embed it \
         again with that model and model_id={expected:?}",
        made_by(.found)
    )]
    OtherModel {
        /// The store's directory.
        path: PathBuf,
        /// Its name.
        name: String,
        /// The model id the store records (None: made without one).
        found: Option<String>,
        /// The model id required.
        expected: String,
    },
    /// A file of the store is unreadable, malformed or damaged.
    #[error("{path}: {reason}")]
    Damaged {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// Writing the store failed (a full disk reads "No space left on
    /// device"); the published store, if any, is as it was.
    #[error("{path}: {source} while writing an embedding store")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// Another embed of the same store holds its lock.
    #[error("{path}: another embed of this store is running")]
    Locked {
        /// The store's directory.
        path: PathBuf,
    },
    /// Rows handed to a [`StoreWriter`](crate::StoreWriter) do not fit the
    /// store (shape, width, non-finite values, order of batches).
    #[error("{reason}")]
    Rows {
        /// What is wrong.
        reason: String,
    },
}

/// A store's model in messages: its id, or that it has none.
pub(crate) fn made_by(model_id: &Option<String>) -> String {
    match model_id {
        Some(id) => format!("model {id:?}"),
        None => "a model of unknown identity (no model id)".into(),
    }
}

/// Everything that can stop a build. Any existing cache is then left as it was.
#[derive(thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// An I/O operation on `path` failed. A full file system reads "no
    /// space left on device writing NAME".
    #[error("{path}: {}", build_io_message(.source, .path))]
    Io {
        /// The file or directory the operation was about.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },

    /// The corpus directory does not exist or is not a directory.
    #[error("corpus directory {0} does not exist or is not a directory")]
    CorpusMissing(PathBuf),

    /// The walk found no thread directory at all.
    #[error(
        "no thread directories under {0} (a thread directory has an all-digit name and a \
         source-tweets/ or source-tweet/ subdirectory)"
    )]
    EmptyCorpus(PathBuf),

    /// The cache would be written inside the corpus it is built from.
    #[error(
        "the cache directory {cache} is inside the corpus {corpus}; choose a directory outside it"
    )]
    OutputInsideCorpus {
        /// The corpus root.
        corpus: PathBuf,
        /// The requested cache directory.
        cache: PathBuf,
    },

    /// `--strict` was given and an input file or thread was bad.
    #[error("bad input (strict mode): {path}: {reason}")]
    StrictBadInput {
        /// Path relative to the corpus root.
        path: PathBuf,
        /// Why the input was rejected.
        reason: String,
    },

    /// Another build holds the lock for this cache directory.
    #[error(
        "another build is writing {cache} (lock {lock} is held); try again when it has finished"
    )]
    Locked {
        /// The cache directory.
        cache: PathBuf,
        /// The lock file.
        lock: PathBuf,
    },

    /// A thread in the build was larger than one shard can hold.
    #[error("{path}: thread is too large for one cache shard ({bytes} bytes)")]
    ThreadTooLarge {
        /// Thread directory, relative to the corpus root.
        path: PathBuf,
        /// Its estimated archived size.
        bytes: u64,
    },

    /// The operating system would not start even one worker thread (memory
    /// or process limits such as `ulimit -v` or `ulimit -u`).
    #[error("cannot start worker threads ({wanted} wanted): {source}; try fewer with --workers")]
    ThreadSpawn {
        /// How many were asked for.
        wanted: usize,
        /// The OS error.
        source: io::Error,
    },

    /// A partition given to a merge is missing, repeated, damaged, or of
    /// another plan.
    #[error("{path}: {reason}")]
    BadPartition {
        /// The partition directory (or the first of the set).
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },

    /// A partition build found the corpus changed since its plan was made:
    /// a thread added, gone, moved between folders or with other folders
    /// (or, for a plan that pins files, other files), or a rumour source
    /// changed.
    #[error(
        "{corpus} no longer matches the plan ({} change{}: {}); make the plan again and build every partition of it",
        .changed.len(),
        if .changed.len() == 1 { "" } else { "s" },
        first_changes(.changed)
    )]
    PlanStale {
        /// The corpus root.
        corpus: PathBuf,
        /// What changed, each naming a thread or file relative to the corpus.
        changed: Vec<String>,
    },

    /// An artifact (a plan, a partition) was made by a library whose
    /// definition of the stored values differs from this one's
    /// ([`Manifest::current_definition`](crate::Manifest::current_definition)):
    /// its values would mix with others computed by other code.
    #[error(
        "{what} was made by definition {found} of the stored values, but this library computes definition {expected}: {remedy}"
    )]
    DefinitionChanged {
        /// The artifact.
        what: String,
        /// Its recorded definition digest (`none recorded` if it has none).
        found: String,
        /// This library's.
        expected: String,
        /// What to do.
        remedy: &'static str,
    },

    /// A partition build was asked for partition `index` of `count`, which
    /// does not exist (partitions are numbered `0..count`, `count >= 1`).
    #[error("partition {index} of {count} does not exist: need 0 <= index < count")]
    PartitionOutOfRange {
        /// The partition asked for.
        index: usize,
        /// The number of partitions asked for.
        count: usize,
    },

    /// The change list of an incremental build
    /// ([`BuildOptions::changed`](crate::BuildOptions::changed)) cannot be
    /// read or names a path outside the corpus. Nothing was built.
    #[error("bad change list {}: {reason}", file.display())]
    BadChangeList {
        /// The change list.
        file: PathBuf,
        /// What is wrong with it (and on which line).
        reason: String,
    },

    /// The caller's [`Progress::cancelled`](crate::Progress::cancelled) said
    /// stop. Any existing cache is left as it was.
    #[error("build cancelled; any existing cache is unchanged")]
    Cancelled,

    /// A bug: a worker thread panicked. The build is abandoned.
    #[error("internal error while processing {path}: {message}")]
    Internal {
        /// What was being processed.
        path: PathBuf,
        /// The panic message.
        message: String,
    },
}

/// The first few of a list of changes, and how many more.
fn first_changes(changed: &[String]) -> String {
    const SHOWN: usize = 10;
    let mut s = changed[..changed.len().min(SHOWN)].join(", ");
    if changed.len() > SHOWN {
        s.push_str(&format!(", and {} more", changed.len() - SHOWN));
    }
    s
}

/// The message of a build's I/O error: the OS's, with what was being
/// written when the file system is full (a build only writes there).
fn build_io_message(e: &io::Error, path: &std::path::Path) -> String {
    const ENOSPC: i32 = 28;
    match e.raw_os_error() {
        Some(ENOSPC) => format!(
            "No space left on device writing {} (os error {ENOSPC}); free space there or build elsewhere",
            path.file_name().map_or_else(
                || path.display().to_string(),
                |n| n.to_string_lossy().into_owned()
            )
        ),
        _ => e.to_string(),
    }
}

impl BuildError {
    /// Wraps an [`io::Error`] with the path it is about.
    pub fn io(path: impl Into<PathBuf>, source: io::Error) -> Self {
        BuildError::Io {
            path: path.into(),
            source,
        }
    }
}

/// Everything that makes a cache unreadable.
#[derive(thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// An I/O operation on `path` failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory the operation was about.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },

    /// The cache directory (or its manifest) does not exist.
    #[error("no cache at {0} (manifest.json not found)")]
    CacheMissing(PathBuf),

    /// A cache file is damaged, truncated or inconsistent with the manifest.
    #[error("{path}: corrupt cache: {reason}")]
    Corrupt {
        /// The damaged file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },

    /// The cache was written by an incompatible version of this library.
    #[error(
        "{path}: cache format version {found} is not supported (this library reads version {expected}); rebuild the cache"
    )]
    UnsupportedVersion {
        /// The file carrying the version.
        path: PathBuf,
        /// Version found in the file.
        found: u32,
        /// Version this library reads and writes.
        expected: u32,
    },
}

impl OpenError {
    /// Wraps an [`io::Error`] with the path it is about.
    pub fn io(path: impl Into<PathBuf>, source: io::Error) -> Self {
        OpenError::Io {
            path: path.into(),
            source,
        }
    }
}

impl OpenError {
    /// A [`OpenError::Corrupt`] for `path`.
    pub fn corrupt(path: impl Into<PathBuf>, reason: impl Into<String>) -> Self {
        OpenError::Corrupt {
            path: path.into(),
            reason: reason.into(),
        }
    }
}

/// Everything that can stop a training-time read: a batch, a split, statistics.
#[derive(thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// The cache (or one of its files, validated on first use) is unreadable.
    #[error(transparent)]
    Cache(#[from] OpenError),

    /// An I/O operation on `path` failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory the operation was about.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },

    /// A batch was asked to hold more threads than its buffers have room for.
    #[error("batch of {needed} threads does not fit buffers for {capacity}")]
    BatchTooSmall {
        /// Threads requested.
        needed: usize,
        /// Threads the buffers hold.
        capacity: usize,
    },

    /// A caller's batch buffer has the wrong length for the batch shape.
    #[error("batch buffer {buffer} holds {found} values, the batch shape needs {expected}")]
    BufferSize {
        /// Which buffer.
        buffer: &'static str,
        /// Length the shape needs.
        expected: usize,
        /// Length given.
        found: usize,
    },

    /// A buffer the batch needs cannot be had: its size overflows, or the
    /// memory cannot be allocated (a graph batch's outputs, which grow with
    /// its nodes).
    #[error("batch buffer {buffer} of {slots} slots x {per_slot} values is too large to allocate")]
    TooLarge {
        /// Which buffer.
        buffer: &'static str,
        /// Slots (a graph batch's nodes so far).
        slots: usize,
        /// Values per slot.
        per_slot: usize,
    },

    /// A thread position beyond the end of the cache.
    #[error("no thread at position {position}")]
    NoSuchThread {
        /// The position asked for.
        position: usize,
    },

    /// [`UniqueTexts`](crate::UniqueTexts) read from a cache other than the
    /// one they were collected from.
    #[error(
        "thread {position} has no such text: the unique texts were collected from another cache"
    )]
    OtherCache {
        /// The thread position of the text asked for.
        position: usize,
    },

    /// Outputs made for one cache content (a [`BatchSpec`](crate::BatchSpec)
    /// and its stores, addressed by that content's reaction order) used
    /// with a cache of another: refused rather than gathering other
    /// reactions' rows.
    #[error("{what} is of cache content {found}, not {expected} (the cache it is used with)")]
    OtherContent {
        /// The store or spec.
        what: String,
        /// The content id of the cache it is used with.
        expected: String,
        /// The content id it was made for.
        found: String,
    },

    /// Two different inputs with one content key (xxh3-128): so unlikely
    /// (about 2^-128 per pair) that it is reported, never guessed around.
    #[error("two different texts share the content key {key:032x}; please report this")]
    KeyCollision {
        /// The shared key.
        key: u128,
    },

    /// A source id that the cache does not hold.
    #[error("source id {source_id} is not in the cache")]
    NoSuchSource {
        /// The id asked for.
        source_id: u64,
    },

    /// A split file could not be read.
    #[error("{path}: {reason}")]
    BadSplit {
        /// The split CSV.
        path: PathBuf,
        /// What is wrong, with the line number.
        reason: String,
    },

    /// An epoch cannot be cut into batches as asked.
    #[error("cannot plan the epoch's batches: {reason}")]
    BadBatching {
        /// Why.
        reason: String,
    },

    /// A statistics file could not be read or does not fit this cache.
    #[error("{path}: {reason}")]
    BadStats {
        /// The statistics file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}

impl LoadError {
    /// Wraps an [`io::Error`] with the path it is about.
    pub fn io(path: impl Into<PathBuf>, source: io::Error) -> Self {
        LoadError::Io {
            path: path.into(),
            source,
        }
    }
}

/// `Debug` is the message, not the variant's fields: `fn main() ->
/// Result<(), socialctx::Error>` then prints `Error: no cache at ...` rather
/// than `CacheMissing("...")`. Match on the variants for details.
macro_rules! debug_is_display {
    ($($t:ty),*) => {$(
        impl std::fmt::Debug for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                std::fmt::Display::fmt(self, f)
            }
        }
    )*};
}
debug_is_display!(Error, BuildError, OpenError, LoadError, EmbeddingError);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_reads_like_display() {
        let e = Error::from(OpenError::CacheMissing("/x/cache".into()));
        assert_eq!(
            format!("{e:?}"),
            "no cache at /x/cache (manifest.json not found)"
        );
        assert_eq!(format!("{e:?}"), e.to_string());
    }
}
