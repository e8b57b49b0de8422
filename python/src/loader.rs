//! `Loader` and `Epoch`: training batches filled in place from the cache
//! (and from embedding stores) by the crate's `Loader`, with the GIL
//! released, into a `Batch`'s buffers (`batch.rs`).

use std::sync::Arc;

use numpy::{PyArray1, PyArrayMethods};
use pyo3::exceptions::{PyMemoryError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use socialctx as sc;

use crate::batch::{Layout, PyBatch, borrow_batch};
use crate::cache::PyCache;
use crate::convert::{Keywords, Negative, Reader, kinds_of, labels_for, positions_of, window_of};
use crate::error::{EmbeddingError, Result};
use crate::stats::PyFeatureStats;
use crate::vocab::PyVocabulary;

/// One embedding store a Loader reads.
struct Store {
    name: String,
    store: Arc<sc::EmbeddingStore>,
}

/// Assembles padded, masked, optionally normalised batches from a cache.
///
/// Arguments (all keyword-only but `cache`):
///
/// - `cache`: an open cache (`socialctx.open(path)`).
/// - `kinds`: which reactions are context: `"replies"` (the reference's
///   default), `"retweets"` or `"both"`.
/// - `max_cxt`: at most this many reactions per thread, the earliest
///   (default 200, at least 1).
/// - `window_s`: keep only reactions within this many seconds after the
///   source (inclusive); None keeps all.
/// - `stats`: a `FeatureStats` to standardise features with
///   (`(x - mean) / (std + 1e-6)`); None leaves them raw.
/// - `empty`: what a thread with no selected reaction gives: `"row"` (one
///   all-zero row with mask 1, as the reference) or `"masked"` (no row).
/// - `embeddings`: names of embedding stores (made by `socialctx.embed`)
///   whose rows each batch indexes: `batch.embedding_index[name]`.
/// - `dense`: also copy the rows themselves into `batch.embeddings[name]`
///   (`[B, T, dim]` on the host). With `dense=False`, gather them on the
///   device instead (`socialctx.torch.EmbeddingTable`).
/// - `pad`: `"max"` (every batch `[B, max_cxt]`, for models sized by
///   `max_cxt`) or `"longest"` (the batch's longest selection rounded up
///   to `pad_multiple`).
/// - `pad_multiple`: see `pad` (default 8).
/// - `token_ids`: a `Vocabulary` (`cache.vocabulary(...)`): every fill
///   also writes `batch.token_ids`, int32 `[B, T, max_tokens]`, each row
///   slot's tokens of the vocabulary's field through it (1 unknown, 0
///   padding, AllenNLP's indices).
/// - `max_tokens`: tokens kept per reaction with `token_ids` (the first).
#[pyclass(frozen, module = "socialctx", name = "Loader")]
pub(crate) struct PyLoader {
    reader: Arc<Reader>,
    selection: sc::Selection,
    stats: Option<sc::FeatureStats>,
    empty: sc::EmptyThreads,
    pad: sc::Pad,
    stores: Vec<Store>,
    dense: bool,
    /// Per thread, its first reaction in cache order (for the stores' index).
    offsets: Vec<u64>,
    /// The shape of the Batches it makes (checked at every fill).
    layout: Layout,
    /// `token_ids=`: the vocabulary batches' token ids go through.
    vocab: Option<Py<PyVocabulary>>,
    /// The Cache object it reads (`Loader.cache`).
    cache: Py<PyCache>,
}

impl PyLoader {
    fn loader<'c>(&self, cache: &'c Reader) -> sc::Loader<'c, Reader> {
        let mut loader = sc::Loader::new(cache, self.selection)
            .empty_threads(self.empty)
            .pad(self.pad);
        if let Some(stats) = &self.stats {
            loader = loader.normalize(stats);
        }
        loader
    }

    pub(crate) fn fill_impl(
        &self,
        py: Python<'_>,
        positions: &[usize],
        labels: Option<&[i8]>,
        batch: &mut PyBatch,
    ) -> Result<()> {
        let layout = &self.layout;
        if batch.layout != *layout {
            return Err(PyValueError::new_err(format!(
                "this Batch was made for another Loader (max_cxt {}, stores {:?}, dense {}); \
                 this Loader has max_cxt {}, stores {:?}, dense {}: make batches with loader.new_batch",
                batch.layout.max_cxt,
                batch.layout.stores,
                batch.layout.dense,
                layout.max_cxt,
                layout.stores,
                layout.dense
            ))
            .into());
        }
        if positions.len() > batch.batch_size {
            return Err(PyValueError::new_err(format!(
                "{} positions do not fit a Batch of {} threads",
                positions.len(),
                batch.batch_size
            ))
            .into());
        }
        let busy = |_| {
            PyRuntimeError::new_err(
                "this Batch's arrays are borrowed elsewhere (another thread filling it?); \
                 give each thread its own Batch (loader.new_batch)",
            )
        };
        let mut features = batch.features.bind(py).try_readwrite().map_err(busy)?;
        let mut mask = batch.mask.bind(py).try_readwrite().map_err(busy)?;
        let mut lengths = batch.lengths.bind(py).try_readwrite().map_err(busy)?;
        let mut ids = batch.source_ids.bind(py).try_readwrite().map_err(busy)?;
        let mut out_labels = batch.labels.bind(py).try_readwrite().map_err(busy)?;
        let (f, m, l, s, y) = (
            features.as_slice_mut()?,
            mask.as_slice_mut()?,
            lengths.as_slice_mut()?,
            ids.as_slice_mut()?,
            out_labels.as_slice_mut()?,
        );
        let cache = &*self.reader;
        let max_cxt = layout.max_cxt;
        let reactions = &mut batch.reactions;
        let width = py.detach(|| {
            let loader = self.loader(cache);
            let mut out = sc::BatchMut::new(max_cxt, f, m, l, s, y)?.with_reactions(reactions)?;
            loader.fill_into(positions, labels, &mut out)?;
            Ok::<_, sc::LoadError>(out.width())
        })?;
        let slots = batch.batch_size * width;
        // The dense buffers hold the previous fill's rows; with the same
        // layout, slots that were and stay padding need no rewrite.
        let same_layout = batch.pristine || batch.width == width;
        for (i, st) in self.stores.iter().enumerate() {
            let mut idx = batch.index_out[i].bind(py).try_readwrite().map_err(busy)?;
            let idx = &mut idx.as_slice_mut()?[..slots];
            let picked = &batch.reactions[..slots];
            let store = &st.store;
            let offsets = &self.offsets;
            let rows = &mut batch.rows_scratch;
            rows.clear();
            rows.resize(slots, -1);
            py.detach(|| store.rows_of_slots(offsets, positions, picked, width, rows));
            if self.dense {
                let (raw, _) = &batch.dense_out[i];
                let n = slots * store.dim();
                let previous = same_layout.then_some(&idx[..]);
                if store.is_half() {
                    let arr = raw.bind(py).cast::<PyArray1<u16>>()?;
                    let mut out = arr.try_readwrite().map_err(busy)?;
                    let out = &mut out.as_slice_mut()?[..n];
                    py.detach(|| store.gather_over(rows, previous, out));
                } else {
                    let arr = raw.bind(py).cast::<PyArray1<f32>>()?;
                    let mut out = arr.try_readwrite().map_err(busy)?;
                    let out = &mut out.as_slice_mut()?[..n];
                    py.detach(|| store.gather_over(rows, previous, out));
                }
            }
            idx.copy_from_slice(rows);
        }
        if self.dense && !self.stores.is_empty() {
            batch.pristine = false;
        }
        if let (Some(vocab), Some(out)) = (&self.vocab, &batch.token_ids_out) {
            let max_tokens = layout.max_tokens;
            let mut ids = out.bind(py).try_readwrite().map_err(busy)?;
            let ids = &mut ids.as_slice_mut()?[..slots * max_tokens];
            let picked = &batch.reactions[..slots];
            let vocab = vocab.get().inner();
            py.detach(|| {
                let mut out = sc::TokenIdsMut::new(max_tokens, ids)?;
                vocab.token_ids(cache, positions, picked, width, &mut out)
            })?;
        }
        batch.size = positions.len();
        batch.width = width;
        Ok(())
    }

    fn lengths_of(&self, py: Python<'_>, positions: &[usize]) -> Result<Vec<usize>> {
        let cache = &*self.reader;
        Ok(py.detach(|| self.loader(cache).lengths(positions))?)
    }
}

