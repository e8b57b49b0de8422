//! Training-time batches: select, pad, mask and normalise from the cache.
//!
//! What RPDNN's training step needs from social context is, per batch of
//! source tweets, a padded `[batch, max_cxt, 28]` tensor of the reactions'
//! features in time order, standardised, with a mask. [`Loader::fill`] writes
//! exactly that into caller-owned buffers ([`Batch`]) straight from the
//! memory-mapped cache: no parsing, no allocation per batch.
//!
//! Selection per thread, applied at load time (no rebuild):
//! 1. context kinds: replies only (the reference's default), retweets only,
//!    or both;
//! 2. an optional time window: keep reactions with
//!    `source_time <= reaction_time <= source_time + window` (whole seconds,
//!    as stored);
//! 3. the earliest `max_cxt` of what remains, in `(created_at, id)` order.
//!
//! **Differs from the reference on purpose:** the reference cuts the
//! directory listing at `max_cxt` files *before* sorting by time, which keeps
//! an arbitrary, file-system-dependent subset for threads longer than
//! `max_cxt`. We cut *after* sorting, so a thread always contributes its
//! earliest `max_cxt` reactions. For threads of at most `max_cxt` reactions
//! (almost all of PHEME) the two agree.
//!
//! ```no_run
//! use socialctx::{LazyCache, ThreadSource};
//! use socialctx::{Batch, Loader, Selection};
//! let cache = LazyCache::open("target/socialctx-cache")?;
//! let loader = Loader::new(&cache, Selection::default());
//! let mut batch = Batch::new(128, 200);
//! let positions: Vec<usize> = (0..cache.len().min(128)).collect();
//! loader.fill(&positions, &mut batch)?;
//! // batch.features: [128 * 200 * 28] f32, batch.mask: [128 * 200] u8, batch.lengths: [128]
//! # Ok::<(), socialctx::Error>(())
//! ```

use super::outputs::{BatchSpec, NO_OUTPUTS, OutputBuf, OutputMut, Outputs};
use super::selection::Selection;
use super::stats::{FeatureStats, Normalizer};
use crate::error::LoadError;
use crate::read::ThreadSource;
use crate::schema::NUM_FEATURES;

type Result<T, E = LoadError> = std::result::Result<T, E>;

/// What a thread with no selected reaction contributes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum EmptyThreads {
    /// One all-zero row with mask 1 and length 1: what the reference feeds the model.
    #[default]
    ZeroRow,
    /// No row: mask all 0, length 0.
    Masked,
}

/// Caller-owned output buffers for one batch, reused across batches.
#[derive(Clone, Debug, PartialEq)]
pub struct Batch {
    /// Capacity in threads.
    pub batch_size: usize,
    /// Rows per thread the buffers hold (the capacity).
    pub max_cxt: usize,
    /// Number of threads filled by the last [`Loader::fill`] (≤ `batch_size`).
    pub len: usize,
    /// Rows per thread of the last fill: `max_cxt` with [`Pad::Max`], the
    /// batch's longest selection rounded up with [`Pad::Longest`].
    pub width: usize,
    /// `features[(b * width + t) * 28 + f]`, zero-padded: the first
    /// `batch_size * width * 28` values hold the batch.
    pub features: Vec<f32>,
    /// `mask[b * width + t]`: 1 for a real row, 0 for padding.
    pub mask: Vec<u8>,
    /// Number of real rows of each thread.
    pub lengths: Vec<u32>,
    /// Source id of each thread.
    pub source_ids: Vec<u64>,
    /// Label of each thread: the cache's [`Label`](crate::Label) code, or
    /// the one passed to [`Loader::fill_labeled`] (e.g. a split's).
    pub labels: Vec<i8>,
    /// With a [`BatchSpec`] of outputs ([`Loader::new_batch`]):
    /// `[batch_size * max_cxt]`, each slot's reaction
    /// ([`BatchMut::with_reactions`]); empty otherwise.
    pub reactions: Vec<u32>,
    /// The [`BatchSpec`]'s outputs, in its order ([`BatchSpec::buffers`]):
    /// per store its index (and dense rows), the token ids...; find one
    /// by name with [`output`](Self::output).
    pub outputs: Vec<OutputBuf>,
}

