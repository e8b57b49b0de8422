//! `Batch`: one batch's NumPy buffers, sized once for `batch_size *
//! max_cxt` rows and refilled in place by a `Loader` (`loader.rs`). Each
//! fill writes its `[batch_size, width]` prefix contiguously (`width` is
//! `max_cxt` with `pad="max"`, the batch's longest selection rounded up with
//! `pad="longest"`) and the getters return views of that prefix, so nothing
//! is allocated or copied per batch.

use numpy::{PyArray1, PyArrayMethods, PyReadwriteArray1};
use pyo3::exceptions::{PyMemoryError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use socialctx as sc;

use crate::error::Result;

/// What a Batch was made for: fills by another Loader must match it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Layout {
    pub(crate) max_cxt: usize,
    /// (store name, dim, float16) per store.
    pub(crate) stores: Vec<(String, usize, bool)>,
    pub(crate) dense: bool,
    /// Tokens per row slot of `token_ids` (0: the Loader has no vocabulary).
    pub(crate) max_tokens: usize,
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
    pub(crate) features: Py<PyArray1<f32>>,
    pub(crate) mask: Py<PyArray1<u8>>,
    pub(crate) lengths: Py<PyArray1<u32>>,
    pub(crate) source_ids: Py<PyArray1<u64>>,
    pub(crate) labels: Py<PyArray1<i8>>,
    /// Per slot, the reaction of its thread filling it (sc::BatchMut::NO_REACTION: none).
    pub(crate) reactions: Vec<u32>,
    /// Per store: the index buffer (int32), and the dense rows (float32 or
    /// uint16 for float16 stores, with a float16 view for the user).
    pub(crate) index_out: Vec<Py<PyArray1<i32>>>,
    pub(crate) dense_out: Vec<(Py<PyAny>, Py<PyAny>)>,
    /// With a Loader's `token_ids=`: int32 `[batch_size * max_cxt * max_tokens]`.
    pub(crate) token_ids_out: Option<Py<PyArray1<i32>>>,
    pub(crate) layout: Layout,
    /// Threads filled by the last fill (the rest is zero padding).
    #[pyo3(get)]
    pub(crate) size: usize,
    /// Rows per thread of the last fill.
    #[pyo3(get)]
    pub(crate) width: usize,
    pub(crate) batch_size: usize,
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
            &[self.batch_size, self.width, sc::Feature::COUNT],
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
    /// With a Loader made with `token_ids=vocab, max_tokens=L`: int32
    /// [batch_size, width, L], each row slot's reaction's tokens through the
    /// vocabulary (1 unknown), the first L, 0 after them and for padding,
    /// retweets' replies and authors without a description. None otherwise.
    #[getter]
    fn token_ids<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.token_ids_out
            .as_ref()
            .map(|out| {
                prefix(
                    out.bind(py).as_any(),
                    &[self.batch_size, self.width, self.layout.max_tokens],
                )
            })
            .transpose()
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

impl PyBatch {
    /// Buffers for `batch_size` threads of `layout`: zeros, allocated by
    /// NumPy (MemoryError, not an abort, when they cannot be had).
    pub(crate) fn allocate(py: Python<'_>, layout: &Layout, batch_size: usize) -> PyResult<Self> {
        if batch_size == 0 {
            return Err(PyValueError::new_err("batch_size must be at least 1"));
        }
        let t = layout.max_cxt;
        let slots = size_of("mask", &[batch_size, t])?;
        let feats = size_of("features", &[batch_size, t, sc::Feature::COUNT])?;
        let mut reactions = Vec::new();
        reactions.try_reserve_exact(slots).map_err(|_| {
            PyMemoryError::new_err(format!(
                "cannot allocate a Batch of {batch_size} x {t} rows"
            ))
        })?;
        reactions.resize(slots, sc::BatchMut::NO_REACTION);
        let mut index_out = Vec::new();
        let mut dense_out = Vec::new();
        for &(_, dim, half) in &layout.stores {
            index_out.push(
                zeros(py, slots, "int32")?
                    .cast_into::<PyArray1<i32>>()?
                    .unbind(),
            );
            if layout.dense {
                let n = size_of("embeddings", &[batch_size, t, dim])?;
                if half {
                    let raw = zeros(py, n, "uint16")?;
                    let user = raw.call_method1("view", ("float16",))?;
                    dense_out.push((raw.unbind(), user.unbind()));
                } else {
                    let raw = zeros(py, n, "float32")?;
                    dense_out.push((raw.clone().unbind(), raw.unbind()));
                }
            }
        }
        let token_ids_out = match layout.max_tokens {
            0 => None,
            l => {
                let n = size_of("token ids", &[batch_size, t, l])?;
                Some(
                    zeros(py, n, "int32")?
                        .cast_into::<PyArray1<i32>>()?
                        .unbind(),
                )
            }
        };
        Ok(PyBatch {
            features: zeros(py, feats, "float32")?.cast_into()?.unbind(),
            mask: zeros(py, slots, "uint8")?.cast_into()?.unbind(),
            lengths: zeros(py, batch_size, "uint32")?.cast_into()?.unbind(),
            source_ids: zeros(py, batch_size, "uint64")?.cast_into()?.unbind(),
            labels: zeros(py, batch_size, "int8")?.cast_into()?.unbind(),
            reactions,
            index_out,
            dense_out,
            token_ids_out,
            layout: layout.clone(),
            size: 0,
            width: t,
            batch_size,
        })
    }
}

/// A dense store's buffer, borrowed for a fill.
enum DenseGuard<'py> {
    F32(PyReadwriteArray1<'py, f32>),
    F16(PyReadwriteArray1<'py, u16>),
}

impl PyBatch {
    /// Runs `fill` (the crate's one fill, with the GIL released) over every
    /// buffer of this Batch, borrowed as a `sc::BatchMut`; records its width.
    pub(crate) fn fill_with<F>(&mut self, py: Python<'_>, fill: F) -> Result<()>
    where
        F: for<'b> FnOnce(&mut sc::BatchMut<'b>) -> std::result::Result<(), sc::LoadError> + Send,
    {
        let busy = |_| {
            PyRuntimeError::new_err(
                "this Batch's arrays are borrowed elsewhere (another thread filling it?); \
                 give each thread its own Batch (loader.new_batch)",
            )
        };
        let mut features = self.features.bind(py).try_readwrite().map_err(busy)?;
        let mut mask = self.mask.bind(py).try_readwrite().map_err(busy)?;
        let mut lengths = self.lengths.bind(py).try_readwrite().map_err(busy)?;
        let mut ids = self.source_ids.bind(py).try_readwrite().map_err(busy)?;
        let mut labels = self.labels.bind(py).try_readwrite().map_err(busy)?;
        let mut index = Vec::with_capacity(self.index_out.len());
        for a in &self.index_out {
            index.push(a.bind(py).try_readwrite().map_err(busy)?);
        }
        let mut dense = Vec::with_capacity(self.dense_out.len());
        for ((raw, _), &(_, _, half)) in self.dense_out.iter().zip(&self.layout.stores) {
            dense.push(if half {
                DenseGuard::F16(
                    raw.bind(py)
                        .cast::<PyArray1<u16>>()?
                        .try_readwrite()
                        .map_err(busy)?,
                )
            } else {
                DenseGuard::F32(
                    raw.bind(py)
                        .cast::<PyArray1<f32>>()?
                        .try_readwrite()
                        .map_err(busy)?,
                )
            });
        }
        let mut tokens = match &self.token_ids_out {
            Some(a) => Some(a.bind(py).try_readwrite().map_err(busy)?),
            None => None,
        };
        let mut dense = dense.iter_mut();
        let mut stores = Vec::with_capacity(index.len());
        for idx in &mut index {
            let (rows, half_rows) = match dense.next() {
                Some(DenseGuard::F32(a)) => (Some(a.as_slice_mut()?), None),
                Some(DenseGuard::F16(a)) => (None, Some(a.as_slice_mut()?)),
                None => (None, None),
            };
            let index = idx.as_slice_mut()?;
            stores.push(sc::EmbeddingMut {
                index,
                rows,
                half_rows,
            });
        }
        let token_ids = match &mut tokens {
            Some(t) => Some(t.as_slice_mut()?),
            None => None,
        };
        let (f, m, l, s, y) = (
            features.as_slice_mut()?,
            mask.as_slice_mut()?,
            lengths.as_slice_mut()?,
            ids.as_slice_mut()?,
            labels.as_slice_mut()?,
        );
        let (max_cxt, previous) = (self.layout.max_cxt, self.width);
        let reactions = &mut self.reactions;
        self.width = py.detach(|| {
            let out = sc::BatchMut::new(max_cxt, f, m, l, s, y)?;
            let mut out = out.with_reactions(reactions)?.reusing(previous);
            if !stores.is_empty() {
                out = out.with_embeddings(&mut stores);
            }
            if let Some(t) = token_ids {
                out = out.with_token_ids(t);
            }
            fill(&mut out)?;
            Ok::<_, sc::LoadError>(out.width())
        })?;
        Ok(())
    }
}

pub(crate) fn borrow_batch<'py>(batch: &Bound<'py, PyBatch>) -> PyResult<PyRefMut<'py, PyBatch>> {
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

/// What `Vocabulary.token_ids` (vocab.rs) reads of a Batch.
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
