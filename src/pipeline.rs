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

use std::collections::{BTreeMap, HashMap};
use std::fs::{self, File};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, bounded, unbounded};
use rayon::prelude::*;

use crate::cache::{
    CacheWriter, LABEL_RUMOUR, LABEL_UNKNOWN, Manifest, REACTION_EXTRA, ReactionRecord, Span,
    THREAD_EXTRA, ThreadData, ThreadRecord, ThreadText, WriterOptions, label_code,
};
use crate::discover::{
    ANNOTATION_FILE, FOLLOWS_FILE, RETWEETS_FILE, ReactionKind, STRUCTURE_FILE, THREAD_FILES,
    ThreadDir, discover,
};
use crate::error::{Error, Result};
use crate::features::labels::{ANNOTATED_RUMOUR, Annotation, annotation};
use crate::features::propagation::{author_counts, depths};
use crate::features::relations::FollowGraph;
use crate::features::reliability::RumourIndex;
use crate::features::{self, FeatureVec};
use crate::parse::{
    DEFAULT_MAX_FILE_BYTES, Reason, SourceFields, TweetReader, open_file, reaction_fields,
    read_reason, source_fields, user_key,
};
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
            shard_bytes: crate::cache::DEFAULT_SHARD_BYTES,
            extended: true,
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
    /// Worker threads that parsed and computed features: the requested
    /// number, or fewer where an address-space limit (`ulimit -v`) or the
    /// OS would not allow that many.
    pub workers: usize,
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
struct Worker<'i> {
    source: TweetReader,
    reaction: TweetReader,
    /// For thread files (structure, annotation, follows, retweets.json).
    extra: TweetReader,
    names: Names,
    max_file_bytes: u64,
    /// Corpus-wide rumour index; `Some` when extended features are built.
    index: Option<&'i RumourIndex>,
}

/// The visible file names of one directory, sorted, in one reused buffer
/// (no allocation per file once it has grown).
#[derive(Default)]
struct Names {
    bytes: Vec<u8>,
    spans: Vec<(usize, usize)>,
}

impl Names {
    /// Lists `dir` (hidden names skipped) in byte order.
    fn list(&mut self, dir: &Path) -> std::io::Result<()> {
        self.bytes.clear();
        self.spans.clear();
        for entry in fs::read_dir(dir)? {
            let entry = entry?;
            let name = entry.file_name();
            let name = std::os::unix::ffi::OsStrExt::as_bytes(name.as_os_str());
            if !name.starts_with(b".") {
                self.spans.push((self.bytes.len(), name.len()));
                self.bytes.extend_from_slice(name);
            }
        }
        let bytes = &self.bytes;
        self.spans
            .sort_unstable_by(|a, b| bytes[a.0..a.0 + a.1].cmp(&bytes[b.0..b.0 + b.1]));
        Ok(())
    }

    /// The names, in order.
    fn iter(&self) -> impl DoubleEndedIterator<Item = &std::ffi::OsStr> + '_ {
        use std::os::unix::ffi::OsStrExt;
        self.spans
            .iter()
            .map(|&(start, len)| std::ffi::OsStr::from_bytes(&self.bytes[start..start + len]))
    }
}

/// Whether a tweet file name ends in `.json`; anything else in a tweet folder
/// (`123.json~`, `#123.json#`, `notes.txt`) is a stray file, reported and skipped.
fn is_json_name(name: &std::ffi::OsStr) -> bool {
    name.as_encoded_bytes().ends_with(b".json")
}

/// The report reason for a stray file in a tweet folder.
const STRAY: &str = "not a .json file (an editor backup or stray file?); skipped";

/// One reaction, ready for the cache, with its author's key.
struct Row {
    rec: ReactionRecord,
    /// Text and description in the thread's text arena.
    text: [Span; 2],
    features: FeatureVec,
    author: u64,
}

/// Parses the reaction loaded in `reader`, computes its features and
/// appends its texts to `arena` (no allocation per reaction).
fn reaction_row(
    reader: &mut TweetReader,
    source: &SourceFields<'_>,
    kind: ReactionKind,
    arena: &mut String,
) -> Result<Row, Reason> {
    reader.parse(|v| {
        let r = reaction_fields(v)?;
        let features = features::compute(&r, source, kind)?;
        let text = [
            Span::push(arena, r.text),
            r.user
                .description
                .map_or(Span::NONE, |d| Span::push(arena, d)),
        ];
        Ok(Row {
            rec: ReactionRecord {
                id: r.id,
                kind: kind as u8,
                created_at: r.created_at.unix_seconds(),
            },
            text,
            features,
            author: user_key(r.user.id_str),
        })
    })?
}

