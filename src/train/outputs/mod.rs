//! What a batch holds besides the reactions' features, mask, lengths,
//! source ids and labels: a list of outputs, each filled per thread while
//! the [`Loader`](crate::Loader) holds it. Per embedding store, each row
//! slot's row in the store (and, dense, the row itself); each row slot's
//! token ids through a [`Vocabulary`]; and the outputs made by name alone
//! ([`BatchSpec::output`]). A [`BatchSpec`] names them once; a
//! [`Loader`](crate::Loader) given it ([`Loader::outputs`](crate::Loader::outputs))
//! fills all of them in one call, into the caller's buffers
//! ([`OutputBuf`], [`OutputMut`]).
//!
//! An output is one type implementing `Output` in a file of this
//! directory; one made by name alone is registered by one line, its entry
//! in `named![...]` below (which declares its module). An output fills
//! the *slots* of one thread at a time: a [`Batch`](crate::Batch)'s row
//! slots of the thread (its selected reactions, then padding), or a
//! [`GraphBatch`](crate::GraphBatch)'s nodes of its graph (root first, a
//! padding slot; then its selected reactions), so that every output
//! reaches both. The [`Batch`](crate::Batch), the
//! [`GraphBatch`](crate::GraphBatch), the Python binding's `Batch` and
//! `GraphBatch` and `socialctx.torch`'s datasets carry every output by its
//! name.
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
//! // [32 * 200] i32, and [32 * 200 * 40] i32
//! let index = batch.output("embedding_index", Some("minilm")).unwrap().as_i32();
//! let ids = batch.output("token_ids", None).unwrap().as_i32();
//! # Ok::<(), socialctx::Error>(())
//! ```

use std::sync::Arc;

use super::loader::BatchMut;
use super::vocab::Vocabulary;
use crate::error::LoadError;
use crate::read::{ThreadSource, ThreadView};
use crate::store::EmbeddingStore;

mod embeddings;
mod token_ids;

type Result<T, E = LoadError> = std::result::Result<T, E>;

/// Declares the outputs made by name alone (no parameter): each is a
/// module of this directory with a `Default` type implementing [`Output`];
/// its name is its one buffer's name.
macro_rules! named {
    ($($module:ident :: $ty:ident),* $(,)?) => {
        $(mod $module;)*
        /// The outputs [`BatchSpec::output`] makes by name.
        fn named_outputs() -> Vec<Box<dyn Output>> {
            vec![$(Box::new($module::$ty::default()) as Box<dyn Output>),*]
        }
    };
}

named![];

/// One output of a batch: the buffers it fills and its fill, one thread at
/// a time while the loader holds the thread.
pub(crate) trait Output: Send + Sync + std::fmt::Debug {
    /// Its buffers, in order: what [`fill`](Self::fill) gets as `out`.
    fn buffers(&self) -> Vec<Desc>;

    /// Fills the slots of one thread (`slots`) into its buffers (`out`).
    fn fill(&self, slots: &Slots<'_, '_>, out: &mut ThreadOut<'_, '_>) -> Result<()>;

    /// Whether the fill needs each slot's reaction recorded (the
    /// [`Batch::reactions`](crate::Batch::reactions) buffer).
    fn needs_reactions(&self) -> bool {
        true
    }
}

/// A buffer's element type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dtype {
    I32,
    F32,
    /// float16 bits.
    F16,
}

/// One buffer of an output: its name (with a key for one of several, e.g.
/// the store's name), element type and values per row slot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Desc {
    pub(crate) name: &'static str,
    pub(crate) key: Option<String>,
    pub(crate) dtype: Dtype,
    /// None: one value per slot; `Some(n)`: `[n]` per slot.
    pub(crate) per_slot: Option<usize>,
}

/// The slots of one thread of a batch, as an output's fill sees them: a
/// flat [`Batch`](crate::Batch)'s row slots of the thread (`width` of
/// them, the selected reactions in time order, then padding), or a
/// [`GraphBatch`](crate::GraphBatch)'s nodes of the thread's graph (its
/// root, then its selected reactions, in node order).
pub(crate) struct Slots<'s, 'c> {
    /// The thread's place in the batch.
    pub(crate) b: usize,
    /// Its position in the cache; None for a slot past the batch's threads.
    pub(crate) position: Option<usize>,
    /// Per slot, the reaction filling it (its index in the thread's time
    /// order), or [`BatchMut::NO_REACTION`] (padding, an empty thread's
    /// row, a graph's root).
    pub(crate) reactions: &'s [u32],
    /// Whether the buffers hold the last fill of this width (a slot that
    /// was padding and is again may be left as it is).
    pub(crate) reuse: bool,
    view: &'s dyn Fn(usize) -> Result<ThreadView<'c>>,
}

