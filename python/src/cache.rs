//! `Cache` (made by `socialctx.open`) and its iterator: one class for a
//! cache validated all at once or file by file on first use, read through
//! the crate's one read API (`socialctx::ThreadSource`).

use std::path::PathBuf;
use std::sync::Arc;

use numpy::{IntoPyArray, PyArray1};
use pyo3::exceptions::{PyIndexError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use socialctx as sc;

use crate::arrow::PyArrowData;
use crate::convert::{
    CacheReader, Reader, field_item, fields_repr, kinds_of, py_index, some_positions_of,
};
use crate::error::{Error, Result};
use crate::texts::PyUniqueTexts;
use crate::thread::{PyThread, view_at};
use crate::vocab::PyVocabulary;

/// A rumour's veracity: none for a thread not labelled rumour, whatever its
/// `annotation.json` says. (The stored column, `dump --extended`'s, follows
/// the annotation alone: PHEME's one non-rumour annotated "unclear" has
/// "unverified" there, one veracity label more than there are rumours.)
pub(crate) fn veracity_of(reader: &Reader, t: &sc::NumView<'_>) -> Option<sc::Veracity> {
    if t.label_code() != sc::Label::Rumour.code() {
        return None;
    }
    let c = reader.thread_column("veracity")?;
    sc::Veracity::from_code(t.thread_value(c)?)
}

/// An open feature cache. Made by `socialctx.open`.
#[pyclass(frozen, module = "socialctx", name = "Cache")]
pub(crate) struct PyCache {
    pub(crate) reader: Arc<Reader>,
    /// Whether every file was validated at open (`validate="all"`).
    validated: bool,
}

impl<'a, 'py> FromPyObject<'a, 'py> for CacheReader {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        if let Ok(cache) = obj.cast::<PyCache>() {
            return Ok(CacheReader(cache.get().reader.clone()));
        }
        // A Loader (or anything else) by its `cache` attribute.
        if let Ok(cache) = obj.getattr("cache")
            && let Ok(cache) = cache.cast::<PyCache>()
        {
            return Ok(CacheReader(cache.get().reader.clone()));
        }
        Err(PyTypeError::new_err(format!(
            "expected a socialctx.Cache or socialctx.Loader, not {}",
            obj.get_type().name()?
        )))
    }
}

/// Opens the cache in `cache_dir`.
#[pyfunction]
#[pyo3(signature = (cache_dir, *, validate="lazy"))]
pub(crate) fn open(py: Python<'_>, cache_dir: PathBuf, validate: &str) -> Result<PyCache> {
    let reader: Arc<Reader> = match validate {
        "lazy" => Arc::new(py.detach(|| sc::LazyCache::open(&cache_dir))?),
        "all" => Arc::new(py.detach(|| sc::Cache::open(&cache_dir))?),
        other => {
            return Err(PyValueError::new_err(format!(
                "validate must be \"lazy\" or \"all\", not {other:?}"
            ))
            .into());
        }
    };
    Ok(PyCache {
        reader,
        validated: validate == "all",
    })
}

impl PyCache {
    fn thread_at(slf: &Bound<'_, Self>, index: usize) -> PyThread {
        PyThread {
            reader: Arc::clone(&slf.get().reader),
            owner: slf.clone().into_any().unbind(),
            index,
        }
    }

    fn each_thread<T>(&self, f: impl Fn(&sc::NumView<'_>) -> T) -> Result<Vec<T>> {
        (0..self.reader.len())
            .map(|i| match self.reader.numbers(i)? {
                Some(t) => Ok(f(&t)),
                None => Err(PyIndexError::new_err(format!("no thread at position {i}")).into()),
            })
            .collect()
    }
}

#[pymethods]
impl PyCache {
    fn __len__(&self) -> usize {
        self.reader.len()
    }

    fn __getitem__(slf: &Bound<'_, Self>, i: isize) -> Result<PyThread> {
        let index = py_index(i, slf.get().reader.len(), |i, len| {
            format!("thread index {i} out of range for a cache of {len} threads")
        })?;
        view_at(&*slf.get().reader, index)?;
        Ok(Self::thread_at(slf, index))
    }

    fn __iter__(slf: &Bound<'_, Self>) -> CacheIter {
        CacheIter {
            cache: slf.clone().unbind(),
            next: 0,
        }
    }

