//! # socialctx
//!
//! Build once, memory-map forever: the 28 numerical social-context features
//! of RPDNN (rumour detection) for PHEME-style Twitter corpora, computed in
//! one parallel pass and stored in a zero-copy, memory-mapped cache.
//!
//! The crate has a build half and a read half that meet only at the on-disk
//! format (see `ARCHITECTURE.md`):
//!
//! | you want to | use |
//! |---|---|
//! | build a cache from a corpus | [`build`] with [`BuildOptions`] (and a [`Progress`]) |
//! | open it, every file checked | [`Cache::open`] → [`ThreadView`], [`ReactionView`] |
//! | open it in microseconds, files checked on first use | [`LazyCache::open`] → [`NumView`] |
//! | padded, masked, normalised batches | [`Loader`] + [`Selection`] into a [`Batch`] |
//! | normalisation statistics | [`FeatureStats`] ([`FeatureStats::normalize`]) |
//! | RPDNN's split files | [`Split`] |
//! | the oracle's JSON Lines | [`dump`] |
//! | what the features are | [`Feature`], [`Feature::NAMES`]; the contract is `FEATURES.md` |
//!
//! ```no_run
//! use socialctx::{build, BuildOptions, Cache, Feature, NoProgress};
//! build("data-samples/corpus", "target/cache", &BuildOptions::default(), &NoProgress)?;
//! let cache = Cache::open("target/cache")?;
//! let thread = cache.iter().next().unwrap();
//! let rows: &[[f32; 28]] = thread.features();
//! println!("first reply {} minutes after the source", rows[0][Feature::TDiff]);
//! # Ok::<(), socialctx::Error>(())
//! ```

#![warn(missing_docs, missing_debug_implementations)]

mod definition;
pub mod dump;
mod error;
mod format;
mod incremental;
mod ingest;
mod merge;
mod output;
mod read;
mod repack;
mod schema;
mod store;
#[doc(hidden)]
pub mod summary;
mod train;

pub use error::{BuildError, EmbeddingError, Error, LoadError, OpenError, Result};
pub use format::FORMAT_VERSION;
pub use format::manifest::{BuildInfo, FileInfo, Manifest, ShardInfo};
pub use format::report::BadInput;
pub use incremental::build_incremental;
pub use ingest::plan::{Plan, build_partition};
pub use ingest::{BuildOptions, BuildSummary, NoProgress, Phases, Progress, build};
pub use merge::merge;
pub use read::texts::{TextField, UniqueTexts};
pub use read::{
    Cache, LazyCache, NumView, ReactionNum, ReactionView, ThreadSource, ThreadView, TokenList,
};
pub use schema::{Annotated, Feature, Label, ParentHow, ReactionKind, Veracity};
pub use store::{EmbeddingStore, StoreMeta, StoreWriter};
pub use train::batches::Batching;
pub use train::graph::GraphBatch;
pub use train::loader::{Batch, BatchMut, EmptyThreads, Loader, Pad, shuffle};
pub use train::outputs::{BatchSpec, OutputBuf, OutputMut};
pub use train::selection::{Kinds, Selection};
pub use train::splits::{ResolvedSplit, Split};
pub use train::stats::{FeatureStats, StatsSource};
pub use train::token_ids::{BagOfWords, TokenIdsMut};
pub use train::vocab::Vocabulary;

/// Internals for this repository's benchmarks, fuzz targets, tests and the
/// Python binding: the build's stages, the writer, the records a test
/// crafts, the store format's helpers, the directory swap. Not a stable
/// API; nothing else belongs here.
#[doc(hidden)]
pub mod internals {
    pub use crate::format::files::MANIFEST_FILE;
    pub use crate::format::footer;
    pub use crate::format::report::write_jsonl;
    pub use crate::format::{Shard, ThreadRecord};
    pub use crate::ingest::publish::swap_dir;
    pub use crate::ingest::writer::{CacheWriter, ThreadData, ThreadText, WriterOptions};
    pub use crate::ingest::{discover, features, layout, parents, parse};
    pub use crate::output::{Replacement, replace_file};
    pub use crate::store::format::{self as store_format, Dtype, npy_header};
}

/// The README's Rust examples, compiled as doctests so that they stay true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

/// GUIDE.md's Rust examples, compiled as doctests too.
#[cfg(doctest)]
#[doc = include_str!("../GUIDE.md")]
pub struct GuideDoctests;
