//! `manifest.json`: what a cache holds and how to check it.
//!
//! The manifest is small, human-readable JSON, written last and renamed into
//! place with the rest of the directory. It records no wall-clock time or
//! thread count, so the same corpus always gives a byte-identical cache.

use serde::{Deserialize, Serialize};

/// The manifest of a cache directory.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    /// Always [`FORMAT_NAME`](crate::format::FORMAT_NAME).
    pub format: String,
    /// [`FORMAT_VERSION`](crate::format::FORMAT_VERSION) of the writer.
    pub format_version: u32,
    /// The feature names, in storage order.
    pub feature_names: Vec<String>,
    /// Number of threads.
    pub threads: u64,
    /// Number of reactions (replies + retweets).
    pub reactions: u64,
    /// Number of replies.
    pub replies: u64,
    /// Number of retweets.
    pub retweets: u64,
    /// Number of lines in the bad-input report.
    pub skipped: u64,
    /// Options the cache was built with.
    pub options: BuildInfo,
    /// Shards, in source-id order.
    pub shards: Vec<ShardInfo>,
    /// The bad-input report file.
    pub report: FileInfo,
    /// Names of the extra per-reaction columns, in storage order.
    pub reaction_columns: Vec<String>,
    /// Names of the extra per-thread columns, in storage order.
    pub thread_columns: Vec<String>,
}

/// Build options that shape the cache's content.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct BuildInfo {
    /// Whether the build stopped at the first bad input (then the report is empty).
    pub strict: bool,
    /// Files larger than this were skipped.
    pub max_file_bytes: u64,
    /// The cap on one shard's archive.
    pub shard_bytes: u64,
}

/// One shard: its two files and what they hold.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct ShardInfo {
    /// The numbers file (`shard-*.rkyv`); its fields sit at the top level of
    /// the shard's JSON object.
    #[serde(flatten)]
    pub numbers: FileInfo,
    /// The text file (`text-*.rkyv`).
    pub text: FileInfo,
    /// Number of threads.
    pub threads: u64,
    /// Number of reactions.
    pub reactions: u64,
    /// Smallest source id in the shard.
    pub first_source_id: u64,
    /// Largest source id in the shard.
    pub last_source_id: u64,
}

/// One file of the cache: a shard's numbers or texts, or the report.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct FileInfo {
    /// File name inside the cache directory.
    pub file: String,
    /// Size in bytes.
    pub bytes: u64,
    /// xxh3-64 of the content (for an archive: without its footer), 16 hex digits.
    pub xxh3: String,
}

/// Formats a checksum the way the manifest stores it.
pub(crate) fn hex64(x: u64) -> String {
    format!("{x:016x}")
}
