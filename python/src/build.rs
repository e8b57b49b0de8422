//! Building caches from Python: `build` (full or incremental), `plan`,
//! `build_partition` and `merge`, their typed results (`BuildSummary`,
//! `PlanSummary`), and the routine that runs a build on a thread of its own
//! while the calling thread waits with the GIL released and checks Python's
//! signals, so that Ctrl-C (or SIGTERM where the command makes it raise)
//! stops the build between threads and nothing is published.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use pyo3::exceptions::{PyKeyboardInterrupt, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use socialctx as sc;

use crate::convert::{Keywords, field, field_item, fields_reduce, fields_repr};
use crate::error::{BuildError, Result, deprecated_keyword};

/// Runs `job` on a new thread and waits for it, calling `tick` about every
/// 100 ms (progress display). A Python signal meanwhile sets `cancel` (the
/// job's `Progress::cancelled`) and is returned beside the job's result,
/// which is then `Cancelled`, or `Ok` when the job had already published.
pub(crate) fn run_build<T: Send + 'static>(
    py: Python<'_>,
    about: &Path,
    cancel: &AtomicBool,
    job: impl FnOnce() -> std::result::Result<T, sc::BuildError> + Send + 'static,
    mut tick: impl FnMut(),
) -> PyResult<(std::result::Result<T, sc::BuildError>, Option<PyErr>)> {
    let (tx, rx) = crossbeam_channel::bounded(1);
    let handle = std::thread::Builder::new()
        .name("socialctx-build".into())
        .spawn(move || {
            let _ = tx.send(job());
        })
        .map_err(|e| BuildError::new_err(format!("cannot start the build thread: {e}")))?;
    let mut interrupted = None;
    let result = loop {
        match py.detach(|| rx.recv_timeout(Duration::from_millis(100))) {
            Ok(r) => break r,
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => {
                break Err(sc::BuildError::Internal {
                    path: about.to_owned(),
                    message: "the build thread stopped without a result".into(),
                });
            }
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
        }
        if interrupted.is_none()
            && let Err(e) = py.check_signals()
        {
            // Stop between threads; the staging directory is removed and
            // any old cache stays. Wait for that, then report it.
            cancel.store(true, Ordering::Relaxed);
            interrupted = Some(e);
        }
        tick();
    };
    let _ = py.detach(|| handle.join());
    Ok((result, interrupted))
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

/// The `workers=` keyword (worker threads; None: one per core), or its
/// deprecated name `threads=`.
fn workers(py: Python<'_>, kw: &mut Keywords<'_, '_>, call: &str) -> PyResult<Option<usize>> {
    let old: Option<Option<usize>> = kw.given_value("threads")?;
    let new: Option<Option<usize>> = kw.given_value("workers")?;
    let workers = match (old, new) {
        (Some(_), Some(_)) => {
            return Err(PyValueError::new_err(format!(
                "{call}: give workers= only (threads= is its deprecated name)"
            )));
        }
        (Some(old), None) => {
            deprecated_keyword(py, call, "threads", "workers")?;
            old
        }
        (None, new) => new.flatten(),
    };
    if workers == Some(0) {
        return Err(PyValueError::new_err("workers must be at least 1"));
    }
    Ok(workers)
}

/// The content options a build and a plan share: `workers`, `strict`,
/// `extended`.
fn build_options(
    py: Python<'_>,
    kw: &mut Keywords<'_, '_>,
    call: &str,
) -> PyResult<sc::BuildOptions> {
    let mut opts = sc::BuildOptions::default()
        .strict(kw.get("strict", false)?)
        .extended(kw.get("extended", true)?);
    if let Some(n) = workers(py, kw, call)? {
        opts = opts.threads(n);
    }
    Ok(opts)
}

/// `build`'s keywords.
struct BuildArgs {
    options: sc::BuildOptions,
    /// Show a progress line on a terminal.
    progress: bool,
    /// Re-read only what changed since the cache there was built.
    incremental: bool,
    /// The crawler's list of what changed (`--changed`; with `incremental`).
    changed: Option<PathBuf>,
}

impl BuildArgs {
    fn from_keywords(py: Python<'_>, given: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        let mut kw = Keywords::new("build()", given);
        let args = BuildArgs {
            options: build_options(py, &mut kw, "build()")?,
            progress: kw.get("progress", true)?,
            incremental: kw.get("incremental", false)?,
            changed: kw.get("changed", None)?,
        };
        kw.finish()?;
        if args.changed.is_some() && !args.incremental {
            return Err(PyValueError::new_err(
                "build(changed=...) needs incremental=True: a change list says what changed \
                 since the previous incremental build",
            ));
        }
        Ok(args)
    }
}

/// Builds the cache for `corpus` at `cache_dir` (replacing any cache there
/// atomically) and returns its `BuildSummary`.
#[pyfunction]
#[pyo3(
    signature = (corpus, cache_dir, **options),
    text_signature = "(corpus, cache_dir, *, workers=None, strict=False, extended=True, progress=True, incremental=False, changed=None)"
)]
pub(crate) fn build(
    py: Python<'_>,
    corpus: PathBuf,
    cache_dir: PathBuf,
    options: Option<&Bound<'_, PyDict>>,
) -> Result<BuildSummary> {
    let args = BuildArgs::from_keywords(py, options)?;
    let state = Arc::new(BuildProgress::default());
    let worker_state = Arc::clone(&state);
    let (c, d) = (corpus.clone(), cache_dir.clone());
    let (opts, incremental) = (args.options.changed(args.changed), args.incremental);
    let job = move || {
        if incremental {
            sc::build_incremental(&c, &d, &opts, &*worker_state)
        } else {
            sc::build(&c, &d, &opts, &*worker_state)
        }
    };
    let show = args.progress
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
    let (result, interrupted) = run_build(py, &corpus, &state.cancel, job, tick)?;
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
            ))
            .into());
        }
        return Err(e.into());
    }
    Ok(BuildSummary::new(&result?, &cache_dir))
}