/// `Loader`'s keywords, as the crate's types.
struct LoaderOptions {
    selection: sc::Selection,
    stats: Option<sc::FeatureStats>,
    empty: sc::EmptyThreads,
    pad: sc::Pad,
    /// Names of the embedding stores each batch indexes.
    embeddings: Vec<String>,
    /// Copy the stores' rows into the batch too.
    dense: bool,
    /// Token ids per row slot through this vocabulary, at most
    /// `max_tokens` each.
    token_ids: Option<(Py<PyVocabulary>, usize)>,
}

impl LoaderOptions {
    fn from_keywords(given: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        let mut kw = Keywords::new("Loader()", given);
        let kinds: String = kw.get("kinds", "replies".to_owned())?;
        let max_cxt: usize = kw.get("max_cxt", 200)?;
        let window_s: Option<f64> = kw.get("window_s", None)?;
        let stats: Option<Bound<'_, PyFeatureStats>> = kw.get("stats", None)?;
        let empty: String = kw.get("empty", "row".to_owned())?;
        let embeddings: Option<Vec<String>> = kw.get("embeddings", None)?;
        let pad: String = kw.get("pad", "max".to_owned())?;
        let pad_multiple: usize = kw.get("pad_multiple", 8)?;
        let dense: bool = kw.get("dense", true)?;
        let vocab: Option<Bound<'_, PyVocabulary>> = kw.get("token_ids", None)?;
        let max_tokens: Option<usize> = kw.get("max_tokens", None)?;
        kw.finish()?;
        let token_ids = match (vocab, max_tokens) {
            (None, None) => None,
            (Some(v), Some(l)) if l >= 1 => Some((v.unbind(), l)),
            (Some(_), Some(_)) => {
                return Err(PyValueError::new_err("max_tokens must be at least 1"));
            }
            (Some(_), None) => {
                return Err(PyValueError::new_err(
                    "token_ids=vocabulary needs max_tokens= (tokens kept per reaction)",
                ));
            }
            (None, Some(_)) => {
                return Err(PyValueError::new_err(
                    "max_tokens= is for token ids: give token_ids=vocabulary too",
                ));
            }
        };
        if max_cxt == 0 {
            return Err(PyValueError::new_err("max_cxt must be at least 1"));
        }
        let pad = match pad.as_str() {
            "max" => sc::Pad::Max,
            "longest" if pad_multiple >= 1 => sc::Pad::Longest {
                multiple: pad_multiple,
            },
            "longest" => return Err(PyValueError::new_err("pad_multiple must be at least 1")),
            other => {
                return Err(PyValueError::new_err(format!(
                    "pad must be \"max\" or \"longest\", not {other:?}"
                )));
            }
        };
        let empty = match empty.as_str() {
            "row" => sc::EmptyThreads::ZeroRow,
            "masked" => sc::EmptyThreads::Masked,
            other => {
                return Err(PyValueError::new_err(format!(
                    "empty must be \"row\" or \"masked\", not {other:?}"
                )));
            }
        };
        let embeddings = embeddings.unwrap_or_default();
        for (i, name) in embeddings.iter().enumerate() {
            if embeddings[..i].contains(name) {
                return Err(PyValueError::new_err(format!(
                    "embedding store {name:?} named twice"
                )));
            }
        }
        Ok(LoaderOptions {
            selection: sc::Selection {
                kinds: kinds_of(&kinds)?,
                window: window_of(window_s)?,
                max_cxt,
            },
            stats: stats.map(|s| s.get().inner.clone()),
            empty,
            pad,
            embeddings,
            dense,
            token_ids,
        })
    }
}

