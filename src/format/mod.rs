//! The on-disk format, shared by the build half (which writes it) and the
//! read half (which checks and maps it); neither imports the other.
//!
//! A cache is a directory (file names: [`files`]):
//!
//! ```text
//! CACHE_DIR/
//!   manifest.json        format version, feature names, counts, build options,
//!                        one entry per shard (size, xxh3, id range), report checksum
//!   shard-00000.rkyv     rkyv archive of a [`Shard`] (numbers and features) + a 32-byte footer
//!   text-00000.rkyv      rkyv archive of its [`TextShard`] (texts, reply tokens) + a 32-byte footer
//!   shard-00001.rkyv     ...
//!   report.jsonl         the bad-input report of the build
//! ```
//!
//! Shards hold consecutive threads in source-id order and are capped in size
//! (16 MiB by default, far below rkyv's 2 GiB relative-pointer limit), so a
//! build writes each shard as soon as it is full and never holds the whole
//! cache in memory. Each archive file ends with a [`footer`] (magic, format
//! version, archive length, xxh3-64 of the archive), in the manner of
//! tantivy's segment footers: a reader checks the footer, the checksum and
//! rkyv's bytecheck once, then reads the memory map without copying.

pub mod files;
pub mod footer;
pub mod gather;
pub mod manifest;
pub mod report;

use rkyv::{Archive, Deserialize, Serialize};

use crate::schema::FeatureVec;

/// Version of the cache format this library writes and reads.
pub const FORMAT_VERSION: u32 = 5;

/// The `format` string of a manifest.
pub const FORMAT_NAME: &str = "socialctx-feature-cache";

/// Default cap on a shard's archive size.
pub const DEFAULT_SHARD_BYTES: usize = 16 * 1024 * 1024;

/// Largest archive a shard may hold: rkyv 0.8 uses 32-bit relative pointers.
pub const MAX_SHARD_BYTES: usize = 1 << 30;

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
    /// Per reaction (aligned with `reactions`): the content keys of its
    /// embedding inputs, so that finding a cache's distinct inputs (what an
    /// embedding store is keyed by) reads these numbers, not the texts.
    pub inputs: Vec<InputKeys>,
    /// Extra per-reaction columns (each aligned with `reactions`), named in
    /// the manifest's `reaction_columns`: the extended features, or none.
    pub reaction_columns: Vec<Vec<f32>>,
    /// Extra per-thread columns (each aligned with `threads`), named in the
    /// manifest's `thread_columns`: the extended labels, or none.
    pub thread_columns: Vec<Vec<f32>>,
}

/// A reaction's embedding inputs, identified by content: for each text
/// field, xxh3-128 of its tokens as stored (joined by the field's
/// separator: what the text shard holds) and the number of tokens, or
/// zeros where the reaction has no input of that field.
///
/// The writer computes them from the very texts it stores ([`InputKeys::of`]),
/// so every build path (fresh, incremental, partitioned, merged) writes
/// the same keys for the same texts.
#[derive(Archive, Serialize, Deserialize, Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct InputKeys {
    /// The reply tokens' key, low then high half.
    pub reply: [u64; 2],
    /// The description's key, low then high half.
    pub description: [u64; 2],
    /// Reply tokens; 0: no reply input (a retweet, a `[]` reply).
    pub reply_tokens: u32,
    /// Description tokens (`split(' ')`); 0: no description input.
    pub description_tokens: u32,
}

impl InputKeys {
    /// The keys of a reaction's inputs: `reply` is its reply-token string
    /// (`None` for [`Span::NONE`]), `description` its description when it
    /// is embedded (`has_description` = 1), else `None`.
    pub fn of(reply: Option<&str>, description: Option<&str>) -> InputKeys {
        let mut k = InputKeys::default();
        // An empty reply list is no input; a description always splits
        // into at least one token (Python's `''.split(' ')` is `['']`).
        if let Some(r) = reply.filter(|r| !r.is_empty()) {
            k.reply = split_key(content_key(r));
            k.reply_tokens = token_count(r, TOKEN_SEPARATOR);
        }
        if let Some(d) = description {
            k.description = split_key(content_key(d));
            k.description_tokens = token_count(d, ' ');
        }
        k
    }
}

impl ArchivedInputKeys {
    /// The reply input's key and token count, if the reaction has one.
    pub fn reply(&self) -> Option<(u128, u32)> {
        let tokens = self.reply_tokens.to_native();
        (tokens > 0).then(|| (join_key(&self.reply), tokens))
    }
    /// The description input's key and token count, if the reaction has one.
    pub fn description(&self) -> Option<(u128, u32)> {
        let tokens = self.description_tokens.to_native();
        (tokens > 0).then(|| (join_key(&self.description), tokens))
    }
}

/// The content key of an input: xxh3-128 of its tokens as stored.
fn content_key(joined: &str) -> u128 {
    xxhash_rust::xxh3::xxh3_128(joined.as_bytes())
}

/// Tokens in a string of tokens joined by the ASCII `sep` (at least one).
pub(crate) fn token_count(joined: &str, sep: char) -> u32 {
    // A byte count, which the compiler vectorises: 4x faster than
    // `str::matches(char)` on replies.
    let sep = sep as u8;
    joined.bytes().filter(|&b| b == sep).count() as u32 + 1
}

fn split_key(k: u128) -> [u64; 2] {
    [k as u64, (k >> 64) as u64]
}