/// Walks `corpus` once and writes the plan of a partitioned build to
/// `plan_file`; returns its `PlanSummary`. `pin_files=True` also lists
/// every thread's tweet folders, so that partitions refuse a thread with
/// files added or removed since, or edited during their read.
#[pyfunction]
#[pyo3(
    signature = (corpus, plan_file, **options),
    text_signature = "(corpus, plan_file, *, workers=None, strict=False, extended=True, pin_files=False)"
)]
pub(crate) fn plan(
    py: Python<'_>,
    corpus: PathBuf,
    plan_file: PathBuf,
    options: Option<&Bound<'_, PyDict>>,
) -> Result<PlanSummary> {
    let mut kw = Keywords::new("plan()", options);
    let opts = build_options(py, &mut kw, "plan()")?;
    let pin_files: bool = kw.get("pin_files", false)?;
    kw.finish()?;
    let plan = py.detach(|| {
        let plan = if pin_files {
            sc::Plan::create_pinned(&corpus, &opts)?
        } else {
            sc::Plan::create(&corpus, &opts)?
        };
        plan.save(&plan_file)?;
        Ok::<_, sc::BuildError>(plan)
    })?;
    Ok(PlanSummary {
        threads: plan.len(),
        id: plan.id(),
    })
}

/// Builds partition `index` of `count` of the plan in `plan_file` into the
/// cache directory `out` (GIL released); returns its `BuildSummary`.
#[pyfunction]
#[pyo3(
    signature = (corpus, plan_file, index, count, out, **options),
    text_signature = "(corpus, plan_file, index, count, out, *, workers=1)"
)]
pub(crate) fn build_partition(
    py: Python<'_>,
    corpus: PathBuf,
    plan_file: PathBuf,
    index: usize,
    count: usize,
    out: PathBuf,
    options: Option<&Bound<'_, PyDict>>,
) -> Result<BuildSummary> {
    let mut kw = Keywords::new("build_partition()", options);
    let workers = workers(py, &mut kw, "build_partition()")?.unwrap_or(1);
    kw.finish()?;
    let summary = py.detach(|| {
        let plan = sc::Plan::load(&plan_file)?;
        sc::build_partition(
            &corpus,
            &plan,
            (index, count),
            &out,
            workers,
            &sc::NoProgress,
        )
    })?;
    Ok(BuildSummary::new(&summary, &out))
}

/// Merges the partition caches `parts` into the cache at `out`,
/// byte-identical to a single build (GIL released); returns its
/// `BuildSummary`.
#[pyfunction]
pub(crate) fn merge(py: Python<'_>, out: PathBuf, parts: Vec<PathBuf>) -> Result<BuildSummary> {
    let summary = py.detach(|| sc::merge(&out, &parts))?;
    let mut result = BuildSummary::new(&summary, &out);
    // Every part is of one plan (the merge checked): name it.
    result.plan_id = parts
        .first()
        .and_then(|p| sc::LazyCache::open(p).ok())
        .and_then(|c| {
            Some(
                sc::ThreadSource::manifest(&c)
                    .partition
                    .as_ref()?
                    .plan_id
                    .clone(),
            )
        });
    result.partitions = Some(parts.len());
    Ok(result)
}

/// What a build, an incremental build, a partition build or a merge made.
#[pyclass(frozen, module = "socialctx", name = "BuildSummary", get_all)]
pub(crate) struct BuildSummary {
    /// The cache directory written.
    cache_dir: String,
    /// Conversation threads in the cache.
    threads: u64,
    /// Reactions (replies and retweets) in the cache.
    reactions: u64,
    /// Replies among them.
    replies: u64,
    /// Retweets among them.
    retweets: u64,
    /// Inputs skipped as bad (the cache's report).
    skipped: u64,
    /// Shard files written.
    shards: usize,
    /// Worker threads the build ran.
    workers: usize,
    /// Wall-clock seconds.
    seconds: f64,
    /// Threads taken from the old cache (incremental builds).
    reused: u64,
    /// Thread files read.
    files_read: u64,
    /// An incremental build's note: what was reused, or why it built in full.
    incremental: Option<String>,
    /// The plan's id, for a partition build or a merge.
    plan_id: Option<String>,
    /// How many partitions the plan was cut into, for a partition build or
    /// a merge.
    partitions: Option<usize>,
    /// What failed after the new cache was published (the build succeeded;
    /// the next build cleans up): the lines `socialctx build` prints as
    /// "warning: …".
    warnings: Vec<String>,
}

