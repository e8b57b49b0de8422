//! The distinct texts to embed, with their counts, straight from the cache.
//!
//! RPDNN embeds every reply and every author description one at a time, in
//! every epoch. Most of that work repeats: an author's description repeats
//! on each of their reactions, and short replies repeat across threads.
//! [`UniqueTexts`] finds the distinct non-empty inputs of one [`TextField`]
//! once, so an embedding model runs once per input, and maps every reaction
//! to its input (or to none: a retweet, a `[]` reply, no description).
//!
//! Inputs are told apart by their content key (xxh3-128 of the stored
//! tokens, what an embedding store reuses rows by), which the build stored
//! beside each reaction's numbers ([`InputKeys`](crate::format::InputKeys)):
//! collecting reads the numbers, not the texts, which on a PHEME-sized
//! cache made it 2.5x faster (41 to 16 ms in `embed`, first use of the
//! shards included). Only where a key repeats are texts read, to confirm
//! that the two inputs are equal.
//!
//! Memory is bounded by the number of distinct inputs, never by the texts:
//! what is kept is 32 bytes per distinct input plus 4 per reaction (and 12
//! per repeat, until it is confirmed).
//!
//! ```no_run
//! use socialctx::{Cache, TextField, UniqueTexts};
//! let cache = Cache::open("target/socialctx-cache")?;
//! let unique = UniqueTexts::collect(&cache, TextField::Reply, None)?;
//! for i in 0..unique.len() {
//!     let tokens = unique.tokens(&cache, i)?;
//!     println!("{} x {:?}", unique.count(i), tokens);
//! }
//! # Ok::<(), socialctx::Error>(())
//! ```

use std::collections::HashMap;
use std::collections::hash_map::Entry as MapEntry;
use std::hash::{BuildHasherDefault, Hasher};

use rayon::prelude::*;

use super::{ReactionView, ThreadSource, TokenList};
use crate::error::LoadError;
use crate::format::ArchivedInputKeys;

/// Which text of a reaction to embed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TextField {
    /// The reply's RPDNN tokens ([`ReactionView::reply_tokens`]); retweets
    /// and `[]` replies have none.
    Reply,
    /// The author's description split on `' '`
    /// ([`ReactionView::description_tokens`]); none without a description.
    Description,
}

impl TextField {
    /// `"reply"` or `"description"`.
    pub fn as_str(self) -> &'static str {
        match self {
            TextField::Reply => "reply",
            TextField::Description => "description",
        }
    }

    /// The field's non-empty token list of `r`, if it has one.
    pub fn tokens_of<'a>(self, r: &ReactionView<'a>) -> Option<TokenList<'a>> {
        let tokens = match self {
            TextField::Reply => r.reply_tokens(),
            TextField::Description => r.description_tokens(),
        }?;
        (!tokens.is_empty()).then_some(tokens)
    }

    /// The field's input key and token count in a reaction's stored keys.
    fn key_of(self, k: &ArchivedInputKeys) -> Option<(u128, u32)> {
        match self {
            TextField::Reply => k.reply(),
            TextField::Description => k.description(),
        }
    }
}

impl std::str::FromStr for TextField {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "reply" => Ok(TextField::Reply),
            "description" => Ok(TextField::Description),
            other => Err(format!(
                "text field must be \"reply\" or \"description\", not {other:?}"
            )),
        }
    }
}

/// One distinct input: where it first occurs, how often, how many tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Entry {
    /// Content key: xxh3-128 of the tokens as stored.
    key: u128,
    /// Thread position and reaction index of its first occurrence.
    thread: u32,
    reaction: u32,
    count: u32,
    tokens: u32,
}

/// The distinct non-empty inputs of one [`TextField`] over a set of
/// threads, ordered by token count (then first occurrence) so that batches
/// of consecutive inputs pad little, with a per-reaction index into them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UniqueTexts {
    field: TextField,
    entries: Vec<Entry>,
    /// Per reaction of the threads, in thread then reaction order.
    index: Vec<u32>,
    /// Per thread: its first reaction in `index`.
    offsets: Vec<u64>,
    positions: Vec<usize>,
}

