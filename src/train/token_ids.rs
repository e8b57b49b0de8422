//! A [`Vocabulary`]'s indices for the batches the [`Loader`](crate::Loader)
//! fills: token ids per row slot (`[B, T, L]`, for models that embed each
//! reaction's tokens) and bags of words per graph node (CSR, BiGCN's input).
//!
//! Both read the tokens of the field the vocabulary was counted on
//! ([`Vocabulary::field`]) straight from the memory map; each token is
//! looked up in the vocabulary's table (built once, when it was counted)
//! by a borrowed `&str`, so filling allocates nothing per token. Indices are
//! AllenNLP's: [`Vocabulary::PADDING_ID`] (0) pads, [`Vocabulary::UNKNOWN_ID`] (1) stands for every
//! token the vocabulary does not hold, known tokens are 2 and up.
//!
//! ```no_run
//! use socialctx::{BagOfWords, BatchMut, Cache, GraphBatch, Kinds, Loader};
//! use socialctx::{Selection, TextField, TokenIdsMut, Vocabulary};
//! let cache = Cache::open("target/socialctx-cache")?;
//! let vocab = Vocabulary::count(&cache, TextField::Reply, Kinds::Replies, None, 1, Some(5000))?;
//! let loader = Loader::new(&cache, Selection::default());
//! let (b, t, l) = (32, 200, 40);
//! let (mut f, mut m) = (vec![0f32; b * t * 28], vec![0u8; b * t]);
//! let (mut len, mut ids, mut y) = (vec![0u32; b], vec![0u64; b], vec![0i8; b]);
//! let mut reactions = vec![BatchMut::NO_REACTION; b * t];
//! let positions: Vec<usize> = (0..b).collect();
//! let mut out =
//!     BatchMut::new(t, &mut f, &mut m, &mut len, &mut ids, &mut y)?.with_reactions(&mut reactions)?;
//! loader.fill_into(&positions, None, &mut out)?;
//! let width = out.width();
//! let mut token_ids = vec![0i32; b * t * l]; // [B, T, L]
//! let mut token_lengths = vec![0u32; b * t]; // [B, T]
//! let mut slots = TokenIdsMut::new(l, &mut token_ids)?.with_lengths(&mut token_lengths)?;
//! vocab.token_ids(&cache, &positions, &reactions[..b * width], width, &mut slots)?;
//!
//! let mut graphs = GraphBatch::default();
//! loader.fill_graph(&positions, None, &mut graphs)?;
//! let mut bow = BagOfWords::default();
//! vocab.bag_of_words(&cache, &graphs, true, &mut bow)?;
//! # Ok::<(), socialctx::Error>(())
//! ```

use super::graph::GraphBatch;
use super::loader::BatchMut;
use super::vocab::Vocabulary;
use crate::error::LoadError;
use crate::read::{ThreadSource, ThreadView};

type Result<T, E = LoadError> = std::result::Result<T, E>;

/// Caller-owned buffers for [`Vocabulary::token_ids`]: `ids` `[slots, L]`
/// (`L` = `max_tokens`) and, optionally, `lengths` `[slots]`, row-major.
#[derive(Debug)]
pub struct TokenIdsMut<'a> {
    max_tokens: usize,
    ids: &'a mut [i32],
    lengths: Option<&'a mut [u32]>,
}

impl<'a> TokenIdsMut<'a> {
    /// `ids` for `ids.len() / max_tokens` row slots of at most `max_tokens`
    /// tokens each. Fails with [`LoadError::BufferSize`] when `max_tokens`
    /// is 0 or does not divide `ids.len()`.
    pub fn new(max_tokens: usize, ids: &'a mut [i32]) -> Result<Self> {
        if max_tokens == 0 || !ids.len().is_multiple_of(max_tokens) {
            return Err(LoadError::BufferSize {
                buffer: "token ids",
                expected: ids.len().next_multiple_of(max_tokens.max(1)),
                found: ids.len(),
            });
        }
        Ok(TokenIdsMut {
            max_tokens,
            ids,
            lengths: None,
        })
    }

    /// Also records each slot's number of tokens (at most `max_tokens`; 0
    /// for padding and for a reaction without the field's tokens).
    /// `lengths` holds one value per slot of `ids`.
    pub fn with_lengths(mut self, lengths: &'a mut [u32]) -> Result<Self> {
        let slots = self.slots();
        if lengths.len() != slots {
            return Err(LoadError::BufferSize {
                buffer: "token lengths",
                expected: slots,
                found: lengths.len(),
            });
        }
        self.lengths = Some(lengths);
        Ok(self)
    }

