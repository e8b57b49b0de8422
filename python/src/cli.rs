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

use crate::build::run_build;
use crate::convert::Keywords;
use crate::error::{Error, Result};

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

/// The options that shape a cache's content (a plan records them), and
/// the worker count: the keywords `_cli_build` and `_cli_plan` share.
fn content_options(kw: &mut Keywords<'_, '_>) -> PyResult<sc::BuildOptions> {
    let workers: Option<usize> = kw.get("workers", None)?;
    let strict: bool = kw.get("strict", false)?;
    let max_file_bytes: Option<u64> = kw.get("max_file_bytes", None)?;
    let shard_mib: u64 = kw.get("shard_mib", 16)?;
    let extended: bool = kw.get("extended", true)?;
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
    if let Some(n) = workers {
        if n == 0 {
            return Err(PyValueError::new_err("workers must be at least 1"));
        }
        opts = opts.threads(n);
    }
    Ok(opts)
}

/// `_cli_build`'s keywords: what `precache` takes besides its two paths.
struct BuildJob {
    options: sc::BuildOptions,
    /// Also write the bad-input report here.
    report: Option<PathBuf>,
    incremental: bool,
    /// A partition build: the plan file and `(index, count)`.
    plan: Option<(PathBuf, (usize, usize))>,
    /// No progress bar.
    quiet: bool,
}

impl BuildJob {
    fn from_keywords(given: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        let mut kw = Keywords::new("_cli_build()", given);
        let mut options = content_options(&mut kw)?;
        if let Some(d) = kw.get::<Option<usize>>("io_depth", None)? {
            options = options.io_depth(d);
        }
        options = options.verify(kw.get("verify", false)?);
        let report: Option<PathBuf> = kw.get("report", None)?;
        let incremental: bool = kw.get("incremental", false)?;
        let plan: Option<PathBuf> = kw.get("plan", None)?;
        let partition: Option<(usize, usize)> = kw.get("partition", None)?;
        let quiet: bool = kw.get("quiet", false)?;
        kw.finish()?;
        let plan = match (plan, partition) {
            (Some(p), Some(part)) => Some((p, part)),
            (None, None) => None,
            _ => {
                return Err(PyValueError::new_err(
                    "plan and partition go together (a partition of a plan)",
                ));
            }
        };
        Ok(BuildJob {
            options,
            report,
            incremental,
            plan,
            quiet,
        })
    }
}

/// What `precache` does, as `socialctx build` and `socialctx
/// build-partition` run it: a full, incremental (`incremental`) or partition
/// (`plan` and `partition`) build of `corpus` into `cache`, with a progress
/// bar on stderr when it is a terminal (unless `quiet`), the bad-input report
/// also written to `report`. Returns the summary `precache` prints. Ctrl-C
/// (and whatever else raises KeyboardInterrupt in a signal handler) stops the
/// build between threads: KeyboardInterrupt, nothing published.
#[pyfunction]
#[pyo3(
    signature = (corpus, cache, **options),
    text_signature = "(corpus, cache, *, workers=None, strict=False, report=None, max_file_bytes=None, shard_mib=16, extended=True, io_depth=None, incremental=False, verify=False, plan=None, partition=None, quiet=False)"
)]
fn _cli_build(
    py: Python<'_>,
    corpus: PathBuf,
    cache: PathBuf,
    options: Option<&Bound<'_, PyDict>>,
) -> Result<String> {
    let BuildJob {
        options: opts,
        report,
        incremental,
        plan,
        quiet,
    } = BuildJob::from_keywords(options)?;
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
    let (result, interrupted) = run_build(py, &corpus, &progress.cancel, job, || {})?;
    let interrupted = interrupted.is_some();
    bar.finish_and_clear();
    let summary = match result {
        // Too late to stop: the build published before it saw the flag.
        // Still stop (the user asked to), but say so.
        Ok(_) if interrupted => {
            return Err(PyKeyboardInterrupt::new_err(format!(
                "the build finished before it saw the signal: the new cache at {} is published",
                cache.display()
            ))
            .into());
        }
        Ok(s) => s,
        Err(sc::BuildError::Cancelled) => {
            return Err(PyKeyboardInterrupt::new_err(format!(
                "nothing was published; {} is as it was",
                cache.display()
            ))
            .into());
        }
        Err(e) => return Err(e.into()),
    };
    if let (Some(path), Some(file)) = (&report, report_file) {
        file.set_len(0)
            .and_then(|()| {
                sc::internals::write_jsonl(BufWriter::new(file), &summary.report)
                    .map_err(std::io::Error::other)
            })
            .map_err(|e| cannot_write_report(path, &e))?;
    }
    // Published: success, with what failed after the swap said on stderr.
    for w in &summary.warnings {
        eprintln!("warning: {w}");
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
#[pyo3(
    signature = (corpus, plan_file, **options),
    text_signature = "(corpus, plan_file, *, workers=None, strict=False, max_file_bytes=None, shard_mib=16, extended=True)"
)]
fn _cli_plan(
    py: Python<'_>,
    corpus: PathBuf,
    plan_file: PathBuf,
    options: Option<&Bound<'_, PyDict>>,
) -> Result<String> {
    let mut kw = Keywords::new("_cli_plan()", options);
    let opts = content_options(&mut kw)?;
    kw.finish()?;
    let plan = py.detach(|| {
        let plan = sc::Plan::create(&corpus, &opts)?;
        plan.save(&plan_file)?;
        Ok::<_, sc::BuildError>(plan)
    })?;
    Ok(sc::summary::plan_summary(&plan, &plan_file))
}

/// The `merge` example: joins the partition caches `parts` into `out`;
/// returns the summary it prints.
#[pyfunction]
fn _cli_merge(py: Python<'_>, out: PathBuf, parts: Vec<PathBuf>) -> Result<String> {
    let summary = py.detach(|| sc::merge(&out, &parts))?;
    for w in &summary.warnings {
        eprintln!("warning: {w}");
    }
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
) -> Result<()> {
    if (extended || graph) && tokens {
        return Err(
            PyValueError::new_err("extended or graph and tokens do not go together").into(),
        );
    }
    let cache = py.detach(|| sc::Cache::open(&cache))?;
    let opts = sc::dump::DumpOptions::default()
        .retweets(retweets)
        .extended(extended)
        .graph(graph)
        .tokens(tokens);
    py.detach(|| {
        let mut out = BufWriter::new(std::io::stdout().lock());
        match sc::dump::write_cache(&mut out, &cache, &opts).and_then(|()| out.flush()) {
            Err(e) if e.kind() == ErrorKind::BrokenPipe => Ok(()),
            other => other,
        }
    })
    .map_err(|e| Error::new_err(format!("writing output: {e}")).into())
}

/// The `stats` example: the 28 features' statistics over the cache's
/// replies (or replies and retweets), optionally only the threads of the
/// split CSVs, saved as JSON to `save`. Returns `(notes, table)`: the notes
/// (split ids that are not in the cache) and the table it prints.
#[pyfunction]
#[pyo3(signature = (cache, *, splits=Vec::new(), retweets=false, save=None))]
fn _cli_stats(
    py: Python<'_>,
    cache: PathBuf,
    splits: Vec<PathBuf>,
    retweets: bool,
    save: Option<PathBuf>,
) -> Result<(Vec<String>, String)> {
    Ok(py.detach(|| stats(&cache, &splits, retweets, save.as_deref()))?)
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