impl UniqueTexts {
    /// `index` value of a reaction with no input (its row embeds to zeros):
    /// the embedding store's [`NO_ROW`](crate::EmbeddingStore::NO_ROW).
    pub const NONE: u32 = crate::schema::NO_ROW;

    /// Finds the distinct inputs of `field` over the threads at `positions`
    /// (all threads when `None`), in that order.
    pub fn collect<C: ThreadSource + Sync + ?Sized>(
        cache: &C,
        field: TextField,
        positions: Option<&[usize]>,
    ) -> Result<Self, LoadError> {
        let positions: Vec<usize> = match positions {
            Some(p) => p.to_vec(),
            None => (0..cache.len()).collect(),
        };
        // Each reaction's input key and token count were stored by the
        // build beside its numbers: collecting reads no text. The numbers
        // are looked up on all cores (which validates the shards in
        // parallel on first use); the numbering, in first-occurrence
        // order, is sequential.
        let threads: Vec<&[ArchivedInputKeys]> = positions
            .par_iter()
            .map(|&pos| {
                let t = cache
                    .numbers(pos)?
                    .ok_or(LoadError::NoSuchThread { position: pos })?;
                Ok(t.input_keys())
            })
            .collect::<Result<_, LoadError>>()?;
        let reactions = threads.iter().map(|t| t.len()).sum();
        // Keyed by the content key (already a uniform hash: see KeyHasher).
        let mut seen: HashMap<u128, u32, KeyHash> =
            HashMap::with_capacity_and_hasher(reactions, KeyHash::default());
        let mut entries = Vec::new();
        let mut index = Vec::with_capacity(reactions);
        let mut offsets = Vec::with_capacity(positions.len() + 1);
        // Every later occurrence of a key, to be confirmed against the
        // first one's text below.
        let mut repeats: Vec<(u32, u32, u32)> = Vec::new();
        for (&pos, keys) in positions.iter().zip(&threads) {
            offsets.push(index.len() as u64);
            for (i, k) in keys.iter().enumerate() {
                let Some((key, tokens)) = field.key_of(k) else {
                    index.push(Self::NONE);
                    continue;
                };
                let id = match seen.entry(key) {
                    MapEntry::Occupied(e) => {
                        let id = *e.get();
                        repeats.push((id, pos as u32, i as u32));
                        id
                    }
                    MapEntry::Vacant(e) => {
                        let id = entries.len() as u32;
                        e.insert(id);
                        entries.push(Entry {
                            key,
                            thread: pos as u32,
                            reaction: i as u32,
                            count: 0,
                            tokens,
                        });
                        id
                    }
                };
                entries[id as usize].count += 1;
                index.push(id);
            }
        }
        offsets.push(index.len() as u64);
        drop(seen);
        // Two inputs sharing a key (odds about 2^-128 per pair) are an
        // error, never one input silently embedded for the other: every
        // repeat's text must equal its first occurrence's.
        repeats.par_iter().try_for_each(|&(id, pos, i)| {
            let e = &entries[id as usize];
            let first = text_at(cache, field, e.thread as usize, e.reaction as usize)?;
            if text_at(cache, field, pos as usize, i as usize)? != first {
                return Err(LoadError::KeyCollision { key: e.key });
            }
            Ok(())
        })?;
        // Renumber by (token count, first occurrence).
        let mut order: Vec<u32> = (0..entries.len() as u32).collect();
        order.sort_by_key(|&i| entries[i as usize].tokens);
        let mut rank = vec![0u32; entries.len()];
        for (new, &old) in order.iter().enumerate() {
            rank[old as usize] = new as u32;
        }
        for id in &mut index {
            if *id != Self::NONE {
                *id = rank[*id as usize];
            }
        }
        let entries = order.iter().map(|&i| entries[i as usize]).collect();
        Ok(UniqueTexts {
            field,
            entries,
            index,
            offsets,
            positions,
        })
    }

