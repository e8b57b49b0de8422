//! The build half: corpus directory in, published cache out.
//!
//! ```text
//!  discover ──► pool: thread assembly × N workers ──► writer ──► publish
//!  (rayon walk)     parse, timestamp, pytext,      (in source-id   (atomic
//!                   features, extended             order, shards)   swap)
//! ```
//!
//! One module per stage: [`discover`] finds thread directories, [`parse`]
//! reads tweets into borrowed fields (with the `pycompat` crate for
//! Python-exact times, text classes and tokens), [`features`] computes the 28
//! features and the extended values, `thread` assembles one thread (`files`
//! reads its files, `extended` its optional ones), `pool` runs that on N
//! workers and hands results back in order, [`writer`] fills shards and
//! `publish` swaps the finished directory in. Memory stays bounded whatever
//! the corpus size: the pool has a fixed window and the writer streams shards.
//!
//! Bad input never stops a lenient build: each skipped file or thread becomes
//! a [`BadInput`]. With `strict`, the first bad input (in source-id order)
//! stops the build with [`BuildError::StrictBadInput`] and any existing cache is
//! left untouched.

pub mod discover;
pub(crate) mod extended;
pub mod features;
mod files;
pub(crate) mod fingerprint;
pub(crate) mod job;
pub mod layout;
pub mod parents;
pub mod parse;
pub(crate) mod pin;
pub(crate) mod plan;
mod pool;
mod prefetch;
pub(crate) mod publish;
mod record;
pub(crate) mod thread;
pub mod writer;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use self::discover::ThreadDir;

use self::features::reliability::RumourIndex;
pub(crate) use self::job::BuildJob;
use self::parse::DEFAULT_MAX_FILE_BYTES;
use crate::error::BuildError;
use crate::format::DEFAULT_SHARD_BYTES;
use crate::format::manifest::Manifest;
use crate::format::report::BadInput;

type Result<T, E = BuildError> = std::result::Result<T, E>;

/// Default number of prefetch threads (see [`BuildOptions::io_depth`]).
pub const DEFAULT_IO_DEPTH: usize = 32;

/// Options of a build.
///
/// ```
/// let opts = socialctx::BuildOptions::default().threads(4).strict(true);
/// assert_eq!((opts.threads, opts.strict, opts.extended), (4, true, true));
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct BuildOptions {
    /// Worker threads (and walker threads). Default: available cores. At
    /// most 1,024 are started.
    pub threads: usize,
    /// Stop at the first bad input instead of skipping and reporting it.
    pub strict: bool,
    /// Tweet files larger than this are skipped and reported.
    pub max_file_bytes: u64,
    /// Cap on one shard's archive size.
    pub shard_bytes: usize,
    /// Prefetch threads that keep reads in flight ahead of the workers when
    /// the corpus is not in the page cache (0: none; at most 1,024 are
    /// started). Default 32, or 0 under an address-space limit; a warm
    /// build skips cached threads, so the default costs little there.
    pub io_depth: usize,
    /// Incremental builds only: also compare file contents (xxh3), for file
    /// systems whose timestamps are coarse or unreliable. Reads every file.
    pub verify: bool,
    /// Incremental builds only: a file listing what changed since the
    /// previous build (one path a line, relative to the corpus root or
    /// absolute inside it; a tweet file or a thread folder; `-`: standard
    /// input), from the crawler that wrote them. Trusted: the threads it
    /// does not name are taken from the old cache without looking at their
    /// files (no walk, no `stat`). GUIDE.md says what it must name.
    pub changed: Option<std::path::PathBuf>,
    /// Also compute the extended features (structure, relations, reliability,
    /// annotations) and read `retweets.json`; off gives exactly the
    /// reference's 28 features over `reactions/`, `replies/` and `retweets/`.
    pub extended: bool,
}

impl Default for BuildOptions {
    fn default() -> Self {
        BuildOptions {
            threads: std::thread::available_parallelism().map_or(2, |n| n.get()),
            strict: false,
            max_file_bytes: DEFAULT_MAX_FILE_BYTES,
            shard_bytes: DEFAULT_SHARD_BYTES,
            io_depth: DEFAULT_IO_DEPTH,
            verify: false,
            changed: None,
            extended: true,
        }
    }
}

impl BuildOptions {
    /// Sets [`threads`](Self::threads).
    pub fn threads(mut self, n: usize) -> Self {
        self.threads = n;
        self
    }
    /// Sets [`strict`](Self::strict).
    pub fn strict(mut self, yes: bool) -> Self {
        self.strict = yes;
        self
    }
    /// Sets [`max_file_bytes`](Self::max_file_bytes).
    pub fn max_file_bytes(mut self, bytes: u64) -> Self {
        self.max_file_bytes = bytes;
        self
    }
    /// Sets [`shard_bytes`](Self::shard_bytes).
    pub fn shard_bytes(mut self, bytes: usize) -> Self {
        self.shard_bytes = bytes;
        self
    }
    /// Sets [`io_depth`](Self::io_depth).
    pub fn io_depth(mut self, depth: usize) -> Self {
        self.io_depth = depth;
        self
    }
    /// Sets [`verify`](Self::verify).
    pub fn verify(mut self, yes: bool) -> Self {
        self.verify = yes;
        self
    }
    /// Sets [`changed`](Self::changed).
    pub fn changed(mut self, list: Option<std::path::PathBuf>) -> Self {
        self.changed = list;
        self
    }
    /// Sets [`extended`](Self::extended).
    pub fn extended(mut self, yes: bool) -> Self {
        self.extended = yes;
        self
    }
}

