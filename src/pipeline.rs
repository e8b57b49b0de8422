//! The build: discover → (parse + features) × N workers → one ordered writer.
//!
//! ```text
//!  discover (jwalk) ──► feeder ──jobs──► worker 1..N ──results──► writer (this thread)
//!                          ▲  (bounded)   read, parse,  (any order)  reorders by index,
//!                          │              features                   appends to shards
//!                          └────────────── credits ◄─────────────────┘
//! ```
//!
//! Threads are processed in source-id order and written in that order. The
//! feeder takes one *credit* per thread it sends and the writer returns it
//! when the thread is written, so at most `window` threads are ever in flight
//! or waiting to be reordered: memory stays bounded whatever the corpus size,
//! even when one huge thread holds up the ones behind it.
//!
//! Bad input never stops a lenient build: each skipped file or thread becomes
//! a [`BadInput`]. With `strict`, the first bad input (in source-id order)
//! stops the build with [`Error::StrictBadInput`] and any existing cache is
//! left untouched.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, bounded, unbounded};

use crate::cache::{
    CacheWriter, Manifest, ReactionRecord, ReactionText, ThreadData, ThreadRecord, ThreadText,
    WriterOptions, label_code,
};
use crate::discover::{ThreadDir, discover};
use crate::error::{Error, Result};
use crate::features::{self, FeatureVec};
use crate::parse::{DEFAULT_MAX_FILE_BYTES, TweetReader, reaction_fields, source_fields};
use crate::report::BadInput;

/// Options of a build.
#[derive(Clone, Debug)]
pub struct BuildOptions {
    /// Worker threads (and walker threads). Default: available cores.
    pub threads: usize,
    /// Stop at the first bad input instead of skipping and reporting it.
    pub strict: bool,
    /// Tweet files larger than this are skipped and reported.
    pub max_file_bytes: u64,
    /// Cap on one shard's archive size.
    pub shard_bytes: usize,
}

impl Default for BuildOptions {
    fn default() -> Self {
        BuildOptions {
            threads: std::thread::available_parallelism().map_or(2, |n| n.get()),
            strict: false,
            max_file_bytes: DEFAULT_MAX_FILE_BYTES,
            shard_bytes: crate::cache::DEFAULT_SHARD_BYTES,
        }
    }
}

/// Receives progress events from a build (all calls come from the calling thread).
pub trait Progress {
    /// Discovery finished with `threads` thread directories.
    fn discovered(&self, _threads: u64) {}
    /// One more thread was written, with `reactions` reactions.
    fn thread_done(&self, _reactions: u64) {}
}

/// A [`Progress`] that ignores everything.
pub struct NoProgress;
impl Progress for NoProgress {}

/// What a finished build produced.
#[derive(Debug)]
pub struct BuildSummary {
    /// The published cache's manifest (counts, shards).
    pub manifest: Manifest,
    /// Every skipped file or thread, sorted by path.
    pub report: Vec<BadInput>,
    /// Wall time of the whole build, publication included.
    pub elapsed: Duration,
    /// Wall time of each phase.
    pub phases: Phases,
}

/// Wall time of each phase of a build.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Phases {
    /// Finding the thread directories.
    pub discover: Duration,
    /// Reading, parsing, computing and writing shards.
    pub process: Duration,
    /// Writing the report and manifest, syncing and renaming into place.
    pub publish: Duration,
}

/// One processed thread: its data (None if the thread was skipped) and the
/// bad inputs met on the way.
struct Outcome {
    data: Option<ThreadData>,
    bad: Vec<BadInput>,
}

/// Per-worker reusable state.
struct Worker {
    source: TweetReader,
    reaction: TweetReader,
    names: Vec<std::ffi::OsString>,
    max_file_bytes: u64,
}

/// Sorted visible file names of `dir` (hidden names skipped).
fn list_dir(dir: &Path, names: &mut Vec<std::ffi::OsString>) -> std::io::Result<()> {
    names.clear();
    for entry in fs::read_dir(dir)? {
        let name = entry?.file_name();
        if !name.as_encoded_bytes().starts_with(b".") {
            names.push(name);
        }
    }
    names.sort_unstable_by(|a, b| a.as_encoded_bytes().cmp(b.as_encoded_bytes()));
    Ok(())
}

