//! `Vocabulary`: token counts of a text field, counted in Rust from the
//! stored tokens (GIL released), saved in AllenNLP's directory format, and
//! the indices of batches through it: token ids per row slot and bags of
//! words per graph node.

use std::path::PathBuf;
use std::sync::Arc;

use numpy::{IntoPyArray, PyArray1, PyArrayMethods};
use pyo3::exceptions::{PyMemoryError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use socialctx as sc;

use crate::batch::PyBatch;
use crate::convert::{CacheReader, Reader};
use crate::error::{CacheError, PyScError, Result};
use crate::graph::PyGraphBatch;

/// Tokens of one text field and their counts, most frequent first (ties by
/// the token). Made by `Cache.vocabulary`. Indices follow AllenNLP's padded
/// namespaces: 0 padding, 1 unknown, `tokens[i]` is `i + 2`.
#[pyclass(frozen, module = "socialctx", name = "Vocabulary")]
pub(crate) struct PyVocabulary {
    inner: Arc<sc::Vocabulary>,
    /// The cache it was counted on: `bag_of_words`' default.
    reader: Arc<Reader>,
}

impl PyVocabulary {
    pub(crate) fn new(inner: sc::Vocabulary, reader: Arc<Reader>) -> Self {
        PyVocabulary {
            inner: Arc::new(inner),
            reader,
        }
    }

    /// The crate's vocabulary, shared (a Loader's `token_ids=`).
    pub(crate) fn shared(&self) -> Arc<sc::Vocabulary> {
        Arc::clone(&self.inner)
    }
}

/// The cache of `source`: a Cache, or the one a Loader reads.
fn reader_of(source: &Bound<'_, PyAny>) -> PyResult<Arc<Reader>> {
    Ok(source.extract::<CacheReader>()?.0)
}

/// A zeroed vector of `n` values, or MemoryError.
fn buffer<T: Clone + Default>(n: usize, what: &str) -> PyResult<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n)
        .map_err(|_| PyMemoryError::new_err(format!("cannot allocate {what} of {n} values")))?;
    v.resize(n, T::default());
    Ok(v)
}

