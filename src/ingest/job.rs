//! One build job: a corpus, an output directory, options, a progress sink
//! and where the threads come from (a fresh walk of the corpus, an old cache
//! for the unchanged ones, or one partition of a [`Plan`]). [`build`],
//! [`build_incremental`](crate::build_incremental) and
//! [`build_partition`](crate::build_partition) are this job with its
//! supplier set.
//!
//! Every supplier ends in the same pass ([`Started::execute`]): workers and
//! prefetchers over the thread list, results to the writer in source-id
//! order, publication.
//!
//! [`build`]: crate::build

use std::path::{Path, PathBuf};
use std::time::Instant;

use super::discover::{Scope, ThreadDir};
use super::extended::EntryReaders;
use super::features::reliability::RumourIndex;
use super::pin::{Pin, pin, pins};
use super::plan::{Own, Plan};
use super::thread::{Outcome, Worker};
use super::writer::{CacheWriter, WriterOptions};
use super::{
    BuildOptions, BuildSummary, NoProgress, Phases, Progress, Tally, canonical_lenient,
    discover_checked, discover_checked_with, io_depth, pool, prefetch, threads_that_fit,
};
use crate::error::BuildError;
use crate::format::report::BadInput;

type Result<T, E = BuildError> = std::result::Result<T, E>;

/// A build of a corpus into a cache directory, set up step by step and run
/// once: `BuildJob::new(corpus, out).options(o).progress(p).partition(..).run()`.
/// Crate-private for now: the public entry points are `build` and
/// `build_partition`, which set its supplier, and `build_incremental`, which
/// starts a job ([`Started::new`]) and supplies it itself.
pub(crate) struct BuildJob<'a> {
    corpus: PathBuf,
    output: PathBuf,
    options: BuildOptions,
    progress: &'a dyn Progress,
    supplier: Supplier<'a>,
}

impl std::fmt::Debug for BuildJob<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BuildJob")
            .field("corpus", &self.corpus)
            .field("output", &self.output)
            .field("options", &self.options)
            .field("supplier", &self.supplier)
            .finish_non_exhaustive()
    }
}

/// Where a build's threads come from.
#[derive(Debug)]
enum Supplier<'a> {
    /// A walk of the corpus; every thread read.
    Fresh,
    /// Partition `index` of `count` of a plan: its threads, no walk.
    Partition {
        plan: &'a Plan,
        index: usize,
        count: usize,
    },
}

impl<'a> BuildJob<'a> {
    /// A fresh build of `corpus` into `output` with the default options and
    /// no progress reports.
    pub(crate) fn new(corpus: impl AsRef<Path>, output: impl AsRef<Path>) -> Self {
        BuildJob {
            corpus: corpus.as_ref().to_path_buf(),
            output: output.as_ref().to_path_buf(),
            options: BuildOptions::default(),
            progress: &NoProgress,
            supplier: Supplier::Fresh,
        }
    }

    /// Builds with `options`. A partition takes its `strict`,
    /// `max_file_bytes`, `shard_bytes` and `extended` from its plan.
    pub(crate) fn options(mut self, options: BuildOptions) -> Self {
        self.options = options;
        self
    }

    /// Reports progress to `progress` (which may also cancel the build).
    pub(crate) fn progress(mut self, progress: &'a dyn Progress) -> Self {
        self.progress = progress;
        self
    }

    /// Builds partition `index` of `count` of `plan`, as
    /// [`build_partition`](crate::build_partition).
    pub(crate) fn partition(mut self, plan: &'a Plan, index: usize, count: usize) -> Self {
        self.supplier = Supplier::Partition { plan, index, count };
        self
    }