/// `Loader.plan`'s keywords: how the epoch is cut, and which rank's share.
struct PlanOptions {
    how: sc::Batching,
    /// Only this rank's batches (None: all).
    rank: Option<usize>,
}

impl PlanOptions {
    fn from_keywords(batch_size: usize, given: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        let mut kw = Keywords::new("Loader.plan()", given);
        let seed: Option<u64> = kw.get("seed", None)?;
        let bucket: bool = kw.get("bucket", false)?;
        let noise: f64 = kw.get("noise", 0.1)?;
        let world_size: usize = kw.get("world_size", 1)?;
        let rank: Option<usize> = kw.get("rank", None)?;
        let drop_last: bool = kw.get("drop_last", false)?;
        kw.finish()?;
        Ok(PlanOptions {
            how: sc::Batching {
                batch_size,
                seed,
                bucket_noise: bucket.then_some(noise),
                world_size,
                drop_last,
            },
            rank,
        })
    }
}

#[pymethods]
impl PyLoader {
    #[new]
    #[pyo3(
        signature = (cache, **options),
        text_signature = "(cache, *, kinds='replies', max_cxt=200, window_s=None, stats=None, empty='row', embeddings=None, pad='max', pad_multiple=8, dense=True, token_ids=None, max_tokens=None)"
    )]
    fn new(
        py: Python<'_>,
        cache: &Bound<'_, PyAny>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> Result<Self> {
        let Ok(cache) = cache.cast::<PyCache>() else {
            return Err(PyTypeError::new_err(format!(
                "Loader needs an open cache, not {}: open it with socialctx.open(path) first",
                cache.repr()?
            ))
            .into());
        };
        let reader = Arc::clone(&cache.get().reader);
        let opts = LoaderOptions::from_keywords(options)?;
        let mut stores = Vec::with_capacity(opts.embeddings.len());
        for name in &opts.embeddings {
            let store = py.detach(|| sc::EmbeddingStore::open(&*reader, name))?;
            if store.dim() == 0 {
                return Err(EmbeddingError::new_err(format!(
                    "{}: store {name:?} has no rows (no input to embed)",
                    store.dir().display()
                ))
                .into());
            }
            stores.push(Store {
                name: name.clone(),
                store: Arc::new(store),
            });
        }
        let offsets = if stores.is_empty() {
            Vec::new()
        } else {
            py.detach(|| reader.reaction_offsets())?
        };
        let layout = Layout {
            max_cxt: opts.selection.max_cxt,
            stores: stores
                .iter()
                .map(|s| (s.name.clone(), s.store.dim(), s.store.is_half()))
                .collect(),
            dense: opts.dense,
            max_tokens: opts.token_ids.as_ref().map_or(0, |(_, l)| *l),
        };
        Ok(PyLoader {
            reader,
            selection: opts.selection,
            stats: opts.stats,
            empty: opts.empty,
            pad: opts.pad,
            stores,
            dense: opts.dense,
            offsets,
            layout,
            vocab: opts.token_ids.map(|(v, _)| v),
            cache: cache.clone().unbind(),
        })
    }

    /// The Cache this Loader reads.
    #[getter]
    fn cache(&self, py: Python<'_>) -> Py<PyCache> {
        self.cache.clone_ref(py)
    }

    /// Names of the embedding stores each batch indexes.
    #[getter]
    fn embeddings(&self) -> Vec<String> {
        self.stores.iter().map(|e| e.name.clone()).collect()
    }

    /// Rows per thread at most (`max_cxt`).
    #[getter]
    fn max_cxt(&self) -> usize {
        self.selection.max_cxt
    }

    /// `"max"` or `"longest"`.
    #[getter]
    fn pad(&self) -> &'static str {
        match self.pad {
            sc::Pad::Max => "max",
            sc::Pad::Longest { .. } => "longest",
        }
    }

    /// A Batch for `batch_size` threads: NumPy buffers allocated once for
    /// `max_cxt` rows per thread, that `fill` and `epoch` write into.
    fn new_batch(&self, py: Python<'_>, batch_size: usize) -> PyResult<PyBatch> {
        PyBatch::allocate(py, &self.layout, batch_size)
    }

    /// Fills `batch` in place with the threads at `positions` (the GIL is
    /// released meanwhile). Labels come from `labels` (one per position,
    /// e.g. a split's) or else from the cache. ValueError for a Batch made
    /// by a Loader of another shape; RuntimeError if another thread is
    /// filling the same Batch.
    #[pyo3(signature = (positions, batch, labels=None))]
    fn fill(
        &self,
        py: Python<'_>,
        positions: &Bound<'_, PyAny>,
        batch: &Bound<'_, PyBatch>,
        labels: Option<&Bound<'_, PyAny>>,
    ) -> Result<()> {
        let positions = positions_of(positions, self.reader.len(), Negative::Refused)?;
        let labels = labels_for(labels, positions.len())?;
        let mut b = borrow_batch(batch)?;
        self.fill_impl(py, &positions, labels.as_deref(), &mut b)
    }

    /// Fills `graph` (a GraphBatch, reused across fills) with the threads at
    /// `positions` as propagation trees, under this Loader's selection and
    /// statistics (the GIL is released meanwhile). Labels as in `fill`.
    #[pyo3(signature = (positions, graph, labels=None))]
    fn fill_graph(
        &self,
        py: Python<'_>,
        positions: &Bound<'_, PyAny>,
        graph: &Bound<'_, crate::graph::PyGraphBatch>,
        labels: Option<&Bound<'_, PyAny>>,
    ) -> Result<()> {
        let positions = positions_of(positions, self.reader.len(), Negative::Refused)?;
        let labels = labels_for(labels, positions.len())?;
        let loader = self.loader(&*self.reader);
        crate::graph::fill(py, &loader, &positions, labels.as_deref(), graph)
    }

    /// int64 [len(positions)]: the rows each thread contributes to a batch
    /// (its selection, at most `max_cxt`; an empty thread's zero row counts).
    fn lengths<'py>(
        &self,
        py: Python<'py>,
        positions: &Bound<'py, PyAny>,
    ) -> Result<Bound<'py, PyArray1<i64>>> {
        let positions = positions_of(positions, self.reader.len(), Negative::Refused)?;
        let l = self.lengths_of(py, &positions)?;
        Ok(PyArray1::from_vec(
            py,
            l.into_iter().map(|x| x as i64).collect(),
        ))
    }

    /// The batches of one epoch, as a list of int64 arrays of indices into
    /// `positions` (feed `positions[b]`), deterministic for the arguments on
    /// any machine and any number of workers.
    ///
    /// - `seed`: shuffle with this seed (None: keep the order).
    /// - `bucket`, `noise`: sort by length with noise `(1 ± noise)` first,
    ///   cut into batches of neighbours, then shuffle the batches (AllenNLP's
    ///   `BucketIterator`); with `pad="longest"` batches then carry little
    ///   padding.
    /// - `world_size`, `rank`: with several ranks the batch count is a
    ///   multiple of `world_size` (threads spread evenly, no batch over
    ///   `batch_size`), so every rank gets the same number; `rank` returns
    ///   only that rank's batches. `drop_last` instead keeps only full
    ///   batches, as many for every rank.
    #[pyo3(
        signature = (positions, batch_size, **options),
        text_signature = "($self, positions, batch_size, *, seed=None, bucket=False, noise=0.1, world_size=1, rank=None, drop_last=False)"
    )]
    fn plan<'py>(
        &self,
        py: Python<'py>,
        positions: &Bound<'py, PyAny>,
        batch_size: usize,
        options: Option<&Bound<'py, PyDict>>,
    ) -> Result<Bound<'py, PyList>> {
        let PlanOptions { how, rank } = PlanOptions::from_keywords(batch_size, options)?;
        let positions = positions_of(positions, self.reader.len(), Negative::Refused)?;
        let lengths = if how.bucket_noise.is_some() {
            self.lengths_of(py, &positions)?
        } else {
            vec![0; positions.len()]
        };
        let world_size = how.world_size;
        let plan = self.plan_of(&lengths, how)?;
        if let Some(r) = rank
            && r >= world_size
        {
            return Err(PyValueError::new_err(format!(
                "rank {r} is not below world_size {world_size}"
            ))
            .into());
        }
        let list = PyList::empty(py);
        let picked: Vec<&[usize]> = match rank {
            Some(r) => how.rank_batches(&plan, r).collect(),
            None => plan.iter().map(Vec::as_slice).collect(),
        };
        for b in picked {
            let v: Vec<i64> = b.iter().map(|&i| i as i64).collect();
            list.append(PyArray1::from_vec(py, v))?;
        }
        Ok(list)
    }

    /// Iterates over one epoch of `positions` in batches of `batch_size`
    /// (see `plan` for `seed`, `bucket` and `noise`). Every step yields
    /// the SAME Batch object, refilled in place: copy what you keep beyond
    /// the step. The Epoch's `real_rows` and `padded_rows` say how much of
    /// the epoch is padding.
    #[pyo3(signature = (positions, batch_size, *, seed=None, labels=None, bucket=false, noise=0.1))]
    fn epoch(
        slf: &Bound<'_, Self>,
        positions: &Bound<'_, PyAny>,
        batch_size: usize,
        seed: Option<u64>,
        labels: Option<&Bound<'_, PyAny>>,
        bucket: bool,
        noise: f64,
    ) -> Result<Epoch> {
        if batch_size == 0 {
            return Err(PyValueError::new_err("batch_size must be at least 1").into());
        }
        let py = slf.py();
        let this = slf.get();
        let order = positions_of(positions, this.reader.len(), Negative::Refused)?;
        let labels = labels_for(labels, order.len())?;
        let lengths = this.lengths_of(py, &order)?;
        let how = sc::Batching {
            batch_size,
            seed,
            bucket_noise: bucket.then_some(noise),
            ..sc::Batching::default()
        };
        let plan = this.plan_of(&lengths, how)?;
        let real_rows = lengths.iter().sum::<usize>() as u64;
        let padded_rows = plan
            .iter()
            .map(|b| (b.len() * this.loader_width(b.iter().map(|&i| lengths[i]))) as u64)
            .sum();
        let batch = Py::new(py, this.new_batch(py, batch_size)?)?;
        Ok(Epoch {
            loader: slf.clone().unbind(),
            batch,
            order,
            labels,
            plan,
            next: 0,
            real_rows,
            padded_rows,
            scratch: (Vec::new(), Vec::new()),
        })
    }
}