fn join_key(k: &[rend::u64_le; 2]) -> u128 {
    u128::from(k[0].to_native()) | (u128::from(k[1].to_native()) << 64)
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
    /// Per thread (aligned with `Shard::threads`): its [`ThreadSpans`].
    pub threads: Vec<ThreadSpans>,
    /// Per reaction (aligned with `Shard::reactions`): its `ReactionSpans`
    /// (text, description, reply tokens).
    pub reactions: Vec<ReactionSpans>,
}

/// A thread's texts in [`TextShard::arena`]. Archived as `[Span; 4]` was
/// (rkyv lays out an archived struct `repr(C)`, fields in order, and `Span`
/// has no padding), so the bytes are those of format version 2.
#[derive(Archive, Serialize, Deserialize, Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ThreadSpans {
    /// Event (grandparent folder name).
    pub event: Span,
    /// Label folder name.
    pub label: Span,
    /// Source author's `id_str`.
    pub source_user_id: Span,
    /// Source tweet text.
    pub source_text: Span,
}

impl ArchivedThreadSpans {
    /// Every span, in storage order.
    pub fn all(&self) -> [&ArchivedSpan; 4] {
        [
            &self.event,
            &self.label,
            &self.source_user_id,
            &self.source_text,
        ]
    }
}

/// A reaction's texts in [`TextShard::arena`], indexed by [`TEXT`],
/// [`DESCRIPTION`] and [`REPLY_TOKENS`].
pub type ReactionSpans = [Span; 3];
/// [`ReactionSpans`] index of the reaction's text (`full_text`, else `text`:
/// what the features read).
pub const TEXT: usize = 0;
/// [`ReactionSpans`] index of the author's description ([`Span::NONE`] when null).
pub const DESCRIPTION: usize = 1;
/// [`ReactionSpans`] index of the reply's RPDNN tokens (`preprocessing_tweet_text`),
/// joined by [`TOKEN_SEPARATOR`]; empty when the reference gives `[]`;
/// [`Span::NONE`] for retweets and for replies whose `text` is not a string
/// (where the reference's text stage fails and skips the reaction).
pub const REPLY_TOKENS: usize = 2;
/// Joins the tokens of a [`REPLY_TOKENS`] span. No token can contain it: every
/// alternative of nltk's TweetTokenizer pattern excludes `\n` (it is `\s`).
pub const TOKEN_SEPARATOR: char = '\n';

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

impl ArchivedSpan {
    /// Whether this is [`Span::NONE`] (a null text).
    pub fn is_none(&self) -> bool {
        self.start.to_native() == Span::NONE.start && self.len.to_native() == Span::NONE.len
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
    /// [`Label`](crate::schema::Label) code of the label folder.
    pub label_code: i8,
}

/// Per-reaction numbers (its features live in [`Shard::features`]).
#[derive(Archive, Serialize, Deserialize, Debug, Default, Clone, Copy, PartialEq)]
pub struct ReactionRecord {
    /// Tweet id.
    pub id: u64,
    /// `created_at`, seconds since the epoch (Python `int(dt.timestamp())`).
    pub created_at: i64,
    /// The author: [`user_key`] of `user.id_str` (format 5; the features'
    /// keying, so it matches the source's `user_key(source_user_id)`).
    pub user_key: u64,
    /// The reaction's parent in the propagation tree (`FEATURES.md`): the
    /// position of an earlier reply of the same thread, or [`PARENT_SOURCE`].
    pub parent: u32,
    /// [`ReactionKind`](crate::schema::ReactionKind) as a byte: 0 reply, 1 retweet.
    pub kind: u8,
    /// [`ParentHow`](crate::schema::ParentHow) as a byte: how `parent` was found.
    pub parent_how: u8,
}

/// A numeric key for a user id string: the id itself when it is decimal
/// (so that it matches the ids in `who-follows-whom.dat`), else a hash with
/// the top bit set (never equal to a real id, which is below 2^63). Here
/// because both halves use it: the build stores reactions' authors by it,
/// the read side keys source authors (stored as `id_str`) the same way.
pub fn user_key(id_str: &str) -> u64 {
    let decimal = !id_str.is_empty() && id_str.bytes().all(|b| b.is_ascii_digit());
    decimal
        .then(|| id_str.parse().ok())
        .flatten()
        .unwrap_or_else(|| xxhash_rust::xxh3::xxh3_64(id_str.as_bytes()) | (1 << 63))
}

/// The parent of a reaction whose parent is the source tweet (see
/// [`ReactionView::parent`](crate::ReactionView::parent)).
pub const PARENT_SOURCE: u32 = u32::MAX;

#[cfg(test)]
mod tests {
    use super::user_key;

    /// Decimal ids below 2^64 are their number (leading zeros and all, as
    /// `who-follows-whom.dat` ids parse); anything else is a stable hash
    /// with the top bit set, distinct strings distinct keys.
    #[test]
    fn user_keys_are_the_id_or_a_marked_hash() {
        for (s, n) in [("0", 0), ("14138785", 14_138_785), ("007", 7)] {
            assert_eq!(user_key(s), n, "{s}");
        }
        assert_eq!(user_key(&u64::MAX.to_string()), u64::MAX);
        let odd = [
            "",
            "-1",
            "+1",
            " 1",
            "1 ",
            "1e3",
            "0x10",
            "abc",
            "\u{661}\u{662}",
            "18446744073709551616",
            "99999999999999999999999",
        ];
        let mut seen = std::collections::HashSet::new();
        for s in odd {
            let k = user_key(s);
            assert!(k >> 63 == 1, "{s:?}: {k:#x}");
            assert_eq!(user_key(s), k, "{s:?}: stable");
            assert!(seen.insert(k), "{s:?}: a key of its own");
        }
    }
}