impl Batch {
    /// Buffers for `batch_size` threads of `max_cxt` rows.
    pub fn new(batch_size: usize, max_cxt: usize) -> Self {
        Batch {
            batch_size,
            max_cxt,
            len: 0,
            width: max_cxt,
            features: vec![0.0; batch_size * max_cxt * NUM_FEATURES],
            mask: vec![0; batch_size * max_cxt],
            lengths: vec![0; batch_size],
            source_ids: vec![0; batch_size],
            labels: vec![0; batch_size],
            reactions: Vec::new(),
            outputs: Vec::new(),
        }
    }

    /// Buffers for `batch_size` threads of `max_cxt` rows and every
    /// output of `spec`.
    pub fn for_spec(batch_size: usize, max_cxt: usize, spec: &BatchSpec) -> Self {
        let mut batch = Batch::new(batch_size, max_cxt);
        let slots = batch_size * max_cxt;
        if spec.needs_reactions() {
            batch.reactions = vec![BatchMut::NO_REACTION; slots];
        }
        batch.outputs = spec.buffers(slots);
        batch
    }

    /// Output `name` (of key `key`: an embedding store's name), if the
    /// batch has it.
    pub fn output(&self, name: &str, key: Option<&str>) -> Option<&OutputBuf> {
        super::outputs::find(&self.outputs, name, key)
    }

    /// The buffers as a [`BatchMut`], for [`Loader::fill_into`].
    /// Its outputs are included when it has them ([`for_spec`](Self::for_spec)).
    pub fn as_mut(&mut self) -> BatchMut<'_> {
        BatchMut {
            max_cxt: self.max_cxt,
            width: self.width,
            features: &mut self.features,
            mask: &mut self.mask,
            lengths: &mut self.lengths,
            source_ids: &mut self.source_ids,
            labels: &mut self.labels,
            reactions: (!self.reactions.is_empty()).then_some(&mut self.reactions[..]),
            outputs: if self.outputs.is_empty() {
                Outputs::None
            } else {
                Outputs::Owned(&mut self.outputs)
            },
            previous_width: Some(self.width),
        }
    }

    /// The rows of thread `b` of the last fill, `[width][28]`.
    pub fn thread_rows(&self, b: usize) -> &[f32] {
        let n = self.width * NUM_FEATURES;
        &self.features[b * n..(b + 1) * n]
    }

    /// The mask of thread `b` of the last fill, `[width]`.
    pub fn thread_mask(&self, b: usize) -> &[u8] {
        &self.mask[b * self.width..(b + 1) * self.width]
    }
}

/// One batch's output buffers, owned by the caller: a [`Batch`]'s vectors,
/// NumPy arrays, or any other memory. [`Loader::fill_into`] writes straight
/// into them, so no batch is ever copied.
///
/// ```
/// # let mut storage = (vec![0f32; 2 * 3 * 28], vec![0u8; 6], vec![0u32; 2], vec![0u64; 2], vec![0i8; 2]);
/// let (f, m, l, s, y) = &mut storage;
/// let out = socialctx::BatchMut::new(3, f, m, l, s, y).unwrap();
/// assert_eq!(out.batch_size(), 2);
/// ```
#[derive(Debug)]
pub struct BatchMut<'a> {
    max_cxt: usize,
    width: usize,
    features: &'a mut [f32],
    mask: &'a mut [u8],
    lengths: &'a mut [u32],
    source_ids: &'a mut [u64],
    labels: &'a mut [i8],
    reactions: Option<&'a mut [u32]>,
    outputs: Outputs<'a>,
    /// The width of the fill the buffers hold (see [`BatchMut::reusing`]).
    previous_width: Option<usize>,
}