impl PyLoader {
    /// The epoch's batches over threads contributing `lengths` rows (the
    /// lengths matter only when bucketing, `noise` given).
    fn plan_of(&self, lengths: &[usize], how: sc::Batching) -> Result<Vec<Vec<usize>>> {
        Ok(how.plan(lengths)?)
    }

    fn loader_width(&self, lengths: impl IntoIterator<Item = usize>) -> usize {
        let cache = &*self.reader;
        self.loader(cache).width_of(lengths)
    }
}

/// One epoch of batches; yields the same Batch object every step.
#[pyclass(module = "socialctx")]
pub(crate) struct Epoch {
    loader: Py<PyLoader>,
    batch: Py<PyBatch>,
    order: Vec<usize>,
    labels: Option<Vec<i8>>,
    plan: Vec<Vec<usize>>,
    next: usize,
    /// Real rows in the whole epoch.
    #[pyo3(get)]
    real_rows: u64,
    /// Rows the epoch's batches hold, padding included.
    #[pyo3(get)]
    padded_rows: u64,
    scratch: (Vec<usize>, Vec<i8>),
}

#[pymethods]
impl Epoch {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __len__(&self) -> usize {
        self.plan.len()
    }

    /// Share of the epoch's rows that are padding (0 to 1).
    #[getter]
    fn padding_fraction(&self) -> f64 {
        if self.padded_rows == 0 {
            0.0
        } else {
            1.0 - self.real_rows as f64 / self.padded_rows as f64
        }
    }

