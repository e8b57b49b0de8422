//! `socialctx._socialctx`: the Python binding of the socialctx crate.
//!
//! A thin layer over the crate's public API. Three rules shape it:
//! - Rust work runs with the GIL released (`Python::detach`): builds,
//!   opens, batch fills, statistics.
//! - Cache data is never copied: feature rows and extended columns are NumPy
//!   views of the memory map whose `base` is the `Cache` object, so a view
//!   keeps the map alive after `del cache`.
//! - Batches are NumPy arrays allocated once; `Loader.fill` writes straight
//!   into them through `socialctx::Loader::fill_into`.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use numpy::ndarray::{ArrayView1, ArrayView2};
use numpy::{Element, IntoPyArray, PyArray1, PyArray2, PyArrayMethods};
use pyo3::exceptions::{PyException, PyIndexError, PyKeyError, PyKeyboardInterrupt, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use pyo3::{create_exception, intern};

use socialctx as sc;

mod background;
mod cli;
mod loader;
mod texts;
mod vocab;

use loader::{Epoch, PyBatch, PyLoader};
use texts::PyUniqueTexts;

create_exception!(
    socialctx,
    Error,
    PyException,
    "Base class of every socialctx error."
);
create_exception!(
    socialctx,
    CacheError,
    Error,
    "A cache is missing, damaged or of another format version; the message names the file and the reason."
);
create_exception!(
    socialctx,
    BuildError,
    Error,
    "A build failed (an unusable corpus or cache directory, a lock held by another build, an I/O error)."
);
create_exception!(
    socialctx,
    EmbeddingError,
    Error,
    "An embedding store is missing, damaged, or was computed for another content of the cache (rebuilt since); the message says which and why."
);
create_exception!(
    socialctx,
    BadInputError,
    BuildError,
    "A strict build met bad input: `path` (relative to the corpus) and `reason` say which and why."
);

fn open_err(e: sc::OpenError) -> PyErr {
    CacheError::new_err(e.to_string())
}

fn build_err(py: Python<'_>, e: sc::BuildError) -> PyErr {
    match e {
        sc::BuildError::StrictBadInput {
            ref path,
            ref reason,
        } => {
            let err = BadInputError::new_err(e.to_string());
            let value = err.value(py);
            let _ = value.setattr("path", path.to_string_lossy().into_owned());
            let _ = value.setattr("reason", reason.clone());
            err
        }
        sc::BuildError::Cancelled => PyKeyboardInterrupt::new_err(e.to_string()),
        other => BuildError::new_err(other.to_string()),
    }
}

pub(crate) fn load_err(e: sc::LoadError) -> PyErr {
    match e {
        sc::LoadError::Cache(e) => open_err(e),
        e @ sc::LoadError::NoSuchThread { .. } => PyIndexError::new_err(e.to_string()),
        e @ sc::LoadError::NoSuchSource { .. } => PyKeyError::new_err(e.to_string()),
        e @ (sc::LoadError::BatchTooSmall { .. } | sc::LoadError::BufferSize { .. }) => {
            PyValueError::new_err(e.to_string())
        }
        other => Error::new_err(other.to_string()),
    }
}

/// A cache validated all at once or file by file on first use: either
/// reads through the crate's one read API.
pub(crate) type AnyCache = dyn sc::ThreadSource + Send + Sync;

/// A read-only NumPy view of `data` whose base is `owner` (which keeps the
/// memory map alive).
fn view1<'py, T: Element>(owner: Bound<'py, PyAny>, data: &[T]) -> PyResult<Bound<'py, PyAny>> {
    let view = ArrayView1::from(data);
    // SAFETY: `data` lives in a memory map owned (through an Arc) by
    // `owner`, which becomes the array's base, and is never written.
    let array = unsafe { PyArray1::borrow_from_array(&view, owner) };
    readonly(array.into_any())
}