    /// Tokens per slot at most (`L`).
    pub fn max_tokens(&self) -> usize {
        self.max_tokens
    }

    /// Row slots the buffers hold.
    pub fn slots(&self) -> usize {
        self.ids.len() / self.max_tokens
    }
}

/// Bags of words per node of a [`GraphBatch`], in CSR form: node `n`'s
/// token ids are `indices[indptr[n]..indptr[n + 1]]`, ascending, each with
/// its number of occurrences in `counts` at the same place. The vectors are
/// reused by every [`Vocabulary::bag_of_words`].
///
/// Types, for PyTorch: `indptr` and `indices` are int64 (what
/// `torch.sparse_csr_tensor` and PyG index with; both must have one type);
/// `counts` are float32, the values a sparse-dense product takes as they
/// are (`torch.sparse.mm`, BiGCN's first layer), exact for any count below
/// 2^24. The matrix is `[num_nodes, vocabulary.len() + 2]`: columns 0
/// (padding) and, unless asked for, 1 (unknown) are empty.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BagOfWords {
    /// `[num_nodes + 1]`: where each node's entries start, then the total.
    pub indptr: Vec<i64>,
    /// `[nnz]`: token ids, ascending within each node.
    pub indices: Vec<i64>,
    /// `[nnz]`: occurrences of each token in its node's text.
    pub counts: Vec<f32>,
    /// One node's ids being counted (reused).
    scratch: Vec<u32>,
}

impl BagOfWords {
    /// Number of nodes (rows).
    pub fn num_nodes(&self) -> usize {
        self.indptr.len().saturating_sub(1)
    }

    /// Number of stored entries.
    pub fn nnz(&self) -> usize {
        self.indices.len()
    }
}

impl Vocabulary {
    /// The token id of `token` as the buffers hold it (an index of a
    /// vocabulary counted in memory is far below `i32::MAX`).
    fn id_of(&self, token: &str) -> i32 {
        self.index(token) as i32
    }

    /// Fills `out` with the token ids of the row slots of a batch the
    /// [`Loader`](crate::Loader) filled with
    /// [`BatchMut::with_reactions`](crate::BatchMut::with_reactions):
    /// `reactions` is that buffer's used prefix, `[B * width]` (slot
    /// `b * width + t`, the batch's [`width`](crate::BatchMut::width),
    /// [`BatchMut::NO_REACTION`] for padding), and `positions` the threads the batch
    /// was filled with (at most `B`).
    ///
    /// Slot `s` gets the tokens of [`field`](Self::field) of the reaction
    /// filling it, as indices ([`index`](Self::index): [`Vocabulary::UNKNOWN_ID`] for
    /// a token not held), the first `max_tokens` of them, then
    /// [`Vocabulary::PADDING_ID`] to `max_tokens`: `ids[s * max_tokens + k]`. Padding
    /// slots, empty-thread rows, retweets' replies and descriptions of
    /// authors without one are all padding (length 0). The first
    /// `reactions.len()` slots of `out` are written, the rest not touched.
    ///
    /// Errors: [`LoadError::BufferSize`] when `reactions` is not whole
    /// rows of `width` or `out` holds fewer slots;
    /// [`LoadError::BatchTooSmall`] for more positions than rows;
    /// [`LoadError::OtherCache`] for a slot naming a reaction its thread
    /// does not have (the batch was filled from another cache).
    pub fn token_ids<C: ThreadSource + ?Sized>(
        &self,
        cache: &C,
        positions: &[usize],
        reactions: &[u32],
        width: usize,
        out: &mut TokenIdsMut<'_>,
    ) -> Result<()> {
        if width == 0 {
            return match reactions.len() {
                0 => Ok(()),
                found => Err(LoadError::BufferSize {
                    buffer: "reactions",
                    expected: 0,
                    found,
                }),
            };
        }
        if !reactions.len().is_multiple_of(width) {
            return Err(LoadError::BufferSize {
                buffer: "reactions",
                expected: reactions.len().next_multiple_of(width),
                found: reactions.len(),
            });
        }
        let rows = reactions.len() / width;
        if positions.len() > rows {
            return Err(LoadError::BatchTooSmall {
                needed: positions.len(),
                capacity: rows,
            });
        }
        let l = out.max_tokens;
        if out.slots() < reactions.len() {
            return Err(LoadError::BufferSize {
                buffer: "token ids",
                expected: reactions.len() * l,
                found: out.ids.len(),
            });
        }
        let ids = out.ids[..reactions.len() * l].chunks_exact_mut(width * l);
        for (b, (slots, ids)) in reactions.chunks_exact(width).zip(ids).enumerate() {
            let lengths = (out.lengths.as_deref_mut()).map(|n| &mut n[b * width..(b + 1) * width]);
            let texts = || {
                let &pos = positions.get(b).ok_or(LoadError::BufferSize {
                    buffer: "positions",
                    expected: b + 1,
                    found: positions.len(),
                })?;
                Ok((pos, texts(cache, pos)?))
            };
            self.thread_token_ids(texts, slots, ids, lengths)?;
        }
        Ok(())
    }

