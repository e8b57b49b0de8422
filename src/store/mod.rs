//! Embedding stores, in one place: the format (both directions), the
//! writer and the reader. A store is one or more immutable row segments
//! plus a small index; see [`format`].
//!
//! Above both halves of the crate, as `incremental` and `merge` are: the
//! writer publishes through the build half's directory swap and reads the
//! cache (its distinct inputs) through the read half, and nothing below
//! imports it.

pub mod format;
mod read;
mod write;

pub use format::StoreMeta;
pub use read::EmbeddingStore;
pub use write::StoreWriter;