impl<'a> BatchMut<'a> {
    /// [`with_reactions`](Self::with_reactions)' value for a row slot no
    /// reaction fills (padding, an empty thread's row; a graph's root).
    pub const NO_REACTION: u32 = u32::MAX;

    /// Buffers for `lengths.len()` threads of `max_cxt` rows:
    /// `features` `[batch][max_cxt][28]`, `mask` `[batch][max_cxt]`, and
    /// `lengths`, `source_ids`, `labels` `[batch]`, all row-major. Fails with
    /// [`LoadError::BufferSize`] naming the buffer whose length does not fit.
    pub fn new(
        max_cxt: usize,
        features: &'a mut [f32],
        mask: &'a mut [u8],
        lengths: &'a mut [u32],
        source_ids: &'a mut [u64],
        labels: &'a mut [i8],
    ) -> Result<Self> {
        let b = lengths.len();
        let check = |buffer: &'static str, found: usize, expected: Option<usize>| match expected {
            Some(expected) if expected == found => Ok(()),
            expected => Err(LoadError::BufferSize {
                buffer,
                expected: expected.unwrap_or(usize::MAX),
                found,
            }),
        };
        let rows = b.checked_mul(max_cxt);
        check(
            "features",
            features.len(),
            rows.and_then(|r| r.checked_mul(NUM_FEATURES)),
        )?;
        check("mask", mask.len(), rows)?;
        check("source_ids", source_ids.len(), Some(b))?;
        check("labels", labels.len(), Some(b))?;
        Ok(BatchMut {
            max_cxt,
            width: max_cxt,
            features,
            mask,
            lengths,
            source_ids,
            labels,
            reactions: None,
            outputs: Outputs::None,
            previous_width: None,
        })
    }

    /// Also records, per row slot `b * width + t`, which reaction of its
    /// thread fills it (its index in the thread's time order), and
    /// [`NO_REACTION`](Self::NO_REACTION) for padding and empty-thread rows: what an
    /// [`EmbeddingStore`](crate::EmbeddingStore)'s rows are looked up by.
    /// `reactions` holds `batch_size * max_cxt` values.
    pub fn with_reactions(mut self, reactions: &'a mut [u32]) -> Result<Self> {
        let expected = self.lengths.len() * self.max_cxt;
        if reactions.len() != expected {
            return Err(LoadError::BufferSize {
                buffer: "reactions",
                expected,
                found: reactions.len(),
            });
        }
        self.reactions = Some(reactions);
        Ok(self)
    }

    /// The buffers of the loader's [`BatchSpec`] outputs, one per buffer
    /// of [`BatchSpec::buffers`] in its order, each of its type and
    /// `batch_size * max_cxt` slots (checked at the fill).
    pub fn with_outputs(mut self, outputs: &'a mut [OutputMut<'a>]) -> Self {
        self.outputs = Outputs::Borrowed(outputs);
        self
    }

    /// Says that the buffers hold the last fill, `width` rows per thread,
    /// as the loader left it: a dense store row that was padding then and
    /// is again is left as it is (zeros) instead of rewritten.
    pub fn reusing(mut self, width: usize) -> Self {
        self.previous_width = Some(width);
        self
    }

    pub(super) fn reuses_width(&self, width: usize) -> bool {
        self.previous_width == Some(width)
    }

    pub(super) fn reactions_len(&self) -> usize {
        self.reactions.as_deref().map_or(0, <[u32]>::len)
    }

    pub(super) fn outputs_mut(&mut self) -> &mut Outputs<'a> {
        &mut self.outputs
    }

    /// Capacity in threads.
    pub fn batch_size(&self) -> usize {
        self.lengths.len()
    }

    /// Rows per thread the buffers hold.
    pub fn max_cxt(&self) -> usize {
        self.max_cxt
    }

    /// Rows per thread of the last fill (the layout's stride).
    pub fn width(&self) -> usize {
        self.width
    }
}

