//! Embedding stores: `StoreWriter` (the crate's writer, for
//! `socialctx.embed`, which only calls the model) and `_open_store` (a
//! store opened and verified in full by the crate's reader).

use std::path::PathBuf;

use numpy::{PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};

use socialctx as sc;

use crate::cache::PyCache;
use crate::convert::{Keywords, Reader};
use crate::error::{EmbeddingError, Result};

use std::sync::Arc;

fn meta_json(meta: &sc::StoreMeta) -> PyResult<String> {
    serde_json::to_string(meta).map_err(|e| EmbeddingError::new_err(e.to_string()))
}

/// Opens store `name` of `cache` verified in full (metadata, every file's
/// checksum, headers, index, finite rows; with `same_content`, that it
/// belongs to this content of the cache; with `model_id`, that it was made
/// by that model). Returns its metadata as JSON and per segment its path
/// and first global row; raises EmbeddingError naming the file and the
/// reason.
#[pyfunction]
#[pyo3(signature = (cache, name, same_content=true, model_id=None))]
pub(crate) fn _open_store(
    py: Python<'_>,
    cache: &Bound<'_, PyCache>,
    name: &str,
    same_content: bool,
    model_id: Option<&str>,
) -> Result<(String, Vec<(PathBuf, usize)>)> {
    let c = &*cache.get().reader;
    let store = py.detach(|| {
        let store = if same_content {
            sc::EmbeddingStore::open(c, name)
        } else {
            sc::EmbeddingStore::open_any_content(c, name)
        }?;
        if let Some(id) = model_id {
            store.require_model(id)?;
        }
        Ok::<_, sc::EmbeddingError>(store)
    })?;
    let segments = store
        .segments()
        .map(|(p, first, _)| (p.to_owned(), first))
        .collect();
    Ok((meta_json(store.meta())?, segments))
}

/// Verifies store `name` of `cache` in full (`EmbeddingStore::verify`:
/// every file's checksum, headers, index, finite rows, whatever the
/// store's verified record says; damage found drops the record). Returns
/// its metadata as JSON; raises EmbeddingError naming the file and the
/// reason.
#[pyfunction]
pub(crate) fn _verify_store(
    py: Python<'_>,
    cache: &Bound<'_, PyCache>,
    name: &str,
) -> Result<String> {
    let c = &*cache.get().reader;
    let meta = py.detach(|| sc::EmbeddingStore::verify(c, name))?;
    Ok(meta_json(&meta)?)
}

/// The crate's `StoreWriter`: holds the store's lock from construction
/// until `finish` or `close`. `socialctx.embed` drives it: for each batch
/// in `done..batches`, the model's rows of `inputs(b)` go to `write(b,
/// rows)`; then `finish()`.
#[pyclass(module = "socialctx", name = "StoreWriter")]
pub(crate) struct PyStoreWriter {
    reader: Arc<Reader>,
    inner: Option<sc::StoreWriter>,
}

impl PyStoreWriter {
    fn writer(&self) -> PyResult<&sc::StoreWriter> {
        self.inner
            .as_ref()
            .ok_or_else(|| EmbeddingError::new_err("the store writer is closed"))
    }
}