    fn __next__(&mut self, py: Python<'_>) -> Result<Option<Py<PyBatch>>> {
        let Some(picked) = self.plan.get(self.next) else {
            return Ok(None);
        };
        let (positions, labels) = &mut self.scratch;
        positions.clear();
        positions.extend(picked.iter().map(|&i| self.order[i]));
        let labels = self.labels.as_ref().map(|l| {
            labels.clear();
            labels.extend(picked.iter().map(|&i| l[i]));
            &labels[..]
        });
        {
            let bound = self.batch.bind(py);
            let mut b = borrow_batch(bound)?;
            self.loader.get().fill_impl(py, positions, labels, &mut b)?;
        }
        self.next += 1;
        Ok(Some(self.batch.clone_ref(py)))
    }
}

/// A deterministic permutation of range(n) from `seed` (the same as the
/// Rust crate's `shuffle` of `0..n`, on every machine).
#[pyfunction]
pub(crate) fn shuffled<'py>(
    py: Python<'py>,
    n: usize,
    seed: u64,
) -> PyResult<Bound<'py, PyArray1<i64>>> {
    let mut v: Vec<i64> = Vec::new();
    v.try_reserve_exact(n)
        .map_err(|_| PyMemoryError::new_err(format!("cannot allocate a permutation of {n}")))?;
    v.extend(0..n as i64);
    py.detach(|| sc::shuffle(&mut v, seed));
    Ok(PyArray1::from_vec(py, v))
}