/// How many rows per thread a batch has.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Pad {
    /// Every batch is `[batch_size, max_cxt]`: for models sized by
    /// `max_cxt` (RPDNN's attention).
    #[default]
    Max,
    /// The batch's longest selection, rounded up to a multiple of
    /// `multiple` (at most the buffers' `max_cxt`, at least one row).
    Longest {
        /// Round the width up to a multiple of this (8 suits tensor cores).
        multiple: usize,
    },
}

/// Assembles batches from a cache.
pub struct Loader<'c, C: ThreadSource + ?Sized> {
    cache: &'c C,
    selection: Selection,
    normalizer: Option<Normalizer>,
    empty: EmptyThreads,
    pad: Pad,
    spec: &'c BatchSpec,
}

impl<C: ThreadSource + ?Sized> std::fmt::Debug for Loader<'_, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Loader")
            .field("threads", &self.cache.len())
            .field("selection", &self.selection)
            .field("normalized", &self.normalizer.is_some())
            .field("empty", &self.empty)
            .field("pad", &self.pad)
            .field("outputs", &self.spec)
            .finish()
    }
}

impl<'c, C: ThreadSource + ?Sized> Loader<'c, C> {
    /// A loader with no normalisation and the reference's empty-thread row.
    pub fn new(cache: &'c C, selection: Selection) -> Self {
        Loader {
            cache,
            selection,
            normalizer: None,
            empty: EmptyThreads::ZeroRow,
            pad: Pad::Max,
            spec: &NO_OUTPUTS,
        }
    }

    /// Fill `spec`'s outputs too (embedding rows, token ids...) in every
    /// fill: the buffers must have them ([`new_batch`](Self::new_batch),
    /// or [`BatchMut::with_outputs`]).
    pub fn outputs(mut self, spec: &'c BatchSpec) -> Self {
        self.spec = spec;
        self
    }

    /// Buffers for `batch_size` threads of the selection's `max_cxt` rows
    /// and every output of the loader's [`BatchSpec`].
    pub fn new_batch(&self, batch_size: usize) -> Batch {
        Batch::for_spec(batch_size, self.selection.max_cxt, self.spec)
    }

    /// How wide each batch is (default [`Pad::Max`]).
    pub fn pad(mut self, pad: Pad) -> Self {
        self.pad = pad;
        self
    }

    /// Standardise features with these statistics.
    pub fn normalize(mut self, stats: &FeatureStats) -> Self {
        self.normalizer = Some(Normalizer::new(stats));
        self
    }

    /// What threads with no selected reaction contribute.
    pub fn empty_threads(mut self, empty: EmptyThreads) -> Self {
        self.empty = empty;
        self
    }

    /// The selection in use.
    pub fn selection(&self) -> &Selection {
        &self.selection
    }

    /// Fills `out` with the threads at `positions` (at most `out.batch_size`),
    /// labelled with the cache's label codes.
    ///
    /// Rows beyond a thread's length, and threads beyond `positions.len()`,
    /// are zeroed. `out.max_cxt` must be at least the selection's `max_cxt`
    /// would need; extra reactions are cut at `out.max_cxt`.
    pub fn fill(&self, positions: &[usize], out: &mut Batch) -> Result<()> {
        let mut view = out.as_mut();
        self.fill_into(positions, None, &mut view)?;
        out.width = view.width;
        out.len = positions.len();
        Ok(())
    }

    /// As [`fill`](Self::fill), with `labels[b]` as thread `b`'s label
    /// (e.g. [`ResolvedSplit::labels`](crate::ResolvedSplit::labels)).
    pub fn fill_labeled(&self, positions: &[usize], labels: &[i8], out: &mut Batch) -> Result<()> {
        let mut view = out.as_mut();
        self.fill_into(positions, Some(labels), &mut view)?;
        out.width = view.width;
        out.len = positions.len();
        Ok(())
    }