#[pymethods]
impl PyStoreWriter {
    #[new]
    #[pyo3(
        signature = (cache, name, **options),
        text_signature = "(cache, name, *, field, half=False, batch_size=256, model_id=None, compact=False, reuse=True, resume=True, verify=False)"
    )]
    fn new(
        py: Python<'_>,
        cache: &Bound<'_, PyCache>,
        name: &str,
        options: Option<&Bound<'_, PyDict>>,
    ) -> Result<Self> {
        let mut kw = Keywords::new("StoreWriter()", options);
        let field: String = kw.get("field", String::new())?;
        let field: sc::TextField = field.parse().map_err(PyValueError::new_err)?;
        let w = sc::StoreWriter::new(name, field)
            .half(kw.get("half", false)?)
            .batch_size(kw.get("batch_size", 256)?)
            .model_id(kw.get::<Option<String>>("model_id", None)?.as_deref())
            .compact(kw.get("compact", false)?)
            .reuse(kw.get("reuse", true)?)
            .resume(kw.get("resume", true)?)
            .verify(kw.get("verify", false)?);
        kw.finish()?;
        let reader = Arc::clone(&cache.get().reader);
        let c: &Reader = &*reader;
        let w = py.detach(|| w.begin(c))?;
        Ok(PyStoreWriter {
            reader,
            inner: Some(w),
        })
    }

    /// Batches in all (the new inputs in batches of `batch_size`).
    #[getter]
    fn batches(&self) -> PyResult<usize> {
        Ok(self.writer()?.batches())
    }

    /// Segments of the previous store read and checked before reusing it
    /// (those changed since last verified; all with `verify=True`).
    #[getter]
    fn segments_read(&self) -> PyResult<usize> {
        Ok(self.writer()?.segments_read())
    }

    /// Batches already written.
    #[getter]
    fn done(&self) -> PyResult<usize> {
        Ok(self.writer()?.done())
    }

    /// Batches an interrupted embed had written.
    #[getter]
    fn resumed(&self) -> PyResult<usize> {
        Ok(self.writer()?.resumed())
    }

    /// The row width fixed so far, if any.
    #[getter]
    fn dim(&self) -> PyResult<Option<usize>> {
        Ok(self.writer()?.dim())
    }

    /// Inputs to embed.
    #[getter]
    fn new_inputs(&self) -> PyResult<usize> {
        Ok(self.writer()?.new_inputs())
    }

    /// Distinct inputs.
    #[getter]
    fn unique(&self) -> PyResult<usize> {
        Ok(self.writer()?.unique().map_or(0, |u| u.len()))
    }

    /// Reactions (the index's length).
    #[getter]
    fn reactions(&self) -> PyResult<usize> {
        Ok(self.writer()?.unique().map_or(0, |u| u.index().len()))
    }

    /// Inputs whose rows come from the previous store.
    #[getter]
    fn reused(&self) -> PyResult<usize> {
        Ok(self.writer()?.reused())
    }

    /// Rows of the previous store no reaction uses any more.
    #[getter]
    fn dropped(&self) -> PyResult<usize> {
        Ok(self.writer()?.dropped())
    }

    /// Whether the store is written as one segment.
    #[getter]
    fn compacting(&self) -> PyResult<bool> {
        Ok(self.writer()?.compacting())
    }

    /// Why a previous store was not reused, where it could not be read.
    #[getter]
    fn not_reused(&self) -> PyResult<Option<String>> {
        Ok(self.writer()?.not_reused().map(str::to_owned))
    }

    /// Why an interrupted embed of another model was started over.
    #[getter]
    fn restarted(&self) -> PyResult<Option<String>> {
        Ok(self.writer()?.restarted().map(str::to_owned))
    }

    /// The inputs of batch `b` as lists of tokens.
    fn inputs<'py>(&self, py: Python<'py>, b: usize) -> Result<Bound<'py, PyList>> {
        let w = self.writer()?;
        let Some(unique) = w.unique() else {
            return Ok(PyList::empty(py));
        };
        let out = PyList::empty(py);
        for &u in w.inputs(b) {
            let t = unique.tokens(&*self.reader, u as usize)?;
            out.append(PyList::new(py, t.iter().map(|s| PyString::new(py, s)))?)?;
        }
        Ok(out)
    }

    /// Writes batch `b`'s rows: float32, or float16 as uint16 bits,
    /// `[len(inputs(b)), dim]` C-contiguous. Rows that do not fit (width,
    /// count, values not finite) are a ValueError.
    fn write(&mut self, py: Python<'_>, b: usize, rows: &Bound<'_, PyAny>) -> Result<()> {
        let w = self
            .inner
            .as_mut()
            .ok_or_else(|| EmbeddingError::new_err("the store writer is closed"))?;
        let written = if let Ok(a) = rows.extract::<PyReadonlyArray2<'_, f32>>() {
            let dim = a.shape()[1];
            let s = a
                .as_slice()
                .map_err(|e| PyValueError::new_err(e.to_string()))?;
            py.detach(|| w.write_f32(b, s, dim))
        } else {
            let a = rows
                .extract::<PyReadonlyArray2<'_, u16>>()
                .map_err(|_| {
                    PyValueError::new_err(
                        "rows must be a 2-d float32 array, or uint16 (float16 bits) for a float16 store",
                    )
                })?;
            let dim = a.shape()[1];
            let s = a
                .as_slice()
                .map_err(|e| PyValueError::new_err(e.to_string()))?;
            py.detach(|| w.write_f16(b, s, dim))
        };
        match written {
            Err(sc::EmbeddingError::Rows { reason }) => Err(PyValueError::new_err(reason).into()),
            other => Ok(other?),
        }
    }

    /// Publishes the store; returns its metadata as JSON. Closes the writer.
    fn finish(&mut self, py: Python<'_>) -> Result<String> {
        let w = self
            .inner
            .take()
            .ok_or_else(|| EmbeddingError::new_err("the store writer is closed"))?;
        let meta = py.detach(|| w.finish())?;
        Ok(meta_json(&meta)?)
    }

    /// Releases the lock without publishing (what is written stays for the
    /// next embed to resume).
    fn close(&mut self) {
        self.inner = None;
    }
}
