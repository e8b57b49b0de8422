//! `FeatureStats`: per-feature statistics for normalisation, computed in
//! Rust with the GIL released, saved as the Rust `stats --save` JSON.

use std::path::PathBuf;

use numpy::PyArray1;
use pyo3::exceptions::{PyUserWarning, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use socialctx as sc;

use crate::cache::PyCache;
use crate::convert::{Reader, kinds_of, some_positions_of, window_of};
use crate::error::Result;

/// Per-feature statistics (count, mean, population std, min, max) for normalisation.
#[pyclass(frozen, module = "socialctx", name = "FeatureStats")]
pub(crate) struct PyFeatureStats {
    pub(crate) inner: sc::FeatureStats,
}

#[pymethods]
impl PyFeatureStats {
    /// Statistics over the reactions of the threads at `positions` (all
    /// threads when None) of the given kinds and time window.
    #[staticmethod]
    #[pyo3(signature = (cache, positions=None, *, kinds="replies", window_s=None))]
    fn compute(
        py: Python<'_>,
        cache: &Bound<'_, PyCache>,
        positions: Option<&Bound<'_, PyAny>>,
        kinds: &str,
        window_s: Option<f64>,
    ) -> Result<Self> {
        let reader = &*cache.get().reader;
        let positions =
            some_positions_of(positions, reader)?.unwrap_or_else(|| (0..reader.len()).collect());
        let selection = sc::Selection {
            kinds: kinds_of(kinds)?,
            window: window_of(window_s)?,
            max_cxt: usize::MAX,
        };
        let stats = py.detach(|| sc::FeatureStats::compute(reader, &positions, &selection))?;
        Ok(PyFeatureStats { inner: stats })
    }

    /// Reads statistics saved by `save` (or by the Rust `stats --save`).
    #[staticmethod]
    fn load(path: PathBuf) -> Result<Self> {
        Ok(PyFeatureStats {
            inner: sc::FeatureStats::load(&path)?,
        })
    }

    /// Writes the statistics as JSON (the same file as the Rust `stats --save`).
    fn save(&self, path: PathBuf) -> Result<()> {
        Ok(self.inner.save(&path)?)
    }

    /// Mean of each feature (np.float64 [28]).
    #[getter]
    fn mean<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<f64>> {
        PyArray1::from_slice(py, &self.inner.mean)
    }
    /// Population standard deviation (ddof 0) of each feature (np.float64 [28]).
    #[getter]
    fn std<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<f64>> {
        PyArray1::from_slice(py, &self.inner.std)
    }
    /// Minimum of each feature (np.float64 [28]).
    #[getter]
    fn min<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<f64>> {
        PyArray1::from_slice(py, &self.inner.min)
    }
    /// Maximum of each feature (np.float64 [28]).
    #[getter]
    fn max<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<f64>> {
        PyArray1::from_slice(py, &self.inner.max)
    }
    /// Number of reactions counted.
    #[getter]
    fn count(&self) -> u64 {
        self.inner.count
    }
    /// Number of threads visited.
    #[getter]
    fn threads(&self) -> u64 {
        self.inner.threads
    }
    /// The definition digest of the values they were computed over (the
    /// cache manifest's; "" for a cache built before it was recorded), or
    /// None for statistics saved before it was recorded. A Loader refuses
    /// statistics of another definition.
    #[getter]
    fn definition(&self) -> Option<String> {
        self.inner
            .computed_over
            .as_ref()
            .map(|o| o.definition.clone())
    }
    /// The content id of the cache generation they were computed over (None
    /// when not recorded). Another generation of the same definition (the
    /// corpus rebuilt since) is accepted: statistics that lag are normal.
    #[getter]
    fn content_id(&self) -> Option<String> {
        self.inner
            .computed_over
            .as_ref()
            .map(|o| o.content_id.clone())
    }
    /// The reactions counted, `"replies"`, `"retweets"` or `"both"` (None
    /// when not recorded).
    #[getter]
    fn kinds(&self) -> Option<String> {
        self.inner.computed_over.as_ref().map(|o| o.kinds.clone())
    }
    /// The time window in seconds they were computed with (None: every
    /// reaction, or not recorded).
    #[getter]
    fn window_s(&self) -> Option<f64> {
        self.inner.computed_over.as_ref().and_then(|o| o.window_s)
    }
    /// The feature names, in column order.
    #[getter]
    fn feature_names(&self) -> Vec<String> {
        self.inner.feature_names.clone()
    }
    /// Pickling (spawn and forkserver DataLoader workers, `copy.deepcopy`):
    /// the JSON `save` writes.
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTuple>> {
        let py = slf.py();
        let json = serde_json::to_string(&slf.get().inner)
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        let remake = slf.get_type().getattr("_from_json")?;
        PyTuple::new(
            py,
            [remake.into_any(), (json,).into_pyobject(py)?.into_any()],
        )
    }

    /// Remakes pickled statistics (see `__reduce__`), checked as `load` checks a file.
    #[staticmethod]
    fn _from_json(json: &str) -> PyResult<Self> {
        let bad =
            |reason: String| PyValueError::new_err(format!("not pickled FeatureStats: {reason}"));
        let inner: sc::FeatureStats = serde_json::from_str(json).map_err(|e| bad(e.to_string()))?;
        if inner
            .feature_names
            .iter()
            .map(String::as_str)
            .ne(sc::Feature::NAMES)
        {
            return Err(bad("feature names differ from this library's".into()));
        }
        Ok(PyFeatureStats { inner })
    }

    fn __repr__(&self) -> String {
        let over = self
            .inner
            .computed_over
            .as_ref()
            .map_or(String::new(), |o| {
                format!(
                    ", definition={:?}, content_id={:?}",
                    o.definition, o.content_id
                )
            });
        format!(
            "socialctx.FeatureStats(threads={}, count={}{over})",
            self.inner.threads, self.inner.count
        )
    }
}

/// `Loader(cache, stats=...)`: refuses statistics of values of another
/// definition, warns when that cannot be checked (see
/// `FeatureStats::check_for`). Anything else given as `stats` is left to
/// the Loader's own keyword check.
pub(crate) fn check_stats_option(
    py: Python<'_>,
    reader: &Reader,
    options: Option<&Bound<'_, PyDict>>,
) -> Result<()> {
    let Some(given) = options.map(|o| o.get_item("stats")).transpose()?.flatten() else {
        return Ok(());
    };
    let Ok(stats) = given.cast::<PyFeatureStats>() else {
        return Ok(());
    };
    if let Some(warning) = stats.get().inner.check_for(reader)? {
        let message = std::ffi::CString::new(warning).unwrap_or_default();
        PyErr::warn(py, &py.get_type::<PyUserWarning>(), &message, 1)?;
    }
    Ok(())
}
