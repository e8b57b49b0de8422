//! `Loader`, `Batch` and `Epoch`: training batches filled in place from the
//! cache (and from embedding stores) by the crate's `Loader`, with the GIL
//! released.
//!
//! A Batch owns flat NumPy buffers sized once for `batch_size * max_cxt`
//! rows; each fill writes its `[batch_size, width]` prefix contiguously
//! (`width` is `max_cxt` with `pad="max"`, the batch's longest selection
//! rounded up with `pad="longest"`) and the getters return views of that
//! prefix, so nothing is allocated or copied per batch.

use std::sync::Arc;

use numpy::{PyArray1, PyArrayMethods};
use pyo3::exceptions::{PyMemoryError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};

use socialctx as sc;

use crate::{
    EmbeddingError, PyCache, PyFeatureStats, kinds_of, labels_of, load_err, positions_of, window_of,
};

/// Maps a store's open error to `EmbeddingError`.
pub(crate) fn store_err(e: sc::EmbeddingError) -> PyErr {
    EmbeddingError::new_err(e.to_string())
}

/// Verifies store `name` of `cache` in full (metadata, checksums,
/// headers, index, finite rows; with `same_content`, that it belongs to
/// this content of the cache) and returns its metadata as JSON; raises
/// EmbeddingError naming the file and the reason.
#[pyfunction]
#[pyo3(signature = (cache, name, same_content=true))]
pub(crate) fn _verify_store(
    py: Python<'_>,
    cache: &Bound<'_, PyCache>,
    name: &str,
    same_content: bool,
) -> PyResult<String> {
    let c = &cache.get().inner;
    let store = py
        .detach(|| {
            if same_content {
                c.embeddings(name)
            } else {
                c.embeddings_of_any_content(name)
            }
        })
        .map_err(store_err)?;
    serde_json::to_string(store.meta()).map_err(|e| EmbeddingError::new_err(e.to_string()))
}

/// One embedding store a Loader reads.
struct Store {
    name: String,
    store: Arc<sc::EmbeddingStore>,
}

/// What a Batch was made for: fills by another Loader must match it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Layout {
    max_cxt: usize,
    /// (store name, dim, float16) per store.
    stores: Vec<(String, usize, bool)>,
    dense: bool,
}

/// A NumPy array of `n` zeros of `dtype`, allocated by NumPy (so that a
/// size that cannot be had is a MemoryError, never an abort).
fn zeros<'py>(py: Python<'py>, n: usize, dtype: &str) -> PyResult<Bound<'py, PyAny>> {
    py.import("numpy")?.call_method1("zeros", (n, dtype))
}

/// `flat[:rows * inner].reshape(rows, *shape)` for the user.
fn prefix<'py>(flat: &Bound<'py, PyAny>, shape: &[usize]) -> PyResult<Bound<'py, PyAny>> {
    let py = flat.py();
    let n: usize = shape.iter().product();
    let slice = pyo3::types::PySlice::new(py, 0, n as isize, 1);
    let head = flat.get_item(slice)?;
    head.call_method1("reshape", (PyTuple::new(py, shape)?,))
}

/// Output buffers of one batch, allocated once and refilled in place.
///
/// `features` ``[batch_size, width, 28]`` float32, `mask` ``[batch_size,
/// width]`` uint8, `lengths` uint32, `source_ids` uint64 and `labels` int8
/// ``[batch_size]``; `embedding_index[name]` int32 ``[batch_size, width]``
/// (the row in store `name`, -1 for none) and, for a Loader with
/// ``dense=True``, `embeddings[name]` ``[batch_size, width, dim]``. Only
/// the first `size` threads are real; the rest is zero padding (mask 0).
/// Every property is a view of memory the next fill overwrites: copy what
/// you keep, and treat the views as read-only (the next fill relies on
/// what it wrote: padding rows it zeroed are not zeroed again).
#[pyclass(module = "socialctx", name = "Batch")]
pub(crate) struct PyBatch {
    features: Py<PyArray1<f32>>,
    mask: Py<PyArray1<u8>>,
    lengths: Py<PyArray1<u32>>,
    source_ids: Py<PyArray1<u64>>,
    labels: Py<PyArray1<i8>>,
    /// Per slot, the reaction of its thread filling it (sc::NO_REACTION: none).
    reactions: Vec<u32>,
    /// Per store: the index buffer (int32), and the dense rows (float32 or
    /// uint16 for float16 stores, with a float16 view for the user).
    index_out: Vec<Py<PyArray1<i32>>>,
    dense_out: Vec<(Py<PyAny>, Py<PyAny>)>,
    layout: Layout,
    /// Rows per store of the fill in progress (before they replace `index_out`).
    rows_scratch: Vec<i32>,
    /// Whether the dense buffers still hold only zeros (never filled).
    pristine: bool,
    /// Threads filled by the last fill (the rest is zero padding).
    #[pyo3(get)]
    size: usize,
    /// Rows per thread of the last fill.
    #[pyo3(get)]
    width: usize,
    batch_size: usize,
}

