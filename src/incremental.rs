//! Incremental builds: re-read only the threads whose files changed, take
//! the others from the old cache, and publish a cache byte-identical to a
//! full build of the same corpus state.
//!
//! Change detection is by metadata: each thread's fingerprint is an xxh3 of
//! (name, size, mtime ns, ctime ns, inode) of every file it uses and of which
//! of its folders exist. ctime catches an in-place edit that restores the
//! mtime. Before reading any file, a build waits until the file system's
//! clock (a stamp file's mtime) has passed every time its fingerprints saw,
//! in whole seconds for files on a device where no corpus file has a
//! sub-second mtime (a file system with 1-second timestamps), so a change after the fingerprints
//! always changes them. A file modified at or after that point counts as
//! changed at the next build (git's racy-clean rule), with or without
//! content hashes (`--verify`: a file edited and reverted while the build
//! read it hashes as before). The point is kept in the fingerprints, never
//! in the cache's bytes. Fingerprints are kept beside the
//! cache in `derived/fingerprints-<content id>.json`, so they belong to
//! exactly one cache content.
//!
//! `user_reliability` depends on every rumour source of the corpus. The new
//! rumour index is computed from the old cache for reused threads and from
//! the files for the others; if it differs from the old one, the reused
//! threads' values are recomputed from their reactions' author keys, kept in
//! the fingerprint file. A full build is done when anything makes reuse
//! unsafe (no or a damaged old cache, other options, another corpus root, no
//! fingerprints, values computed by another definition of the features:
//! `crate::definition`), and the summary says why.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use serde::{Deserialize, Serialize};
use xxhash_rust::xxh3::xxh3_64;

use crate::error::BuildError;
use crate::format::files::fingerprints_file;
use crate::format::report::BadInput;
use crate::format::user_key;
use crate::ingest::discover::ThreadDir;
use crate::ingest::extended::{rumour_index, rumour_index_with};
use crate::ingest::features::reliability::RumourIndex;
use crate::ingest::fingerprint::{Fp, How, Precision, fingerprints};
use crate::ingest::job::{Reuse, Started, Supply};
use crate::ingest::thread::Outcome;
use crate::ingest::writer::remove_superseded_fingerprints;
use crate::ingest::{BuildOptions, BuildSummary, Progress, Tally, discover_checked};
use crate::read::{Cache, ThreadSource};
use crate::repack::thread_data;
use crate::schema::reaction_column;

type Result<T, E = BuildError> = std::result::Result<T, E>;

/// Version of the fingerprints file; another version means a full build.
/// 2: per-thread report lines (`bad`); 3: content id and checksum.
const FINGERPRINTS_VERSION: u32 = 3;

/// The fingerprints of the threads of one cache content. Derived data,
/// never trusted as found: the file carries its own checksum and the
/// content id of the cache it was written with, and either not matching
/// means a full build.
#[derive(Debug, Serialize, Deserialize)]
struct Fingerprints {
    #[serde(default)]
    version: u32,
    /// The content id of the cache these belong to.
    #[serde(default)]
    content_id: String,
    /// xxh3-64 of the file's JSON with this field empty, 16 hex digits.
    #[serde(default)]
    xxh3: String,
    corpus: String,
    strict: bool,
    max_file_bytes: u64,
    shard_bytes: u64,
    extended: bool,
    /// Whether the fingerprints include content hashes.
    #[serde(default)]
    verify: bool,
    /// The definition digest of the build that wrote these.
    #[serde(default)]
    definition: String,
    /// When the build that wrote these started reading (ns since the epoch,
    /// the file system's clock, after the fingerprinted times had passed):
    /// a file modified at or after it may have been read before the change.
    /// It lives here, beside the cache, never in the cache's bytes.
    started_ns: i128,
    /// Thread rel path -> fingerprint.
    threads: BTreeMap<String, u64>,
    /// Thread rel path -> its reactions' author keys, in cache order: what
    /// recomputing `user_reliability` needs when rumour sources change.
    #[serde(default)]
    authors: BTreeMap<String, Vec<u64>>,
    /// Thread rel path -> the report lines its assembly gave (discovery's
    /// lines are not among them: discovery gives them again each build).
    #[serde(default)]
    bad: BTreeMap<String, Vec<BadInput>>,
}