impl<'c> Slots<'_, 'c> {
    /// The thread: its reactions' numbers (times, parents, kinds...) and
    /// texts, looked up on demand (call once per fill).
    pub(crate) fn thread(&self) -> Result<ThreadView<'c>> {
        let position = self.position.ok_or(LoadError::BufferSize {
            buffer: "positions",
            expected: self.b + 1,
            found: self.b,
        })?;
        (self.view)(position)
    }
}

/// An output's buffers, the part of one thread: slots `at` of each.
pub(crate) struct ThreadOut<'o, 'a> {
    outs: &'o mut Outputs<'a>,
    first: usize,
    per_slot: &'o [usize],
    at: std::ops::Range<usize>,
}

impl ThreadOut<'_, '_> {
    fn range(&self, k: usize) -> std::ops::Range<usize> {
        let n = self.per_slot[self.first + k];
        self.at.start * n..self.at.end * n
    }

    /// This output's buffer `k`, the thread's part.
    pub(crate) fn one(&mut self, k: usize) -> OutputMut<'_> {
        let at = self.range(k);
        self.outs.get(self.first + k).slice(at)
    }

    /// Buffers `j < k` of this output, the thread's parts.
    pub(crate) fn two(&mut self, j: usize, k: usize) -> (OutputMut<'_>, OutputMut<'_>) {
        let (at_j, at_k) = (self.range(j), self.range(k));
        let (a, b) = self.outs.pair(self.first + j, self.first + k);
        (a.slice(at_j), b.slice(at_k))
    }
}

/// A caller's buffer for one output of a [`BatchSpec`]: `[batch_size *
/// max_cxt * per_slot]` values of its type (checked at the fill).
#[derive(Debug)]
pub enum OutputMut<'a> {
    /// int32 values.
    I32(&'a mut [i32]),
    /// float32 values.
    F32(&'a mut [f32]),
    /// float16 values, as their bits.
    F16(&'a mut [u16]),
}

impl<'a> OutputMut<'a> {
    /// Number of values.
    pub fn len(&self) -> usize {
        match self {
            OutputMut::I32(s) => s.len(),
            OutputMut::F32(s) => s.len(),
            OutputMut::F16(s) => s.len(),
        }
    }

    /// Whether it holds no value.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn dtype(&self) -> Dtype {
        match self {
            OutputMut::I32(_) => Dtype::I32,
            OutputMut::F32(_) => Dtype::F32,
            OutputMut::F16(_) => Dtype::F16,
        }
    }

    fn reborrow(&mut self) -> OutputMut<'_> {
        match self {
            OutputMut::I32(s) => OutputMut::I32(s),
            OutputMut::F32(s) => OutputMut::F32(s),
            OutputMut::F16(s) => OutputMut::F16(s),
        }
    }

    fn slice(self, at: std::ops::Range<usize>) -> OutputMut<'a> {
        match self {
            OutputMut::I32(s) => OutputMut::I32(&mut s[at]),
            OutputMut::F32(s) => OutputMut::F32(&mut s[at]),
            OutputMut::F16(s) => OutputMut::F16(&mut s[at]),
        }
    }

    /// The int32 values (none for another type: checked at the fill).
    pub(crate) fn i32(self) -> &'a mut [i32] {
        match self {
            OutputMut::I32(s) => s,
            _ => &mut [],
        }
    }

    /// The float32 values (none for another type).
    pub(crate) fn f32(self) -> &'a mut [f32] {
        match self {
            OutputMut::F32(s) => s,
            _ => &mut [],
        }
    }
}

/// One output buffer, owned by a [`Batch`](crate::Batch): `[batch_size *
/// max_cxt * per_slot]` values, the first `batch_size * width * per_slot`
/// of them the last fill's. The next fill may rely on what the last one
/// wrote (a dense store's row slot that stays padding is not zeroed
/// again): treat it as read-only. Owned by a
/// [`GraphBatch`](crate::GraphBatch): `[num_nodes * per_slot]` values,
/// one slot per node (a root's as a padding slot's).
#[derive(Clone, Debug, PartialEq)]
pub struct OutputBuf {
    /// The output's name (`"embedding_index"`, `"embeddings"`, `"token_ids"`...).
    pub name: &'static str,
    /// Which of several of that name (an embedding store's name); None for one.
    pub key: Option<String>,
    /// Values per slot: None for one (`[B, T]`; a graph's `[N]`), `Some(n)`
    /// for `[B, T, n]` (`[N, n]`).
    pub per_slot: Option<usize>,
    values: Values,
}

