//! What a batch holds besides the reactions' features, mask, lengths,
//! source ids and labels: per embedding store, each row slot's row in the
//! store (and, dense, the row itself), and each row slot's token ids
//! through a [`Vocabulary`]. A [`BatchSpec`] names them once; a
//! [`Loader`](crate::Loader) given it ([`Loader::outputs`](crate::Loader::outputs))
//! fills all of them in one call, into the caller's buffers.
//!
//! ```no_run
//! use std::sync::Arc;
//! use socialctx::{BatchSpec, Cache, EmbeddingStore, Kinds, Loader, Selection};
//! use socialctx::{TextField, Vocabulary};
//! let cache = Cache::open("target/socialctx-cache")?;
//! let vocab = Vocabulary::count(&cache, TextField::Reply, Kinds::Replies, None, 1, Some(5000))?;
//! let spec = BatchSpec::new()
//!     .embeddings(&cache, vec![EmbeddingStore::open(&cache, "minilm")?], true)?
//!     .token_ids(Arc::new(vocab), 40);
//! let loader = Loader::new(&cache, Selection::default()).outputs(&spec);
//! let mut batch = loader.new_batch(32);
//! loader.fill(&(0..32).collect::<Vec<_>>(), &mut batch)?;
//! // batch.embeddings[0].index: [32 * 200] i32, batch.token_ids: [32 * 200 * 40] i32
//! # Ok::<(), socialctx::Error>(())
//! ```

use std::sync::Arc;

use super::loader::BatchMut;
use super::token_ids::TokenIdsMut;
use super::vocab::Vocabulary;
use crate::error::LoadError;
use crate::read::ThreadSource;
use crate::store::EmbeddingStore;

type Result<T, E = LoadError> = std::result::Result<T, E>;

/// The outputs a [`Loader`](crate::Loader) fills besides features, mask,
/// lengths, source ids and labels. Made once (it maps each thread to its
/// first reaction for the stores' index), then borrowed by every fill.
#[derive(Debug, Default)]
pub struct BatchSpec {
    stores: Vec<EmbeddingStore>,
    /// Per thread, its first reaction in cache order (the stores' index).
    offsets: Vec<u64>,
    /// The content id of the cache `offsets` are of (with stores): a
    /// Loader over another content would gather other reactions' rows.
    content: u64,
    dense: bool,
    token_ids: Option<(Arc<Vocabulary>, usize)>,
}

/// A spec with no output beyond the features (a Loader without one).
pub(super) static NO_OUTPUTS: BatchSpec = BatchSpec {
    stores: Vec::new(),
    offsets: Vec::new(),
    content: 0,
    dense: false,
    token_ids: None,
};

impl BatchSpec {
    /// Features, mask, lengths, source ids and labels only.
    pub fn new() -> Self {
        Self::default()
    }

    /// Per store (opened on `cache`), each row slot's row in it
    /// ([`EmbeddingMut::index`]) and, with `dense`, the row's values
    /// ([`EmbeddingMut::rows`], or `half_rows` for a float16 store).
    /// A store of another cache content is refused
    /// ([`LoadError::OtherContent`]), and so is the spec at the fill of a
    /// [`Loader`](crate::Loader) over another content: the stores' index is
    /// addressed by this cache's reaction order.
    pub fn embeddings<C: ThreadSource + ?Sized>(
        mut self,
        cache: &C,
        stores: Vec<EmbeddingStore>,
        dense: bool,
    ) -> Result<Self> {
        let content = cache.content_id();
        if let Some(store) = stores.iter().find(|s| s.meta().cache_content_id != content) {
            return Err(LoadError::OtherContent {
                what: format!("embedding store {}", store.dir().display()),
                expected: content,
                found: store.meta().cache_content_id.clone(),
            });
        }
        self.content = cache.core().content_id();
        self.offsets = if stores.is_empty() {
            Vec::new()
        } else {
            cache.reaction_offsets()?
        };
        self.stores = stores;
        self.dense = dense;
        Ok(self)
    }

    /// Each row slot's reaction's tokens through `vocab`, at most
    /// `max_tokens` (at least 1) per slot (see [`Vocabulary::token_ids`]).
    pub fn token_ids(mut self, vocab: Arc<Vocabulary>, max_tokens: usize) -> Self {
        self.token_ids = Some((vocab, max_tokens));
        self
    }

    /// The embedding stores, in output order.
    pub fn stores(&self) -> &[EmbeddingStore] {
        &self.stores
    }