    /// The token ids of one thread's row slots (`slots`: each one's
    /// reaction), `ids` `[slots.len() * max_tokens]`, and their lengths;
    /// `texts` gives the thread's position and texts, called at its first
    /// real slot (not at all for a thread of padding).
    pub(crate) fn thread_token_ids<'c>(
        &self,
        texts: impl FnOnce() -> Result<(usize, ThreadView<'c>)>,
        slots: &[u32],
        ids: &mut [i32],
        mut lengths: Option<&mut [u32]>,
    ) -> Result<()> {
        let l = ids.len() / slots.len().max(1);
        if l == 0 {
            return Ok(());
        }
        let mut texts = Some(texts);
        let mut thread: Option<(usize, ThreadView<'_>)> = None;
        for (k, (&r, row)) in slots.iter().zip(ids.chunks_exact_mut(l)).enumerate() {
            let mut n = 0;
            if r != BatchMut::NO_REACTION {
                if thread.is_none()
                    && let Some(f) = texts.take()
                {
                    thread = Some(f()?);
                }
                if let Some((pos, t)) = thread {
                    let reaction = t
                        .reaction(r as usize)
                        .ok_or(LoadError::OtherCache { position: pos })?;
                    if let Some(tokens) = self.field().tokens_of(&reaction) {
                        for (dst, tok) in row.iter_mut().zip(tokens.iter()) {
                            *dst = self.id_of(tok);
                            n += 1;
                        }
                    }
                }
            }
            row[n..].fill(Vocabulary::PADDING_ID as i32);
            if let Some(lengths) = lengths.as_deref_mut() {
                lengths[k] = n as u32;
            }
        }
        Ok(())
    }

    /// Fills `out` with each node's bag of words over the field the
    /// vocabulary was counted on (see [`BagOfWords`]): a reaction node's
    /// tokens mapped through [`index`](Self::index) and counted, all of
    /// them (no cut at a length). Tokens the vocabulary does not hold count
    /// under [`Vocabulary::UNKNOWN_ID`] with `unknown`, and are left out without it
    /// (BiGCN counts only its top-5,000 words).
    ///
    /// **Root rows are empty:** the cache stores the source tweet's text
    /// but not its tokens (RPDNN tokenises replies only, and the tokenizer
    /// belongs to the build), so a root has no bag of words here. A model
    /// that wants the source's words adds them at the roots
    /// (`graphs.ptr[..B]`).
    ///
    /// `graphs` must come from `cache` ([`LoadError::OtherCache`] for a
    /// node naming a reaction its thread does not have).
    pub fn bag_of_words<C: ThreadSource + ?Sized>(
        &self,
        cache: &C,
        graphs: &GraphBatch,
        unknown: bool,
        out: &mut BagOfWords,
    ) -> Result<()> {
        out.indptr.clear();
        out.indices.clear();
        out.counts.clear();
        out.indptr.push(0);
        let mut ids = std::mem::take(&mut out.scratch);
        for (b, &pos) in graphs.positions.iter().enumerate() {
            let t = texts(cache, pos)?;
            let nodes = graphs.ptr[b] as usize..graphs.ptr[b + 1] as usize;
            for &r in &graphs.reactions[nodes] {
                ids.clear();
                if r != BatchMut::NO_REACTION {
                    let reaction = t
                        .reaction(r as usize)
                        .ok_or(LoadError::OtherCache { position: pos })?;
                    if let Some(tokens) = self.field().tokens_of(&reaction) {
                        ids.extend(
                            tokens
                                .iter()
                                .map(|tok| self.index(tok))
                                .filter(|&id| unknown || id != Vocabulary::UNKNOWN_ID),
                        );
                    }
                }
                ids.sort_unstable();
                for run in ids.chunk_by(|a, b| a == b) {
                    out.indices.push(i64::from(run[0]));
                    out.counts.push(run.len() as f32);
                }
                out.indptr.push(out.indices.len() as i64);
            }
        }
        out.scratch = ids;
        Ok(())
    }
}

fn texts<C: ThreadSource + ?Sized>(cache: &C, position: usize) -> Result<ThreadView<'_>> {
    cache
        .thread(position)?
        .ok_or(LoadError::NoSuchThread { position })
}
