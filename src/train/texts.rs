//! The distinct texts to embed, with their counts, straight from the cache.
//!
//! RPDNN embeds every reply and every author description one at a time, in
//! every epoch. Most of that work repeats: an author's description repeats
//! on each of their reactions, and short replies repeat across threads.
//! [`UniqueTexts`] finds the distinct non-empty inputs of one [`TextField`]
//! once, so an embedding model runs once per input, and maps every reaction
//! to its input (or to none: a retweet, a `[]` reply, no description).
//!
//! Memory is bounded by the number of distinct inputs, never by the texts:
//! the texts stay in the memory map (the set of seen inputs borrows them),
//! and what is kept is 16 bytes per distinct input plus 4 per reaction.
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

use crate::error::LoadError;
use crate::read::{ReactionView, ThreadSource, TokenList};

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
    /// the embedding store's [`NO_ROW`](crate::NO_ROW).
    pub const NONE: u32 = crate::format::embeddings::NO_ROW;

    /// Finds the distinct inputs of `field` over the threads at `positions`
    /// (all threads when `None`), in that order.
    pub fn collect<C: ThreadSource + ?Sized>(
        cache: &C,
        field: TextField,
        positions: Option<&[usize]>,
    ) -> Result<Self, LoadError> {
        let positions: Vec<usize> = match positions {
            Some(p) => p.to_vec(),
            None => (0..cache.len()).collect(),
        };
        let mut seen: HashMap<&str, u32> = HashMap::new();
        let mut entries = Vec::new();
        let mut index = Vec::new();
        let mut offsets = Vec::with_capacity(positions.len() + 1);
        for &pos in &positions {
            offsets.push(index.len() as u64);
            let t = cache
                .thread(pos)?
                .ok_or(LoadError::NoSuchThread { position: pos })?;
            for (i, r) in t.reactions().enumerate() {
                let Some(tokens) = field.tokens_of(&r) else {
                    index.push(Self::NONE);
                    continue;
                };
                let next = entries.len() as u32;
                let id = *seen.entry(tokens.joined()).or_insert(next);
                if id == next {
                    entries.push(Entry {
                        thread: pos as u32,
                        reaction: i as u32,
                        count: 0,
                        tokens: tokens.len() as u32,
                    });
                }
                entries[id as usize].count += 1;
                index.push(id);
            }
        }
        offsets.push(index.len() as u64);
        drop(seen);
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
        let position = e.thread as usize;
        let t = cache
            .thread(position)?
            .ok_or(LoadError::NoSuchThread { position })?;
        t.reaction(e.reaction as usize)
            .and_then(|r| self.field.tokens_of(&r))
            .ok_or(LoadError::OtherCache { position })
    }
    /// The content key of input `i`: xxh3-128 of its tokens as stored
    /// (joined by the field's separator). Equal inputs have equal keys in
    /// any cache, which is what lets an embedding store reuse the rows of
    /// inputs it has already embedded after a rebuild.
    pub fn key<C: ThreadSource + ?Sized>(&self, cache: &C, i: usize) -> Result<u128, LoadError> {
        Ok(xxhash_rust::xxh3::xxh3_128(
            self.tokens(cache, i)?.joined().as_bytes(),
        ))
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

/// Per thread position, its first reaction's index in cache order (threads
/// by position, reactions by time), plus the total at the end: what an
/// [`EmbeddingStore`](crate::EmbeddingStore)'s per-reaction index is
/// addressed by.
pub fn reaction_offsets<C: ThreadSource + ?Sized>(cache: &C) -> Result<Vec<u64>, LoadError> {
    let mut offsets = Vec::with_capacity(cache.len() + 1);
    let mut next = 0u64;
    for i in 0..cache.len() {
        offsets.push(next);
        let t = cache
            .numbers(i)?
            .ok_or(LoadError::NoSuchThread { position: i })?;
        next += t.reaction_count() as u64;
    }
    offsets.push(next);
    Ok(offsets)
}