    /// Whether the stores' rows are copied into the batch too.
    pub fn dense(&self) -> bool {
        self.dense && !self.stores.is_empty()
    }

    /// The vocabulary token ids go through, and the tokens kept per slot.
    pub fn vocabulary(&self) -> Option<(&Vocabulary, usize)> {
        self.token_ids.as_ref().map(|(v, l)| (&**v, *l))
    }

    /// Whether the fill must record each slot's reaction (stores or token ids).
    pub(super) fn needs_reactions(&self) -> bool {
        !self.stores.is_empty() || self.token_ids.is_some()
    }

    /// Checks that `out` has a buffer of the right size for every output
    /// (and none for an output the spec lacks), before anything is written.
    pub(super) fn check<C: ThreadSource + ?Sized>(
        &self,
        cache: &C,
        out: &mut BatchMut<'_>,
    ) -> Result<()> {
        let now = cache.core().content_id();
        if !self.stores.is_empty() && now != self.content {
            return Err(LoadError::OtherContent {
                what: "a BatchSpec's embedding stores".to_owned(),
                expected: format!("{now:016x}"),
                found: format!("{:016x}", self.content),
            });
        }
        let slots = out.batch_size() * out.max_cxt();
        let size = |buffer, expected, found| {
            if expected == found {
                Ok(())
            } else {
                Err(LoadError::BufferSize {
                    buffer,
                    expected,
                    found,
                })
            }
        };
        if self.needs_reactions() {
            size("reactions", slots, out.reactions_len())?;
        }
        let outs = out.stores_mut();
        size("embedding stores", self.stores.len(), outs.count())?;
        for (i, store) in self.stores.iter().enumerate() {
            let o = outs.store(i);
            size("embedding index", slots, o.index.len())?;
            let n = if self.dense { slots * store.dim() } else { 0 };
            let rows = o.rows.as_ref().map_or(0, |r| r.len());
            let half = o.half_rows.as_ref().map_or(0, |r| r.len());
            if store.is_half() {
                size("embedding rows (none for a float16 store)", 0, rows)?;
                size("embedding half_rows", n, half)?;
            } else {
                size("embedding rows", n, rows)?;
                size("embedding half_rows (none for a float32 store)", 0, half)?;
            }
        }
        let tokens = self.token_ids.as_ref().map_or(0, |(_, l)| slots * l);
        size("token ids", tokens, out.token_ids_len())
    }

    /// Fills the embedding and token-id outputs of the slots the loader
    /// just filled (`width` per thread, reactions recorded in `out`).
    pub(super) fn fill<C: ThreadSource + ?Sized>(
        &self,
        cache: &C,
        positions: &[usize],
        out: &mut BatchMut<'_>,
    ) -> Result<()> {
        if !self.needs_reactions() {
            return Ok(());
        }
        let width = out.width();
        let slots = out.batch_size() * width;
        let reuse = out.reuses_width(width);
        let (reactions, outs, token_ids) = out.outputs_mut();
        let reactions = &reactions[..slots];
        for (i, store) in self.stores.iter().enumerate() {
            let mut o = outs.store(i);
            let dim = store.dim();
            let index = store.index();
            let (mut seg, mut half_seg) = (None, None);
            for (slot, &r) in reactions.iter().enumerate() {
                let row = slot_row(index, &self.offsets, positions, width, slot, r);
                // A slot that was padding in the last fill of this width
                // holds zeros already: a `[B, max_cxt]` batch, mostly
                // padding, costs only its real rows.
                if !(reuse && row < 0 && o.index[slot] == -1) {
                    let at = slot * dim..(slot + 1) * dim;
                    if let Some(d) = o.rows.as_deref_mut() {
                        store.copy_row(row, &mut seg, &mut d[at.clone()]);
                    }
                    if let Some(d) = o.half_rows.as_deref_mut() {
                        store.copy_row(row, &mut half_seg, &mut d[at]);
                    }
                }
                o.index[slot] = row;
            }
        }
        if let (Some((vocab, max_tokens)), Some(ids)) = (&self.token_ids, token_ids) {
            let mut ids = TokenIdsMut::new(*max_tokens, &mut ids[..slots * max_tokens])?;
            vocab.token_ids(cache, positions, reactions, width, &mut ids)?;
        }
        Ok(())
    }
}