fn view2<'py, T: Element>(
    owner: Bound<'py, PyAny>,
    data: &[T],
    cols: usize,
) -> PyResult<Bound<'py, PyAny>> {
    let rows = data.len().checked_div(cols).unwrap_or(0);
    let view = ArrayView2::from_shape((rows, cols), data)
        .map_err(|e| Error::new_err(format!("internal: bad view shape: {e}")))?;
    // SAFETY: as in `view1`.
    let array = unsafe { PyArray2::borrow_from_array(&view, owner) };
    readonly(array.into_any())
}

fn readonly(array: Bound<'_, PyAny>) -> PyResult<Bound<'_, PyAny>> {
    let kwargs = PyDict::new(array.py());
    kwargs.set_item(intern!(array.py(), "write"), false)?;
    array.call_method(intern!(array.py(), "setflags"), (), Some(&kwargs))?;
    Ok(array)
}

/// An open feature cache. Made by `socialctx.open`.
#[pyclass(frozen, module = "socialctx", name = "Cache")]
pub(crate) struct PyCache {
    pub(crate) inner: Arc<AnyCache>,
    /// Whether every file was validated at open (`validate="all"`).
    validated: bool,
}

/// Per reaction of `view`, the token list `list` picks, as Python lists.
fn token_lists<'a>(
    view: &sc::ThreadView<'a>,
    list: impl Fn(&sc::ReactionView<'a>) -> Option<sc::TokenList<'a>>,
) -> Vec<Option<Vec<String>>> {
    view.reactions()
        .map(|r| list(&r).map(|t| t.iter().map(str::to_owned).collect()))
        .collect()
}

/// Python's reading of index `i` into `len` items (negative counts from
/// the end); IndexError with `what(i, len)` when out of range.
pub(crate) fn py_index(
    i: isize,
    len: usize,
    what: impl FnOnce(isize, usize) -> String,
) -> PyResult<usize> {
    let n = len as isize;
    let j = if i < 0 { i + n } else { i };
    if j < 0 || j >= n {
        return Err(PyIndexError::new_err(what(i, len)));
    }
    Ok(j as usize)
}

impl PyCache {
    fn view(&self, i: usize) -> PyResult<sc::ThreadView<'_>> {
        self.inner
            .thread(i)
            .map_err(open_err)?
            .ok_or_else(|| PyIndexError::new_err(format!("no thread at position {i}")))
    }

    fn index(&self, i: isize) -> PyResult<usize> {
        py_index(i, self.inner.len(), |i, len| {
            format!("thread index {i} out of range for a cache of {len} threads")
        })
    }
}

#[pymethods]
impl PyCache {
    fn __len__(&self) -> usize {
        self.inner.len()
    }