/// The attribute names, in the order `repr` shows them (also the keys of
/// the dicts the build functions returned before).
const BUILD_SUMMARY_FIELDS: [&str; 15] = [
    "cache_dir",
    "threads",
    "reactions",
    "replies",
    "retweets",
    "skipped",
    "shards",
    "workers",
    "seconds",
    "reused",
    "files_read",
    "incremental",
    "plan_id",
    "partitions",
    "warnings",
];

impl BuildSummary {
    fn new(s: &sc::BuildSummary, cache_dir: &Path) -> Self {
        let m = &s.manifest;
        BuildSummary {
            cache_dir: cache_dir.to_string_lossy().into_owned(),
            threads: m.threads,
            reactions: m.reactions,
            replies: m.replies,
            retweets: m.retweets,
            skipped: m.skipped,
            shards: m.shards.len(),
            workers: s.workers,
            seconds: s.elapsed.as_secs_f64(),
            reused: s.reused,
            files_read: s.files_read,
            incremental: s.incremental.clone(),
            plan_id: m.partition.as_ref().map(|p| p.plan_id.clone()),
            partitions: m.partition.as_ref().map(|p| p.count as usize),
            warnings: s.warnings.clone(),
        }
    }
}

#[pymethods]
impl BuildSummary {
    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        fields_repr(slf.as_any(), "BuildSummary", &BUILD_SUMMARY_FIELDS)
    }

    fn __reduce__<'py>(
        slf: &Bound<'py, Self>,
    ) -> PyResult<(Bound<'py, PyAny>, (Bound<'py, PyDict>,))> {
        fields_reduce(slf.as_any(), &BUILD_SUMMARY_FIELDS)
    }

    /// Unpickling: the summary with these fields.
    #[staticmethod]
    fn _from_fields(f: &Bound<'_, PyDict>) -> PyResult<Self> {
        Ok(BuildSummary {
            cache_dir: field(f, "cache_dir")?,
            threads: field(f, "threads")?,
            reactions: field(f, "reactions")?,
            replies: field(f, "replies")?,
            retweets: field(f, "retweets")?,
            skipped: field(f, "skipped")?,
            shards: field(f, "shards")?,
            workers: field(f, "workers")?,
            seconds: field(f, "seconds")?,
            reused: field(f, "reused")?,
            files_read: field(f, "files_read")?,
            incremental: field(f, "incremental")?,
            plan_id: field(f, "plan_id")?,
            partitions: field(f, "partitions")?,
            // Pickled before summaries had warnings: none.
            warnings: match f.get_item("warnings")? {
                Some(w) => w.extract()?,
                None => Vec::new(),
            },
        })
    }

    /// Deprecated: `summary["threads"]` (results were dicts); read the
    /// attribute instead.
    fn __getitem__<'py>(slf: &Bound<'py, Self>, key: &str) -> PyResult<Bound<'py, PyAny>> {
        field_item(slf.as_any(), "BuildSummary", &BUILD_SUMMARY_FIELDS, key)
    }
}

/// The plan of a partitioned build, as `plan` wrote it.
#[pyclass(frozen, module = "socialctx", name = "PlanSummary", get_all)]
pub(crate) struct PlanSummary {
    /// Conversation threads the plan covers.
    threads: usize,
    /// The plan's id (16 hex digits): every partition of it carries it.
    id: String,
}

const PLAN_SUMMARY_FIELDS: [&str; 2] = ["threads", "id"];

#[pymethods]
impl PlanSummary {
    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        fields_repr(slf.as_any(), "PlanSummary", &PLAN_SUMMARY_FIELDS)
    }

    fn __reduce__<'py>(
        slf: &Bound<'py, Self>,
    ) -> PyResult<(Bound<'py, PyAny>, (Bound<'py, PyDict>,))> {
        fields_reduce(slf.as_any(), &PLAN_SUMMARY_FIELDS)
    }

    /// Unpickling: the summary with these fields.
    #[staticmethod]
    fn _from_fields(f: &Bound<'_, PyDict>) -> PyResult<Self> {
        Ok(PlanSummary {
            threads: field(f, "threads")?,
            id: field(f, "id")?,
        })
    }

    /// Deprecated: `planned["id"]`; read the attribute instead.
    fn __getitem__<'py>(slf: &Bound<'py, Self>, key: &str) -> PyResult<Bound<'py, PyAny>> {
        field_item(slf.as_any(), "PlanSummary", &PLAN_SUMMARY_FIELDS, key)
    }
}