    /// The field.
    pub fn field(&self) -> TextField {
        self.field
    }
    /// Number of distinct inputs.
    pub fn len(&self) -> usize {
        self.entries.len()
    }
    /// No input at all.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
    /// Reactions whose input is input `i`.
    pub fn count(&self, i: usize) -> u32 {
        self.entries[i].count
    }
    /// Number of tokens of input `i` (non-decreasing in `i`).
    pub fn token_count(&self, i: usize) -> u32 {
        self.entries[i].tokens
    }
    /// The tokens of input `i`, read from `cache` (the one collected from).
    pub fn tokens<'c, C: ThreadSource + ?Sized>(
        &self,
        cache: &'c C,
        i: usize,
    ) -> Result<TokenList<'c>, LoadError> {
        let e = self.entries[i];
        tokens_at(cache, self.field, e.thread as usize, e.reaction as usize)
    }
    /// The content key of input `i`: xxh3-128 of its tokens as stored
    /// (joined by the field's separator). Equal inputs have equal keys in
    /// any cache, which is what lets an embedding store reuse the rows of
    /// inputs it has already embedded after a rebuild.
    pub fn key(&self, i: usize) -> u128 {
        self.entries[i].key
    }
    /// Per input, the position of its key in `keys` (the content keys of
    /// another collection, e.g. a previous embedding store's rows), or
    /// `None` for an input `keys` does not have. Where `keys` holds a key
    /// twice, the first position is taken.
    pub fn positions_in(&self, keys: &[u128]) -> Vec<Option<u32>> {
        let mut at: HashMap<u128, u32, KeyHash> =
            HashMap::with_capacity_and_hasher(keys.len(), KeyHash::default());
        for (i, &k) in keys.iter().enumerate() {
            at.entry(k).or_insert(i as u32);
        }
        self.entries
            .iter()
            .map(|e| at.get(&e.key).copied())
            .collect()
    }
    /// Per reaction of the threads (thread order, then the thread's
    /// reaction order): its input, or [`NONE`](Self::NONE).
    pub fn index(&self) -> &[u32] {
        &self.index
    }
    /// Per thread, the start of its reactions in [`index`](Self::index);
    /// one more entry than threads (the last is the total).
    pub fn offsets(&self) -> &[u64] {
        &self.offsets
    }
    /// The thread positions, in order.
    pub fn positions(&self) -> &[usize] {
        &self.positions
    }
}

/// The `field` tokens of reaction `reaction` of the thread at `position`.
fn tokens_at<C: ThreadSource + ?Sized>(
    cache: &C,
    field: TextField,
    position: usize,
    reaction: usize,
) -> Result<TokenList<'_>, LoadError> {
    let t = cache
        .thread(position)?
        .ok_or(LoadError::NoSuchThread { position })?;
    t.reaction(reaction)
        .and_then(|r| field.tokens_of(&r))
        .ok_or(LoadError::OtherCache { position })
}

fn text_at<C: ThreadSource + ?Sized>(
    cache: &C,
    field: TextField,
    position: usize,
    reaction: usize,
) -> Result<&str, LoadError> {
    tokens_at(cache, field, position, reaction).map(|t| t.joined())
}

/// A content key is already a uniform 128-bit hash: its low half serves as
/// the map's hash as it is (SipHash over the key again bought nothing).
#[derive(Default)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // Only u128 keys are hashed (write_u128); anything else folds in.
        for chunk in bytes.chunks(8) {
            let mut b = [0u8; 8];
            b[..chunk.len()].copy_from_slice(chunk);
            self.0 =
                (self.0.rotate_left(5) ^ u64::from_le_bytes(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u128(&mut self, k: u128) {
        self.0 = k as u64;
    }
}

type KeyHash = BuildHasherDefault<KeyHasher>;