#[derive(Clone, Debug, PartialEq)]
enum Values {
    I32(Vec<i32>),
    F32(Vec<f32>),
    F16(Vec<u16>),
}

impl Values {
    fn dtype(&self) -> Dtype {
        match self {
            Values::I32(_) => Dtype::I32,
            Values::F32(_) => Dtype::F32,
            Values::F16(_) => Dtype::F16,
        }
    }
}

impl OutputBuf {
    /// Zeroed values for `slots` row slots of `desc`.
    fn new(desc: Desc, slots: usize) -> Self {
        let n = slots * desc.per_slot.unwrap_or(1);
        OutputBuf {
            name: desc.name,
            key: desc.key,
            per_slot: desc.per_slot,
            values: match desc.dtype {
                Dtype::I32 => Values::I32(vec![0; n]),
                Dtype::F32 => Values::F32(vec![0.0; n]),
                Dtype::F16 => Values::F16(vec![0; n]),
            },
        }
    }

    /// NumPy's name of the values' type: `"int32"`, `"float32"` or `"float16"`.
    pub fn dtype(&self) -> &'static str {
        match self.values {
            Values::I32(_) => "int32",
            Values::F32(_) => "float32",
            Values::F16(_) => "float16",
        }
    }

    /// The int32 values (empty for another type).
    pub fn as_i32(&self) -> &[i32] {
        match &self.values {
            Values::I32(v) => v,
            _ => &[],
        }
    }

    /// The float32 values (empty for another type).
    pub fn as_f32(&self) -> &[f32] {
        match &self.values {
            Values::F32(v) => v,
            _ => &[],
        }
    }

    /// The float16 values' bits (empty for another type).
    pub fn as_f16(&self) -> &[u16] {
        match &self.values {
            Values::F16(v) => v,
            _ => &[],
        }
    }

    /// The values, writable (e.g. to drop them: `clear`).
    pub fn as_mut(&mut self) -> OutputMut<'_> {
        match &mut self.values {
            Values::I32(v) => OutputMut::I32(v),
            Values::F32(v) => OutputMut::F32(v),
            Values::F16(v) => OutputMut::F16(v),
        }
    }

    /// Drops the values (a buffer that no longer fits any fill).
    pub fn clear(&mut self) {
        match &mut self.values {
            Values::I32(v) => v.clear(),
            Values::F32(v) => v.clear(),
            Values::F16(v) => v.clear(),
        }
    }

    /// Grows (with zeros) or cuts the values to `slots` slots' (a graph
    /// batch's nodes so far); the capacity stays. A size that overflows or
    /// cannot be allocated is [`LoadError::TooLarge`], not an abort.
    pub(super) fn resize(&mut self, slots: usize) -> Result<()> {
        let per_slot = self.per_slot.unwrap_or(1);
        let too_large = || LoadError::TooLarge {
            buffer: self.name,
            slots,
            per_slot,
        };
        let n = slots.checked_mul(per_slot).ok_or_else(too_large)?;
        fn grow<T: Clone>(v: &mut Vec<T>, n: usize, zero: T) -> Option<()> {
            v.try_reserve_exact(n.saturating_sub(v.len())).ok()?;
            v.resize(n, zero);
            Some(())
        }
        match &mut self.values {
            Values::I32(v) => grow(v, n, 0),
            Values::F32(v) => grow(v, n, 0.0),
            Values::F16(v) => grow(v, n, 0),
        }
        .ok_or_else(too_large)
    }
}

/// Output `name` (of key `key`) of `outputs`, if there.
pub(super) fn find<'o>(
    outputs: &'o [OutputBuf],
    name: &str,
    key: Option<&str>,
) -> Option<&'o OutputBuf> {
    (outputs.iter()).find(|o| o.name == name && o.key.as_deref() == key)
}