    /// Fills caller-owned buffers with the threads at `positions`: the
    /// zero-copy path for NumPy arrays or C memory. `labels`, when given,
    /// must hold one label per position; otherwise each thread gets the
    /// cache's label code. Every thread slot beyond `positions.len()` is
    /// zeroed, so the buffers hold exactly this batch whatever they held
    /// before.
    ///
    /// The batch is laid out contiguously with [`out.width()`](BatchMut::width)
    /// rows per thread (the [`Pad`] policy's): `features[(b * width + t) * 28 + f]`,
    /// `mask[b * width + t]`; values past `batch_size * width` rows are not
    /// touched. With [`Pad::Max`] the width is the buffers' `max_cxt`.
    pub fn fill_into(
        &self,
        positions: &[usize],
        labels: Option<&[i8]>,
        out: &mut BatchMut<'_>,
    ) -> Result<()> {
        if positions.len() > out.batch_size() {
            return Err(LoadError::BatchTooSmall {
                needed: positions.len(),
                capacity: out.batch_size(),
            });
        }
        if let Some(labels) = labels
            && labels.len() != positions.len()
        {
            return Err(LoadError::BufferSize {
                buffer: "labels argument",
                expected: positions.len(),
                found: labels.len(),
            });
        }
        self.spec.check(self.cache, out)?;
        let sel = Selection {
            max_cxt: out.max_cxt.min(self.selection.max_cxt),
            ..self.selection
        };
        let width = match self.pad {
            Pad::Max => out.max_cxt,
            Pad::Longest { multiple } => {
                let mut longest = 0;
                for &pos in positions {
                    longest = longest.max(self.rows_of(pos, &sel)?);
                }
                longest
                    .max(1)
                    .next_multiple_of(multiple.max(1))
                    .min(out.max_cxt)
            }
        };
        out.width = width;
        let stride = width * NUM_FEATURES;
        let reuse = out.reuses_width(width);
        let spec = self.spec;
        for (b, &pos) in positions.iter().enumerate() {
            let t = self.thread(pos)?;
            let rows = t.features();
            let dst = &mut out.features[b * stride..(b + 1) * stride];
            let mask = &mut out.mask[b * width..(b + 1) * width];
            let mut picked = out
                .reactions
                .as_deref_mut()
                .map(|r| &mut r[b * width..(b + 1) * width]);
            let mut n = 0;
            for i in sel.indices(&t) {
                let row = &mut dst[n * NUM_FEATURES..(n + 1) * NUM_FEATURES];
                match &self.normalizer {
                    None => row.copy_from_slice(&rows[i]),
                    Some(norm) => {
                        for (f, (d, x)) in row.iter_mut().zip(&rows[i]).enumerate() {
                            *d = norm.apply(f, *x);
                        }
                    }
                }
                if let Some(p) = picked.as_deref_mut() {
                    p[n] = i as u32;
                }
                n += 1;
            }
            if let Some(p) = picked {
                p[n..].fill(BatchMut::NO_REACTION);
            }
            let mut len = n;
            if n == 0 && self.empty == EmptyThreads::ZeroRow && width > 0 {
                dst[..NUM_FEATURES].fill(0.0);
                len = 1;
            }
            dst[len * NUM_FEATURES..].fill(0.0);
            mask[..len].fill(1);
            mask[len..].fill(0);
            out.lengths[b] = len as u32;
            out.source_ids[b] = t.source_id();
            out.labels[b] = labels.map_or(t.label_code(), |l| l[b]);
            if spec.has_outputs() {
                // Every output of the thread while it is at hand.
                let at = b * width..(b + 1) * width;
                let picked = (out.reactions.as_deref()).map_or(&[][..], |r| &r[at.clone()]);
                let outs = &mut out.outputs;
                spec.fill_thread(self.cache, (b, Some(pos)), picked, at, reuse, outs)?;
            }
        }
        let (used, cap) = (positions.len(), out.batch_size());
        out.features[used * stride..cap * stride].fill(0.0);
        out.mask[used * width..cap * width].fill(0);
        if let Some(r) = out.reactions.as_deref_mut() {
            r[used * width..cap * width].fill(BatchMut::NO_REACTION);
        }
        out.lengths[used..].fill(0);
        out.source_ids[used..].fill(0);
        out.labels[used..].fill(0);
        if spec.has_outputs() {
            for b in used..cap {
                let at = b * width..(b + 1) * width;
                let picked = (out.reactions.as_deref()).map_or(&[][..], |r| &r[at.clone()]);
                let outs = &mut out.outputs;
                spec.fill_thread(self.cache, (b, None), picked, at, reuse, outs)?;
            }
        }
        Ok(())
    }