    fn __getitem__(slf: &Bound<'_, Self>, i: isize) -> PyResult<PyThread> {
        let index = slf.get().index(i)?;
        slf.get().view(index)?;
        Ok(PyThread {
            cache: slf.clone().unbind(),
            index,
        })
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
            self.inner.dir().display().to_string(),
            self.inner.len()
        )
    }

    /// The thread with this source id, or None.
    fn get(slf: &Bound<'_, Self>, source_id: u64) -> PyResult<Option<PyThread>> {
        Ok(slf
            .get()
            .inner
            .position(source_id)
            .map_err(open_err)?
            .map(|index| PyThread {
                cache: slf.clone().unbind(),
                index,
            }))
    }

    /// Position of the thread with this source id, or None.
    fn position(&self, source_id: u64) -> PyResult<Option<usize>> {
        self.inner.position(source_id).map_err(open_err)
    }

    /// The cache directory.
    #[getter]
    fn path(&self) -> String {
        self.inner.dir().to_string_lossy().into_owned()
    }

    /// The distinct non-empty inputs of `field` ("reply": the RPDNN reply
    /// tokens; "description": the authors' descriptions split on ' ') over
    /// the threads at `positions` (all when None), with their counts and a
    /// per-reaction index: what to embed once instead of per reaction.
    #[pyo3(signature = (field="reply", positions=None))]
    fn unique_texts(
        slf: &Bound<'_, Self>,
        field: &str,
        positions: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyUniqueTexts> {
        let positions = positions
            .map(|p| positions_of(p, slf.get().inner.len()))
            .transpose()?;
        texts::collect(slf.py(), slf, field, positions)
    }

    /// Token counts of `field` ("reply" or "description") over the
    /// reactions of `kinds` ("replies", the reference's context, "retweets"
    /// or "both") of the threads at `positions` (all when None), counted in
    /// Rust in one pass: tokens seen at least `min_count` times, the
    /// `max_size` most frequent when given. Memory grows with the distinct
    /// tokens only.
    #[pyo3(signature = (field="reply", *, kinds="replies", positions=None, min_count=1, max_size=None))]
    fn vocabulary(
        slf: &Bound<'_, Self>,
        field: &str,
        kinds: &str,
        positions: Option<&Bound<'_, PyAny>>,
        min_count: u64,
        max_size: Option<usize>,
    ) -> PyResult<vocab::PyVocabulary> {
        vocab::count(slf.py(), slf, field, kinds, positions, min_count, max_size)
    }

    /// The cache's content id (16 hex digits): equal for equal content.
    /// Name files derived from the cache after it.
    #[getter]
    fn content_id(&self) -> String {
        self.inner.content_id()
    }

    /// `CACHE_DIR/derived`: where files computed from the cache belong
    /// (rebuilds keep it).
    #[getter]
    fn derived_dir(&self) -> String {
        self.inner.derived_dir().to_string_lossy().into_owned()
    }

    /// The 28 feature names, in column order.
    #[getter]
    fn feature_names(&self) -> Vec<&'static str> {
        sc::FEATURE_NAMES.to_vec()
    }

    /// Names of the extended per-reaction columns (empty for a build without them).
    #[getter]
    fn reaction_columns(&self) -> Vec<String> {
        self.inner.manifest().reaction_columns.clone()
    }

    /// Names of the extended per-thread columns.
    #[getter]
    fn thread_columns(&self) -> Vec<String> {
        self.inner.manifest().thread_columns.clone()
    }

    /// Source ids of every thread, in cache order (np.uint64 [T]).
    #[getter]
    fn source_ids<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray1<u64>>> {
        let ids = py.detach(|| self.each_thread(|t| t.source_id()))?;
        Ok(ids.into_pyarray(py))
    }

    /// Label codes of every thread (np.int8 [T]: 1 rumour, 0 non-rumour, -1 unknown).
    #[getter]
    fn labels<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray1<i8>>> {
        let labels = py.detach(|| self.each_thread(|t| t.label_code()))?;
        Ok(labels.into_pyarray(py))
    }

    /// The bad-input report of the build: a list of {"path", "reason"}.
    #[getter]
    fn report<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let report = py.detach(|| self.inner.report()).map_err(open_err)?;
        let list = PyList::empty(py);
        for line in report {
            let d = PyDict::new(py);
            d.set_item("path", line.path)?;
            d.set_item("reason", line.reason)?;
            list.append(d)?;
        }
        Ok(list)
    }

    /// The manifest, as a dict (the JSON of manifest.json).
    #[getter]
    fn manifest<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let json = serde_json::to_string(self.inner.manifest())
            .map_err(|e| Error::new_err(e.to_string()))?;
        py.import("json")?.call_method1("loads", (json,))
    }
}

impl PyCache {
    fn each_thread<T>(&self, f: impl Fn(&sc::NumView<'_>) -> T) -> PyResult<Vec<T>> {
        (0..self.inner.len())
            .map(|i| match self.inner.numbers(i) {
                Ok(Some(t)) => Ok(f(&t)),
                Ok(None) => Err(PyIndexError::new_err(format!("no thread at position {i}"))),
                Err(e) => Err(open_err(e)),
            })
            .collect()
    }
}

/// Iterator over a cache's threads, in source-id order.
#[pyclass(module = "socialctx")]
struct CacheIter {
    cache: Py<PyCache>,
    next: usize,
}

#[pymethods]
impl CacheIter {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&mut self, py: Python<'_>) -> PyResult<Option<PyThread>> {
        let cache = self.cache.get();
        if self.next >= cache.inner.len() {
            return Ok(None);
        }
        cache.view(self.next)?;
        let t = PyThread {
            cache: self.cache.clone_ref(py),
            index: self.next,
        };
        self.next += 1;
        Ok(Some(t))
    }
}

