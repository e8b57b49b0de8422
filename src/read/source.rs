//! The one read API: [`ThreadSource`], implemented by both caches, and what
//! the training side and the Python binding are written against.

use std::path::{Path, PathBuf};

use super::cache::Core;
use super::view::{NumView, ThreadView};
use crate::error::{LoadError, OpenError};
use crate::format::manifest::Manifest;
use crate::format::report::BadInput;

type Result<T, E = OpenError> = std::result::Result<T, E>;

/// Only the crate's caches read a cache: every method below is written once,
/// over the state they share.
pub trait Sealed {
    /// The manifest and shard slots of the cache.
    fn core(&self) -> &Core;
}

/// Reading an open cache, fully validated ([`Cache`](crate::Cache)) or
/// validated file by file on first use ([`LazyCache`](crate::LazyCache)).
///
/// Reads that can meet a file not yet validated return
/// `Result<Option<_>>`: `Err` for a damaged file (naming it), `Ok(None)`
/// for a position or id the cache does not hold. A [`Cache`](crate::Cache)
/// never returns `Err`; it also has the same reads without the `Result`
/// as inherent methods of the same names, which take precedence on a
/// `Cache`. Sealed: implemented by the two caches only.
pub trait ThreadSource: Sealed {
    /// The cache directory.
    fn dir(&self) -> &Path {
        self.core().dir()
    }

    /// The manifest (counts, build options, shards).
    fn manifest(&self) -> &Manifest {
        self.core().manifest()
    }

    /// Number of threads (from the manifest).
    fn len(&self) -> usize {
        self.core().len()
    }

    /// True when the cache holds no thread.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The numbers of the thread at position `i` (0-based, source-id order);
    /// validates only its shard's numbers file, never its texts.
    fn numbers(&self, i: usize) -> Result<Option<NumView<'_>>> {
        self.core().numbers_at(i)
    }

    /// The thread at position `i`, texts included.
    fn thread(&self, i: usize) -> Result<Option<ThreadView<'_>>> {
        self.core().thread(i)
    }

    /// Position of the thread with this source id, by binary search: O(log n).
    fn position(&self, source_id: u64) -> Result<Option<usize>> {
        self.core().position(source_id)
    }

    /// The thread with this source id, texts included: O(log n).
    fn get(&self, source_id: u64) -> Result<Option<ThreadView<'_>>> {
        match self.position(source_id)? {
            Some(i) => self.thread(i),
            None => Ok(None),
        }
    }

    /// The bad-input report of the build that wrote this cache (a
    /// [`LazyCache`](crate::LazyCache) reads it and checks it against the
    /// manifest now).
    fn report(&self) -> Result<Vec<BadInput>> {
        self.core().report()
    }

    /// Index of the extra per-reaction column `name` (e.g. `"depth"`), for
    /// [`NumView::column`].
    fn reaction_column(&self, name: &str) -> Option<usize> {
        self.core().reaction_column(name)
    }

    /// Index of the extra per-thread column `name` (e.g. `"veracity"`), for
    /// [`NumView::thread_value`].
    fn thread_column(&self, name: &str) -> Option<usize> {
        self.core().thread_column(name)
    }

    /// The cache's content id: 16 hex digits of the xxh3 of its manifest.
    /// Builds are deterministic, so a rebuild of the same corpus with the
    /// same options has the same id, and any other content another one:
    /// name derived files after it (see [`derived_dir`](Self::derived_dir)).
    fn content_id(&self) -> String {
        format!("{:016x}", self.core().content_id())
    }

    /// `CACHE_DIR/derived/`: the place for files computed from the cache
    /// (statistics, embeddings). Rebuilds keep it; name files after
    /// [`content_id`](Self::content_id) so that a stale one is never used.
    fn derived_dir(&self) -> PathBuf {
        self.dir().join(crate::format::files::DERIVED_DIR)
    }

    /// Per thread position, its first reaction's index in cache order
    /// (threads by position, reactions by time), plus the total at the end:
    /// what an [`EmbeddingStore`](crate::EmbeddingStore)'s per-reaction index is addressed by.
    fn reaction_offsets(&self) -> Result<Vec<u64>, LoadError> {
        let mut offsets = Vec::with_capacity(self.len() + 1);
        let mut next = 0u64;
        for i in 0..self.len() {
            offsets.push(next);
            let t = self
                .numbers(i)?
                .ok_or(LoadError::NoSuchThread { position: i })?;
            next += t.reaction_count() as u64;
        }
        offsets.push(next);
        Ok(offsets)
    }
}

impl ThreadSource for super::Cache {}
impl ThreadSource for super::LazyCache {}
