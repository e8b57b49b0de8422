//! Stage 4: the on-disk feature cache.
//!
//! A cache is a directory:
//!
//! ```text
//! CACHE_DIR/
//!   manifest.json        format version, feature names, counts, build options,
//!                        one entry per shard (size, xxh3, id range), report checksum
//!   shard-00000.rkyv     rkyv archive of a [`Shard`] + a 32-byte footer
//!   shard-00001.rkyv     ...
//!   report.jsonl         the bad-input report of the build
//! ```
//!
//! Shards hold consecutive threads in source-id order and are capped in size
//! (64 MiB by default, far below rkyv's 2 GiB relative-pointer limit), so a
//! build writes each shard as soon as it is full and never holds the whole
//! cache in memory. Each shard file is the archive followed by a footer
//! (magic, format version, archive length, xxh3-64 of the archive), in the
//! manner of tantivy's segment footers: a reader checks the footer, the
//! checksum and rkyv's bytecheck once, then reads the memory map without
//! copying.
//!
//! The directory is built under a temporary name beside the target, synced,
//! and swapped in with one atomic rename ([`writer`]); a reader therefore
//! sees either the old cache or the new one, never a mixture.

pub mod manifest;
pub mod reader;
pub mod writer;

use rkyv::{Archive, Deserialize, Serialize};

use crate::features::FeatureVec;

pub use manifest::{Manifest, ShardInfo};
pub use reader::{Cache, LazyCache, ReactionView, ThreadView};
pub use writer::{CacheWriter, WriterOptions};

/// Version of the cache format this library writes and reads.
pub const FORMAT_VERSION: u32 = 1;

/// The `format` string of a manifest.
pub const FORMAT_NAME: &str = "socialctx-feature-cache";

/// Magic bytes at the start of every shard footer.
pub const SHARD_MAGIC: [u8; 8] = *b"SCTXSHRD";

/// Size of the footer that ends every shard file.
pub const FOOTER_LEN: usize = 32;

/// Manifest file name inside a cache directory.
pub const MANIFEST_FILE: &str = "manifest.json";

/// Report file name inside a cache directory.
pub const REPORT_FILE: &str = "report.jsonl";

/// Default cap on a shard's archive size.
pub const DEFAULT_SHARD_BYTES: usize = 64 * 1024 * 1024;

/// Label code of a thread in the `rumours` folder.
pub const LABEL_RUMOUR: i8 = 1;
/// Label code of a thread in the `non-rumours` folder.
pub const LABEL_NON_RUMOUR: i8 = 0;
/// Label code of a thread in any other folder.
pub const LABEL_UNKNOWN: i8 = -1;

/// The label code for a parent folder name.
///
/// ```
/// use socialctx::cache::{label_code, LABEL_RUMOUR, LABEL_UNKNOWN};
/// assert_eq!(label_code("rumours"), LABEL_RUMOUR);
/// assert_eq!(label_code("ferguson"), LABEL_UNKNOWN);
/// ```
pub fn label_code(label: &str) -> i8 {
    match label {
        "rumours" => LABEL_RUMOUR,
        "non-rumours" => LABEL_NON_RUMOUR,
        _ => LABEL_UNKNOWN,
    }
}

/// One shard: consecutive threads and, in parallel arrays, their reactions
/// and features.
#[derive(Archive, Serialize, Deserialize, Debug, Default, Clone, PartialEq)]
pub struct Shard {
    /// Threads in strictly ascending source-id order.
    pub threads: Vec<ThreadRecord>,
    /// Reactions of all threads, thread after thread; within a thread in
    /// `(created_at, id)` order.
    pub reactions: Vec<ReactionRecord>,
    /// `features[i]` belongs to `reactions[i]`, so one thread's features are
    /// one contiguous slice.
    pub features: Vec<FeatureVec>,
    /// Extra per-reaction columns (aligned with `reactions`), named in the
    /// manifest. Empty in format version 1; room for structural features.
    pub reaction_columns: Vec<Vec<f32>>,
    /// Extra per-thread columns (aligned with `threads`), named in the
    /// manifest. Empty in format version 1; room for veracity labels.
    pub thread_columns: Vec<Vec<f32>>,
}

/// Per-thread metadata.
#[derive(Archive, Serialize, Deserialize, Debug, Default, Clone, PartialEq)]
pub struct ThreadRecord {
    /// Source tweet id (the thread directory's name).
    pub source_id: u64,
    /// Event: the grandparent directory's name.
    pub event: String,
    /// Label folder: the parent directory's name.
    pub label: String,
    /// [`label_code`] of `label`.
    pub label_code: i8,
    /// Source tweet `created_at`, seconds since the epoch.
    pub source_created_at: i64,
    /// Source tweet `user.id_str`.
    pub source_user_id: String,
    /// Source tweet text (`text`, else `full_text`).
    pub source_text: String,
    /// Index of the thread's first reaction in the shard.
    pub first_reaction: u32,
    /// Number of reactions (replies and retweets).
    pub reaction_count: u32,
}

/// Per-reaction data (its features live in [`Shard::features`]).
#[derive(Archive, Serialize, Deserialize, Debug, Default, Clone, PartialEq)]
pub struct ReactionRecord {
    /// Tweet id.
    pub id: u64,
    /// [`ReactionKind`](crate::discover::ReactionKind) as a byte: 0 reply, 1 retweet.
    pub kind: u8,
    /// `created_at`, seconds since the epoch (Python `int(dt.timestamp())`).
    pub created_at: i64,
    /// Reaction text (`full_text`, else `text`).
    pub text: String,
    /// Author's description (None when null).
    pub user_description: Option<String>,
}

/// One thread as the pipeline hands it to the writer.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct ThreadData {
    /// Metadata; `first_reaction` and `reaction_count` are set by the writer.
    pub record: ThreadRecord,
    /// Reactions in `(created_at, id)` order.
    pub reactions: Vec<ReactionRecord>,
    /// Features of each reaction, same order.
    pub features: Vec<FeatureVec>,
}

impl ThreadData {
    /// A rough upper bound of the archived size, used to cap shards.
    pub fn estimated_bytes(&self) -> usize {
        let r = &self.record;
        let thread =
            64 + r.event.len() + r.label.len() + r.source_user_id.len() + r.source_text.len();
        let reactions: usize = self
            .reactions
            .iter()
            .map(|x| 48 + x.text.len() + x.user_description.as_ref().map_or(0, String::len))
            .sum();
        thread + reactions + self.features.len() * std::mem::size_of::<FeatureVec>()
    }
}
