//! The reading abstraction the training side is written against: a cache
//! whose threads can be read by position and found by source id, either
//! fully validated ([`Cache`]) or validated on first use ([`LazyCache`]).

use super::cache::{Cache, LazyCache};
use super::view::{NumView, ThreadView};
use crate::error::OpenError;

type Result<T, E = OpenError> = std::result::Result<T, E>;

/// Anything that yields threads' numbers by position: [`Cache`] or [`LazyCache`].
pub trait ThreadSource {
    /// Number of threads.
    fn thread_count(&self) -> usize;
    /// The numbers of the thread at position `i`.
    fn thread_at(&self, i: usize) -> Result<Option<NumView<'_>>>;
    /// Position of a source id.
    fn position_of(&self, source_id: u64) -> Result<Option<usize>>;
    /// The thread at position `i` with its texts (which a [`LazyCache`]
    /// validates on first use, apart from the numbers).
    fn texts_at(&self, i: usize) -> Result<Option<ThreadView<'_>>>;
}

impl ThreadSource for Cache {
    fn thread_count(&self) -> usize {
        self.len()
    }
    fn thread_at(&self, i: usize) -> Result<Option<NumView<'_>>> {
        Ok(self.numbers(i))
    }
    fn position_of(&self, source_id: u64) -> Result<Option<usize>> {
        Ok(self.position(source_id))
    }
    fn texts_at(&self, i: usize) -> Result<Option<ThreadView<'_>>> {
        Ok(self.thread(i))
    }
}

impl ThreadSource for LazyCache {
    fn thread_count(&self) -> usize {
        self.len()
    }
    fn thread_at(&self, i: usize) -> Result<Option<NumView<'_>>> {
        self.numbers(i)
    }
    fn position_of(&self, source_id: u64) -> Result<Option<usize>> {
        self.position(source_id)
    }
    fn texts_at(&self, i: usize) -> Result<Option<ThreadView<'_>>> {
        self.thread(i)
    }
}