impl Fingerprints {
    /// The checksum of these fingerprints (their JSON with `xxh3` empty;
    /// sorted maps, so the same fingerprints always give the same bytes).
    fn checksum(&mut self) -> String {
        let kept = std::mem::take(&mut self.xxh3);
        let sum = serde_json::to_vec(self).map_or(0, |b| xxh3_64(&b));
        self.xxh3 = kept;
        format!("{sum:016x}")
    }

    /// Reads and checks the fingerprints of `cache`, or says why they
    /// cannot be used.
    fn load(cache: &Cache) -> std::result::Result<Fingerprints, String> {
        let file = cache
            .derived_dir()
            .join(fingerprints_file(&cache.content_id()));
        let bytes = fs::read(&file).map_err(|_| "the old cache has no fingerprints".to_string())?;
        let mut fp: Fingerprints = serde_json::from_slice(&bytes)
            .map_err(|e| format!("fingerprints unreadable ({}: {e})", file.display()))?;
        if fp.version != FINGERPRINTS_VERSION {
            return Err(format!(
                "the fingerprints are of version {} (this build writes {FINGERPRINTS_VERSION})",
                fp.version
            ));
        }
        if fp.checksum() != fp.xxh3 {
            return Err(format!(
                "the fingerprints do not match their checksum (edited or damaged: {})",
                file.display()
            ));
        }
        if fp.content_id != cache.content_id() {
            return Err(format!(
                "the fingerprints are of another cache content ({}, not {}: {})",
                fp.content_id,
                cache.content_id(),
                file.display()
            ));
        }
        Ok(fp)
    }

    /// Writes these fingerprints, sealed for the cache content
    /// `content_id`, into `derived` by a rename: a failed write leaves no
    /// partial file and the error names the file.
    fn write(mut self, content_id: &str, derived: &Path) -> Result<()> {
        self.content_id = content_id.to_owned();
        self.xxh3 = self.checksum();
        let name = fingerprints_file(content_id);
        let file = derived.join(&name);
        fs::create_dir_all(derived).map_err(|e| BuildError::io(derived, e))?;
        let json = serde_json::to_vec(&self).map_err(|e| BuildError::io(&file, e.into()))?;
        // The one routine for replacing a file: a killed build's temporary
        // file is removed by the next write of the same fingerprints.
        crate::output::replace_file(&file, |f| std::io::Write::write_all(f, &json))
            .map_err(|e| BuildError::io(&file, e))?;
        Ok(())
    }
}

/// The file system's clock now: the mtime of a stamp file created (and
/// removed at once) in `dir` beside the cache. File times come from the
/// kernel's coarse clock (a tick behind the wall clock) in the file
/// system's granularity; `None` if no stamp could be written.
fn file_clock(dir: &Path) -> Option<i128> {
    let stamp = dir.join(".build-start");
    let t = fs::File::create(&stamp)
        .and_then(|f| f.metadata())
        .map(|m| i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()));
    let _ = fs::remove_file(&stamp);
    t.ok()
}

/// Waits until file times have moved past every time the fingerprints saw
/// (in each file system's precision: [`Precision`]), so that any later
/// change of a fingerprinted file gets a time of its own and shows in the
/// next build's fingerprints; the build reads files only after this.
/// Returns the start time that the next build's racy-clean rule uses.
/// Times more than a second ahead (a skewed clock) are not waited for:
/// those files stay racy and are read again by the next build.
fn settle(dir: &Path, fps: &[Fp], precision: &Precision) -> i128 {
    let now = || {
        file_clock(dir).unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as i128)
        })
    };
    let second = 1_000_000_000i128;
    let Some(need) = precision.settled_at(fps) else {
        return now();
    };
    let mut t = now();
    if need - t <= second + second / 10 {
        while t < need {
            let left = (need - t).clamp(1_000_000, 50_000_000);
            std::thread::sleep(std::time::Duration::from_nanos(left as u64));
            t = now();
        }
    }
    t
}