    /// The cache it reads.
    pub(super) fn cache(&self) -> &'c C {
        self.cache
    }

    /// The outputs filled besides the features.
    pub(super) fn spec(&self) -> &'c BatchSpec {
        self.spec
    }

    /// The normalisation in use, if any.
    pub(super) fn normalizer(&self) -> Option<&Normalizer> {
        self.normalizer.as_ref()
    }

    pub(super) fn thread(&self, pos: usize) -> Result<crate::read::NumView<'c>> {
        self.cache
            .numbers(pos)?
            .ok_or(LoadError::NoSuchThread { position: pos })
    }

    /// Rows thread `pos` contributes under `sel` (its empty-thread row included).
    fn rows_of(&self, pos: usize, sel: &Selection) -> Result<usize> {
        let n = sel.indices(&self.thread(pos)?).count();
        Ok(
            if n == 0 && self.empty == EmptyThreads::ZeroRow && sel.max_cxt > 0 {
                1
            } else {
                n
            },
        )
    }

    /// The rows each thread at `positions` contributes to a batch (at most
    /// the selection's `max_cxt`; an empty thread's zero row counts): what
    /// length-bucketed batches ([`Batching::plan`](crate::Batching::plan)) are
    /// sorted by, and what a batch's padding is measured against.
    pub fn lengths(&self, positions: &[usize]) -> Result<Vec<usize>> {
        positions
            .iter()
            .map(|&p| self.rows_of(p, &self.selection))
            .collect()
    }

    /// The width ([`Pad`]) of a batch whose threads contribute `lengths` rows.
    pub fn width_of(&self, lengths: impl IntoIterator<Item = usize>) -> usize {
        match self.pad {
            Pad::Max => self.selection.max_cxt,
            Pad::Longest { multiple } => lengths
                .into_iter()
                .max()
                .unwrap_or(0)
                .max(1)
                .next_multiple_of(multiple.max(1))
                .min(self.selection.max_cxt),
        }
    }

    /// Fills `out` with the threads of these source ids.
    pub fn fill_ids(&self, ids: &[u64], out: &mut Batch, scratch: &mut Vec<usize>) -> Result<()> {
        scratch.clear();
        for &id in ids {
            scratch.push(
                self.cache
                    .position(id)?
                    .ok_or(LoadError::NoSuchSource { source_id: id })?,
            );
        }
        self.fill(scratch, out)
    }
}

/// Shuffles `items` in place, deterministically from `seed` (Fisher-Yates
/// driven by splitmix64): the same order on every machine and for any
/// thread count. Shuffling `0..n` gives an epoch's order.
///
/// ```
/// let mut order: Vec<usize> = (0..10).collect();
/// socialctx::shuffle(&mut order, 42);
/// let mut again: Vec<usize> = (0..10).collect();
/// socialctx::shuffle(&mut again, 42);
/// assert_eq!(order, again);
/// assert_eq!(order, [8, 3, 6, 5, 4, 0, 9, 2, 1, 7]);
/// ```
pub fn shuffle<T>(items: &mut [T], seed: u64) {
    let mut state = seed;
    let mut next = || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    for i in (1..items.len()).rev() {
        // Multiply-shift maps 64 random bits onto 0..=i without modulo bias worth noting.
        let j = ((u128::from(next()) * (i as u128 + 1)) >> 64) as usize;
        items.swap(i, j);
    }
}
