//! # socialctx
//!
//! Build once, memory-map forever: the 28 numerical social-context features
//! of RPDNN (rumour detection) for PHEME-style Twitter corpora, computed in
//! one parallel pass and stored in a zero-copy, memory-mapped cache.
//!
//! The stages, one module each:
//!
//! | module | stage |
//! |---|---|
//! | [`discover`] | find thread directories (parallel walk) |
//! | [`parse`] | read tweet files into borrowed fields (simd-json) |
//! | [`timestamp`], [`pytext`] | Python-exact timestamps and text classes |
//! | [`features`] | the 28 features: [`features::user`], [`features::tweet`], [`features::context`] |
//! | [`pipeline`] | worker pool and ordered writer |
//! | [`cache`] | shard writer, atomic publish, validated zero-copy reader |
//! | [`report`] | the bad-input report |
//! | [`dump`] | the oracle's JSON Lines format |
//! | [`loader`], [`stats`], [`splits`] | training-time batches, normalisation statistics, split files |
//!
//! ```no_run
//! use socialctx::{build, BuildOptions, Cache, NoProgress};
//! build("data-samples/corpus".as_ref(), "target/cache".as_ref(), &BuildOptions::default(), &NoProgress)?;
//! let cache = Cache::open("target/cache".as_ref())?;
//! let thread = cache.iter().next().unwrap();
//! let rows: &[[f32; 28]] = thread.features();
//! # Ok::<(), socialctx::Error>(())
//! ```

#![warn(missing_docs)]

pub mod cache;
pub mod discover;
pub mod dump;
pub mod error;
pub mod features;
pub mod loader;
pub mod parse;
pub mod pipeline;
pub mod pytext;
pub mod report;
pub mod splits;
pub mod stats;
pub mod timestamp;

pub use cache::Cache;
pub use error::{Error, Result};
pub use features::{FEATURE_NAMES, FeatureVec, NUM_FEATURES};
pub use pipeline::{BuildOptions, BuildSummary, NoProgress, Progress, build};
pub use report::BadInput;

/// The README's Rust examples, compiled as doctests so that they stay true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
