//! Entry points of the `socialctx` command (`socialctx/cli.py`): the jobs of
//! the Rust examples (`precache`, `dump`, `stats`, `merge`), with the same
//! output, for an installed package that has no cargo. Each returns the text
//! the example prints on stdout (or writes it, for `dump`) and raises the
//! package's exceptions with the examples' messages; the command prints them
//! as `error: ...` and picks the exit status.

use std::io::{BufWriter, ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use pyo3::exceptions::{PyKeyboardInterrupt, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use socialctx as sc;

use super::{CacheError, Error, build_err};

/// Adds this module's functions and constants to the extension module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add(
        "_DEFAULT_MAX_FILE_BYTES",
        sc::internals::parse::DEFAULT_MAX_FILE_BYTES,
    )?;
    m.add_function(wrap_pyfunction!(_cli_build, m)?)?;
    m.add_function(wrap_pyfunction!(_cli_plan, m)?)?;
    m.add_function(wrap_pyfunction!(_cli_merge, m)?)?;
    m.add_function(wrap_pyfunction!(_cli_dump, m)?)?;
    m.add_function(wrap_pyfunction!(_cli_stats, m)?)?;
    Ok(())
}

/// Threads on the bar, reactions in the message (as `precache` draws it),
/// and the flag that Ctrl-C or SIGTERM sets.
struct Bar {
    bar: ProgressBar,
    reactions: AtomicU64,
    cancel: AtomicBool,
}

impl sc::Progress for Bar {
    fn discovered(&self, threads: u64) {
        self.bar.set_length(threads);
        self.bar.set_message("threads");
        self.bar.set_style(
            ProgressStyle::with_template(
                "{spinner} {elapsed_precise} {wide_bar} {pos}/{len} {msg}, eta {eta}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
    }
    fn cancelled(&self) -> bool {
        self.cancel.load(Ordering::Relaxed)
    }
    fn thread_done(&self, reactions: u64) {
        let total = self.reactions.fetch_add(reactions, Ordering::Relaxed) + reactions;
        self.bar.inc(1);
        if self.bar.position().is_multiple_of(64) {
            self.bar.set_message(format!("threads, {total} reactions"));
        }
    }
}

fn options(
    threads: Option<usize>,
    strict: bool,
    max_file_bytes: Option<u64>,
    shard_mib: u64,
    extended: bool,
) -> PyResult<sc::BuildOptions> {
    if !(1..=1024).contains(&shard_mib) {
        return Err(PyValueError::new_err(format!(
            "shard_mib must be 1 to 1024, not {shard_mib}"
        )));
    }
    let mut opts = sc::BuildOptions::default()
        .strict(strict)
        .shard_bytes((shard_mib * 1024 * 1024) as usize)
        .extended(extended);
    if let Some(b) = max_file_bytes {
        opts = opts.max_file_bytes(b);
    }
    if let Some(n) = threads {
        if n == 0 {
            return Err(PyValueError::new_err("threads must be at least 1"));
        }
        opts = opts.threads(n);
    }
    Ok(opts)
}

/// What `precache` does, as `socialctx build` and `socialctx
/// build-partition` run it: a full, incremental (`incremental`) or partition
/// (`plan` and `partition`) build of `corpus` into `cache`, with a progress
/// bar on stderr when it is a terminal (unless `quiet`), the bad-input report
/// also written to `report`. Returns the summary `precache` prints. Ctrl-C
/// (and whatever else raises KeyboardInterrupt in a signal handler) stops the
/// build between threads: KeyboardInterrupt, nothing published.
#[pyfunction]
#[pyo3(signature = (corpus, cache, *, threads=None, strict=false, report=None,
    max_file_bytes=None, shard_mib=16, extended=true, io_depth=None,
    incremental=false, verify=false, plan=None, partition=None, quiet=false))]