/// Reads the source tweet file of a thread into `reader`; returns its path
/// relative to the thread, or the reason it is unusable.
fn read_source(
    td: &ThreadDir,
    reader: &mut TweetReader,
    names: &mut Names,
    max: u64,
) -> Result<String, String> {
    let dir_name = td
        .source_dir()
        .ok_or_else(|| "no source-tweets/ or source-tweet/ folder".to_string())?;
    let dir = td.path.join(dir_name);
    names
        .list(&dir)
        .map_err(|e| format!("cannot list {dir_name}/: {e}"))?;
    // The reference takes the last name in sorted order, ignoring *.csv; we
    // also pass over stray files (editor backups...), which `process` reports.
    let name = names
        .iter()
        .rev()
        .find(|n| is_json_name(n))
        .ok_or_else(|| format!("no source tweet file in {dir_name}/"))?;
    let rel = format!("{dir_name}/{}", name.to_string_lossy());
    reader
        .read_file(&dir.join(name), max)
        .map_err(|r| format!("source tweet {rel}: {r}"))?;
    Ok(rel)
}

impl Worker<'_> {
    fn process(&mut self, td: &ThreadDir) -> Outcome {
        let fail = |reason: String| Outcome {
            data: None,
            bad: vec![BadInput::new(&td.rel, reason)],
        };
        let source_rel =
            match read_source(td, &mut self.source, &mut self.names, self.max_file_bytes) {
                Ok(rel) => rel,
                Err(reason) => return fail(reason),
            };
        let source = match self.source.parse(source_fields) {
            Ok(Ok(s)) => s,
            Ok(Err(r)) | Err(r) => return fail(format!("source tweet {source_rel}: {r}")),
        };

        let mut bad = Vec::new();
        // `self.names` still lists the source folder; *.csv there is ignored.
        let source_dir = td.source_dir().unwrap_or_default();
        for name in self.names.iter() {
            if !is_json_name(name) && !name.as_encoded_bytes().ends_with(b".csv") {
                let path = format!("{}/{source_dir}/{}", td.rel, name.to_string_lossy());
                bad.push(BadInput::new(path, STRAY));
            }
        }
        let mut rows: Vec<Row> = Vec::new();
        let mut arena = String::new();
        for (dir_name, kind) in td.reaction_dirs() {
            let dir = td.path.join(dir_name);
            let listed = self.names.list(&dir).and_then(|()| File::open(&dir));
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
            for name in self.names.iter() {
                let file_rel = || format!("{}/{dir_name}/{}", td.rel, name.to_string_lossy());
                if !is_json_name(name) {
                    bad.push(BadInput::new(file_rel(), STRAY));
                    continue;
                }
                let row = self
                    .reaction
                    .read_file_in(&dir_file, name, self.max_file_bytes)
                    .and_then(|()| reaction_row(&mut self.reaction, &source, kind, &mut arena));
                match row {
                    Ok(row) => rows.push(row),
                    Err(r) => bad.push(BadInput::new(file_rel(), r)),
                }
            }
        }

        let extended = self.index.map(|index| {
            let readers = (&mut self.extra, &mut self.reaction);
            let ext = read_thread_files(
                readers,
                self.max_file_bytes,
                td,
                &source,
                (&mut rows, &mut arena),
                &mut bad,
            );
            (index, ext)
        });

        rows.sort_by_key(|r| (r.rec.created_at, r.rec.id));
        let source_author = user_key(source.user_id_str);
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
            text_arena: arena,
            reaction_texts: Vec::with_capacity(rows.len()),
            features: Vec::with_capacity(rows.len()),
            reaction_extra: Vec::new(),
            thread_extra: [f32::NAN; THREAD_EXTRA],
        };
        if let Some((index, ext)) = extended {
            let counts =
                author_counts(std::iter::once(source_author).chain(rows.iter().map(|r| r.author)));
            data.reaction_extra = rows
                .iter()
                .map(|r| ext.reaction_values(r, source_author, &counts, index))
                .collect();
            data.thread_extra = [ext.annotation.veracity, ext.annotation.annotated_rumour];
        }
        for row in rows {
            data.reactions.push(row.rec);
            data.reaction_texts.push(row.text);
            data.features.push(row.features);
        }
        Outcome {
            data: Some(data),
            bad,
        }
    }
}

