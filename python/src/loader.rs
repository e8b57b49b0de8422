//! `Loader` and `Epoch`: training batches filled in place from the cache
//! (and from embedding stores) by the crate's `Loader`, with the GIL
//! released, into a `Batch`'s buffers (`batch.rs`).

use std::sync::Arc;

use numpy::PyArray1;
use pyo3::exceptions::{PyMemoryError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use socialctx as sc;

use crate::batch::{PyBatch, borrow_batch};
use crate::cache::PyCache;
use crate::convert::{Negative, labels_for, positions_of, same_generation};
use crate::epoch::Epoch;
use crate::error::Result;
use crate::fill::{LoaderCore, PlanOptions};

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
///   (`(x - mean) / (std + 1e-6)`); None leaves them raw. Statistics of
///   values of another definition (another socialctx version computed
///   them) are refused, naming both digests; another generation of the
///   same definition (the corpus rebuilt since) is fine; a file saved
///   before statistics recorded it is taken with a warning.
/// - `empty`: what a thread with no selected reaction gives: `"row"` (one
///   all-zero row with mask 1, as the reference) or `"masked"` (no row).
/// - `embeddings`: names of embedding stores (made by `socialctx.embed`)
///   whose rows each batch indexes: `batch.embedding_index[name]`; or a
///   dict `{name: model_id}`, which also refuses a store made by another
///   model or without a model id (EmbeddingError naming both; None: any).
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
/// - `outputs`: names of further outputs every fill writes, each
///   `batch.<name>` (and `batch.outputs[name]`), `[B, T, ...]`.
#[pyclass(frozen, module = "socialctx", name = "Loader")]
pub(crate) struct PyLoader {
    /// Its settings, shared with its epochs.
    core: Arc<LoaderCore>,
    /// The Cache object it reads (`Loader.cache`).
    cache: Py<PyCache>,
}

#[pymethods]
impl PyLoader {
    #[new]
    #[pyo3(
        signature = (cache, **options),
        text_signature = "(cache, *, kinds='replies', max_cxt=200, window_s=None, stats=None, empty='row', embeddings=None, pad='max', pad_multiple=8, dense=True, token_ids=None, max_tokens=None, outputs=None)"
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
        // Statistics of values of another definition are refused (D3).
        crate::stats::check_stats_option(py, &*reader, options)?;
        let core = LoaderCore::new(py, reader, options)?;
        Ok(PyLoader {
            core: Arc::new(core),
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
        (self.core.shape.outputs.iter())
            .filter(|o| o.name == "embedding_index")
            .filter_map(|o| o.key.clone())
            .collect()
    }

    /// Rows per thread at most (`max_cxt`).
    #[getter]
    fn max_cxt(&self) -> usize {
        self.core.selection.max_cxt
    }

    /// `"max"` or `"longest"`.
    #[getter]
    fn pad(&self) -> &'static str {
        match self.core.pad {
            sc::Pad::Max => "max",
            sc::Pad::Longest { .. } => "longest",
        }
    }

    /// A Batch for `batch_size` threads: NumPy buffers allocated once for
    /// `max_cxt` rows per thread, that `fill` and `epoch` write into.
    fn new_batch(&self, py: Python<'_>, batch_size: usize) -> PyResult<PyBatch> {
        PyBatch::allocate(py, &self.core.shape, batch_size)
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
        let positions = positions_of(positions, &*self.core.reader, Negative::Refused)?;
        if let Some(l) = labels {
            same_generation(l, &*self.core.reader, "labels")?;
        }
        let labels = labels_for(labels, positions.len())?;
        let mut b = borrow_batch(batch)?;
        self.core.fill(py, &positions, labels.as_deref(), &mut b)
    }

    /// Fills `graph` (a GraphBatch, reused across fills) with the threads at
    /// `positions` as propagation trees, under this Loader's selection and
    /// statistics, and its outputs per node (`graph.outputs`; the GIL is
    /// released meanwhile). Labels as in `fill`.
    #[pyo3(signature = (positions, graph, labels=None))]
    fn fill_graph(
        &self,
        py: Python<'_>,
        positions: &Bound<'_, PyAny>,
        graph: &Bound<'_, crate::graph::PyGraphBatch>,
        labels: Option<&Bound<'_, PyAny>>,
    ) -> Result<()> {
        let positions = positions_of(positions, &*self.core.reader, Negative::Refused)?;
        if let Some(l) = labels {
            same_generation(l, &*self.core.reader, "labels")?;
        }
        let labels = labels_for(labels, positions.len())?;
        crate::graph::fill(
            py,
            &self.core.loader(),
            &positions,
            labels.as_deref(),
            graph,
        )
    }

    /// int64 [len(positions)]: the rows each thread contributes to a batch
    /// (its selection, at most `max_cxt`; an empty thread's zero row counts).
    fn lengths<'py>(
        &self,
        py: Python<'py>,
        positions: &Bound<'py, PyAny>,
    ) -> Result<Bound<'py, PyArray1<i64>>> {
        let positions = positions_of(positions, &*self.core.reader, Negative::Refused)?;
        let l = self.core.lengths(py, &positions)?;
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
    ///   padding, and the sort is by the width a thread pads to (its length
    ///   rounded up to `pad_multiple`) first, the noisy length only within
    ///   one width.
    /// - `world_size`, `rank`: with several ranks the batch count is a
    ///   multiple of `world_size` (threads spread evenly, no batch over
    ///   `batch_size`), so every rank gets the same number; `rank` returns
    ///   only that rank's batches. No batch is ever empty: when batches
    ///   would outnumber the threads (`batch_size=1`, or fewer threads
    ///   than ranks) they are batches of one, the first threads repeated
    ///   (`DistributedSampler`'s padding). `drop_last` instead keeps only
    ///   full batches, as many for every rank.
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
        let PlanOptions { mut how, rank } = PlanOptions::from_keywords(batch_size, options)?;
        how.pad_multiple = self.core.pad_multiple();
        let positions = positions_of(positions, &*self.core.reader, Negative::Refused)?;
        let lengths = if how.bucket_noise.is_some() {
            self.core.lengths(py, &positions)?
        } else {
            vec![0; positions.len()]
        };
        let world_size = how.world_size;
        let plan = how.plan(&lengths)?;
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
        let (py, this) = (slf.py(), slf.get());
        let order = positions_of(positions, &*this.core.reader, Negative::Refused)?;
        if let Some(l) = labels {
            same_generation(l, &*this.core.reader, "labels")?;
        }
        let labels = labels_for(labels, order.len())?;
        let how = sc::Batching {
            batch_size,
            seed,
            bucket_noise: bucket.then_some(noise),
            pad_multiple: this.core.pad_multiple(),
            ..sc::Batching::default()
        };
        let batch = Py::new(py, this.new_batch(py, batch_size)?)?;
        Epoch::new(py, Arc::clone(&this.core), batch, order, labels, how)
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