#[allow(clippy::too_many_arguments)]
fn _cli_build(
    py: Python<'_>,
    corpus: PathBuf,
    cache: PathBuf,
    threads: Option<usize>,
    strict: bool,
    report: Option<PathBuf>,
    max_file_bytes: Option<u64>,
    shard_mib: u64,
    extended: bool,
    io_depth: Option<usize>,
    incremental: bool,
    verify: bool,
    plan: Option<PathBuf>,
    partition: Option<(usize, usize)>,
    quiet: bool,
) -> PyResult<String> {
    let mut opts = options(threads, strict, max_file_bytes, shard_mib, extended)?;
    if let Some(d) = io_depth {
        opts = opts.io_depth(d);
    }
    opts = opts.verify(verify);
    let plan = match (plan, partition) {
        (Some(p), Some(part)) => Some((p, part)),
        (None, None) => None,
        _ => {
            return Err(PyValueError::new_err(
                "plan and partition go together (a partition of a plan)",
            ));
        }
    };
    // Outputs are checked before anything is replaced: an unwritable
    // report fails now, not after the cache was swapped.
    let report_file = match &report {
        Some(path) => Some(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|e| cannot_write_report(path, &e))?,
        ),
        None => None,
    };
    let bar = if quiet {
        ProgressBar::hidden()
    } else {
        // indicatif draws nothing when stderr is not a terminal.
        ProgressBar::new_spinner().with_message("discovering threads")
    };
    bar.set_style(
        ProgressStyle::with_template("{spinner} {elapsed_precise} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    bar.enable_steady_tick(Duration::from_millis(120));
    let progress = Arc::new(Bar {
        bar: bar.clone(),
        reactions: AtomicU64::new(0),
        cancel: AtomicBool::new(false),
    });

    let worker = Arc::clone(&progress);
    let (c, d) = (corpus.clone(), cache.clone());
    let job = move || match &plan {
        Some((plan_file, part)) => sc::Plan::load(plan_file)
            .and_then(|plan| sc::build_partition(&c, &plan, *part, &d, opts.threads, &*worker)),
        None if incremental => sc::build_incremental(&c, &d, &opts, &*worker),
        None => sc::build(&c, &d, &opts, &*worker),
    };
    // SIGINT, or SIGTERM where the command made it raise too: the build
    // stops between threads; the staging directory is removed, any old
    // cache stays.
    let (result, interrupted) =
        crate::background::run_build(py, &corpus, &progress.cancel, job, || {})?;
    let interrupted = interrupted.is_some();
    bar.finish_and_clear();
    let summary = match result {
        // Too late to stop: the build published before it saw the flag.
        // Still stop (the user asked to), but say so.
        Ok(_) if interrupted => {
            return Err(PyKeyboardInterrupt::new_err(format!(
                "the build finished before it saw the signal: the new cache at {} is published",
                cache.display()
            )));
        }
        Ok(s) => s,
        Err(sc::BuildError::Cancelled) => {
            return Err(PyKeyboardInterrupt::new_err(format!(
                "nothing was published; {} is as it was",
                cache.display()
            )));
        }
        Err(e) => return Err(build_err(py, e)),
    };
    if let (Some(path), Some(file)) = (&report, report_file) {
        file.set_len(0)
            .and_then(|()| {
                sc::internals::write_jsonl(BufWriter::new(file), &summary.report)
                    .map_err(std::io::Error::other)
            })
            .map_err(|e| cannot_write_report(path, &e))?;
    }
    Ok(sc::summary::build_summary(&summary, &corpus, &cache))
}

fn cannot_write_report(path: &Path, e: &dyn std::fmt::Display) -> PyErr {
    Error::new_err(format!(
        "cannot write the report to {}: {e}",
        path.display()
    ))
}

/// `precache CORPUS --plan PLAN_FILE`: walks `corpus` once and writes the
/// plan of a partitioned build; returns the line `precache` prints.
#[pyfunction]
#[pyo3(signature = (corpus, plan_file, *, threads=None, strict=false, max_file_bytes=None,
    shard_mib=16, extended=true))]