/// The outputs a [`BatchMut`] writes: caller buffers, or a
/// [`Batch`](crate::Batch)'s own.
#[derive(Debug, Default)]
pub(super) enum Outputs<'a> {
    #[default]
    None,
    Borrowed(&'a mut [OutputMut<'a>]),
    Owned(&'a mut [OutputBuf]),
}

impl Outputs<'_> {
    pub(super) fn count(&self) -> usize {
        match self {
            Outputs::None => 0,
            Outputs::Borrowed(s) => s.len(),
            Outputs::Owned(s) => s.len(),
        }
    }

    pub(super) fn get(&mut self, i: usize) -> OutputMut<'_> {
        match self {
            Outputs::None => OutputMut::I32(&mut []),
            Outputs::Borrowed(s) => s[i].reborrow(),
            Outputs::Owned(s) => s[i].as_mut(),
        }
    }

    fn pair(&mut self, j: usize, k: usize) -> (OutputMut<'_>, OutputMut<'_>) {
        match self {
            Outputs::None => (OutputMut::I32(&mut []), OutputMut::I32(&mut [])),
            Outputs::Borrowed(s) => {
                let (a, b) = s.split_at_mut(k);
                (a[j].reborrow(), b[0].reborrow())
            }
            Outputs::Owned(s) => {
                let (a, b) = s.split_at_mut(k);
                (a[j].as_mut(), b[0].as_mut())
            }
        }
    }
}

/// The outputs a [`Loader`](crate::Loader) fills besides features, mask,
/// lengths, source ids and labels. Made once (it maps each thread to its
/// first reaction for the stores' index), then borrowed by every fill.
#[derive(Debug, Default)]
pub struct BatchSpec {
    outputs: Vec<Box<dyn Output>>,
    /// Every output's buffers, in order.
    descs: Vec<Desc>,
    /// Per output, its first buffer in `descs`.
    firsts: Vec<usize>,
    /// Values per slot of each buffer.
    per_slot: Vec<usize>,
    stores: Vec<Arc<EmbeddingStore>>,
    /// The content id of the cache the stores' index is addressed by: a
    /// Loader over another content would gather other reactions' rows.
    content: u64,
    dense: bool,
    token_ids: Option<(Arc<Vocabulary>, usize)>,
}

/// A spec with no output beyond the features (a Loader without one).
pub(super) static NO_OUTPUTS: BatchSpec = BatchSpec {
    outputs: Vec::new(),
    descs: Vec::new(),
    firsts: Vec::new(),
    per_slot: Vec::new(),
    stores: Vec::new(),
    content: 0,
    dense: false,
    token_ids: None,
};

impl BatchSpec {
    /// Features, mask, lengths, source ids and labels only.
    pub fn new() -> Self {
        Self::default()
    }

    fn push(&mut self, output: Box<dyn Output>) {
        self.firsts.push(self.descs.len());
        for d in output.buffers() {
            self.per_slot.push(d.per_slot.unwrap_or(1));
            self.descs.push(d);
        }
        self.outputs.push(output);
    }

