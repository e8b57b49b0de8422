//! Texts for embedding: the distinct inputs of a text field
//! (`Cache.unique_texts`). Stores are written and read by the crate (see
//! `store.rs` and `loader.rs`).

use std::sync::Arc;

use numpy::{PyArray1, PyArray2, PyArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyString};

use socialctx as sc;

use crate::convert::{Reader, py_index};
use crate::error::Result;

/// The distinct non-empty inputs of one text field over a set of threads,
/// ordered by token count, with their counts and a per-reaction index.
/// Made by `Cache.unique_texts`.
#[pyclass(frozen, module = "socialctx", name = "UniqueTexts")]
pub(crate) struct PyUniqueTexts {
    reader: Arc<Reader>,
    inner: sc::UniqueTexts,
}

impl PyUniqueTexts {
    /// The distinct inputs of `field` over the threads at `positions`
    /// (all when None), collected with the GIL released.
    pub(crate) fn collect(
        py: Python<'_>,
        reader: &Arc<Reader>,
        field: &str,
        positions: Option<Vec<usize>>,
    ) -> Result<PyUniqueTexts> {
        let field: sc::TextField = field.parse().map_err(PyValueError::new_err)?;
        let c: &Reader = &**reader;
        let inner = py.detach(|| sc::UniqueTexts::collect(c, field, positions.as_deref()))?;
        Ok(PyUniqueTexts {
            reader: Arc::clone(reader),
            inner,
        })
    }

    /// The tokens of input `i` as a Python list of str, made straight from
    /// the memory map (no Rust `String` per token on the way).
    fn tokens_at<'py>(&self, py: Python<'py>, i: usize) -> Result<Bound<'py, PyList>> {
        let t = self.inner.tokens(&*self.reader, i)?;
        Ok(PyList::new(py, t.iter().map(|s| PyString::new(py, s)))?)
    }

    fn check(&self, i: isize) -> PyResult<usize> {
        py_index(i, self.inner.len(), |i, len| {
            format!("input {i} out of range for {len} unique texts")
        })
    }
}

#[pymethods]
impl PyUniqueTexts {
    fn __len__(&self) -> usize {
        self.inner.len()
    }

    /// The tokens of input `i`.
    fn __getitem__<'py>(&self, py: Python<'py>, i: isize) -> Result<Bound<'py, PyList>> {
        self.tokens_at(py, self.check(i)?)
    }

    fn __repr__(&self) -> String {
        format!(
            "socialctx.UniqueTexts(field={:?}, unique={}, reactions={})",
            self.inner.field().as_str(),
            self.inner.len(),
            self.inner.index().len()
        )
    }

    /// "reply" or "description".
    #[getter]
    fn field(&self) -> &'static str {
        self.inner.field().as_str()
    }

    /// The token lists of inputs `start..stop`, in order.
    fn batch<'py>(&self, py: Python<'py>, start: usize, stop: usize) -> Result<Bound<'py, PyList>> {
        let stop = stop.min(self.inner.len());
        let lists = (start.min(stop)..stop)
            .map(|i| self.tokens_at(py, i))
            .collect::<Result<Vec<_>>>()?;
        Ok(PyList::new(py, lists)?)
    }

    /// np.uint32 [unique]: reactions per input.
    #[getter]
    fn counts<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<u32>> {
        let v: Vec<u32> = (0..self.inner.len()).map(|i| self.inner.count(i)).collect();
        PyArray1::from_vec(py, v)
    }

    /// np.uint32 [unique]: tokens per input (non-decreasing).
    #[getter]
    fn token_counts<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<u32>> {
        let v: Vec<u32> = (0..self.inner.len())
            .map(|i| self.inner.token_count(i))
            .collect();
        PyArray1::from_vec(py, v)
    }

    /// np.uint64 [unique, 2]: each input's content key (xxh3-128 of its
    /// tokens, low then high half): equal inputs have equal keys in any
    /// cache (what `embed` reuses rows by).
    #[getter]
    fn keys<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray2<u64>>> {
        let n = self.inner.len();
        let mut flat = Vec::with_capacity(n * 2);
        for i in 0..n {
            let k = self.inner.key(i);
            flat.extend([k as u64, (k >> 64) as u64]);
        }
        PyArray1::from_vec(py, flat).reshape([n, 2])
    }

    /// np.int64 [unique]: per input, the row of `keys` (an `uint64 [n, 2]`
    /// array of content keys, low then high half, such as a previous
    /// embedding store's `keys.npy`) with the same key, or -1.
    fn positions_in<'py>(
        &self,
        py: Python<'py>,
        keys: numpy::PyReadonlyArray2<'py, u64>,
    ) -> PyResult<Bound<'py, PyArray1<i64>>> {
        let view = keys.as_array();
        if view.ncols() != 2 {
            return Err(PyValueError::new_err(format!(
                "keys must have shape [n, 2], not {:?}",
                view.shape()
            )));
        }
        let keys: Vec<u128> = view
            .rows()
            .into_iter()
            .map(|r| u128::from(r[0]) | (u128::from(r[1]) << 64))
            .collect();
        let inner = &self.inner;
        let at = py.detach(|| inner.positions_in(&keys));
        let out: Vec<i64> = at.iter().map(|p| p.map_or(-1, i64::from)).collect();
        Ok(PyArray1::from_vec(py, out))
    }

    /// np.uint32 [reactions]: per reaction of the threads (thread order,
    /// then time order), its input, or 0xFFFFFFFF (NONE) for none.
    #[getter]
    fn index<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<u32>> {
        PyArray1::from_slice(py, self.inner.index())
    }

    /// np.uint64 [threads + 1]: where each thread's reactions start in `index`.
    #[getter]
    fn offsets<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<u64>> {
        PyArray1::from_slice(py, self.inner.offsets())
    }

    /// The value of `index` for a reaction with no input.
    #[classattr]
    #[allow(non_snake_case)]
    fn NONE() -> u32 {
        sc::UniqueTexts::NONE
    }
}