#[allow(clippy::too_many_arguments)]
fn _cli_plan(
    py: Python<'_>,
    corpus: PathBuf,
    plan_file: PathBuf,
    threads: Option<usize>,
    strict: bool,
    max_file_bytes: Option<u64>,
    shard_mib: u64,
    extended: bool,
) -> PyResult<String> {
    let opts = options(threads, strict, max_file_bytes, shard_mib, extended)?;
    let plan = py
        .detach(|| {
            let plan = sc::Plan::create(&corpus, &opts)?;
            plan.save(&plan_file)?;
            Ok::<_, sc::BuildError>(plan)
        })
        .map_err(|e| build_err(py, e))?;
    Ok(sc::summary::plan_summary(&plan, &plan_file))
}

/// The `merge` example: joins the partition caches `parts` into `out`;
/// returns the summary it prints.
#[pyfunction]
fn _cli_merge(py: Python<'_>, out: PathBuf, parts: Vec<PathBuf>) -> PyResult<String> {
    let summary = py
        .detach(|| sc::merge(&out, &parts))
        .map_err(|e| build_err(py, e))?;
    Ok(sc::summary::merge_summary(&summary, &out))
}

/// The `dump` example: writes the cache to the process's standard output
/// (file descriptor 1, not `sys.stdout`) in the oracle's JSON Lines. A
/// closed pipe (`| head`) ends it quietly.
#[pyfunction]
#[pyo3(signature = (cache, *, retweets=false, extended=false, tokens=false, graph=false))]
fn _cli_dump(
    py: Python<'_>,
    cache: PathBuf,
    retweets: bool,
    extended: bool,
    tokens: bool,
    graph: bool,
) -> PyResult<()> {
    if (extended || graph) && tokens {
        return Err(PyValueError::new_err(
            "extended or graph and tokens do not go together",
        ));
    }
    let cache = py
        .detach(|| sc::Cache::open(&cache))
        .map_err(|e| CacheError::new_err(e.to_string()))?;
    let opts = sc::dump::DumpOptions::default()
        .retweets(retweets)
        .extended(extended)
        .graph(graph)
        .tokens(tokens);
    py.detach(|| {
        let mut out = BufWriter::new(std::io::stdout().lock());
        match sc::dump::write_cache_with(&mut out, &cache, opts).and_then(|()| out.flush()) {
            Err(e) if e.kind() == ErrorKind::BrokenPipe => Ok(()),
            other => other,
        }
    })
    .map_err(|e| Error::new_err(format!("writing output: {e}")))
}

/// The `stats` example: the 28 features' statistics over the cache's
/// replies (or replies and retweets), optionally only the threads of the
/// split CSVs, saved as JSON to `save`. Returns `(notes, table)`: the notes
/// (split ids that are not in the cache) and the table it prints.
#[pyfunction]
#[pyo3(signature = (cache, *, splits=Vec::new(), retweets=false, save=None))]
fn _cli_stats<'py>(
    py: Python<'py>,
    cache: PathBuf,
    splits: Vec<PathBuf>,
    retweets: bool,
    save: Option<PathBuf>,
) -> PyResult<Bound<'py, PyDict>> {
    let (notes, table) = py
        .detach(|| stats(&cache, &splits, retweets, save.as_deref()))
        .map_err(|e| Error::new_err(e.to_string()))?;
    let d = PyDict::new(py);
    d.set_item("notes", notes)?;
    d.set_item("table", table)?;
    Ok(d)
}

fn stats(
    cache: &Path,
    splits: &[PathBuf],
    retweets: bool,
    save: Option<&Path>,
) -> sc::Result<(Vec<String>, String)> {
    let cache = sc::Cache::open(cache)?;
    let (s, notes) = sc::summary::split_stats(&cache, splits, retweets)?;
    if let Some(path) = save {
        s.save(path)?;
    }
    Ok((notes, sc::summary::stats_table(&s)))
}