/// Receives progress events from a build (all calls come from the calling thread).
pub trait Progress {
    /// Discovery finished with `threads` thread directories.
    fn discovered(&self, _threads: u64) {}
    /// One more thread was written, with `reactions` reactions.
    fn thread_done(&self, _reactions: u64) {}
    /// Asked between threads: `true` stops the build with
    /// [`BuildError::Cancelled`], leaving any existing cache as it was and
    /// no staging directory behind (a binding's Ctrl-C).
    fn cancelled(&self) -> bool {
        false
    }
}

/// A [`Progress`] that ignores everything.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoProgress;
impl Progress for NoProgress {}

/// What a finished build produced.
#[derive(Debug)]
#[non_exhaustive]
pub struct BuildSummary {
    /// The published cache's manifest (counts, shards).
    pub manifest: Manifest,
    /// Every skipped file or thread, sorted by path.
    pub report: Vec<BadInput>,
    /// Wall time of the whole build, publication included.
    pub elapsed: Duration,
    /// Wall time of each phase.
    pub phases: Phases,
    /// Threads in the cache per label code (1 rumour, 0 non-rumour, -1 unknown).
    pub labels: BTreeMap<i8, u64>,
    /// Threads in the cache per event (as [`ThreadView::event`](crate::ThreadView::event)).
    pub events: BTreeMap<String, u64>,
    /// For [`build_incremental`](crate::build_incremental): what it did
    /// ("incremental: N threads reused, M re-read" or "full build: why").
    pub incremental: Option<String>,
    /// Threads taken from the old cache without reading their files.
    pub reused: u64,
    /// Tweet and thread files the workers opened and read.
    pub files_read: u64,
    /// Worker threads that parsed and computed features: the requested
    /// number, or fewer where an address-space limit (`ulimit -v`) or the
    /// OS would not allow that many.
    pub workers: usize,
    /// What went wrong after the cache was published (removing the
    /// replaced cache, making the swap durable): the build has succeeded,
    /// and the next build cleans up what was left.
    pub warnings: Vec<String>,
}

/// Wall time of each phase of a build.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct Phases {
    /// Finding the thread directories (and, with extended features,
    /// building the corpus-wide rumour index).
    pub discover: Duration,
    /// Reading, parsing, computing and writing shards.
    pub process: Duration,
    /// Writing the report and manifest, syncing and renaming into place.
    pub publish: Duration,
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
/// use socialctx::{build, BuildOptions, NoProgress};
/// let summary = build("data-samples/corpus", "target/cache", &BuildOptions::default(), &NoProgress)?;
/// println!("{} threads, {} skipped", summary.manifest.threads, summary.report.len());
/// # Ok::<(), socialctx::Error>(())
/// ```
pub fn build(
    corpus: impl AsRef<Path>,
    cache: impl AsRef<Path>,
    opts: &BuildOptions,
    progress: &dyn Progress,
) -> Result<BuildSummary> {
    BuildJob::new(corpus, cache)
        .options(opts.clone())
        .progress(progress)
        .run()
}

/// Threads per label code, per event and per event and label: the one
/// count of them. A build adds each thread as it writes it (its summary's
/// `labels` and `events`), a merge or an incremental build each thread it
/// keeps, and `Tally::of` (`summary.rs`) a cache's threads, for
/// `corpus_stats` and the binding's `Cache.thread_counts`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Threads per label code (1 rumour, 0 non-rumour, -1 unknown).
    pub labels: BTreeMap<i8, u64>,
    /// Threads per event (as [`ThreadView::event`](crate::ThreadView::event)).
    pub events: BTreeMap<String, u64>,
    /// Threads per event and label: `[unknown, non-rumour, rumour]` (index
    /// label code + 1).
    pub event_labels: BTreeMap<String, [u64; 3]>,
}

impl Tally {
    /// Adds counts of threads per event and label (as
    /// [`event_labels`](Self::event_labels)).
    pub(crate) fn add_counts(&mut self, event_labels: &BTreeMap<String, [u64; 3]>) {
        for (event, counts) in event_labels {
            let n: u64 = counts.iter().sum();
            if n == 0 {
                continue;
            }
            *self.events.entry(event.clone()).or_insert(0) += n;
            let by_label = self.event_labels.entry(event.clone()).or_insert([0; 3]);
            for (slot, &c) in counts.iter().enumerate() {
                by_label[slot] += c;
                if c > 0 {
                    *self.labels.entry(slot as i8 - 1).or_insert(0) += c;
                }
            }
        }
    }