/// The global row in a store (`index`, `offsets` as [`BatchSpec`] keeps
/// them) of row slot `slot` of a batch `width` slots wide, filled by
/// reaction `r` of its thread; -1 for none.
fn slot_row(
    index: &[u32],
    offsets: &[u64],
    positions: &[usize],
    width: usize,
    slot: usize,
    r: u32,
) -> i32 {
    if width == 0 || r == BatchMut::NO_REACTION {
        return -1;
    }
    positions
        .get(slot / width)
        .and_then(|&p| offsets.get(p))
        .and_then(|&first| index.get((first + u64::from(r)) as usize))
        .filter(|&&row| row != EmbeddingStore::NO_ROW)
        .map_or(-1, |&row| row as i32)
}

impl EmbeddingStore {
    /// For the row slots of a batch (`positions`' threads, `width` slots
    /// each, `reactions` as [`BatchMut::with_reactions`](crate::BatchMut::with_reactions)
    /// recorded them), each slot's global row in this store, or -1 for none.
    /// `offsets[p]` is thread `p`'s first reaction in cache order
    /// ([`reaction_offsets`](crate::ThreadSource::reaction_offsets)). Slots of threads
    /// past `positions` get -1. (A [`BatchSpec`] does this, and the gather,
    /// in the loader's fill.)
    pub fn rows_of_slots(
        &self,
        offsets: &[u64],
        positions: &[usize],
        reactions: &[u32],
        width: usize,
        out: &mut [i32],
    ) {
        let index = self.index();
        for (slot, (o, &r)) in out.iter_mut().zip(reactions).enumerate() {
            *o = slot_row(index, offsets, positions, width, slot, r);
        }
    }
}

/// One store's outputs in caller buffers, `batch_size * max_cxt` slots.
#[derive(Debug)]
pub struct EmbeddingMut<'a> {
    /// `[slots]`: each slot's global row in the store, -1 for none.
    pub index: &'a mut [i32],
    /// `[slots * dim]` float32, with a dense [`BatchSpec`] and a float32 store.
    pub rows: Option<&'a mut [f32]>,
    /// `[slots * dim]` float16 bits, with a dense [`BatchSpec`] and a float16 store.
    pub half_rows: Option<&'a mut [u16]>,
}

/// One store's outputs, owned by a [`Batch`](crate::Batch). The next fill
/// relies on what the last one wrote (a row slot that stays padding is not
/// zeroed again): treat them as read-only.
#[derive(Clone, Debug, PartialEq)]
pub struct EmbeddingBuf {
    /// `[batch_size * max_cxt]`: each slot's global row (the first
    /// `batch_size * width` hold the last fill), -1 for none.
    pub index: Vec<i32>,
    /// `[batch_size * max_cxt * dim]` with a dense spec and a float32 store; empty otherwise.
    pub rows: Vec<f32>,
    /// `[batch_size * max_cxt * dim]` with a dense spec and a float16 store; empty otherwise.
    pub half_rows: Vec<u16>,
}

impl EmbeddingBuf {
    /// Zeroed buffers for `slots` slots of `store`.
    pub(super) fn new(store: &EmbeddingStore, slots: usize, dense: bool) -> Self {
        let n = if dense { slots * store.dim() } else { 0 };
        let half = store.is_half();
        EmbeddingBuf {
            index: vec![0; slots],
            rows: vec![0.0; if half { 0 } else { n }],
            half_rows: vec![0; if half { n } else { 0 }],
        }
    }
}

/// The stores' outputs a [`BatchMut`] writes: caller buffers, or a
/// [`Batch`](crate::Batch)'s own.
#[derive(Debug, Default)]
pub(super) enum Stores<'a> {
    #[default]
    None,
    Borrowed(&'a mut [EmbeddingMut<'a>]),
    Owned(&'a mut [EmbeddingBuf]),
}

impl Stores<'_> {
    pub(super) fn count(&self) -> usize {
        match self {
            Stores::None => 0,
            Stores::Borrowed(s) => s.len(),
            Stores::Owned(s) => s.len(),
        }
    }

    pub(super) fn store(&mut self, i: usize) -> EmbeddingMut<'_> {
        match self {
            Stores::None => unreachable!("no store outputs (checked against the spec)"),
            Stores::Borrowed(s) => {
                let e = &mut s[i];
                EmbeddingMut {
                    index: e.index,
                    rows: e.rows.as_deref_mut(),
                    half_rows: e.half_rows.as_deref_mut(),
                }
            }
            Stores::Owned(s) => {
                let e = &mut s[i];
                EmbeddingMut {
                    index: &mut e.index,
                    rows: (!e.rows.is_empty()).then_some(&mut e.rows[..]),
                    half_rows: (!e.half_rows.is_empty()).then_some(&mut e.half_rows[..]),
                }
            }
        }
    }
}