impl Worker {
    fn process(&mut self, td: &ThreadDir) -> Outcome {
        let fail = |reason: String| Outcome {
            data: None,
            bad: vec![BadInput::new(&td.rel, reason)],
        };
        let Some(source_dir_name) = td.source_dir() else {
            return fail("no source-tweets/ or source-tweet/ folder".into());
        };
        let source_dir = td.path.join(source_dir_name);
        if let Err(e) = list_dir(&source_dir, &mut self.names) {
            return fail(format!("cannot list {source_dir_name}/: {e}"));
        }
        // The reference takes the last name in sorted order, ignoring *.csv.
        let Some(name) = self
            .names
            .iter()
            .rev()
            .find(|n| !n.as_encoded_bytes().ends_with(b".csv"))
        else {
            return fail(format!("no source tweet file in {source_dir_name}/"));
        };
        let source_rel = format!("{source_dir_name}/{}", name.to_string_lossy());
        if let Err(r) = self
            .source
            .read_file(&source_dir.join(name), self.max_file_bytes)
        {
            return fail(format!("source tweet {source_rel}: {r}"));
        }
        let source = match self.source.parse(source_fields) {
            Ok(Ok(s)) => s,
            Ok(Err(r)) | Err(r) => return fail(format!("source tweet {source_rel}: {r}")),
        };

        let mut bad = Vec::new();
        let mut rows: Vec<(ReactionRecord, ReactionText, FeatureVec)> = Vec::new();
        for (dir_name, kind) in td.reaction_dirs() {
            let dir = td.path.join(dir_name);
            let listed = list_dir(&dir, &mut self.names).and_then(|()| File::open(&dir));
            let dir_file = match listed {
                Ok(f) => f,
                Err(e) => {
                    bad.push(BadInput::new(
                        format!("{}/{dir_name}", td.rel),
                        format!("cannot list directory: {e}"),
                    ));
                    continue;
                }
            };
            for name in &self.names {
                let file_rel = || format!("{}/{dir_name}/{}", td.rel, name.to_string_lossy());
                if let Err(r) = self
                    .reaction
                    .read_file_in(&dir_file, name, self.max_file_bytes)
                {
                    bad.push(BadInput::new(file_rel(), r));
                    continue;
                }
                let parsed = self.reaction.parse(|v| {
                    let r = reaction_fields(v)?;
                    let f = features::compute(&r, &source, kind)?;
                    let rec = ReactionRecord {
                        id: r.id,
                        kind: kind as u8,
                        created_at: r.created_at.unix_seconds(),
                    };
                    let text = ReactionText {
                        text: r.text.to_owned(),
                        user_description: r.user.description.map(str::to_owned),
                    };
                    Ok((rec, text, f))
                });
                match parsed {
                    Ok(Ok(row)) => rows.push(row),
                    Ok(Err(r)) | Err(r) => bad.push(BadInput::new(file_rel(), r)),
                }
            }
        }
        rows.sort_by_key(|(r, _, _)| (r.created_at, r.id));
        let mut data = ThreadData {
            record: ThreadRecord {
                source_id: td.source_id,
                source_created_at: source.created_at.unix_seconds(),
                first_reaction: 0,
                reaction_count: 0,
                label_code: label_code(&td.label),
            },
            text: ThreadText {
                event: td.event.clone(),
                label: td.label.clone(),
                source_user_id: source.user_id_str.to_owned(),
                source_text: source.text.to_owned(),
            },
            reactions: Vec::with_capacity(rows.len()),
            reaction_texts: Vec::with_capacity(rows.len()),
            features: Vec::with_capacity(rows.len()),
        };
        for (rec, text, f) in rows {
            data.reactions.push(rec);
            data.reaction_texts.push(text);
            data.features.push(f);
        }
        Outcome {
            data: Some(data),
            bad,
        }
    }
}

/// Canonical form of a path that may not exist yet (its nearest existing
/// ancestor is canonicalized).
fn canonical_lenient(p: &Path) -> PathBuf {
    let mut tail = Vec::new();
    let mut cur = p.to_path_buf();
    loop {
        if let Ok(c) = cur.canonicalize() {
            return tail
                .into_iter()
                .rev()
                .fold(c, |acc: PathBuf, part| acc.join(part));
        }
        match (cur.file_name().map(|n| n.to_os_string()), cur.parent()) {
            (Some(name), Some(parent)) => {
                tail.push(name);
                cur = if parent.as_os_str().is_empty() {
                    PathBuf::from(".")
                } else {
                    parent.to_path_buf()
                };
            }
            _ => return p.to_path_buf(),
        }
    }
}