    /// Per store (opened on `cache`), each row slot's row in it (output
    /// `"embedding_index"`, int32, keyed by the store's name) and, with
    /// `dense`, the row's values (`"embeddings"`, `[dim]` per slot, float32
    /// or float16 as the store). A store of another cache content is
    /// refused ([`LoadError::OtherContent`]), and so is the spec at the
    /// fill of a [`Loader`](crate::Loader) over another content: the
    /// stores' index is addressed by this cache's reaction order.
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
        let offsets: Arc<[u64]> = if stores.is_empty() {
            Arc::from(Vec::new())
        } else {
            Arc::from(cache.reaction_offsets()?)
        };
        for store in stores {
            let store = Arc::new(store);
            let output =
                embeddings::Embedding::new(Arc::clone(&store), Arc::clone(&offsets), dense);
            self.push(Box::new(output));
            self.stores.push(store);
        }
        self.dense = dense;
        Ok(self)
    }

    /// Each row slot's reaction's tokens through `vocab` (output
    /// `"token_ids"`, int32 `[max_tokens]` per slot), at most `max_tokens`
    /// (at least 1) per slot (see [`Vocabulary::token_ids`]).
    pub fn token_ids(mut self, vocab: Arc<Vocabulary>, max_tokens: usize) -> Self {
        self.push(Box::new(token_ids::TokenIds::new(
            Arc::clone(&vocab),
            max_tokens,
        )));
        self.token_ids = Some((vocab, max_tokens));
        self
    }

    /// The output made by name alone called `name` (None: there is none).
    pub fn output(mut self, name: &str) -> Option<Self> {
        let output = named_outputs()
            .into_iter()
            .find(|o| o.buffers().first().is_some_and(|d| d.name == name))?;
        self.push(output);
        Some(self)
    }

    /// The names of the outputs [`output`](Self::output) makes.
    pub fn output_names() -> Vec<&'static str> {
        (named_outputs().iter())
            .filter_map(|o| o.buffers().first().map(|d| d.name))
            .collect()
    }

    /// The buffers a batch of `slots` row slots (`batch_size * max_cxt`)
    /// needs for this spec's outputs, zeroed, in fill order (with `slots`
    /// 0, a description of each).
    pub fn buffers(&self, slots: usize) -> Vec<OutputBuf> {
        (self.descs.iter())
            .map(|d| OutputBuf::new(d.clone(), slots))
            .collect()
    }

    /// The embedding stores, in output order.
    pub fn stores(&self) -> &[Arc<EmbeddingStore>] {
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

    /// Whether there is an output to fill.
    pub(super) fn has_outputs(&self) -> bool {
        !self.outputs.is_empty()
    }

    /// Whether the fill must record each slot's reaction.
    pub(super) fn needs_reactions(&self) -> bool {
        self.outputs.iter().any(|o| o.needs_reactions())
    }

    /// Refuses a `cache` of another content than the stores' (their index
    /// is addressed by the reactions' order in the cache the spec was made on).
    pub(super) fn check_content<C: ThreadSource + ?Sized>(&self, cache: &C) -> Result<()> {
        let now = cache.core().content_id();
        if !self.stores.is_empty() && now != self.content {
            return Err(LoadError::OtherContent {
                what: "a BatchSpec's embedding stores".to_owned(),
                expected: format!("{now:016x}"),
                found: format!("{:016x}", self.content),
            });
        }
        Ok(())
    }

    /// Whether `outputs` are this spec's buffers (name, key, type and
    /// values per slot, in order), whatever their sizes.
    pub(super) fn fits(&self, outputs: &[OutputBuf]) -> bool {
        outputs.len() == self.descs.len()
            && (outputs.iter().zip(&self.descs)).all(|(o, d)| {
                o.name == d.name
                    && o.key == d.key
                    && o.per_slot == d.per_slot
                    && o.values.dtype() == d.dtype
            })
    }

    /// Checks that `out` has a buffer of the right type and size for every
    /// output (and none for an output the spec lacks), before anything is
    /// written.
    pub(super) fn check<C: ThreadSource + ?Sized>(
        &self,
        cache: &C,
        out: &mut BatchMut<'_>,
    ) -> Result<()> {
        self.check_content(cache)?;
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
        let outs = out.outputs_mut();
        size("outputs", self.descs.len(), outs.count())?;
        for (i, d) in self.descs.iter().enumerate() {
            let o = outs.get(i);
            let n = slots * self.per_slot[i];
            if o.dtype() != d.dtype {
                return Err(LoadError::BufferSize {
                    buffer: d.name,
                    expected: n,
                    // A buffer of another type holds no value of this one.
                    found: 0,
                });
            }
            size(d.name, n, o.len())?;
        }
        Ok(())
    }

    /// Fills every output's slots `at` with those of thread `b`
    /// (`reactions`: each slot's reaction), at `position` in the cache
    /// (None: a thread slot past the batch's threads, all padding). A
    /// flat batch's thread has slots `b * width..(b + 1) * width`, a
    /// graph batch's its nodes.
    pub(super) fn fill_thread<C: ThreadSource + ?Sized>(
        &self,
        cache: &C,
        (b, position): (usize, Option<usize>),
        reactions: &[u32],
        at: std::ops::Range<usize>,
        reuse: bool,
        outs: &mut Outputs<'_>,
    ) -> Result<()> {
        let view = |p: usize| {
            cache
                .thread(p)?
                .ok_or(LoadError::NoSuchThread { position: p })
        };
        let slots = Slots {
            b,
            position,
            reactions,
            reuse,
            view: &view,
        };
        for (output, &first) in self.outputs.iter().zip(&self.firsts) {
            let mut out = ThreadOut {
                outs,
                first,
                per_slot: &self.per_slot,
                at: at.clone(),
            };
            output.fill(&slots, &mut out)?;
        }
        Ok(())
    }
}
