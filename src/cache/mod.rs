//! Stage 4: the on-disk feature cache.
//!
//! A cache is a directory:
//!
//! ```text
//! CACHE_DIR/
//!   manifest.json        format version, feature names, counts, build options,
//!                        one entry per shard (size, xxh3, id range), report checksum
//!   shard-00000.rkyv     rkyv archive of a [`Shard`] (numbers and features) + a 32-byte footer
//!   text-00000.rkyv      rkyv archive of its [`TextShard`] (texts) + a 32-byte footer
//!   shard-00001.rkyv     ...
//!   report.jsonl         the bad-input report of the build
//! ```
//!
//! Shards hold consecutive threads in source-id order and are capped in size
//! (16 MiB by default, far below rkyv's 2 GiB relative-pointer limit), so a
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
pub use reader::{Cache, LazyCache, NumView, ReactionNum, ReactionView, ThreadView};
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
pub const DEFAULT_SHARD_BYTES: usize = 16 * 1024 * 1024;

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

/// One shard's numbers: consecutive threads and, in parallel arrays, their
/// reactions and features. Everything here is fixed-size, so validating it is
/// little more than a checksum: this is all a training loop reads.
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
    /// Extra per-reaction columns (each aligned with `reactions`), named in
    /// the manifest's `reaction_columns`: the extended features, or none.
    pub reaction_columns: Vec<Vec<f32>>,
    /// Extra per-thread columns (each aligned with `threads`), named in the
    /// manifest's `thread_columns`: the extended labels, or none.
    pub thread_columns: Vec<Vec<f32>>,
}

/// One shard's texts, aligned with its [`Shard`]: kept in a separate file so
/// that training, which needs only numbers, never validates or pages them in.
///
/// All texts live back to back in one `arena` string and are addressed by
/// [`Span`]s, so a shard holds three objects instead of two strings per
/// reaction: nothing is allocated per reaction to build it, and validating
/// it is one UTF-8 check plus bounds checks.
#[derive(Archive, Serialize, Deserialize, Debug, Default, Clone, PartialEq)]
pub struct TextShard {
    /// Every text of the shard, back to back.
    pub arena: String,
    /// Per thread (aligned with `Shard::threads`): event, label, source user
    /// id and source text.
    pub threads: Vec<[Span; 4]>,
    /// Per reaction (aligned with `Shard::reactions`): text and the author's
    /// description ([`Span::NONE`] when null).
    pub reactions: Vec<[Span; 2]>,
}

/// A byte range of [`TextShard::arena`].
#[derive(Archive, Serialize, Deserialize, Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    /// First byte.
    pub start: u32,
    /// Length in bytes.
    pub len: u32,
}

impl Span {
    /// Marks a missing (null) text.
    pub const NONE: Span = Span {
        start: u32::MAX,
        len: 0,
    };

    /// Appends `text` to `arena` and returns its span.
    pub fn push(arena: &mut String, text: &str) -> Span {
        let start = arena.len() as u32;
        arena.push_str(text);
        Span {
            start,
            len: text.len() as u32,
        }
    }

    /// This span moved `by` bytes later (NONE stays NONE).
    pub fn shifted(self, by: u32) -> Span {
        if self == Span::NONE {
            self
        } else {
            Span {
                start: self.start + by,
                len: self.len,
            }
        }
    }
}

/// Per-thread numbers.
#[derive(Archive, Serialize, Deserialize, Debug, Default, Clone, Copy, PartialEq)]
pub struct ThreadRecord {
    /// Source tweet id (the thread directory's name).
    pub source_id: u64,
    /// Source tweet `created_at`, seconds since the epoch.
    pub source_created_at: i64,
    /// Index of the thread's first reaction in the shard.
    pub first_reaction: u32,
    /// Number of reactions (replies and retweets).
    pub reaction_count: u32,
    /// [`label_code`] of the label folder.
    pub label_code: i8,
}

/// Per-thread texts, as the pipeline hands them to the writer.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct ThreadText {
    /// Event: the grandparent directory's name.
    pub event: String,
    /// Label folder: the parent directory's name.
    pub label: String,
    /// Source tweet `user.id_str`.
    pub source_user_id: String,
    /// Source tweet text (`text`, else `full_text`).
    pub source_text: String,
}

/// Per-reaction numbers (its features live in [`Shard::features`]).
#[derive(Archive, Serialize, Deserialize, Debug, Default, Clone, Copy, PartialEq)]
pub struct ReactionRecord {
    /// Tweet id.
    pub id: u64,
    /// `created_at`, seconds since the epoch (Python `int(dt.timestamp())`).
    pub created_at: i64,
    /// [`ReactionKind`](crate::discover::ReactionKind) as a byte: 0 reply, 1 retweet.
    pub kind: u8,
}

/// One thread as the pipeline hands it to the writer.
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadData {
    /// Numbers; `first_reaction` and `reaction_count` are set by the writer.
    pub record: ThreadRecord,
    /// Texts.
    pub text: ThreadText,
    /// Reactions in `(created_at, id)` order.
    pub reactions: Vec<ReactionRecord>,
    /// The reactions' texts and descriptions, back to back.
    pub text_arena: String,
    /// Per reaction, same order: text and description spans in `text_arena`.
    pub reaction_texts: Vec<[Span; 2]>,
    /// Their features, same order.
    pub features: Vec<FeatureVec>,
    /// Extended per-reaction values, same order, in
    /// [`REACTION_COLUMNS`](crate::features::REACTION_COLUMNS) order (NaN =
    /// unknown); empty when the build has no extended features.
    pub reaction_extra: Vec<[f32; REACTION_EXTRA]>,
    /// Extended per-thread values in [`THREAD_COLUMNS`](crate::features::THREAD_COLUMNS) order.
    pub thread_extra: [f32; THREAD_EXTRA],
}

/// Number of extended per-reaction columns.
pub const REACTION_EXTRA: usize = crate::features::REACTION_COLUMNS.len();
/// Number of extended per-thread columns.
pub const THREAD_EXTRA: usize = crate::features::THREAD_COLUMNS.len();

impl ThreadData {
    /// A rough upper bound of the archived size (both files), used to cap shards.
    pub fn estimated_bytes(&self) -> usize {
        let t = &self.text;
        let thread =
            96 + t.event.len() + t.label.len() + t.source_user_id.len() + t.source_text.len();
        let texts = self.text_arena.len() + self.reaction_texts.len() * 16;
        thread
            + texts
            + self.reactions.len() * (24 + std::mem::size_of::<FeatureVec>())
            + self.reaction_extra.len() * REACTION_EXTRA * 4
    }
}