/// One thread of a cache: its source tweet and reactions.
#[pyclass(frozen, module = "socialctx", name = "Thread")]
struct PyThread {
    cache: Py<PyCache>,
    index: usize,
}

impl PyThread {
    fn view(&self) -> PyResult<sc::ThreadView<'_>> {
        self.cache.get().view(self.index)
    }

    fn owner<'py>(&self, py: Python<'py>) -> Bound<'py, PyAny> {
        self.cache.bind(py).clone().into_any()
    }
}

#[pymethods]
impl PyThread {
    fn __len__(&self) -> PyResult<usize> {
        Ok(self.view()?.reaction_count())
    }

    fn __repr__(&self) -> PyResult<String> {
        let t = self.view()?;
        Ok(format!(
            "socialctx.Thread(source_id={}, label={:?}, reactions={})",
            t.source_id(),
            t.label(),
            t.reaction_count()
        ))
    }

    /// Position of the thread in the cache.
    #[getter]
    fn position(&self) -> usize {
        self.index
    }

    /// Source tweet id.
    #[getter]
    fn source_id(&self) -> PyResult<u64> {
        Ok(self.view()?.source_id())
    }

    /// Event (the grandparent folder's name).
    #[getter]
    fn event(&self) -> PyResult<String> {
        Ok(self.view()?.event().to_owned())
    }

    /// Label folder name (`rumours`, `non-rumours`, ...).
    #[getter]
    fn label(&self) -> PyResult<String> {
        Ok(self.view()?.label().to_owned())
    }

    /// 1 rumour, 0 non-rumour, -1 unknown.
    #[getter]
    fn label_code(&self) -> PyResult<i8> {
        Ok(self.view()?.label_code())
    }

    /// Source tweet text.
    #[getter]
    fn source_text(&self) -> PyResult<String> {
        Ok(self.view()?.source_text().to_owned())
    }

    /// The source tweet author's user id (as the tweet's `user.id_str`).
    #[getter]
    fn source_user_id(&self) -> PyResult<String> {
        Ok(self.view()?.source_user_id().to_owned())
    }

    /// Source tweet `created_at`, seconds since the epoch.
    #[getter]
    fn source_created_at(&self) -> PyResult<i64> {
        Ok(self.view()?.source_created_at())
    }

