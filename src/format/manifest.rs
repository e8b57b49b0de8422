//! `manifest.json`: what a cache holds and how to check it.
//!
//! The manifest is small, human-readable JSON, written last and renamed into
//! place with the rest of the directory. It records no wall-clock time or
//! thread count, so the same corpus always gives a byte-identical cache.

use serde::{Deserialize, Serialize};
use xxhash_rust::xxh3::xxh3_64;

use crate::format::report::BadInput;

/// The manifest of a cache directory.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    /// Always `"socialctx-feature-cache"`.
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
    /// The definition digest of the code that computed the values
    /// ([`current_definition`](Self::current_definition) of the library
    /// that built it; empty in caches built before it was recorded): an
    /// incremental build reuses threads, and a merge takes partitions, only
    /// of its own definition.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub definition: String,
    /// For a partition cache ([`build_partition`](crate::build_partition)):
    /// which part of which plan it holds. Absent from every other cache
    /// (so their manifests are as before).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<PartitionInfo>,
    /// xxh3-64 of the manifest's bytes with this field empty, 16 hex
    /// digits ([`seal`](Self::seal)): every byte is checked, the build
    /// options (which no other check covers) included.
    pub checksum: String,
}

/// What a partition cache holds, written with its manifest (so it is
/// published with the cache, never left over from an earlier build):
/// which plan, which part of it, and the plan's threads it covers. A merge
/// checks these against each other, against the cache's threads and
/// against its checksum.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct PartitionInfo {
    /// The plan's id ([`Plan::id`](crate::Plan::id)).
    pub plan_id: String,
    /// This partition's number, `0..count`.
    pub index: u64,
    /// How many partitions the plan was cut into.
    pub count: u64,
    /// Threads in the whole plan.
    pub plan_threads: u64,
    /// The plan's threads this partition covers: positions
    /// `first_thread..end_thread` in the plan's source-id order.
    pub first_thread: u64,
    /// End (exclusive) of that range.
    pub end_thread: u64,
    /// Source id of the plan's thread at `first_thread` (0 for an empty range).
    pub first_source_id: u64,
    /// Source id of the plan's thread at `end_thread - 1` (0 for an empty range).
    pub last_source_id: u64,
    /// The plan's discovery report (the same in every partition).
    pub bad: Vec<BadInput>,
    /// A digest of the corpus inputs this partition's build found, checked
    /// against the plan (16 hex digits): a merge requires all partitions to
    /// have seen the same.
    pub inputs: String,
    /// Its threads per event and label (`[unknown, non-rumour, rumour]`,
    /// as `Tally::event_labels`), counted as they were written: the merge's
    /// summary, without reading the threads of the shards it links. Absent
    /// in an empty partition, and in those of versions before it (whose
    /// merge reads every thread).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub threads_by_event: std::collections::BTreeMap<String, [u64; 3]>,
    /// xxh3-64 of this record (with this field empty) and of what a merge
    /// takes from the manifest (the files' checksums, the counts, the
    /// options, the columns, the definition), 16 hex digits: an edit of
    /// any of them is detected.
    pub xxh3: String,
}

impl Manifest {
    /// The [`reaction_columns`](Self::reaction_columns) of an extended
    /// cache: the extra per-reaction columns, in storage order.
    pub const REACTION_COLUMNS: [&'static str; 6] = crate::schema::REACTION_COLUMNS;

    /// The [`thread_columns`](Self::thread_columns) of an extended cache:
    /// the extra per-thread columns, in storage order.
    pub const THREAD_COLUMNS: [&'static str; 2] = crate::schema::THREAD_COLUMNS;

    /// This library's definition digest (16 hex digits): a digest, made
    /// when the crate is compiled, of the sources that compute the values a
    /// cache stores (ARCHITECTURE.md lists them). Any change of them
    /// changes it; a build records it in [`definition`](Self::definition).
    pub fn current_definition() -> &'static str {
        crate::definition::definition()
    }

    /// The manifest's bytes as every writer writes them (pretty JSON, one
    /// final newline): readers accept these bytes and no others.
    pub fn to_bytes(&self) -> serde_json::Result<Vec<u8>> {
        let mut json = serde_json::to_vec_pretty(self)?;
        json.push(b'\n');
        Ok(json)
    }

    /// The checksum this manifest must carry: xxh3-64 of its bytes with
    /// [`checksum`](Self::checksum) empty.
    pub fn expected_checksum(&self) -> String {
        let mut unsealed = self.clone();
        unsealed.checksum.clear();
        let bytes = unsealed.to_bytes().unwrap_or_default();
        hex64(xxh3_64(&bytes))
    }

    /// Sets [`checksum`](Self::checksum) (after every other field is final).
    pub fn seal(&mut self) {
        self.checksum = self.expected_checksum();
    }

    /// The checksum a partition record of this manifest must carry (see
    /// `PartitionInfo::xxh3`); `None` when there is no partition record.
    pub fn partition_checksum(&self) -> Option<String> {
        let mut p = self.partition.clone()?;
        p.xxh3.clear();
        // Everything a merge takes from a partition's manifest rather than
        // its shards' bytes: it links shards it does not read.
        let covered = (
            (&p, &self.shards, &self.report, self.threads, self.reactions),
            (self.replies, self.retweets, &self.options),
            (
                &self.reaction_columns,
                &self.thread_columns,
                &self.definition,
            ),
        );
        let bytes = serde_json::to_vec(&covered).ok()?;
        Some(hex64(xxh3_64(&bytes)))
    }
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