    /// Counts one thread of label code `label` in `event`.
    pub fn add(&mut self, label: i8, event: &str) {
        *self.labels.entry(label).or_insert(0) += 1;
        // Any code outside -1..=1 (none is stored) counts as unknown.
        let slot = usize::try_from(i16::from(label) + 1)
            .ok()
            .filter(|&i| i < 3)
            .unwrap_or(0);
        match (self.events.get_mut(event), self.event_labels.get_mut(event)) {
            (Some(n), Some(by_label)) => {
                *n += 1;
                by_label[slot] += 1;
            }
            _ => {
                self.events.insert(event.to_owned(), 1);
                let mut by_label = [0; 3];
                by_label[slot] = 1;
                self.event_labels.insert(event.to_owned(), by_label);
            }
        }
    }
}

/// Discovery with the checks every build makes before reading a tweet:
/// strict mode fails on the first bad directory, and a corpus with no
/// thread and nothing to report is an error. The report comes sorted. With
/// `index`, the rumour index is built in the same walk.
pub(crate) fn discover_checked(
    corpus: &Path,
    threads: usize,
    opts: &BuildOptions,
    index: bool,
) -> Result<(Vec<ThreadDir>, Vec<BadInput>, Option<RumourIndex>)> {
    discover_checked_with(
        corpus,
        threads,
        opts,
        index,
        &|_, _| (),
        discover::Scope::All,
    )
    .map(|(list, report, index, _)| (list, report, index))
}

/// [`discover_checked`], also computing `pre` of each thread on the walk's
/// threads (with the walk thread's index), each value with the thread's
/// own rumour entry (see [`extended::discover_indexed_with`]).
#[allow(clippy::type_complexity)]
pub(crate) fn discover_checked_with<P: Send>(
    corpus: &Path,
    threads: usize,
    opts: &BuildOptions,
    index: bool,
    pre: &(dyn Fn(&ThreadDir, usize) -> P + Sync),
    scope: discover::Scope<'_>,
) -> Result<(
    Vec<ThreadDir>,
    Vec<BadInput>,
    Option<RumourIndex>,
    Vec<(P, Option<(u64, i64)>)>,
)> {
    let skipping = matches!(scope, discover::Scope::Partition(_));
    let (found, index, pres) =
        extended::discover_indexed_with(corpus, threads, opts.max_file_bytes, index, pre, scope)?;
    let mut report = found.bad;
    report.sort();
    if opts.strict
        && let Some(first) = report.first()
    {
        return Err(BuildError::StrictBadInput {
            path: first.path.clone().into(),
            reason: first.reason.clone(),
        });
    }
    // A partition's walk records only its own threads (none, in an empty
    // partition); its plan says what the corpus must hold.
    if found.threads.is_empty() && report.is_empty() && !skipping {
        return Err(BuildError::EmptyCorpus(corpus.to_path_buf()));
    }
    Ok((found.threads, report, index, pres))
}

/// Address space set aside per worker thread under a finite `RLIMIT_AS`:
/// its stack (2 MiB) and the 64 MiB heap arena glibc reserves for a thread
/// that allocates, twice over: the walk's pool of the same size (which also
/// reads the rumour index) may still be winding down when the workers start,
/// and the margin is kept from when the index had a pool of its own.
/// (24 MiB per thread was measured to fail now and then under 512 MiB.)
const ADDRESS_SPACE_PER_THREAD: u64 = 2 * (66 << 20);
/// Address space kept free under a finite `RLIMIT_AS` for everything that
/// is not per thread: the shard being written, the thread list, maps.
const ADDRESS_SPACE_RESERVE: u64 = 192 << 20;

/// The most worker or prefetch threads a build starts, whatever it is
/// asked for: `workers=65535` ran the machine out of memory, and no corpus
/// gains past this. (`socialctx build` refuses more as a usage error.)
const MAX_THREADS: usize = 1024;

/// Prefetch threads to start: `wanted` (at most [`MAX_THREADS`]), or none
/// under an address-space limit (each thread that allocates may reserve a
/// glibc heap arena).
fn io_depth(wanted: usize) -> usize {
    match rustix::process::getrlimit(rustix::process::Resource::As).current {
        Some(_) => 0,
        None => wanted.min(MAX_THREADS),
    }
}

/// How many of `wanted` threads (at most [`MAX_THREADS`]) fit under the
/// process's address-space limit.
///
/// Without this, `ulimit -v` with many cores ends in an allocation failure
/// (abort) or a panic inside a freshly started thread that cannot be caught.
fn threads_that_fit(wanted: usize) -> usize {
    let wanted = wanted.min(MAX_THREADS);
    let Some(limit) = rustix::process::getrlimit(rustix::process::Resource::As).current else {
        return wanted;
    };
    // VmSize: the address space in use now, in kB.
    let used = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmSize:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024);
    let free = limit.saturating_sub(used + ADDRESS_SPACE_RESERVE);
    let fit = usize::try_from(free / ADDRESS_SPACE_PER_THREAD).unwrap_or(usize::MAX);
    fit.clamp(1, wanted)
}