    /// The reactions' 28 features (np.float32 [n, 28]): a read-only,
    /// zero-copy view of the memory map, the same memory on every access.
    #[getter]
    fn features<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let t = self.view()?;
        view2(
            self.owner(py),
            t.features().as_flattened(),
            sc::NUM_FEATURES,
        )
    }

    /// Reaction tweet ids (np.uint64 [n]), in (created_at, id) order.
    #[getter]
    fn reaction_ids<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray1<u64>>> {
        let t = self.view()?;
        let v: Vec<u64> = t.reaction_records().map(|r| r.id).collect();
        Ok(v.into_pyarray(py))
    }

    /// Reaction `created_at`, seconds since the epoch (np.int64 [n]).
    #[getter]
    fn created_at<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray1<i64>>> {
        let t = self.view()?;
        let v: Vec<i64> = t.reaction_records().map(|r| r.created_at).collect();
        Ok(v.into_pyarray(py))
    }

    /// Reaction kinds (np.uint8 [n]): 1 reply, 0 retweet (as feature `c_type`).
    #[getter]
    fn kinds<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray1<u8>>> {
        let t = self.view()?;
        let v: Vec<u8> = t
            .reaction_records()
            .map(|r| u8::from(r.kind == sc::ReactionKind::Reply))
            .collect();
        Ok(v.into_pyarray(py))
    }

    /// Reaction texts.
    #[getter]
    fn texts(&self) -> PyResult<Vec<String>> {
        Ok(self
            .view()?
            .reactions()
            .map(|r| r.text().to_owned())
            .collect())
    }

    /// The reaction authors' descriptions (None where null).
    #[getter]
    fn descriptions(&self) -> PyResult<Vec<Option<String>>> {
        Ok(self
            .view()?
            .reactions()
            .map(|r| r.user_description().map(str::to_owned))
            .collect())
    }

    /// Per reaction, RPDNN's `preprocessing_tweet_text` tokens of the reply
    /// (`[]` where the reference gives none; None for a retweet, or a reply
    /// whose `text` is not a string).
    #[getter]
    fn reply_tokens(&self) -> PyResult<Vec<Option<Vec<String>>>> {
        Ok(token_lists(&self.view()?, |r| r.reply_tokens()))
    }

    /// Per reaction, the author's description split on ' ' (None without a
    /// description: `has_description` = 0).
    #[getter]
    fn description_tokens(&self) -> PyResult<Vec<Option<Vec<String>>>> {
        Ok(token_lists(&self.view()?, |r| r.description_tokens()))
    }

    /// An extended per-reaction column (np.float32 [n], NaN where unknown):
    /// a read-only, zero-copy view. KeyError for an unknown name.
    fn column<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyAny>> {
        let cache = self.cache.get();
        let c = cache.inner.reaction_column(name).ok_or_else(|| {
            PyKeyError::new_err(format!(
                "no reaction column {name:?} (this cache has {:?})",
                cache.inner.manifest().reaction_columns
            ))
        })?;
        let t = self.view()?;
        view1(self.owner(py), t.column(c))
    }

    /// An extended per-thread value (e.g. "veracity"), None when unknown.
    /// KeyError for an unknown name.
    fn value(&self, name: &str) -> PyResult<Option<f32>> {
        let cache = self.cache.get();
        let c = cache.inner.thread_column(name).ok_or_else(|| {
            PyKeyError::new_err(format!(
                "no thread column {name:?} (this cache has {:?})",
                cache.inner.manifest().thread_columns
            ))
        })?;
        Ok(self.view()?.thread_value(c).filter(|v| !v.is_nan()))
    }
}

/// Progress of a build run from Python: counters read by the waiting
/// thread, and the flag Ctrl-C sets.
#[derive(Default)]
struct BuildProgress {
    total: AtomicU64,
    done: AtomicU64,
    cancel: AtomicBool,
}

impl sc::Progress for BuildProgress {
    fn discovered(&self, threads: u64) {
        self.total.store(threads, Ordering::Relaxed);
    }
    fn thread_done(&self, _reactions: u64) {
        self.done.fetch_add(1, Ordering::Relaxed);
    }
    fn cancelled(&self) -> bool {
        self.cancel.load(Ordering::Relaxed)
    }
}