/// Non-empty per-thread values by thread rel path.
fn per_thread<T: Clone>(list: &[ThreadDir], values: &[Vec<T>]) -> BTreeMap<String, Vec<T>> {
    list.iter()
        .zip(values)
        .filter(|(_, x)| !x.is_empty())
        .map(|(td, x)| (td.rel.clone(), x.clone()))
        .collect()
}

/// The old cache and what of it can be reused, or why nothing can.
struct Old {
    cache: Cache,
    /// rel -> position in the old cache (None: the thread was skipped, its
    /// report lines say why), for threads whose files are unchanged.
    reuse: HashMap<String, Option<usize>>,
    /// Report lines of the old cache's threads' assembly by thread rel
    /// (not discovery's).
    report: BTreeMap<String, Vec<BadInput>>,
    /// Author keys of the reused threads' reactions.
    authors: BTreeMap<String, Vec<u64>>,
}

fn canonical(p: &Path) -> String {
    p.canonicalize()
        .unwrap_or_else(|_| p.to_path_buf())
        .to_string_lossy()
        .into_owned()
}

/// Why the old cache at `cache_dir` cannot serve an incremental build of
/// `corpus` with `opts`, or what it offers.
fn old_cache(
    corpus: &Path,
    cache_dir: &Path,
    opts: &BuildOptions,
    list: &[ThreadDir],
    fps: &[Fp],
) -> std::result::Result<Old, String> {
    let cache = Cache::open(cache_dir).map_err(|e| format!("no usable old cache ({e})"))?;
    let m = cache.manifest();
    // Values computed by other code are never reused: checked first, so
    // that the summary says why.
    let ours = crate::definition::definition();
    if m.definition != ours {
        return Err(format!(
            "definition changed (the old cache's values were computed by definition {}, this build's is {ours})",
            crate::definition::shown(&m.definition)
        ));
    }
    let old = Fingerprints::load(&cache)?;
    if old.definition != ours {
        return Err(format!(
            "definition changed (the old fingerprints were written by definition {}, this build's is {ours})",
            crate::definition::shown(&old.definition)
        ));
    }
    if old.corpus != canonical(corpus) {
        return Err(format!("the old cache was built from {}", old.corpus));
    }
    if old.verify != opts.verify {
        return Err(if opts.verify {
            "the old fingerprints have no content hashes (--verify)".into()
        } else {
            "the old fingerprints were made with --verify".into()
        });
    }
    if (
        old.strict,
        old.max_file_bytes,
        old.shard_bytes,
        old.extended,
    ) != (
        opts.strict,
        opts.max_file_bytes,
        opts.shard_bytes as u64,
        opts.extended,
    ) || (
        m.options.strict,
        m.options.max_file_bytes,
        m.options.shard_bytes,
    ) != (opts.strict, opts.max_file_bytes, opts.shard_bytes as u64)
    {
        return Err("the old cache was built with other options".into());
    }
    // Each thread's own report lines, as its last assembly gave them.
    let report = old.bad;
    let precision = Precision::of(fps);
    let mut reuse = HashMap::new();
    for (td, f) in list.iter().zip(fps) {
        // The racy-clean rule, with or without content hashes: a file
        // modified at or after the previous build's start (in its file
        // system's precision) may have been read (or hashed) before that
        // change or a revert of it.
        if old.threads.get(&td.rel) != Some(&f.hash)
            || f.newest >= precision.racy_from(old.started_ns, f)
        {
            continue;
        }
        match cache.position(td.source_id) {
            // A thread without reactions has no author list stored.
            Some(pos)
                if Some(old.authors.get(&td.rel).map_or(0, Vec::len))
                    == cache.thread(pos).map(|t| t.reaction_count()) =>
            {
                reuse.insert(td.rel.clone(), Some(pos));
            }
            Some(_) => {}
            // Skipped last time, and unchanged: skipped again, same lines.
            None if report
                .get(&td.rel)
                .is_some_and(|lines| lines.iter().any(|l| l.path == td.rel)) =>
            {
                reuse.insert(td.rel.clone(), None);
            }
            None => {}
        }
    }
    let mut authors = old.authors;
    authors.retain(|rel, _| reuse.get(rel).is_some_and(Option::is_some));
    Ok(Old {
        cache,
        reuse,
        report,
        authors,
    })
}