/// Reads `structure.json`, `annotation.json`, `who-follows-whom.dat` and
/// `retweets.json` (retweets as JSON Lines) when the thread has them.
fn read_thread_files(
    (extra, reaction): (&mut TweetReader, &mut TweetReader),
    max: u64,
    td: &ThreadDir,
    source: &SourceFields<'_>,
    (rows, arena): (&mut Vec<Row>, &mut String),
    bad: &mut Vec<BadInput>,
) -> Extended {
    let mut ext = Extended::default();
    let rel = |i: usize| format!("{}/{}", td.rel, THREAD_FILES[i]);
    if td.has_file(STRUCTURE_FILE) {
        let r = extra.read_file(&td.path.join(THREAD_FILES[STRUCTURE_FILE]), max);
        match r.and_then(|()| extra.parse(depths)?) {
            Ok(d) => ext.depths = Some(d),
            Err(reason) => bad.push(BadInput::new(rel(STRUCTURE_FILE), reason)),
        }
    }
    if td.has_file(ANNOTATION_FILE) {
        let r = extra.read_file(&td.path.join(THREAD_FILES[ANNOTATION_FILE]), max);
        match r.and_then(|()| extra.parse(annotation)?) {
            Ok(a) => ext.annotation = a,
            Err(reason) => bad.push(BadInput::new(rel(ANNOTATION_FILE), reason)),
        }
    }
    if td.has_file(FOLLOWS_FILE) {
        match extra.read_file(&td.path.join(THREAD_FILES[FOLLOWS_FILE]), max) {
            Ok(()) => {
                let (graph, bad_lines) = FollowGraph::parse(extra.bytes());
                for line in bad_lines {
                    bad.push(BadInput::new(
                        rel(FOLLOWS_FILE),
                        format!("line {line}: expected two user ids separated by a tab"),
                    ));
                }
                ext.follows = Some(graph);
            }
            Err(reason) => bad.push(BadInput::new(rel(FOLLOWS_FILE), reason)),
        }
    }
    if td.has_file(RETWEETS_FILE) {
        let path = td.path.join(THREAD_FILES[RETWEETS_FILE]);
        let mut on_line = |n: usize, line: Result<&[u8], Reason>| {
            let row = line.and_then(|line| {
                reaction.load_bytes(line);
                reaction_row(reaction, source, ReactionKind::Retweet, arena)
            });
            match row {
                Ok(row) => rows.push(row),
                Err(reason) => bad.push(BadInput::new(
                    rel(RETWEETS_FILE),
                    format!("line {n}: {reason}"),
                )),
            }
        };
        if let Err(reason) = for_each_line(&path, max, &mut on_line) {
            bad.push(BadInput::new(rel(RETWEETS_FILE), reason));
        }
    }
    ext
}