/// Builds the cache for `corpus` at `cache_dir` (replacing any cache there
/// atomically) and returns a summary dict.
#[pyfunction]
#[pyo3(signature = (corpus, cache_dir, *, threads=None, strict=false, extended=true, progress=true, incremental=false))]
#[allow(clippy::too_many_arguments)]
fn build<'py>(
    py: Python<'py>,
    corpus: PathBuf,
    cache_dir: PathBuf,
    threads: Option<usize>,
    strict: bool,
    extended: bool,
    progress: bool,
    incremental: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let mut opts = sc::BuildOptions::default()
        .strict(strict)
        .extended(extended);
    if let Some(n) = threads {
        if n == 0 {
            return Err(PyValueError::new_err("threads must be at least 1"));
        }
        opts = opts.threads(n);
    }
    let state = Arc::new(BuildProgress::default());
    let worker_state = Arc::clone(&state);
    let (c, d) = (corpus.clone(), cache_dir.clone());
    let job = move || {
        if incremental {
            sc::build_incremental(&c, &d, &opts, &*worker_state)
        } else {
            sc::build(&c, &d, &opts, &*worker_state)
        }
    };
    let show = progress
        && py
            .import("sys")?
            .getattr("stderr")?
            .call_method0("isatty")?
            .is_truthy()?;
    let started = Instant::now();
    let tick = || {
        if show {
            let (done, total) = (
                state.done.load(Ordering::Relaxed),
                state.total.load(Ordering::Relaxed),
            );
            eprint!(
                "\rsocialctx: {done}/{total} threads, {:.1} s",
                started.elapsed().as_secs_f64()
            );
        }
    };
    let (result, interrupted) = background::run_build(py, &corpus, &state.cancel, job, tick)?;
    if show {
        eprint!("\r\x1b[K");
    }
    if let Some(e) = interrupted {
        // Too late to stop: the build finished and published before it saw
        // the flag. Still raise (the user asked to stop), but say so.
        if result.is_ok() {
            return Err(PyKeyboardInterrupt::new_err(format!(
                "interrupted after the build finished: the new cache at {} is published",
                cache_dir.display()
            )));
        }
        return Err(e);
    }
    let summary = result.map_err(|e| build_err(py, e))?;
    let m = &summary.manifest;
    let d = PyDict::new(py);
    d.set_item("cache_dir", cache_dir.to_string_lossy())?;
    d.set_item("threads", m.threads)?;
    d.set_item("reactions", m.reactions)?;
    d.set_item("replies", m.replies)?;
    d.set_item("retweets", m.retweets)?;
    d.set_item("skipped", summary.report.len())?;
    d.set_item("shards", m.shards.len())?;
    d.set_item("workers", summary.workers)?;
    d.set_item("seconds", summary.elapsed.as_secs_f64())?;
    d.set_item("reused", summary.reused)?;
    d.set_item("files_read", summary.files_read)?;
    if let Some(note) = &summary.incremental {
        d.set_item("incremental", note)?;
    }
    Ok(d)
}

/// Walks `corpus` once and writes the plan of a partitioned build to
/// `plan_file`; returns `{"threads", "id"}`.
#[pyfunction]
#[pyo3(signature = (corpus, plan_file, *, threads=None, strict=false, extended=true))]
fn plan<'py>(
    py: Python<'py>,
    corpus: PathBuf,
    plan_file: PathBuf,
    threads: Option<usize>,
    strict: bool,
    extended: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let mut opts = sc::BuildOptions::default()
        .strict(strict)
        .extended(extended);
    if let Some(n) = threads {
        opts = opts.threads(n.max(1));
    }
    let plan = py
        .detach(|| {
            let plan = sc::Plan::create(&corpus, &opts)?;
            plan.save(&plan_file)?;
            Ok::<_, sc::BuildError>(plan)
        })
        .map_err(|e| build_err(py, e))?;
    let d = PyDict::new(py);
    d.set_item("threads", plan.len())?;
    d.set_item("id", plan.id())?;
    Ok(d)
}

/// Builds partition `index` of `count` of the plan in `plan_file` into the
/// cache directory `out` (GIL released); returns `{"threads", "reactions"}`.
#[pyfunction]
#[pyo3(signature = (corpus, plan_file, index, count, out, *, threads=1))]
fn build_partition<'py>(
    py: Python<'py>,
    corpus: PathBuf,
    plan_file: PathBuf,
    index: usize,
    count: usize,
    out: PathBuf,
    threads: usize,
) -> PyResult<Bound<'py, PyDict>> {
    let summary = py
        .detach(|| {
            let plan = sc::Plan::load(&plan_file)?;
            sc::build_partition(
                &corpus,
                &plan,
                (index, count),
                &out,
                threads,
                &sc::NoProgress,
            )
        })
        .map_err(|e| build_err(py, e))?;
    let d = PyDict::new(py);
    d.set_item("threads", summary.manifest.threads)?;
    d.set_item("reactions", summary.manifest.reactions)?;
    Ok(d)
}