    /// Runs the build and publishes the cache.
    pub(crate) fn run(self) -> Result<BuildSummary> {
        match self.supplier {
            Supplier::Fresh => {
                let mut started = Started::new(&self.corpus, &self.output, self.options)?;
                started.progress = self.progress;
                let (list, report, index) = discover_checked(
                    &self.corpus,
                    started.workers,
                    &started.opts,
                    started.opts.extended,
                )?;
                started.execute(Supply {
                    list: &list,
                    index: index.as_ref(),
                    report,
                    reuse: None,
                    before_publish: None,
                })
            }
            Supplier::Partition { plan, index, count } => {
                if count == 0 || index >= count {
                    return Err(BuildError::PartitionOutOfRange { index, count });
                }
                plan.check().map_err(|why| {
                    BuildError::io(
                        &self.output,
                        std::io::Error::new(
                            std::io::ErrorKind::InvalidInput,
                            format!("the plan is not valid: {why}"),
                        ),
                    )
                })?;
                let ours = crate::definition::definition();
                if plan.definition() != ours {
                    return Err(BuildError::DefinitionChanged {
                        what: format!("plan {}", plan.id()),
                        found: crate::definition::shown(plan.definition()).to_owned(),
                        expected: ours.to_owned(),
                        remedy: "make the plan again with this version and build every partition of it",
                    });
                }
                let opts = plan.options(self.options);
                let mut started = Started::new(&self.corpus, &self.output, opts)?;
                started.progress = self.progress;
                let range = plan.partition_range(index, count);
                let pin_files = plan.pins_files();
                // One walk: the corpus's listing must still be the one
                // planned (a thread added, gone or moved since would give a
                // cache of neither corpus), no tweet read or `stat`, other
                // partitions' thread folders not listed (`Others`); and each
                // of this partition's own threads, as the walk finds it, has
                // its rumour entry read and (plans that pin files) is pinned
                // before any is read (see `Plan::verify_own`).
                let readers = EntryReaders::new(started.workers, started.opts.max_file_bytes);
                let extended = started.opts.extended;
                let own = |td: &ThreadDir, worker: usize| {
                    let at = plan.position_in(range.clone(), &td.rel)?;
                    let p = pin_files.then(|| pin(td));
                    let rumour = if extended {
                        readers.entry(td, worker)
                    } else {
                        None
                    };
                    Some((at, p, rumour))
                };
                let others = plan.others(range.clone());
                let skip = |rel: &str| others.skip(rel);
                let (found, found_bad, _, values) = discover_checked_with(
                    &self.corpus,
                    started.workers,
                    &started.opts,
                    false,
                    &own,
                    Scope::Partition(&skip),
                )?;
                drop(readers);
                let stale = |changed| BuildError::PlanStale {
                    corpus: self.corpus.clone(),
                    changed,
                };
                // Reports inside threads the plan took unlisted are this
                // partition's (the plan has none of them).
                let report = plan
                    .verify_listing(&found, &found_bad, &others)
                    .map_err(stale)?;
                drop(others);
                // The listing is the plan's: each own thread was found once.
                let mut before: Vec<Option<Own>> = vec![None; range.len()];
                for (at, p, rumour) in values.into_iter().filter_map(|(v, _)| v) {
                    before[at] = Some((p, rumour));
                }
                let before: Vec<Own> = before.into_iter().flatten().collect();
                if before.len() != range.len() {
                    return Err(stale(vec![format!(
                        "{} threads of partition {index}/{count} not found where planned",
                        range.len() - before.len()
                    )]));
                }
                plan.verify_own(range.clone(), &before).map_err(stale)?;
                let before: Option<Vec<Pin>> = before.into_iter().map(|(p, _)| p).collect();
                let (list, rumours, mut info) = plan.partition(&self.corpus, index, count, &found);
                drop(found);
                info.inputs = plan.inputs();
                started.writer.set_partition(info);
                let workers = started.workers;
                // Plans that pin files: its own threads pinned again after
                // they were read and before anything is published, an edit
                // during this read refused.
                let mut check = |_: &str, _: &Path, _: &[Vec<BadInput>]| match &before {
                    Some(before) => plan
                        .verify_read(range.clone(), before, &pins(&list, workers))
                        .map_err(stale),
                    None => Ok(()),
                };
                started.execute(Supply {
                    list: &list,
                    index: rumours.as_ref(),
                    report,
                    reuse: None,
                    before_publish: Some(&mut check),
                })
            }
        }
    }
}

/// Threads an incremental build takes from its old cache.
pub(crate) trait Reuse: Sync {
    /// Thread `i` of the list as the old cache holds it (its data and report
    /// lines, no file read), or None to read its files.
    fn take(&self, i: usize) -> Option<Outcome>;
    /// The label code and event of a thread `take` handed over carried
    /// (`Outcome::carried`), for the build's tally.
    fn tally_of(&self, c: &crate::format::gather::Carried) -> (i8, &str);
}

/// Called after a build's files are written and before they are published
/// (incremental builds write their fingerprints there): the content id, the
/// `derived/` directory, and per thread its own report lines.
pub(crate) type BeforePublish<'a> = &'a mut dyn FnMut(&str, &Path, &[Vec<BadInput>]) -> Result<()>;

/// What one pass runs over: the threads in source-id order, what discovery
/// reported, the rumour index (extended builds), the threads an old cache
/// supplies, and what runs between the last write and the swap.
pub(crate) struct Supply<'s> {
    pub(crate) list: &'s [ThreadDir],
    pub(crate) index: Option<&'s RumourIndex>,
    pub(crate) report: Vec<BadInput>,
    pub(crate) reuse: Option<&'s dyn Reuse>,
    pub(crate) before_publish: Option<BeforePublish<'s>>,
}

/// A job whose paths were checked, worker count sized and writer opened
/// (its lock taken): everything before any tweet is read.
pub(crate) struct Started<'p> {
    pub(crate) opts: BuildOptions,
    pub(crate) workers: usize,
    pub(crate) writer: CacheWriter,
    pub(crate) progress: &'p dyn Progress,
    start: Instant,
    /// When the walk (or what stands for it) began.
    discover_from: Instant,
}

