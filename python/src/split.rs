//! `Split` and `read_split`: an RPDNN split CSV matched against a cache.

use std::path::PathBuf;

use numpy::PyArray1;
use pyo3::prelude::*;

use socialctx as sc;

use crate::cache::PyCache;
use crate::error::Result;

/// A split file matched against a cache.
#[pyclass(frozen, module = "socialctx", name = "Split")]
pub(crate) struct PySplit {
    positions: Vec<i64>,
    ids: Vec<u64>,
    labels: Vec<i8>,
    missing: Vec<u64>,
}

#[pymethods]
impl PySplit {
    /// Cache positions of the split's threads, in file order (np.int64).
    #[getter]
    fn positions<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<i64>> {
        PyArray1::from_slice(py, &self.positions)
    }
    /// Their source ids (np.uint64), aligned with `positions`.
    #[getter]
    fn ids<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<u64>> {
        PyArray1::from_slice(py, &self.ids)
    }
    /// Their labels from the CSV (np.int8: 1 rumour, 0 non-rumour), aligned with `positions`.
    #[getter]
    fn labels<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<i8>> {
        PyArray1::from_slice(py, &self.labels)
    }
    /// Ids of the CSV that the cache does not hold (np.uint64), in file order.
    #[getter]
    fn missing<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<u64>> {
        PyArray1::from_slice(py, &self.missing)
    }
    fn __len__(&self) -> usize {
        self.positions.len()
    }
    fn __repr__(&self) -> String {
        format!(
            "socialctx.Split(threads={}, missing={})",
            self.positions.len(),
            self.missing.len()
        )
    }
}

/// Reads an RPDNN split CSV and finds its threads in `cache`.
#[pyfunction]
pub(crate) fn read_split(
    py: Python<'_>,
    csv_path: PathBuf,
    cache: &Bound<'_, PyCache>,
) -> Result<PySplit> {
    let reader = &*cache.get().reader;
    let resolved = py.detach(|| sc::Split::read(&csv_path)?.resolve(reader))?;
    let ids = resolved
        .positions
        .iter()
        .map(|&p| reader.numbers(p).map(|t| t.map_or(0, |t| t.source_id())))
        .collect::<std::result::Result<Vec<u64>, _>>()?;
    Ok(PySplit {
        positions: resolved.positions.iter().map(|&p| p as i64).collect(),
        ids,
        labels: resolved.labels,
        missing: resolved.missing,
    })
}