/// Merges the partition caches `parts` into the cache at `out`,
/// byte-identical to a single build (GIL released); returns a summary dict.
#[pyfunction]
fn merge<'py>(py: Python<'py>, out: PathBuf, parts: Vec<PathBuf>) -> PyResult<Bound<'py, PyDict>> {
    let summary = py
        .detach(|| sc::merge(&out, &parts))
        .map_err(|e| build_err(py, e))?;
    let m = &summary.manifest;
    let d = PyDict::new(py);
    d.set_item("cache_dir", out.to_string_lossy())?;
    d.set_item("threads", m.threads)?;
    d.set_item("reactions", m.reactions)?;
    d.set_item("skipped", m.skipped)?;
    d.set_item("shards", m.shards.len())?;
    d.set_item("seconds", summary.elapsed.as_secs_f64())?;
    Ok(d)
}

/// Opens the cache in `cache_dir`.
#[pyfunction]
#[pyo3(signature = (cache_dir, *, validate="lazy"))]
fn open(py: Python<'_>, cache_dir: PathBuf, validate: &str) -> PyResult<PyCache> {
    let inner: Arc<AnyCache> = match validate {
        "lazy" => py
            .detach(|| sc::LazyCache::open(&cache_dir))
            .map(|c| Arc::new(c) as Arc<AnyCache>),
        "all" => py
            .detach(|| sc::Cache::open(&cache_dir))
            .map(|c| Arc::new(c) as Arc<AnyCache>),
        other => {
            return Err(PyValueError::new_err(format!(
                "validate must be \"lazy\" or \"all\", not {other:?}"
            )));
        }
    }
    .map_err(open_err)?;
    Ok(PyCache {
        inner,
        validated: validate == "all",
    })
}

/// Positions from an int64 NumPy array or any sequence of ints, checked
/// against the cache's length (negative positions count from the end).
pub(crate) fn positions_of(obj: &Bound<'_, PyAny>, len: usize) -> PyResult<Vec<usize>> {
    let check = |i: i64| -> PyResult<usize> {
        let j = if i < 0 { i + len as i64 } else { i };
        if j < 0 || j as u64 >= len as u64 {
            Err(PyIndexError::new_err(format!(
                "thread position {i} out of range for a cache of {len} threads"
            )))
        } else {
            Ok(j as usize)
        }
    };
    if let Ok(array) = obj.cast::<PyArray1<i64>>() {
        let ro = array.readonly();
        return ro.as_array().iter().map(|&i| check(i)).collect();
    }
    let v: Vec<i64> = obj.extract()?;
    v.into_iter().map(check).collect()
}