/// Builds the cache for `corpus` at `cache`, replacing any cache there atomically.
///
/// ```no_run
/// use socialctx::pipeline::{build, BuildOptions, NoProgress};
/// let summary = build("data-samples/corpus".as_ref(), "target/cache".as_ref(),
///                     &BuildOptions::default(), &NoProgress)?;
/// println!("{} threads, {} skipped", summary.manifest.threads, summary.report.len());
/// # Ok::<(), socialctx::Error>(())
/// ```
pub fn build(
    corpus: &Path,
    cache: &Path,
    opts: &BuildOptions,
    progress: &dyn Progress,
) -> Result<BuildSummary> {
    let start = Instant::now();
    if !corpus.is_dir() {
        return Err(Error::CorpusMissing(corpus.to_path_buf()));
    }
    let corpus_abs = canonical_lenient(corpus);
    let cache_abs = canonical_lenient(cache);
    if cache_abs.starts_with(&corpus_abs) {
        return Err(Error::OutputInsideCorpus {
            corpus: corpus.to_path_buf(),
            cache: cache.to_path_buf(),
        });
    }
    let threads = opts.threads.max(1);
    let mut writer = CacheWriter::create(
        cache,
        WriterOptions {
            shard_bytes: opts.shard_bytes,
            strict: opts.strict,
            max_file_bytes: opts.max_file_bytes,
        },
    )?;

    let mut phases = Phases::default();
    let t = Instant::now();
    let found = discover(corpus, threads)?;
    phases.discover = t.elapsed();
    let mut report = found.bad;
    report.sort();
    if opts.strict
        && let Some(first) = report.first()
    {
        return Err(Error::StrictBadInput {
            path: first.path.clone(),
            reason: first.reason.clone(),
        });
    }
    if found.threads.is_empty() && report.is_empty() {
        return Err(Error::EmptyCorpus(corpus.to_path_buf()));
    }
    progress.discovered(found.threads.len() as u64);

    let t = Instant::now();
    run_workers(&found.threads, threads, opts, |td, outcome| {
        if opts.strict
            && let Some(first) = outcome.bad.first()
        {
            return Err(Error::StrictBadInput {
                path: first.path.clone(),
                reason: first.reason.clone(),
            });
        }
        report.extend(outcome.bad);
        let n = outcome
            .data
            .as_ref()
            .map_or(0, |d| d.reactions.len() as u64);
        if let Some(data) = outcome.data {
            writer.push(data, &td.rel)?;
        }
        progress.thread_done(n);
        Ok(())
    })?;

    phases.process = t.elapsed();
    let t = Instant::now();
    report.sort();
    let manifest = writer.finish(&report)?;
    phases.publish = t.elapsed();
    Ok(BuildSummary {
        manifest,
        report,
        elapsed: start.elapsed(),
        phases,
    })
}

type Job = usize;
type Done = (usize, std::result::Result<Outcome, String>);

/// Runs the worker pool over `list` and calls `sink` for each outcome in list order.
fn run_workers(
    list: &[ThreadDir],
    threads: usize,
    opts: &BuildOptions,
    mut sink: impl FnMut(&ThreadDir, Outcome) -> Result<()>,
) -> Result<()> {
    let window = (threads * 16).max(64);
    let (job_tx, job_rx) = bounded::<Job>(threads * 4);
    let (done_tx, done_rx) = unbounded::<Done>();
    let (credit_tx, credit_rx) = bounded::<()>(window);
    for _ in 0..window {
        let _ = credit_tx.send(());
    }
    let stop = AtomicBool::new(false);

    std::thread::scope(|scope| {
        let stop = &stop;
        scope.spawn(move || feed(list.len(), job_tx, credit_rx, stop));
        for _ in 0..threads {
            let (job_rx, done_tx) = (job_rx.clone(), done_tx.clone());
            let max_file_bytes = opts.max_file_bytes;
            scope.spawn(move || {
                let mut w = Worker {
                    source: TweetReader::new(),
                    reaction: TweetReader::new(),
                    names: Vec::new(),
                    max_file_bytes,
                };
                for i in job_rx {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let out = catch_unwind(AssertUnwindSafe(|| w.process(&list[i]))).map_err(|p| {
                        p.downcast_ref::<&str>()
                            .map(|s| s.to_string())
                            .or_else(|| p.downcast_ref::<String>().cloned())
                            .unwrap_or_else(|| "panic".into())
                    });
                    if done_tx.send((i, out)).is_err() {
                        break;
                    }
                }
            });
        }
        drop(done_tx);
        drop(job_rx);

        let result = write_in_order(list, &done_rx, &credit_tx, &mut sink);
        // On error, make the feeder and the workers wind down quickly.
        stop.store(true, Ordering::Relaxed);
        drop(credit_tx);
        drop(done_rx);
        result
    })
}

fn feed(n: usize, jobs: Sender<Job>, credits: Receiver<()>, stop: &AtomicBool) {
    for i in 0..n {
        if credits.recv().is_err() || stop.load(Ordering::Relaxed) || jobs.send(i).is_err() {
            return;
        }
    }
}

fn write_in_order(
    list: &[ThreadDir],
    done: &Receiver<Done>,
    credits: &Sender<()>,
    sink: &mut impl FnMut(&ThreadDir, Outcome) -> Result<()>,
) -> Result<()> {
    let mut pending: BTreeMap<usize, std::result::Result<Outcome, String>> = BTreeMap::new();
    let mut next = 0;
    while next < list.len() {
        let Ok((i, out)) = done.recv() else {
            return Err(Error::Internal {
                path: list[next].rel.clone(),
                message: "worker threads stopped early".into(),
            });
        };
        pending.insert(i, out);
        while let Some(out) = pending.remove(&next) {
            let out = out.map_err(|message| Error::Internal {
                path: list[next].rel.clone(),
                message,
            })?;
            sink(&list[next], out)?;
            let _ = credits.send(());
            next += 1;
        }
    }
    Ok(())
}