impl Started<'_> {
    /// Checks the corpus and the cache paths, sizes the worker count and
    /// opens the writer (which takes the lock).
    pub(crate) fn new(corpus: &Path, cache: &Path, opts: BuildOptions) -> Result<Self> {
        let start = Instant::now();
        if !corpus.is_dir() {
            return Err(BuildError::CorpusMissing(corpus.to_path_buf()));
        }
        if canonical_lenient(cache).starts_with(canonical_lenient(corpus)) {
            return Err(BuildError::OutputInsideCorpus {
                corpus: corpus.to_path_buf(),
                cache: cache.to_path_buf(),
            });
        }
        let workers = threads_that_fit(opts.threads.max(1));
        let writer = CacheWriter::create(
            cache,
            WriterOptions {
                shard_bytes: opts.shard_bytes,
                strict: opts.strict,
                max_file_bytes: opts.max_file_bytes,
                extended: opts.extended,
            },
        )?;
        Ok(Started {
            opts,
            workers,
            writer,
            progress: &NoProgress,
            start,
            discover_from: Instant::now(),
        })
    }

    /// The time since the job started, and the phases so far (discovery
    /// ends now).
    pub(crate) fn discovered_so_far(&self) -> (std::time::Duration, Phases) {
        let phases = Phases {
            discover: self.discover_from.elapsed(),
            ..Phases::default()
        };
        (self.start.elapsed(), phases)
    }

    /// The main pass over `supply.list` (in source-id order): workers,
    /// prefetch, the ordered writer, publication.
    pub(crate) fn execute(self, supply: Supply<'_>) -> Result<BuildSummary> {
        let Started {
            opts,
            workers: threads,
            mut writer,
            progress,
            start,
            discover_from,
        } = self;
        let Supply {
            list,
            index,
            mut report,
            reuse,
            before_publish,
        } = supply;
        if progress.cancelled() {
            return Err(BuildError::Cancelled);
        }
        let mut phases = Phases {
            discover: discover_from.elapsed(),
            ..Phases::default()
        };
        progress.discovered(list.len() as u64);

        let t = Instant::now();
        let mut tally = Tally::default();
        let mut files_read = 0u64;
        // Per thread, for the hook: the assembly's own lines.
        let per_thread = if before_publish.is_some() {
            list.len()
        } else {
            0
        };
        let mut thread_bad: Vec<Vec<BadInput>> = vec![Vec::new(); per_thread];
        // Prefetching would open the reused threads' files; reads of the
        // changed ones are few.
        let depth = if reuse.is_some() {
            0
        } else {
            io_depth(opts.io_depth)
        };
        let prefetch = prefetch::Prefetch::new(list, depth);
        let workers = std::thread::scope(|scope| {
            let prefetch = &prefetch;
            for k in 0..depth {
                // Small stacks: they only list, open and hint. A thread the OS
                // refuses is one prefetcher fewer, not an error.
                let _ = std::thread::Builder::new()
                    .name(format!("socialctx-prefetch-{k}"))
                    .stack_size(256 << 10)
                    .spawn_scoped(scope, move || prefetch.run(k == 0));
            }
            let result = pool::run_ordered(
                list.len(),
                threads,
                || Worker::new(opts.max_file_bytes, index),
                |worker, i| {
                    reuse
                        .and_then(|r| r.take(i))
                        .unwrap_or_else(|| worker.process(&list[i]))
                },
                |i| PathBuf::from(&list[i].rel),
                |i, outcome| {
                    if progress.cancelled() {
                        return Err(BuildError::Cancelled);
                    }
                    if opts.strict
                        && let Some(first) = outcome.bad.first()
                    {
                        return Err(BuildError::StrictBadInput {
                            path: first.path.clone().into(),
                            reason: first.reason.clone(),
                        });
                    }
                    if per_thread > 0 {
                        thread_bad[i] = outcome.bad.clone();
                    }
                    report.extend(outcome.bad);
                    files_read += outcome.files_read;
                    let n = outcome
                        .data
                        .as_ref()
                        .map(|d| d.reactions.len() as u64)
                        .or(outcome.carried.as_ref().map(|c| c.reactions as u64))
                        .unwrap_or(0);
                    if let Some(data) = outcome.data {
                        tally.add(data.record.label_code, &data.text.event);
                        writer.push(data, &list[i].rel)?;
                    } else if let Some(c) = &outcome.carried
                        && let Some(reuse) = reuse
                    {
                        let (label, event) = reuse.tally_of(c);
                        tally.add(label, event);
                        writer.push_carried(c, &list[i].rel)?;
                    }
                    prefetch.advance(i + 1);
                    progress.thread_done(n);
                    Ok(())
                },
            );
            prefetch.stop();
            result
        })?;

        phases.process = t.elapsed();
        if progress.cancelled() {
            return Err(BuildError::Cancelled);
        }
        let t = Instant::now();
        report.sort();
        let (manifest, warnings) = match before_publish {
            Some(hook) => writer.finish_with(
                &report,
                Some(&mut |id: &str, derived: &Path| hook(id, derived, &thread_bad)),
            )?,
            None => writer.finish_with(&report, None)?,
        };
        phases.publish = t.elapsed();
        Ok(BuildSummary {
            manifest,
            report,
            elapsed: start.elapsed(),
            phases,
            labels: tally.labels,
            events: tally.events,
            incremental: None,
            reused: 0,
            files_read,
            workers,
            warnings,
        })
    }
}