/// Streams the non-blank lines of a JSON Lines file to `f` with their line
/// numbers (from 1), in bounded memory: one status per line, each capped at
/// `max` bytes like a tweet file (a longer line is reported to `f` and
/// skipped), however large the file. A `retweets.json` holds a whole thread's
/// retweets, so reading it whole would make memory grow with the file.
fn for_each_line(
    path: &Path,
    max: u64,
    f: &mut impl FnMut(usize, Result<&[u8], Reason>),
) -> Result<(), Reason> {
    use std::io::{BufRead, Read};
    let mut reader = std::io::BufReader::with_capacity(64 * 1024, open_file(path)?);
    let mut line = Vec::new();
    let read_error = |n: usize, e: std::io::Error| read_reason(&e, &format!(" (line {n})"));
    for n in 1.. {
        line.clear();
        let got = (&mut reader)
            .take(max.saturating_add(1))
            .read_until(b'\n', &mut line)
            .map_err(|e| read_error(n, e))?;
        if got == 0 {
            return Ok(());
        }
        if line.last() == Some(&b'\n') {
            line.pop();
        } else if line.len() as u64 > max {
            // Skip the rest of the over-long line without keeping it.
            loop {
                let buf = reader.fill_buf().map_err(|e| read_error(n, e))?;
                if buf.is_empty() {
                    break;
                }
                match buf.iter().position(|&b| b == b'\n') {
                    Some(p) => {
                        reader.consume(p + 1);
                        break;
                    }
                    None => {
                        let len = buf.len();
                        reader.consume(len);
                    }
                }
            }
            f(
                n,
                Err(format!("line is over the {max}-byte limit for one tweet")),
            );
            continue;
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        f(n, Ok(&line));
    }
    Ok(())
}

/// What the thread files of one thread gave.
#[derive(Default)]
struct Extended {
    depths: Option<HashMap<u64, u32>>,
    follows: Option<FollowGraph>,
    annotation: Annotation,
}

impl Extended {
    /// The extended values of one reaction, in `REACTION_COLUMNS` order.
    fn reaction_values(
        &self,
        r: &Row,
        source_author: u64,
        counts: &HashMap<u64, u32>,
        index: &RumourIndex,
    ) -> [f32; REACTION_EXTRA] {
        let flag = |b: bool| if b { 1.0 } else { 0.0 };
        let depth = self
            .depths
            .as_ref()
            .and_then(|d| d.get(&r.rec.id))
            .map_or(f32::NAN, |&d| d as f32);
        let (follows, followed) = match &self.follows {
            Some(g) => (
                flag(g.follows(r.author, source_author)),
                flag(g.follows(source_author, r.author)),
            ),
            None => (f32::NAN, f32::NAN),
        };
        let reciprocal = if follows.is_nan() {
            f32::NAN
        } else {
            flag(follows == 1.0 && followed == 1.0)
        };
        [
            depth,
            counts.get(&r.author).copied().unwrap_or(1) as f32,
            follows,
            followed,
            reciprocal,
            index.reliability(r.author, r.rec.created_at),
        ]
    }
}

/// Builds the corpus-wide rumour index from the source tweets of the
/// threads labelled rumour: in a `rumours` folder, or in a folder that is
/// neither `rumours` nor `non-rumours` with an `annotation.json` that says
/// `"is_rumour": "rumour"` (the PHEME journalism layout). A thread whose
/// source cannot be read is skipped here and reported by the main pass.
fn rumour_index(threads: &[ThreadDir], workers: usize, max_file_bytes: u64) -> RumourIndex {
    let is_rumour = |td: &ThreadDir, reader: &mut TweetReader| match label_code(&td.label) {
        LABEL_RUMOUR => true,
        LABEL_UNKNOWN if td.has_file(ANNOTATION_FILE) => {
            let path = td.path.join(THREAD_FILES[ANNOTATION_FILE]);
            reader.read_file(&path, max_file_bytes).is_ok()
                && matches!(reader.parse(annotation), Ok(Ok(a)) if a.annotated_rumour == ANNOTATED_RUMOUR)
        }
        _ => false,
    };
    let one = |td: &ThreadDir, reader: &mut TweetReader, names: &mut Names| {
        if !is_rumour(td, reader) {
            return None;
        }
        read_source(td, reader, names, max_file_bytes).ok()?;
        reader
            .parse(|v| {
                source_fields(v).map(|s| (user_key(s.user_id_str), s.created_at.unix_seconds()))
            })
            .ok()?
            .ok()
    };
    let collect = || {
        threads
            .par_iter()
            .map_init(
                || (TweetReader::new(), Names::default()),
                |(reader, names), td| one(td, reader, names),
            )
            .flatten()
            .collect::<Vec<_>>()
    };
    // A pool that cannot start (memory or process limits) must not fall
    // back to rayon's global pool, which panics when it cannot start either:
    // try fewer threads, then none.
    let pool = [workers, 1]
        .into_iter()
        .find_map(|n| rayon::ThreadPoolBuilder::new().num_threads(n).build().ok());
    let found = match pool {
        Some(pool) => pool.install(collect),
        None => {
            let (mut reader, mut names) = (TweetReader::new(), Names::default());
            threads
                .iter()
                .filter_map(|td| one(td, &mut reader, &mut names))
                .collect()
        }
    };
    let mut index = RumourIndex::default();
    for (author, at) in found {
        index.add(author, at);
    }
    index
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
    let threads = threads_that_fit(opts.threads.max(1));
    let mut writer = CacheWriter::create(
        cache,
        WriterOptions {
            shard_bytes: opts.shard_bytes,
            strict: opts.strict,
            max_file_bytes: opts.max_file_bytes,
            extended: opts.extended,
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
    let index = opts
        .extended
        .then(|| rumour_index(&found.threads, threads, opts.max_file_bytes));
    phases.discover = t.elapsed();
    progress.discovered(found.threads.len() as u64);

    let t = Instant::now();
    let workers = run_workers(
        &found.threads,
        threads,
        opts,
        index.as_ref(),
        |td, outcome| {
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
        },
    )?;

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
        workers,
    })
}

/// Address space set aside per worker thread under a finite `RLIMIT_AS`:
/// its stack (2 MiB) and the 64 MiB heap arena glibc reserves for a thread
/// that allocates, twice over, because the walk's and the rumour index's
/// pools of the same size may still be winding down when the workers start.
/// (24 MiB per thread was measured to fail now and then under 512 MiB.)
const ADDRESS_SPACE_PER_THREAD: u64 = 2 * (66 << 20);
/// Address space kept free under a finite `RLIMIT_AS` for everything that
/// is not per thread: the shard being written, the thread list, maps.
const ADDRESS_SPACE_RESERVE: u64 = 192 << 20;

/// How many of `wanted` threads fit under the process's address-space limit.
///
/// Without this, `ulimit -v` with many cores ends in an allocation failure
/// (abort) or a panic inside a freshly started thread that cannot be caught.
fn threads_that_fit(wanted: usize) -> usize {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes only into `lim`.
    if unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut lim) } != 0
        || lim.rlim_cur == libc::RLIM_INFINITY
    {
        return wanted;
    }
    // VmSize: the address space in use now, in kB.
    let used = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmSize:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024);
    let free = lim.rlim_cur.saturating_sub(used + ADDRESS_SPACE_RESERVE);
    let fit = usize::try_from(free / ADDRESS_SPACE_PER_THREAD).unwrap_or(usize::MAX);
    fit.clamp(1, wanted)
}