#[pymethods]
impl PyBatch {
    /// Capacity in threads.
    #[getter]
    fn batch_size(&self) -> usize {
        self.batch_size
    }
    /// Rows per thread the buffers hold (the Loader's `max_cxt`).
    #[getter]
    fn max_cxt(&self) -> usize {
        self.layout.max_cxt
    }
    /// float32 [batch_size, width, 28]: the selected reactions' features in time order.
    #[getter]
    fn features<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        prefix(
            self.features.bind(py).as_any(),
            &[self.batch_size, self.width, sc::NUM_FEATURES],
        )
    }
    /// uint8 [batch_size, width]: 1 for a real row, 0 for padding.
    #[getter]
    fn mask<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        prefix(self.mask.bind(py).as_any(), &[self.batch_size, self.width])
    }
    /// uint32 [batch_size]: real rows per thread.
    #[getter]
    fn lengths<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<u32>> {
        self.lengths.bind(py).clone()
    }
    /// uint64 [batch_size]: each thread's source id.
    #[getter]
    fn source_ids<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<u64>> {
        self.source_ids.bind(py).clone()
    }
    /// int8 [batch_size]: each thread's label (1 rumour, 0 non-rumour, -1 unknown, or the given ones).
    #[getter]
    fn labels<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<i8>> {
        self.labels.bind(py).clone()
    }
    /// Per embedding store: int32 [batch_size, width], each row slot's row in
    /// the store, -1 for none (padding, retweets, `[]` tokens, no description).
    #[getter]
    fn embedding_index<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for ((name, _, _), out) in self.layout.stores.iter().zip(&self.index_out) {
            d.set_item(
                name,
                prefix(out.bind(py).as_any(), &[self.batch_size, self.width])?,
            )?;
        }
        Ok(d)
    }
    /// Per embedding store, with `dense=True`: [batch_size, width, dim] rows
    /// (float32, or float16 for a float16 store), zeros where there is none.
    #[getter]
    fn embeddings<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for ((name, dim, _), (_, user)) in self.layout.stores.iter().zip(&self.dense_out) {
            d.set_item(
                name,
                prefix(user.bind(py), &[self.batch_size, self.width, *dim])?,
            )?;
        }
        Ok(d)
    }
    fn __len__(&self) -> usize {
        self.size
    }
    fn __repr__(&self) -> String {
        format!(
            "socialctx.Batch(size={}, batch_size={}, width={}, max_cxt={})",
            self.size, self.batch_size, self.width, self.layout.max_cxt
        )
    }
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
#[pyclass(frozen, module = "socialctx", name = "Loader")]
pub(crate) struct PyLoader {
    cache: Py<PyCache>,
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
}

impl PyLoader {
    fn loader<'c>(&self, cache: &'c crate::AnyCache) -> sc::Loader<'c, crate::AnyCache> {
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
    ) -> PyResult<()> {
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
            )));
        }
        if positions.len() > batch.batch_size {
            return Err(PyValueError::new_err(format!(
                "{} positions do not fit a Batch of {} threads",
                positions.len(),
                batch.batch_size
            )));
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
        let cache = &*self.cache.get().inner;
        let max_cxt = layout.max_cxt;
        let reactions = &mut batch.reactions;
        let width = py
            .detach(|| {
                let loader = self.loader(cache);
                let mut out =
                    sc::BatchMut::new(max_cxt, f, m, l, s, y)?.with_reactions(reactions)?;
                loader.fill_into(positions, labels, &mut out)?;
                Ok::<_, sc::LoadError>(out.width())
            })
            .map_err(load_err)?;
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
        batch.size = positions.len();
        batch.width = width;
        Ok(())
    }

    fn lengths_of(&self, py: Python<'_>, positions: &[usize]) -> PyResult<Vec<usize>> {
        let cache = &*self.cache.get().inner;
        py.detach(|| self.loader(cache).lengths(positions))
            .map_err(load_err)
    }
}

/// What `Vocabulary.token_ids` (src/vocab.rs) reads of a Batch and a Loader.
impl PyBatch {
    /// The last fill's per-slot reactions `[batch_size * width]`, its
    /// `batch_size` and `width`, and its threads' source ids (`size` of them).
    pub(crate) fn filled_slots(
        &self,
        py: Python<'_>,
    ) -> PyResult<(&[u32], usize, usize, Vec<u64>)> {
        let ids = self.source_ids.bind(py).try_readonly()?;
        let ids = ids.as_slice()?[..self.size].to_vec();
        let slots = &self.reactions[..self.batch_size * self.width];
        Ok((slots, self.batch_size, self.width, ids))
    }
}