    fn __repr__(&self) -> String {
        let kind = if self.validated { "all" } else { "lazy" };
        format!(
            "socialctx.Cache({:?}, threads={}, validate={kind:?})",
            self.reader.dir().display().to_string(),
            self.reader.len()
        )
    }

    /// The thread with this source id, or None.
    fn get(slf: &Bound<'_, Self>, source_id: u64) -> Result<Option<PyThread>> {
        let position = slf.get().reader.position(source_id)?;
        Ok(position.map(|index| Self::thread_at(slf, index)))
    }

    /// Position of the thread with this source id, or None.
    fn position(&self, source_id: u64) -> Result<Option<usize>> {
        Ok(self.reader.position(source_id)?)
    }

    /// The cache as Arrow data (`__arrow_c_stream__`) for pyarrow, polars,
    /// DuckDB, pandas and `datasets`: one row per reaction (`level=
    /// "reactions"`) or per thread (`"threads"`), the `columns` named (all
    /// when None), of the threads at `positions` (all when None).
    #[pyo3(signature = (level="reactions", columns=None, positions=None))]
    fn to_arrow(
        &self,
        py: Python<'_>,
        level: &str,
        columns: Option<Vec<String>>,
        positions: Option<&Bound<'_, PyAny>>,
    ) -> Result<PyArrowData> {
        crate::arrow::to_arrow(py, &self.reader, level, columns, positions)
    }

    /// The cache directory.
    #[getter]
    fn path(&self) -> String {
        self.reader.dir().to_string_lossy().into_owned()
    }

    /// The distinct non-empty inputs of `field` ("reply": the RPDNN reply
    /// tokens; "description": the authors' descriptions split on ' ') over
    /// the threads at `positions` (all when None), with their counts and a
    /// per-reaction index: what to embed once instead of per reaction.
    #[pyo3(signature = (field="reply", positions=None))]
    fn unique_texts(
        &self,
        py: Python<'_>,
        field: &str,
        positions: Option<&Bound<'_, PyAny>>,
    ) -> Result<PyUniqueTexts> {
        let positions = some_positions_of(positions, &*self.reader)?;
        PyUniqueTexts::collect(py, &self.reader, field, positions)
    }

    /// Token counts of `field` ("reply" or "description") over the
    /// reactions of `kinds` ("replies", the reference's context, "retweets"
    /// or "both") of the threads at `positions` (all when None), counted in
    /// Rust in one pass: tokens seen at least `min_count` times, the
    /// `max_size` most frequent when given. Memory grows with the distinct
    /// tokens only.
    #[pyo3(signature = (field="reply", *, kinds="replies", positions=None, min_count=1, max_size=None))]
    fn vocabulary(
        &self,
        py: Python<'_>,
        field: &str,
        kinds: &str,
        positions: Option<&Bound<'_, PyAny>>,
        min_count: u64,
        max_size: Option<usize>,
    ) -> Result<PyVocabulary> {
        let field: sc::TextField = field.parse().map_err(PyValueError::new_err)?;
        let kinds = kinds_of(kinds)?;
        let positions = some_positions_of(positions, &*self.reader)?;
        let reader = &*self.reader;
        let vocab = py.detach(|| {
            sc::Vocabulary::count(
                reader,
                field,
                kinds,
                positions.as_deref(),
                min_count,
                max_size,
            )
        })?;
        Ok(PyVocabulary::new(vocab, self.reader.clone()))
    }

    /// The cache's content id (16 hex digits): equal for equal content.
    /// Name files derived from the cache after it.
    #[getter]
    fn content_id(&self) -> String {
        self.reader.content_id()
    }

    /// `CACHE_DIR/derived`: where files computed from the cache belong
    /// (rebuilds keep it).
    #[getter]
    fn derived_dir(&self) -> String {
        self.reader.derived_dir().to_string_lossy().into_owned()
    }

    /// The 28 feature names, in column order.
    #[getter]
    fn feature_names(&self) -> Vec<&'static str> {
        sc::Feature::NAMES.to_vec()
    }

    /// Names of the extended per-reaction columns (empty for a build without them).
    #[getter]
    fn reaction_columns(&self) -> Vec<String> {
        self.reader.manifest().reaction_columns.clone()
    }

    /// Names of the extended per-thread columns.
    #[getter]
    fn thread_columns(&self) -> Vec<String> {
        self.reader.manifest().thread_columns.clone()
    }