pub(crate) fn labels_of(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Vec<i8>>> {
    let Some(obj) = obj else { return Ok(None) };
    if obj.is_none() {
        return Ok(None);
    }
    if let Ok(array) = obj.cast::<PyArray1<i8>>() {
        return Ok(Some(array.readonly().as_array().to_vec()));
    }
    Ok(Some(obj.extract()?))
}

pub(crate) fn kinds_of(kinds: &str) -> PyResult<sc::Kinds> {
    match kinds {
        "replies" => Ok(sc::Kinds::Replies),
        "retweets" => Ok(sc::Kinds::Retweets),
        "both" => Ok(sc::Kinds::Both),
        other => Err(PyValueError::new_err(format!(
            "kinds must be \"replies\", \"retweets\" or \"both\", not {other:?}"
        ))),
    }
}

pub(crate) fn window_of(window_s: Option<f64>) -> PyResult<Option<Duration>> {
    window_s
        .map(|w| {
            Duration::try_from_secs_f64(w).map_err(|_| {
                PyValueError::new_err(format!("window_s must be a non-negative number, not {w}"))
            })
        })
        .transpose()
}

/// A split file matched against a cache.
#[pyclass(frozen, module = "socialctx", name = "Split")]
struct PySplit {
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
fn read_split(py: Python<'_>, csv_path: PathBuf, cache: &Bound<'_, PyCache>) -> PyResult<PySplit> {
    let inner = &cache.get().inner;
    let (split, resolved) = py
        .detach(|| {
            let split = sc::Split::read(&csv_path)?;
            let resolved = split.resolve(&**inner)?;
            Ok::<_, sc::LoadError>((split, resolved))
        })
        .map_err(load_err)?;
    let _ = split;
    let ids = resolved
        .positions
        .iter()
        .map(|&p| inner.numbers(p).map(|t| t.map_or(0, |t| t.source_id())))
        .collect::<Result<Vec<u64>, _>>()
        .map_err(open_err)?;
    Ok(PySplit {
        positions: resolved.positions.iter().map(|&p| p as i64).collect(),
        ids,
        labels: resolved.labels,
        missing: resolved.missing,
    })
}

/// Per-feature statistics (count, mean, population std, min, max) for normalisation.
#[pyclass(frozen, module = "socialctx", name = "FeatureStats")]
struct PyFeatureStats {
    inner: sc::FeatureStats,
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
    ) -> PyResult<Self> {
        let inner = &cache.get().inner;
        let positions = match positions {
            Some(p) if !p.is_none() => positions_of(p, inner.len())?,
            _ => (0..inner.len()).collect(),
        };
        let selection = sc::Selection {
            kinds: kinds_of(kinds)?,
            window: window_of(window_s)?,
            max_cxt: usize::MAX,
        };
        let stats = py
            .detach(|| sc::FeatureStats::compute(&**inner, &positions, &selection))
            .map_err(load_err)?;
        Ok(PyFeatureStats { inner: stats })
    }

    /// Reads statistics saved by `save` (or by the Rust `stats --save`).
    #[staticmethod]
    fn load(path: PathBuf) -> PyResult<Self> {
        Ok(PyFeatureStats {
            inner: sc::FeatureStats::load(&path).map_err(load_err)?,
        })
    }

    /// Writes the statistics as JSON (the same file as the Rust `stats --save`).
    fn save(&self, path: PathBuf) -> PyResult<()> {
        self.inner.save(&path).map_err(load_err)
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
    /// The feature names, in column order.
    #[getter]
    fn feature_names(&self) -> Vec<String> {
        self.inner.feature_names.clone()
    }
    fn __repr__(&self) -> String {
        format!(
            "socialctx.FeatureStats(threads={}, count={})",
            self.inner.threads, self.inner.count
        )
    }
}

#[pymodule]
fn _socialctx(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("Error", py.get_type::<Error>())?;
    m.add("CacheError", py.get_type::<CacheError>())?;
    m.add("BuildError", py.get_type::<BuildError>())?;
    m.add("BadInputError", py.get_type::<BadInputError>())?;
    m.add("EmbeddingError", py.get_type::<EmbeddingError>())?;
    m.add("FEATURE_NAMES", sc::FEATURE_NAMES.to_vec())?;
    m.add("NUM_FEATURES", sc::NUM_FEATURES)?;
    m.add("FORMAT_VERSION", sc::FORMAT_VERSION)?;
    m.add_function(wrap_pyfunction!(build, m)?)?;
    m.add_function(wrap_pyfunction!(open, m)?)?;
    m.add_function(wrap_pyfunction!(plan, m)?)?;
    m.add_function(wrap_pyfunction!(build_partition, m)?)?;
    m.add_function(wrap_pyfunction!(merge, m)?)?;
    m.add_function(wrap_pyfunction!(read_split, m)?)?;
    m.add_function(wrap_pyfunction!(loader::shuffled, m)?)?;
    m.add_function(wrap_pyfunction!(loader::_verify_store, m)?)?;
    m.add_function(wrap_pyfunction!(texts::_xxh3_file, m)?)?;
    m.add_function(wrap_pyfunction!(texts::_publish_dir, m)?)?;
    m.add_class::<PyUniqueTexts>()?;
    m.add_class::<vocab::PyVocabulary>()?;
    m.add_class::<PyCache>()?;
    m.add_class::<PyThread>()?;
    m.add_class::<PySplit>()?;
    m.add_class::<PyFeatureStats>()?;
    m.add_class::<PyLoader>()?;
    m.add_class::<PyBatch>()?;
    m.add_class::<Epoch>()?;
    m.add_class::<CacheIter>()?;
    cli::register(m)?;
    Ok(())
}