/// Builds `corpus` into `cache` as [`build`](crate::build) does, re-reading
/// only the threads that changed since the cache there was built (see the
/// module docs). The summary's `incremental` says what was reused or why a
/// full build was done.
pub fn build_incremental(
    corpus: impl AsRef<Path>,
    cache: impl AsRef<Path>,
    opts: &BuildOptions,
    progress: &dyn Progress,
) -> Result<BuildSummary> {
    // The job started as every build starts (lock, staging, workers), then
    // supplied with its own walk and reuse: no trait object in `job.rs`.
    let (corpus, cache) = (corpus.as_ref(), cache.as_ref());
    let mut started = Started::new(corpus, cache, opts.clone())?;
    started.progress = progress;
    run(corpus, cache, started)
}

/// The incremental supplier of a started build: walks the corpus,
/// fingerprints its threads, and runs the pass with the unchanged ones taken
/// from the old cache at `cache` (or keeps that cache when nothing changed).
fn run(corpus: &Path, cache: &Path, started: Started<'_>) -> Result<BuildSummary> {
    let opts = started.opts.clone();
    let workers = started.workers;
    // The rumour index comes later: from the old cache where it can.
    let (list, report, _) = discover_checked(corpus, workers, &opts, false)?;
    let list = &list;
    let how = if opts.verify {
        How::Content
    } else {
        How::Local
    };
    let fps = fingerprints(list, workers, how);
    let started_ns = settle(started.writer.temp_dir(), &fps, &Precision::of(&fps));
    let old = old_cache(corpus, cache, &opts, list, &fps);
    let index = opts.extended.then(|| match &old {
        Ok(o) => o.rumour_index(list, workers, opts.max_file_bytes),
        Err(_) => rumour_index(list, workers, opts.max_file_bytes),
    });
    // Did the rumour sources change? Then reused threads get their
    // user_reliability recomputed from the stored author keys.
    let index_changed = match (&index, &old) {
        (Some(new_index), Ok(o)) => o.rumour_sources_changed(new_index),
        _ => false,
    };
    let reused = old.as_ref().map_or(0, |o| o.reuse.len() as u64);
    if let Ok(o) = &old
        && !index_changed
        && o.unchanged(list, &report)
    {
        return Ok(o.kept(started));
    }
    let reuser = old.as_ref().ok().map(|old| Reuser {
        old,
        list,
        extended: opts.extended,
        recompute: if index_changed { index.as_ref() } else { None },
    });
    // Fingerprints of what is about to be published, for the next run:
    // written before the swap, so a cache is never published without them.
    let corpus_id = canonical(corpus);
    let mut write_fingerprints = |content_id: &str,
                                  derived: &Path,
                                  authors: &[Vec<u64>],
                                  thread_bad: &[Vec<BadInput>]|
     -> Result<()> {
        Fingerprints {
            version: FINGERPRINTS_VERSION,
            content_id: String::new(),
            xxh3: String::new(),
            corpus: corpus_id.clone(),
            strict: opts.strict,
            max_file_bytes: opts.max_file_bytes,
            shard_bytes: opts.shard_bytes as u64,
            extended: opts.extended,
            verify: opts.verify,
            definition: crate::definition::definition().to_owned(),
            started_ns,
            threads: list
                .iter()
                .zip(&fps)
                .map(|(td, fp)| (td.rel.clone(), fp.hash))
                .collect(),
            authors: per_thread(list, authors),
            bad: per_thread(list, thread_bad),
        }
        .write(content_id, derived)
    };
    let mut summary = started.execute(Supply {
        list,
        index: index.as_ref(),
        report,
        reuse: reuser.as_ref().map(|r| r as &dyn Reuse),
        before_publish: Some(&mut write_fingerprints),
    })?;
    summary.incremental = Some(match &old {
        Ok(_) => format!(
            "incremental: {reused} threads reused, {} re-read{}",
            list.len() as u64 - reused,
            if index_changed {
                "; rumour sources changed, user_reliability recomputed"
            } else {
                ""
            }
        ),
        Err(why) => format!("full build: {why}"),
    });
    summary.reused = reused;
    Ok(summary)
}