    /// Source ids of every thread, in cache order (np.uint64 [T]).
    #[getter]
    fn source_ids<'py>(&self, py: Python<'py>) -> Result<Bound<'py, PyArray1<u64>>> {
        let ids = py.detach(|| self.each_thread(|t| t.source_id()))?;
        Ok(ids.into_pyarray(py))
    }

    /// Label codes of every thread (np.int8 [T]: 1 rumour, 0 non-rumour, -1 unknown).
    #[getter]
    fn labels<'py>(&self, py: Python<'py>) -> Result<Bound<'py, PyArray1<i8>>> {
        let labels = py.detach(|| self.each_thread(|t| t.label_code()))?;
        Ok(labels.into_pyarray(py))
    }

    /// Threads per label code, per event and per event and label: the
    /// crate's count (`socialctx::summary::Tally`, the build summary's), as
    /// `{"labels": {code: n}, "events": {event: n}, "event_labels": {event:
    /// [unknown, non-rumour, rumour]}}`.
    fn thread_counts<'py>(&self, py: Python<'py>) -> Result<Bound<'py, PyDict>> {
        let reader = self.reader.as_ref();
        let tally = py.detach(|| sc::summary::Tally::of(reader))?;
        let out = PyDict::new(py);
        out.set_item("labels", tally.labels)?;
        out.set_item("events", tally.events)?;
        out.set_item("event_labels", tally.event_labels)?;
        Ok(out)
    }

    /// Veracity codes of every thread (np.int8 [T]: 0 false, 1 true, 2
    /// unverified; -1 for a thread not labelled rumour, whatever its
    /// annotation says, and for a rumour without a veracity annotation).
    #[getter]
    fn veracity<'py>(&self, py: Python<'py>) -> Result<Bound<'py, PyArray1<i8>>> {
        let reader = self.reader.as_ref();
        let codes = py.detach(|| {
            self.each_thread(|t| veracity_of(reader, t).map_or(-1, |v| v.code() as i8))
        })?;
        Ok(codes.into_pyarray(py))
    }

    /// The bad-input report of the build: a list of `BadInput` (`path`, `reason`).
    #[getter]
    fn report(&self, py: Python<'_>) -> Result<Vec<PyBadInput>> {
        let report = py.detach(|| self.reader.report())?;
        Ok(report
            .into_iter()
            .map(|inner| PyBadInput { inner })
            .collect())
    }

    /// The manifest, as a dict (the JSON of manifest.json).
    #[getter]
    fn manifest<'py>(&self, py: Python<'py>) -> Result<Bound<'py, PyAny>> {
        let json = serde_json::to_string(self.reader.manifest())
            .map_err(|e| Error::new_err(e.to_string()))?;
        Ok(py.import("json")?.call_method1("loads", (json,))?)
    }
}

/// Iterator over a cache's threads, in source-id order.
#[pyclass(module = "socialctx")]
pub(crate) struct CacheIter {
    cache: Py<PyCache>,
    next: usize,
}

#[pymethods]
impl CacheIter {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&mut self, py: Python<'_>) -> Result<Option<PyThread>> {
        let cache = self.cache.bind(py);
        if self.next >= cache.get().reader.len() {
            return Ok(None);
        }
        view_at(&*cache.get().reader, self.next)?;
        let t = PyCache::thread_at(cache, self.next);
        self.next += 1;
        Ok(Some(t))
    }
}

/// One input a build skipped: `path` (relative to the corpus) and `reason`.
#[pyclass(frozen, module = "socialctx", name = "BadInput")]
pub(crate) struct PyBadInput {
    inner: sc::BadInput,
}

#[pymethods]
impl PyBadInput {
    /// The file or thread, relative to the corpus root.
    #[getter]
    fn path(&self) -> &str {
        &self.inner.path
    }

    /// Why it was skipped.
    #[getter]
    fn reason(&self) -> &str {
        &self.inner.reason
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        fields_repr(slf.as_any(), "BadInput", &BAD_INPUT_FIELDS)
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other
            .cast::<PyBadInput>()
            .is_ok_and(|o| o.get().inner == self.inner)
    }

    /// Deprecated: `entry["path"]` of the dicts `Cache.report` returned; use
    /// the attributes.
    fn __getitem__<'py>(slf: &Bound<'py, Self>, key: &str) -> PyResult<Bound<'py, PyAny>> {
        field_item(slf.as_any(), "BadInput", &BAD_INPUT_FIELDS, key)
    }
}

const BAD_INPUT_FIELDS: [&str; 2] = ["path", "reason"];