impl PyLoader {
    /// The cache this Loader reads.
    pub(crate) fn cache(&self) -> &Py<PyCache> {
        &self.cache
    }
}

fn borrow_batch<'py>(batch: &Bound<'py, PyBatch>) -> PyResult<PyRefMut<'py, PyBatch>> {
    batch.try_borrow_mut().map_err(|_| {
        PyRuntimeError::new_err(
            "this Batch is being filled by another thread; give each thread its own Batch \
             (loader.new_batch)",
        )
    })
}

/// Checked `a * b * ...` for buffer sizes: ValueError on overflow.
fn size_of(what: &str, dims: &[usize]) -> PyResult<usize> {
    dims.iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .filter(|&n| n <= isize::MAX as usize / 8)
        .ok_or_else(|| {
            PyValueError::new_err(format!("a Batch's {what} of shape {dims:?} is too large"))
        })
}

#[pymethods]
impl PyLoader {
    #[new]
    #[pyo3(signature = (cache, *, kinds="replies", max_cxt=200, window_s=None, stats=None, empty="row", embeddings=None, pad="max", pad_multiple=8, dense=true))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        cache: &Bound<'_, PyAny>,
        kinds: &str,
        max_cxt: usize,
        window_s: Option<f64>,
        stats: Option<&Bound<'_, PyFeatureStats>>,
        empty: &str,
        embeddings: Option<Vec<String>>,
        pad: &str,
        pad_multiple: usize,
        dense: bool,
    ) -> PyResult<Self> {
        let cache: Py<PyCache> = match cache.cast::<PyCache>() {
            Ok(c) => c.clone().unbind(),
            Err(_) => {
                return Err(pyo3::exceptions::PyTypeError::new_err(format!(
                    "Loader needs an open cache, not {}: open it with socialctx.open(path) first",
                    cache.repr()?
                )));
            }
        };
        if max_cxt == 0 {
            return Err(PyValueError::new_err("max_cxt must be at least 1"));
        }
        let pad = match pad {
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
        let names = embeddings.unwrap_or_default();
        let mut stores = Vec::with_capacity(names.len());
        for (i, name) in names.iter().enumerate() {
            if names[..i].contains(name) {
                return Err(PyValueError::new_err(format!(
                    "embedding store {name:?} named twice"
                )));
            }
            let c = &cache.get().inner;
            let store = py.detach(|| c.embeddings(name)).map_err(store_err)?;
            if store.dim() == 0 {
                return Err(EmbeddingError::new_err(format!(
                    "{}: store {name:?} has no rows (no input to embed)",
                    store.dir().display()
                )));
            }
            stores.push(Store {
                name: name.clone(),
                store: Arc::new(store),
            });
        }
        let offsets = if stores.is_empty() {
            Vec::new()
        } else {
            let c = &*cache.get().inner;
            py.detach(|| sc::reaction_offsets(c)).map_err(load_err)?
        };
        let empty = match empty {
            "row" => sc::EmptyThreads::ZeroRow,
            "masked" => sc::EmptyThreads::Masked,
            other => {
                return Err(PyValueError::new_err(format!(
                    "empty must be \"row\" or \"masked\", not {other:?}"
                )));
            }
        };
        let layout = Layout {
            max_cxt,
            stores: stores
                .iter()
                .map(|s| (s.name.clone(), s.store.dim(), s.store.is_half()))
                .collect(),
            dense,
        };
        Ok(PyLoader {
            cache,
            selection: sc::Selection {
                kinds: kinds_of(kinds)?,
                window: window_of(window_s)?,
                max_cxt,
            },
            stats: stats.map(|s| s.get().inner.clone()),
            empty,
            pad,
            stores,
            dense,
            offsets,
            layout,
        })
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
        if batch_size == 0 {
            return Err(PyValueError::new_err("batch_size must be at least 1"));
        }
        let t = self.selection.max_cxt;
        let slots = size_of("mask", &[batch_size, t])?;
        let feats = size_of("features", &[batch_size, t, sc::NUM_FEATURES])?;
        let mut reactions = Vec::new();
        reactions.try_reserve_exact(slots).map_err(|_| {
            PyMemoryError::new_err(format!(
                "cannot allocate a Batch of {batch_size} x {t} rows"
            ))
        })?;
        reactions.resize(slots, sc::NO_REACTION);
        let mut index_out = Vec::new();
        let mut dense_out = Vec::new();
        for st in &self.stores {
            index_out.push(
                zeros(py, slots, "int32")?
                    .cast_into::<PyArray1<i32>>()?
                    .unbind(),
            );
            if self.dense {
                let n = size_of("embeddings", &[batch_size, t, st.store.dim()])?;
                if st.store.is_half() {
                    let raw = zeros(py, n, "uint16")?;
                    let user = raw.call_method1("view", ("float16",))?;
                    dense_out.push((raw.unbind(), user.unbind()));
                } else {
                    let raw = zeros(py, n, "float32")?;
                    dense_out.push((raw.clone().unbind(), raw.unbind()));
                }
            }
        }
        Ok(PyBatch {
            features: zeros(py, feats, "float32")?.cast_into()?.unbind(),
            mask: zeros(py, slots, "uint8")?.cast_into()?.unbind(),
            lengths: zeros(py, batch_size, "uint32")?.cast_into()?.unbind(),
            source_ids: zeros(py, batch_size, "uint64")?.cast_into()?.unbind(),
            labels: zeros(py, batch_size, "int8")?.cast_into()?.unbind(),
            reactions,
            index_out,
            dense_out,
            layout: self.layout.clone(),
            rows_scratch: Vec::new(),
            pristine: true,
            size: 0,
            width: t,
            batch_size,
        })
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
    ) -> PyResult<()> {
        let positions = positions_of(positions, self.cache.get().inner.len())?;
        let labels = labels_of(labels)?;
        if let Some(l) = &labels
            && l.len() != positions.len()
        {
            return Err(PyValueError::new_err(format!(
                "{} labels for {} positions",
                l.len(),
                positions.len()
            )));
        }
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
    ) -> PyResult<()> {
        let positions = positions_of(positions, self.cache.get().inner.len())?;
        let labels = labels_of(labels)?;
        let loader = self.loader(&self.cache.get().inner);
        crate::graph::fill(py, &loader, &positions, labels.as_deref(), graph)
    }

    /// int64 [len(positions)]: the rows each thread contributes to a batch
    /// (its selection, at most `max_cxt`; an empty thread's zero row counts).
    fn lengths<'py>(
        &self,
        py: Python<'py>,
        positions: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyArray1<i64>>> {
        let positions = positions_of(positions, self.cache.get().inner.len())?;
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
    #[pyo3(signature = (positions, batch_size, *, seed=None, bucket=false, noise=0.1, world_size=1, rank=None, drop_last=false))]
    #[allow(clippy::too_many_arguments)]
    fn plan<'py>(
        &self,
        py: Python<'py>,
        positions: &Bound<'py, PyAny>,
        batch_size: usize,
        seed: Option<u64>,
        bucket: bool,
        noise: f64,
        world_size: usize,
        rank: Option<usize>,
        drop_last: bool,
    ) -> PyResult<Bound<'py, PyList>> {
        let positions = positions_of(positions, self.cache.get().inner.len())?;
        let lengths = if bucket {
            self.lengths_of(py, &positions)?
        } else {
            vec![0; positions.len()]
        };
        let how = sc::Batching {
            batch_size,
            seed,
            bucket_noise: bucket.then_some(noise),
            world_size,
            drop_last,
        };
        let plan = self.plan_of(&lengths, how)?;
        if let Some(r) = rank
            && r >= world_size
        {
            return Err(PyValueError::new_err(format!(
                "rank {r} is not below world_size {world_size}"
            )));
        }
        let list = PyList::empty(py);
        let picked: Vec<&[usize]> = match rank {
            Some(r) => sc::rank_batches(&plan, r, world_size).collect(),
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
    #[allow(clippy::too_many_arguments)]
    fn epoch(
        slf: &Bound<'_, Self>,
        positions: &Bound<'_, PyAny>,
        batch_size: usize,
        seed: Option<u64>,
        labels: Option<&Bound<'_, PyAny>>,
        bucket: bool,
        noise: f64,
    ) -> PyResult<Epoch> {
        if batch_size == 0 {
            return Err(PyValueError::new_err("batch_size must be at least 1"));
        }
        let py = slf.py();
        let this = slf.get();
        let order = positions_of(positions, this.cache.get().inner.len())?;
        let labels = labels_of(labels)?;
        if let Some(l) = &labels
            && l.len() != order.len()
        {
            return Err(PyValueError::new_err(format!(
                "{} labels for {} positions",
                l.len(),
                order.len()
            )));
        }
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
    fn plan_of(&self, lengths: &[usize], how: sc::Batching) -> PyResult<Vec<Vec<usize>>> {
        sc::plan_batches(lengths, &how).map_err(|e| PyValueError::new_err(e.to_string()))
    }

    fn loader_width(&self, lengths: impl IntoIterator<Item = usize>) -> usize {
        let cache = &*self.cache.get().inner;
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

    fn __next__(&mut self, py: Python<'_>) -> PyResult<Option<Py<PyBatch>>> {
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
/// Rust crate's `shuffled`, on every machine).
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