impl Old {
    /// The corpus's rumour index: the reused threads' entries from the old
    /// cache, the others' from their files.
    fn rumour_index(&self, list: &[ThreadDir], workers: usize, max_file_bytes: u64) -> RumourIndex {
        let known = |i: usize| match self.reuse.get(&list[i].rel)? {
            Some(pos) => {
                let t = self.cache.thread(*pos)?;
                Some(
                    (t.label_code() == 1)
                        .then(|| (user_key(t.source_user_id()), t.source_created_at())),
                )
            }
            None => Some(None),
        };
        rumour_index_with(list, workers, max_file_bytes, Some(&known))
    }

    /// Whether `new_index` has other rumour sources than the old cache.
    fn rumour_sources_changed(&self, new_index: &RumourIndex) -> bool {
        let mut previous = RumourIndex::default();
        for t in self.cache.iter() {
            if t.label_code() == 1 {
                previous.add(user_key(t.source_user_id()), t.source_created_at());
            }
        }
        let sorted = |i: &RumourIndex| {
            let mut v: Vec<_> = i.entries().collect();
            v.sort_unstable();
            v
        };
        sorted(&previous) != sorted(new_index)
    }

    /// Whether nothing changed at all: every thread of `list` reused, none
    /// added or gone, and the report the build would write (discovery's
    /// lines now, `report`, and each reused thread's own) is the old one.
    /// The old cache is then exactly what a full build would publish.
    fn unchanged(&self, list: &[ThreadDir], report: &[BadInput]) -> bool {
        if self.reuse.len() != list.len()
            || self.cache.len() != self.reuse.values().filter(|p| p.is_some()).count()
        {
            return false;
        }
        let mut expected = report.to_vec();
        for td in list {
            expected.extend(self.report.get(&td.rel).into_iter().flatten().cloned());
        }
        expected.sort();
        expected == self.cache.report()
    }

    /// Keeps the old cache as it is (nothing changed): releases the lock and
    /// staging directory of `started`, and summarises the old cache.
    fn kept(&self, started: Started<'_>) -> BuildSummary {
        let reused = self.reuse.len() as u64;
        started.progress.discovered(reused);
        let (elapsed, phases) = started.discovered_so_far();
        drop(started);
        remove_superseded_fingerprints(&self.cache.derived_dir(), &self.cache.content_id());
        let mut tally = Tally::default();
        for t in self.cache.iter() {
            tally.add(t.label_code(), t.event());
        }
        BuildSummary {
            manifest: self.cache.manifest().clone(),
            report: self.cache.report().to_vec(),
            elapsed,
            phases,
            labels: tally.labels,
            events: tally.events,
            incremental: Some(format!(
                "incremental: nothing changed; the cache is kept as it is ({reused} threads)"
            )),
            reused,
            files_read: 0,
            workers: 0,
            warnings: Vec::new(),
        }
    }
}

/// Unchanged threads from the old cache, with `user_reliability` recomputed
/// against `recompute` (the new rumour index) when the rumour sources
/// changed.
struct Reuser<'a> {
    old: &'a Old,
    list: &'a [ThreadDir],
    extended: bool,
    recompute: Option<&'a RumourIndex>,
}

impl Reuse for Reuser<'_> {
    fn take(&self, i: usize) -> Option<Outcome> {
        let o = self.old;
        let td = &self.list[i];
        let pos = o.reuse.get(&td.rel)?;
        let bad = o.report.get(&td.rel).cloned().unwrap_or_default();
        let Some(pos) = pos else {
            // Skipped last time, unchanged: skipped again, same lines.
            return Some(Outcome {
                data: None,
                bad,
                files_read: 0,
                authors: Vec::new(),
            });
        };
        let t = o.cache.thread(*pos)?;
        let mut data = thread_data(&t, self.extended);
        let authors = o.authors.get(&td.rel).cloned().unwrap_or_default();
        if let (Some(col), Some(idx)) = (reaction_column("user_reliability"), self.recompute) {
            for ((row, r), &a) in data
                .reaction_extra
                .iter_mut()
                .zip(&data.reactions)
                .zip(&authors)
            {
                row[col] = idx.reliability(a, r.created_at);
            }
        }
        Some(Outcome {
            data: Some(data),
            bad,
            files_read: 0,
            authors,
        })
    }
}