type Job = usize;
type Done = (usize, std::result::Result<Outcome, String>);

/// Runs the worker pool over `list` and calls `sink` for each outcome in list order.
fn run_workers(
    list: &[ThreadDir],
    threads: usize,
    opts: &BuildOptions,
    index: Option<&RumourIndex>,
    mut sink: impl FnMut(&ThreadDir, Outcome) -> Result<()>,
) -> Result<usize> {
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
        // Threads are started with `Builder` so that an OS refusal (memory or
        // process limits) is an error, not a panic: the build goes on with the
        // workers that did start, and fails clearly if none did.
        // The feeder first: it is one thread, and without it nothing runs.
        let fed = std::thread::Builder::new()
            .name("socialctx-feeder".into())
            .spawn_scoped(scope, move || feed(list.len(), job_tx, credit_rx, stop));
        let mut started = 0;
        let mut refused = None;
        for w in 0..threads {
            if fed.is_err() {
                break;
            }
            let (job_rx, done_tx) = (job_rx.clone(), done_tx.clone());
            let max_file_bytes = opts.max_file_bytes;
            let spawned = std::thread::Builder::new()
                .name(format!("socialctx-worker-{w}"))
                .spawn_scoped(scope, move || {
                    let mut w = Worker {
                        source: TweetReader::new(),
                        reaction: TweetReader::new(),
                        extra: TweetReader::new(),
                        names: Names::default(),
                        max_file_bytes,
                        index,
                    };
                    for i in job_rx {
                        if stop.load(Ordering::Relaxed) {
                            break;
                        }
                        let out =
                            catch_unwind(AssertUnwindSafe(|| w.process(&list[i]))).map_err(|p| {
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
            match spawned {
                Ok(_) => started += 1,
                Err(e) => {
                    refused = Some(e);
                    break;
                }
            }
        }
        drop(done_tx);
        drop(job_rx);
        if started == 0 || fed.is_err() {
            // Every closure that did not start was dropped with its channel
            // ends, so whatever did start winds down on its own.
            let source = fed
                .err()
                .or(refused)
                .unwrap_or_else(|| std::io::Error::other("no worker thread started"));
            return Err(Error::ThreadSpawn {
                wanted: threads,
                source,
            });
        }

        let result = write_in_order(list, &done_rx, &credit_tx, &mut sink);
        // On error, make the feeder and the workers wind down quickly.
        stop.store(true, Ordering::Relaxed);
        drop(credit_tx);
        drop(done_rx);
        result.map(|()| started)
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