#[pymethods]
impl PyVocabulary {
    /// The text field counted on ("reply" or "description"), which
    /// `token_ids` and `bag_of_words` read.
    #[getter]
    fn field(&self) -> &'static str {
        self.inner.field().as_str()
    }

    /// The tokens, most frequent first.
    #[getter]
    fn tokens(&self) -> Vec<String> {
        self.inner.tokens().to_vec()
    }

    /// np.uint64 [len]: each token's count.
    #[getter]
    fn counts<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<u64>> {
        PyArray1::from_slice(py, self.inner.counts())
    }

    /// AllenNLP's index of `token`: 2 and up if known, 1 (unknown) otherwise.
    fn index(&self, token: &str) -> u32 {
        self.inner.index(token)
    }

    /// Writes AllenNLP's vocabulary directory (`non_padded_namespaces.txt`,
    /// `<namespace>.txt`), which `allennlp.data.Vocabulary.from_files` loads.
    #[pyo3(signature = (directory, namespace="tokens"))]
    fn save(&self, py: Python<'_>, directory: PathBuf, namespace: &str) -> Result<()> {
        if namespace.is_empty() || namespace.contains(['/', '\0']) {
            return Err(PyValueError::new_err(format!(
                "namespace {namespace:?} must be a plain file name"
            ))
            .into());
        }
        let inner = &self.inner;
        Ok(py.detach(|| inner.save(&directory, namespace))?)
    }

    /// int32 [batch_size, width, max_tokens]: the token ids of each row slot
    /// of `batch` (as its last fill left it, by a Loader of `source`, a
    /// Cache or that Loader): the slot's reaction's tokens of `field`
    /// through `index` (1 for unknown ones), the first `max_tokens`, padded
    /// with 0; padding slots, retweets' replies and authors without a
    /// description are all 0. With `lengths=True`, also uint32
    /// [batch_size, width]: the tokens kept per slot. Fresh arrays; the GIL
    /// is released meanwhile.
    #[pyo3(signature = (source, batch, *, max_tokens, lengths=false))]
    fn token_ids<'py>(
        &self,
        py: Python<'py>,
        source: &Bound<'py, PyAny>,
        batch: &Bound<'py, PyBatch>,
        max_tokens: usize,
        lengths: bool,
    ) -> Result<Bound<'py, PyAny>> {
        if max_tokens == 0 {
            return Err(PyValueError::new_err("max_tokens must be at least 1").into());
        }
        let reader = reader_of(source)?;
        let b = batch
            .try_borrow()
            .map_err(|_| PyRuntimeError::new_err("this Batch is being filled by another thread"))?;
        let (reactions, batch_size, width, source_ids) = b.filled_slots(py)?;
        let n = reactions
            .len()
            .checked_mul(max_tokens)
            .filter(|&n| n <= isize::MAX as usize / 4)
            .ok_or_else(|| PyValueError::new_err("token ids of this shape are too large"))?;
        let mut ids: Vec<i32> = buffer(n, "token ids")?;
        let mut lens: Vec<u32> = buffer(if lengths { reactions.len() } else { 0 }, "lengths")?;
        let inner = &self.inner;
        let c = &*reader;
        py.detach(|| {
            let positions = source_ids
                .iter()
                .map(|&id| {
                    c.position(id)?
                        .ok_or(sc::LoadError::NoSuchSource { source_id: id })
                })
                .collect::<std::result::Result<Vec<usize>, sc::LoadError>>()?;
            let mut out = sc::TokenIdsMut::new(max_tokens, &mut ids)?;
            if lengths {
                out = out.with_lengths(&mut lens)?;
            }
            inner.token_ids(c, &positions, reactions, width, &mut out)
        })
        .map_err(|e| match e {
            e @ (sc::LoadError::NoSuchSource { .. } | sc::LoadError::OtherCache { .. }) => {
                PyScError::from(PyValueError::new_err(format!(
                    "this Batch was filled from another cache than the one given ({e})"
                )))
            }
            e => PyScError::from(e),
        })?;
        let ids = ids
            .into_pyarray(py)
            .reshape([batch_size, width, max_tokens])?
            .into_any();
        if !lengths {
            return Ok(ids);
        }
        let lens = lens.into_pyarray(py).reshape([batch_size, width])?;
        Ok(PyTuple::new(py, [ids, lens.into_any()])?.into_any())
    }

    /// Each node's bag of words of `graph` (a filled GraphBatch), in CSR
    /// form: (indptr int64 [N + 1], indices int64 [nnz], counts float32
    /// [nnz]); node n's token ids are indices[indptr[n]:indptr[n + 1]],
    /// ascending, with their counts. `cache` (a Cache or Loader) is the one
    /// the graph was filled from, by default the one counted on. Unknown
    /// tokens count under 1 with `unknown=True`, and are left out
    /// otherwise. Root rows are empty (the cache holds no source tokens).
    #[pyo3(signature = (graph, cache=None, *, unknown=true))]
    fn bag_of_words<'py>(
        &self,
        py: Python<'py>,
        graph: &Bound<'py, PyGraphBatch>,
        cache: Option<&Bound<'py, PyAny>>,
        unknown: bool,
    ) -> Result<Bound<'py, PyTuple>> {
        let reader = match cache {
            Some(c) if !c.is_none() => reader_of(c)?,
            _ => self.reader.clone(),
        };
        let g = graph.try_borrow().map_err(|_| {
            PyRuntimeError::new_err("this GraphBatch is being filled by another thread")
        })?;
        let graphs = &g.inner;
        let inner = &self.inner;
        let c = &*reader;
        let mut bow = sc::BagOfWords::default();
        py.detach(|| inner.bag_of_words(c, graphs, unknown, &mut bow))?;
        let sc::BagOfWords {
            indptr,
            indices,
            counts,
            ..
        } = bow;
        Ok(PyTuple::new(
            py,
            [
                indptr.into_pyarray(py).into_any(),
                indices.into_pyarray(py).into_any(),
                counts.into_pyarray(py).into_any(),
            ],
        )?)
    }

    /// Pickling (spawn and forkserver DataLoader workers, `copy.deepcopy`):
    /// the tokens and counts, with the path and content id of the cache
    /// counted on, reopened on unpickling.
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTuple>> {
        let py = slf.py();
        let this = slf.get();
        let args = (
            this.reader.dir().to_string_lossy().into_owned(),
            this.reader.content_id(),
            this.inner.field().as_str(),
            this.inner.tokens().to_vec(),
            this.inner.counts().to_vec(),
        );
        let remake = slf.get_type().getattr("_from_parts")?;
        PyTuple::new(py, [remake.into_any(), args.into_pyobject(py)?.into_any()])
    }

    /// Remakes a pickled Vocabulary (see `__reduce__`). CacheError if the
    /// cache it was counted on is gone or was rebuilt with other content.
    #[staticmethod]
    fn _from_parts(
        py: Python<'_>,
        cache_dir: PathBuf,
        content_id: &str,
        field: &str,
        tokens: Vec<String>,
        counts: Vec<u64>,
    ) -> Result<Self> {
        let field: sc::TextField = field.parse().map_err(PyValueError::new_err)?;
        let inner = sc::Vocabulary::from_parts(field, tokens, counts)
            .map_err(|e| PyValueError::new_err(format!("not a pickled Vocabulary: {e}")))?;
        let reader: Arc<Reader> = Arc::new(py.detach(|| sc::LazyCache::open(&cache_dir))?);
        let now = reader.content_id();
        if now != content_id {
            return Err(CacheError::new_err(format!(
                "{}: the cache this Vocabulary was counted on was rebuilt (content id {content_id}, \
                 now {now}); count a new one on the rebuilt cache",
                cache_dir.display()
            ))
            .into());
        }
        Ok(PyVocabulary::new(inner, reader))
    }

    fn __len__(&self) -> usize {
        self.inner.len()
    }

    fn __contains__(&self, token: &str) -> bool {
        self.inner.index(token) >= 2
    }

    fn __repr__(&self) -> String {
        format!("socialctx.Vocabulary(tokens={})", self.inner.len())
    }
}
