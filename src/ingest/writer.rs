//! Writing a cache: shards as they fill up, then the report and the
//! manifest, all into a [`Staging`] directory that is published atomically.
//!
//! The writer never holds the whole cache in memory: a shard is serialized
//! straight to its file (hashed on the way) as soon as it is full, and its
//! buffers are reused for the next one.
//!
//! A full shard is written by a background thread while the next one fills
//! (at most one at a time, so at most two shards are in memory). Written
//! inline, the serialization, write and `fsync` of each shard held up the
//! build's ordered sink for tens of milliseconds, and the workers, a bounded
//! window ahead of it, stood idle.
//!
//! Shard files are written with `O_DIRECT` where the file system takes it
//! (`DirectOut`): the bytes are the same, but they are not copied into
//! freshly allocated page-cache pages, which cost a warm build 5% of its CPU,
//! and unlinking the replaced cache no longer frees its pages at
//! publication. A reader's first pass over a new cache reads it from disk.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;

use xxhash_rust::xxh3::xxh3_64;

use super::parse::DEFAULT_MAX_FILE_BYTES;
use super::publish::{Staging, io, link_open_file};
pub(crate) use super::record::estimated_bytes;
use super::record::input_keys;
pub use super::record::{ThreadData, ThreadText};
use crate::error::BuildError;
use crate::format::files::{
    DERIVED_DIR, MANIFEST_FILE, REPORT_FILE, fingerprints_id, shard_file, text_file,
};
use crate::format::gather;
use crate::format::manifest::{BuildInfo, FileInfo, Manifest, PartitionInfo, ShardInfo, hex64};
use crate::format::report::{BadInput, write_jsonl};
use crate::format::{
    DEFAULT_SHARD_BYTES, FORMAT_NAME, FORMAT_VERSION, MAX_SHARD_BYTES, Shard, Span, TextShard,
    ThreadSpans,
};
use crate::schema::{
    FEATURE_NAMES, REACTION_COLUMNS, REACTION_EXTRA, ReactionKind, THREAD_COLUMNS, THREAD_EXTRA,
};

type Result<T, E = BuildError> = std::result::Result<T, E>;

mod out;
use out::*;

/// Options of a [`CacheWriter`].
#[derive(Clone, Debug)]
pub struct WriterOptions {
    /// Start a new shard when the current one would grow past this many bytes.
    pub shard_bytes: usize,
    /// Recorded in the manifest.
    pub strict: bool,
    /// Recorded in the manifest.
    pub max_file_bytes: u64,
    /// Store the extended columns (`ThreadData::reaction_extra`, `thread_extra`).
    pub extended: bool,
}

impl Default for WriterOptions {
    fn default() -> Self {
        WriterOptions {
            shard_bytes: DEFAULT_SHARD_BYTES,
            strict: false,
            max_file_bytes: DEFAULT_MAX_FILE_BYTES,
            extended: true,
        }
    }
}

/// One thread in this many, on average, starts a shard whatever the
/// shard holds ([`starts_shard`]).
pub(crate) const SHARD_START_EVERY: u64 = 2048;

/// Whether thread `source_id` starts a shard whatever the shard before it
/// holds: one thread in [`SHARD_START_EVERY`], chosen by a hash of its
/// source id alone (content-defined cut points, as rsync's and restic's
/// chunkers cut). A build's cuts are otherwise decided by what the shard
/// already holds, so a partition, which starts elsewhere than a single
/// build, cut every shard elsewhere too; from its first such thread on, it
/// cuts where the single build does, and a merge links those shards
/// instead of copying them (`crate::merge`).
pub(crate) fn starts_shard(source_id: u64) -> bool {
    xxh3_64(&source_id.to_le_bytes()).is_multiple_of(SHARD_START_EVERY)
}

/// Whether thread `source_id` of `bytes` (estimated) and `reactions`
/// reactions starts a new shard after one that holds `held` (threads,
/// estimated bytes, reactions): the one rule where shards are cut, in
/// builds, incremental builds and merges alike.
pub(crate) fn cut_before(
    opts: &WriterOptions,
    (threads, held_bytes, held_reactions): (u64, usize, usize),
    source_id: u64,
    bytes: usize,
    reactions: usize,
) -> bool {
    threads > 0
        && (starts_shard(source_id)
            || held_bytes + bytes > opts.shard_bytes.min(MAX_SHARD_BYTES)
            || held_reactions + reactions > u32::MAX as usize)
}

/// Builds a cache directory shard by shard and publishes it atomically.
#[derive(Debug)]
pub struct CacheWriter {
    /// The shard being written in the background. Declared before
    /// `staging`, so that it is dropped (joined) first: a writer dropped on
    /// an error must not have a thread still writing into the staging
    /// directory that `staging`'s drop removes.
    pending: PendingFlush,
    /// Cleared buffers of the last shard written, for the next one.
    spare: Option<(Shard, TextShard)>,
    staging: Staging,
    opts: WriterOptions,
    current: Shard,
    current_text: TextShard,
    current_bytes: usize,
    /// The current shard's threads and reactions, its first and last
    /// source ids, carried threads included (`current` holds the others).
    current_count: ShardCounts,
    /// The cache whose threads [`push_carried`](Self::push_carried) copies
    /// (an incremental build's old cache), and the current shard's threads
    /// in order: runs of `current`'s and of that cache's. Empty while the
    /// shard holds only threads of `current`.
    carry_from: Option<Arc<dyn gather::Archives>>,
    pieces: Vec<Piece>,
    shards: Vec<ShardInfo>,
    replies: u64,
    retweets: u64,
    /// The partition record for the manifest (partition builds only).
    partition: Option<PartitionInfo>,
    /// Its threads per event and label, as they are pushed (partition
    /// builds only).
    partition_tally: super::Tally,
}

impl CacheWriter {
    /// Locks `target`, cleans up after interrupted builds and opens a
    /// temporary directory beside it.
    ///
    /// Fails if another build holds the lock, or if `target` exists and is
    /// not a cache (it would be replaced).
    pub fn create(target: &Path, opts: WriterOptions) -> Result<Self> {
        Ok(CacheWriter {
            pending: PendingFlush(None),
            spare: None,
            staging: Staging::begin(target)?,
            opts,
            current: Shard::default(),
            current_text: TextShard::default(),
            current_bytes: 0,
            current_count: ShardCounts::default(),
            carry_from: None,
            pieces: Vec::new(),
            shards: Vec::new(),
            replies: 0,
            retweets: 0,
            partition: None,
            partition_tally: super::Tally::default(),
        })
    }

    /// Makes the cache a partition cache: `info` goes into its manifest,
    /// with its checksum computed at [`finish`](Self::finish).
    pub fn set_partition(&mut self, info: PartitionInfo) {
        self.partition = Some(info);
    }

    /// The temporary directory being written (for tests).
    pub fn temp_dir(&self) -> &Path {
        self.staging.dir()
    }

    /// Appends one thread. Threads must come in strictly ascending source-id order.
    pub fn push(&mut self, t: ThreadData, rel_path: &str) -> Result<()> {
        self.push_ref(&t, rel_path)
    }

    /// [`push`](Self::push) by reference, for a caller that refills one
    /// [`ThreadData`] per thread (a re-pack: no allocation per thread).
    pub fn push_ref(&mut self, t: &ThreadData, rel_path: &str) -> Result<()> {
        let bytes = t.estimated_bytes();
        if bytes > MAX_SHARD_BYTES || t.reactions.len() > u32::MAX as usize / 2 {
            return Err(BuildError::ThreadTooLarge {
                path: rel_path.into(),
                bytes: bytes as u64,
            });
        }
        let n = t.reactions.len();
        if t.features.len() != n
            || t.reaction_texts.len() != n
            || !(t.inputs.is_empty() || t.inputs.len() == n)
        {
            return Err(BuildError::Internal {
                path: rel_path.into(),
                message: "features or texts do not match the reactions".into(),
            });
        }
        if let Some(last) = self.last_source_id()
            && t.record.source_id <= last
        {
            // A merge of partitions that overlap, or a plan edited by hand:
            // such a cache would not open, so nothing is published.
            return Err(BuildError::io(
                rel_path,
                std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!(
                        "source id {} comes after {last}: threads must come in strictly ascending source-id order; nothing was published",
                        t.record.source_id
                    ),
                ),
            ));
        }
        if self.full_before(t.record.source_id, bytes, n) {
            self.flush()?;
        }
        let mut record = t.record;
        record.first_reaction = self.current.reactions.len() as u32;
        record.reaction_count = t.reactions.len() as u32;
        for r in &t.reactions {
            if r.kind == ReactionKind::Retweet as u8 {
                self.retweets += 1;
            } else {
                self.replies += 1;
            }
        }
        if self.opts.extended {
            if t.reaction_extra.len() != t.reactions.len() {
                return Err(BuildError::Internal {
                    path: rel_path.into(),
                    message: "extended columns do not match the reactions".into(),
                });
            }
            let shard = &mut self.current;
            shard.reaction_columns.resize_with(REACTION_EXTRA, Vec::new);
            shard.thread_columns.resize_with(THREAD_EXTRA, Vec::new);
            for row in &t.reaction_extra {
                for (col, v) in shard.reaction_columns.iter_mut().zip(row) {
                    col.push(*v);
                }
            }
            for (col, v) in shard.thread_columns.iter_mut().zip(&t.thread_extra) {
                col.push(*v);
            }
        }
        if self.carry_from.is_some() {
            let i = self.current.threads.len();
            match self.pieces.last_mut() {
                Some(Piece::Native(r)) if r.end == i => r.end = i + 1,
                _ => self.pieces.push(Piece::Native(i..i + 1)),
            }
        }
        if self.partition.is_some() {
            self.partition_tally.add(record.label_code, &t.text.event);
        }
        self.current_count.add(record.source_id, n);
        self.current.threads.push(record);
        self.current.reactions.extend_from_slice(&t.reactions);
        if t.inputs.is_empty() {
            self.current.inputs.extend(input_keys(t));
        } else {
            self.current.inputs.extend_from_slice(&t.inputs);
        }
        self.current.features.extend_from_slice(&t.features);
        let text = &mut self.current_text;
        let arena = &mut text.arena;
        let thread_spans = ThreadSpans {
            event: Span::push(arena, &t.text.event),
            label: Span::push(arena, &t.text.label),
            source_user_id: Span::push(arena, &t.text.source_user_id),
            source_text: Span::push(arena, &t.text.source_text),
        };
        text.threads.push(thread_spans);
        let base = text.arena.len() as u32;
        text.arena.push_str(&t.text_arena);
        text.reactions.extend(
            t.reaction_texts
                .iter()
                .map(|spans| spans.map(|s| s.shifted(base))),
        );
        self.current_bytes += bytes;
        Ok(())
    }

    /// The last source id pushed, if any.
    fn last_source_id(&self) -> Option<u64> {
        (self.current_count.threads > 0)
            .then_some(self.current_count.last_source_id)
            .or_else(|| self.shards.last().map(|s| s.last_source_id))
    }

    /// Whether thread `source_id`, of `bytes` (estimated) and `reactions`
    /// reactions, starts a new shard ([`cut_before`]).
    fn full_before(&self, source_id: u64, bytes: usize, reactions: usize) -> bool {
        cut_before(
            &self.opts,
            (
                self.current_count.threads,
                self.current_bytes,
                self.current_count.reactions as usize,
            ),
            source_id,
            bytes,
            reactions,
        )
    }

    /// Lets [`push_carried`](Self::push_carried) copy threads of `cache`
    /// (an incremental build's old cache, checked when opened).
    pub(crate) fn carry_from(&mut self, cache: Arc<dyn gather::Archives>) {
        self.carry_from = Some(cache);
    }

    /// Appends thread `c` of the cache given to
    /// [`carry_from`](Self::carry_from) by copying its archived bytes (a
    /// thread an incremental build reuses as it is): the bytes that
    /// [`push_ref`](Self::push_ref) of its re-pack writes.
    pub(crate) fn push_carried(&mut self, c: &gather::Carried, rel_path: &str) -> Result<()> {
        if self.carry_from.is_none() {
            return Err(BuildError::Internal {
                path: rel_path.into(),
                message: "a carried thread without the cache it is carried from".into(),
            });
        }
        if c.bytes > MAX_SHARD_BYTES || c.reactions > u32::MAX as usize / 2 {
            return Err(BuildError::ThreadTooLarge {
                path: rel_path.into(),
                bytes: c.bytes as u64,
            });
        }
        if let Some(last) = self.last_source_id()
            && c.source_id <= last
        {
            return Err(BuildError::Internal {
                path: rel_path.into(),
                message: format!(
                    "source id {} comes after {last}: threads must come in strictly ascending source-id order",
                    c.source_id
                ),
            });
        }
        if self.full_before(c.source_id, c.bytes, c.reactions) {
            self.flush()?;
        }
        match self.pieces.last_mut() {
            Some(Piece::Carried(s, r)) if *s == c.shard && r.end == c.index => r.end = c.index + 1,
            _ => self
                .pieces
                .push(Piece::Carried(c.shard, c.index..c.index + 1)),
        }
        self.current_count.add(c.source_id, c.reactions);
        self.retweets += c.retweets as u64;
        self.replies += (c.reactions - c.retweets) as u64;
        self.current_bytes += c.bytes;
        Ok(())
    }

    /// Writes whole shards in order ([`Gathered`]): each either runs of
    /// other caches' checked shards, written by copying their archived
    /// bytes ([`gather`](crate::format::gather): every thread
    /// [`canonical`](gather::canonical), in ascending source-id order, each
    /// shard cut where [`push_ref`](Self::push_ref) would cut it), or one
    /// whole shard of another cache, whose files are linked (copied where a
    /// link cannot be made). The bytes are those `push_ref` of each
    /// thread's re-pack and a flush would write. `ruler`: a string at least
    /// as long as any shard's text arena (only its length is read).
    /// `(replies, retweets)`: what the shards hold, which the caller knows
    /// (a merge: its partitions' sums) and the writer does not count, since
    /// it does not read the shards it links.
    ///
    /// Up to [`GATHER_AT_ONCE`] shards are written at once, each on threads
    /// of its own: a merge's copying costs little CPU, and one shard at a
    /// time left the CPU idle while each `O_DIRECT` write waited on the disk
    /// and the disk idle while the next chunk was gathered.
    pub(crate) fn push_gathered(
        &mut self,
        shards: &[Gathered<'_>],
        ruler: &str,
        (replies, retweets): (u64, u64),
    ) -> Result<()> {
        if self.current_count.threads > 0 {
            self.flush()?;
        }
        self.wait_flushed()?;
        self.replies += replies;
        self.retweets += retweets;
        let columns = if self.opts.extended {
            (REACTION_EXTRA, THREAD_EXTRA)
        } else {
            (0, 0)
        };
        let dir = self.staging.dir().to_path_buf();
        let shards: Vec<&Gathered<'_>> = shards.iter().filter(|g| g.threads() > 0).collect();
        // What a file written here gets (the staging directory's owner and
        // group, the umask's mode): a linked file must have it too.
        let like = {
            use std::os::unix::fs::MetadataExt;
            let m = io(&dir, std::fs::metadata(&dir))?;
            (m.uid(), m.gid(), m.mode() & 0o666)
        };
        for group in shards.chunks(GATHER_AT_ONCE) {
            let base = self.shards.len();
            let write = |k: usize, shard: &Gathered<'_>| -> (Result<FileInfo>, Result<FileInfo>) {
                let copy = |runs: &[gather::Run<'_>], ruler: &str| {
                    let numbers = gather::ShardGather { runs, columns };
                    let text = gather::TextGather { runs, ruler };
                    write_shard_files(&dir, base + k, &numbers, &text)
                };
                let whole = match shard {
                    Gathered::Runs(runs) => return copy(runs, ruler),
                    Gathered::Whole(whole) => whole,
                };
                if let Some(linked) = link_whole(&dir, base + k, whole, like) {
                    return linked;
                }
                // Not linked: read, checked and copied, with a ruler of its
                // own (`ruler` covers the shards that were to be copied).
                let copied = whole.runs().and_then(|runs| {
                    let own = anon_ruler(runs[0].arena().len()).map_err(|e| e.to_string())?;
                    Ok(copy(&runs, own.as_str()))
                });
                copied.unwrap_or_else(|why| {
                    let e = || BuildError::BadPartition {
                        path: whole.dir.to_path_buf(),
                        reason: why.clone(),
                    };
                    (Err(e()), Err(e()))
                })
            };
            let written: Vec<_> = std::thread::scope(|scope| {
                let handles: Vec<_> = group
                    .iter()
                    .enumerate()
                    .map(|(k, shard)| {
                        std::thread::Builder::new()
                            .name("socialctx-gather".into())
                            .spawn_scoped(scope, move || write(k, shard))
                            .map_err(|_| (k, *shard))
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| match h {
                        Ok(h) => h.join().unwrap_or_else(|_| {
                            let e = || BuildError::Internal {
                                path: dir.clone(),
                                message: "a shard writer thread panicked".into(),
                            };
                            (Err(e()), Err(e()))
                        }),
                        // No thread to be had: written here.
                        Err((k, shard)) => write(k, shard),
                    })
                    .collect()
            });
            for ((numbers, text), shard) in written.into_iter().zip(group) {
                let (numbers, text) = (numbers?, text?);
                self.shards.push(shard.info(numbers, text));
            }
        }
        Ok(())
    }

    fn write_synced(&self, name: &str, parts: &[&[u8]]) -> Result<()> {
        let path = self.staging.dir().join(name);
        let mut f = io(&path, File::create(&path))?;
        for p in parts {
            io(&path, f.write_all(p))?;
        }
        io(&path, f.sync_all())
    }

    /// Hands the current shard (numbers and texts) to a background thread
    /// that serializes, writes and syncs it, after waiting for the one
    /// before; the next shard fills the buffers that one used (no
    /// allocation churn). Written inline when no thread can be started.
    fn flush(&mut self) -> Result<()> {
        self.wait_flushed()?;
        let n = self.shards.len();
        let next = self.spare.take().unwrap_or_default();
        let shard = std::mem::replace(&mut self.current, next.0);
        let text = std::mem::replace(&mut self.current_text, next.1);
        self.current_bytes = 0;
        let counts = std::mem::take(&mut self.current_count);
        // A shard holding carried threads is gathered from its runs.
        let carried = self
            .pieces
            .iter()
            .any(|p| matches!(p, Piece::Carried(..)))
            .then(|| self.carry_from.clone())
            .flatten()
            .map(|from| (std::mem::take(&mut self.pieces), from));
        self.pieces.clear();
        let columns = if self.opts.extended {
            (REACTION_EXTRA, THREAD_EXTRA)
        } else {
            (0, 0)
        };
        let dir = self.staging.dir().to_path_buf();
        // The job hands its input back so that a refused spawn can run it here.
        let job = Box::new((dir, n, shard, text, carried, columns));
        let (tx, rx) = std::sync::mpsc::sync_channel::<Box<FlushJob>>(1);
        let spawned = std::thread::Builder::new()
            .name("socialctx-shard-writer".into())
            .spawn(move || {
                rx.recv()
                    .map_err(|_| None)
                    .and_then(|job| write_shard(*job).map_err(Some))
            });
        match spawned {
            Ok(handle) => {
                let _ = tx.send(job);
                self.pending.0 = Some((counts, handle));
                Ok(())
            }
            Err(_) => {
                let done = write_shard(*job)?;
                self.record(counts, done);
                Ok(())
            }
        }
    }

    /// Waits for the shard being written in the background, if any, and
    /// records it.
    fn wait_flushed(&mut self) -> Result<()> {
        let Some((counts, handle)) = self.pending.0.take() else {
            return Ok(());
        };
        let done = match handle.join() {
            Ok(Ok(done)) => done,
            Ok(Err(Some(e))) => return Err(e),
            Ok(Err(None)) | Err(_) => {
                return Err(BuildError::Internal {
                    path: shard_file(self.shards.len()).into(),
                    message: "the shard writer thread stopped".into(),
                });
            }
        };
        self.record(counts, done);
        Ok(())
    }

    fn record(&mut self, counts: ShardCounts, done: Flushed) {
        let (numbers, text, mut shard, mut text_shard) = done;
        self.shards.push(ShardInfo {
            numbers,
            text,
            threads: counts.threads,
            reactions: counts.reactions,
            first_source_id: counts.first_source_id,
            last_source_id: counts.last_source_id,
        });
        shard.threads.clear();
        shard.reactions.clear();
        shard.features.clear();
        shard.inputs.clear();
        shard.reaction_columns.iter_mut().for_each(Vec::clear);
        shard.thread_columns.iter_mut().for_each(Vec::clear);
        text_shard.arena.clear();
        text_shard.threads.clear();
        text_shard.reactions.clear();
        self.spare = Some((shard, text_shard));
    }

    /// Writes the last shard, the report and the manifest, and publishes the
    /// cache at the target path. `report` should be sorted (it is stored as given).
    pub fn finish(self, report: &[BadInput]) -> Result<Manifest> {
        self.finish_with(report, None).map(|(m, _)| m)
    }

    /// As [`finish`](Self::finish); `before_publish` is called with the new
    /// cache's content id and the `derived/` directory the published cache
    /// will have (the old cache's, which publication carries over, or the
    /// staging directory's when there is none) after everything is written
    /// and before the swap: an error there publishes nothing. After the
    /// swap, fingerprints files of other contents are removed from
    /// `derived/` (nothing else there is touched). Also returns warnings
    /// about what failed after the cache was published.
    pub fn finish_with(
        mut self,
        report: &[BadInput],
        before_publish: Option<WriterHook<'_>>,
    ) -> Result<(Manifest, Vec<String>)> {
        if self.current_count.threads > 0 {
            self.flush()?;
        }
        // The report is written while the last shard is.
        let mut report_bytes = Vec::new();
        write_jsonl(&mut report_bytes, report)
            .map_err(|e| BuildError::io(self.staging.dir().join(REPORT_FILE), e))?;
        self.write_synced(REPORT_FILE, &[&report_bytes])?;
        self.wait_flushed()?;

        let mut manifest = Manifest {
            format: FORMAT_NAME.into(),
            format_version: FORMAT_VERSION,
            feature_names: FEATURE_NAMES.iter().map(|s| s.to_string()).collect(),
            threads: self.shards.iter().map(|s| s.threads).sum(),
            reactions: self.shards.iter().map(|s| s.reactions).sum(),
            replies: self.replies,
            retweets: self.retweets,
            skipped: report.len() as u64,
            options: BuildInfo {
                strict: self.opts.strict,
                max_file_bytes: self.opts.max_file_bytes,
                shard_bytes: self.opts.shard_bytes as u64,
            },
            shards: std::mem::take(&mut self.shards),
            report: FileInfo {
                file: REPORT_FILE.into(),
                bytes: report_bytes.len() as u64,
                xxh3: hex64(xxh3_64(&report_bytes)),
            },
            reaction_columns: if self.opts.extended {
                REACTION_COLUMNS.iter().map(|s| s.to_string()).collect()
            } else {
                Vec::new()
            },
            thread_columns: if self.opts.extended {
                THREAD_COLUMNS.iter().map(|s| s.to_string()).collect()
            } else {
                Vec::new()
            },
            definition: crate::definition::definition().to_owned(),
            partition: self.partition.take().map(|mut p| {
                p.threads_by_event = std::mem::take(&mut self.partition_tally.event_labels);
                p
            }),
            checksum: String::new(),
        };
        if let Some(sum) = manifest.partition_checksum()
            && let Some(p) = manifest.partition.as_mut()
        {
            p.xxh3 = sum;
        }
        manifest.seal();
        let json = manifest.to_bytes().map_err(|e| BuildError::Internal {
            path: MANIFEST_FILE.into(),
            message: e.to_string(),
        })?;
        self.write_synced(MANIFEST_FILE, &[&json])?;
        // The content id, as readers compute it from the manifest's bytes.
        let content_id = hex64(xxh3_64(&json));
        let target = self.staging.target().to_path_buf();
        if let Some(hook) = before_publish {
            let home = if target.is_dir() {
                &target
            } else {
                self.staging.dir()
            };
            hook(&content_id, &home.join(DERIVED_DIR))?;
        }
        let mut warnings = self.staging.publish()?;
        warnings.extend(crate::definition::simulation_warning());
        remove_superseded_fingerprints(&target.join(DERIVED_DIR), &content_id);
        Ok((manifest, warnings))
    }
}

/// What [`CacheWriter::finish_with`] calls before the swap: the content id
/// and the `derived/` directory the published cache will have.
pub type WriterHook<'a> = &'a mut dyn FnMut(&str, &Path) -> Result<()>;

/// Removes the fingerprints files of contents other than `content_id` from
/// `derived` (only names of exactly our shape; best effort: a file that
/// cannot be removed is left, and a later publish tries again).
pub(crate) fn remove_superseded_fingerprints(derived: &Path, content_id: &str) {
    let Ok(entries) = std::fs::read_dir(derived) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        if let Some(id) = fingerprints_id(&name.to_string_lossy())
            && id != content_id
            && e.file_type().is_ok_and(|t| t.is_file())
        {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// What a background shard write is given: the staging directory, the
/// shard's number, its numbers and its texts (the threads written as a
/// build writes them), the runs of the shard when it holds carried threads
/// (with the cache they are carried from), and the extended columns'
/// counts.
type FlushJob = (
    PathBuf,
    usize,
    Shard,
    TextShard,
    Option<(Vec<Piece>, Arc<dyn gather::Archives>)>,
    (usize, usize),
);

/// A run of the current shard's threads: of the writer's own (`current`,
/// by index), or of the carried-from cache's shard (its index, threads).
#[derive(Clone, Debug)]
enum Piece {
    Native(std::ops::Range<usize>),
    Carried(usize, std::ops::Range<usize>),
}
/// What it gives back: the two files written, and the buffers to reuse.
type Flushed = (FileInfo, FileInfo, Shard, TextShard);

/// Writes shard `n`'s two files into `dir`, the texts on a second thread
/// (the last shard's write is on the build's critical path, and each file
/// waits on its own `fsync`).
fn write_shard((dir, n, shard, text, carried, columns): FlushJob) -> Result<Flushed> {
    if let Some((pieces, from)) = carried {
        return write_mixed(&dir, n, shard, text, &pieces, &*from, columns);
    }
    let (numbers, text_info) = write_shard_files(&dir, n, &shard, &text);
    Ok((numbers?, text_info?, shard, text))
}

/// Writes shard `n` of carried runs and of the writer's own threads
/// (`shard`, `text`): the latter are archived in memory first (a build
/// carrying threads re-reads few), then every run is copied
/// ([`gather`]), which writes the bytes that pushing each thread's re-pack
/// would.
fn write_mixed(
    dir: &Path,
    n: usize,
    shard: Shard,
    text: TextShard,
    pieces: &[Piece],
    from: &dyn gather::Archives,
    columns: (usize, usize),
) -> Result<Flushed> {
    let internal = |message: String| BuildError::Internal {
        path: shard_file(n).into(),
        message,
    };
    let own = if shard.threads.is_empty() {
        None
    } else {
        let numbers = rkyv::to_bytes::<rkyv::rancor::BoxedError>(&shard)
            .map_err(|e| internal(format!("archiving the shard's new threads: {e}")))?;
        let texts = rkyv::to_bytes::<rkyv::rancor::BoxedError>(&text)
            .map_err(|e| internal(format!("archiving the shard's new texts: {e}")))?;
        Some((numbers, texts))
    };
    let own_archives = match &own {
        Some((numbers, texts)) => Some((
            rkyv::access::<crate::format::ArchivedShard, rkyv::rancor::BoxedError>(numbers)
                .map_err(|e| internal(e.to_string()))?,
            rkyv::access::<crate::format::ArchivedTextShard, rkyv::rancor::BoxedError>(texts)
                .map_err(|e| internal(e.to_string()))?,
        )),
        None => None,
    };
    let mut runs = Vec::with_capacity(pieces.len());
    for p in pieces {
        let (archives, threads) = match p {
            Piece::Native(r) => (own_archives, r.clone()),
            Piece::Carried(s, r) => (from.archives(*s), r.clone()),
        };
        let (numbers, text) =
            archives.ok_or_else(|| internal("a carried shard could not be read".into()))?;
        runs.push(gather::Run {
            numbers,
            text,
            threads,
        });
    }
    let arena: usize = runs.iter().map(|r| r.arena().len()).sum();
    let ruler = anon_ruler(arena).map_err(|e| BuildError::io(dir, e))?;
    let ruler = ruler.as_str();
    let numbers_out = gather::ShardGather {
        runs: &runs,
        columns,
    };
    let text_out = gather::TextGather { runs: &runs, ruler };
    let (numbers, text_info) = write_shard_files(dir, n, &numbers_out, &text_out);
    let (numbers, text_info) = (numbers?, text_info?);
    drop(runs);
    drop(own);
    Ok((numbers, text_info, shard, text))
}

/// One shard of a merged cache ([`CacheWriter::push_gathered`]).
#[derive(Debug)]
pub(crate) enum Gathered<'a> {
    /// Runs of other caches' threads, in order: copied.
    Runs(Vec<gather::Run<'a>>),
    /// One whole shard of another cache, its files open: a shard's bytes
    /// are a function of its threads alone (every offset in it is relative
    /// to it), so where that shard holds exactly the threads a build would
    /// cut into this one, it is this shard, byte for byte, and is linked.
    Whole(WholeShard<'a>),
}

impl Gathered<'_> {
    fn threads(&self) -> u64 {
        match self {
            Gathered::Runs(runs) => runs.iter().map(|r| r.threads.len() as u64).sum(),
            Gathered::Whole(w) => w.info.threads,
        }
    }

    /// Its record in the new manifest, its files written as `numbers` and
    /// `text`.
    fn info(&self, numbers: FileInfo, text: FileInfo) -> ShardInfo {
        match self {
            Gathered::Whole(w) => ShardInfo {
                numbers,
                text,
                ..w.info.clone()
            },
            Gathered::Runs(runs) => {
                let ids = |r: &gather::Run<'_>| {
                    let ts = &r.numbers.threads[r.threads.clone()];
                    ts.first()
                        .zip(ts.last())
                        .map(|(a, b)| (a.source_id.to_native(), b.source_id.to_native()))
                };
                ShardInfo {
                    numbers,
                    text,
                    threads: self.threads(),
                    reactions: runs.iter().map(|r| r.reactions().len() as u64).sum(),
                    first_source_id: runs.iter().find_map(ids).map_or(0, |(a, _)| a),
                    last_source_id: runs.iter().rev().find_map(ids).map_or(0, |(_, b)| b),
                }
            }
        }
    }
}

/// A shard of another cache, with its open files: checked against its
/// record (sizes and footers) but not read, and read (checked whole) only
/// should a link fail and its bytes be copied.
#[derive(Clone, Copy)]
pub(crate) struct WholeShard<'a> {
    /// Its numbers file, as opened with that cache's manifest.
    pub numbers: &'a File,
    /// Its text file, as opened with that cache's manifest.
    pub text: &'a File,
    /// Its record in that cache's manifest.
    pub info: &'a ShardInfo,
    /// That cache, and the shard's index in it.
    pub from: &'a dyn gather::Archives,
    /// See `from`.
    pub index: usize,
    /// That cache's directory, for errors.
    pub dir: &'a Path,
}

impl std::fmt::Debug for WholeShard<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WholeShard")
            .field("dir", &self.dir)
            .field("index", &self.index)
            .finish()
    }
}

impl<'a> WholeShard<'a> {
    /// The shard as one run, to copy: its files read and checked whole
    /// (or why they cannot be).
    fn runs(&self) -> std::result::Result<Vec<gather::Run<'a>>, String> {
        let (numbers, text) = self.from.checked(self.index)?;
        Ok(vec![gather::Run {
            numbers,
            text,
            threads: 0..numbers.threads.len(),
        }])
    }
}

/// A string of `len` zero bytes, mapped and never written (the kernel's
/// zero page backs it): a ruler for [`gather::TextGather`], which reads
/// only its length.
pub(crate) struct Ruler(memmap2::MmapMut);

impl Ruler {
    pub(crate) fn as_str(&self) -> &str {
        // Zero bytes are UTF-8 (NUL characters).
        std::str::from_utf8(&self.0).unwrap_or_default()
    }
}

/// A [`Ruler`] of at least `len` bytes.
pub(crate) fn anon_ruler(len: usize) -> std::io::Result<Ruler> {
    memmap2::MmapMut::map_anon(len.max(1)).map(Ruler)
}

/// Links `whole`'s two files into `dir` as shard `n`, or `None` where a
/// link cannot be made (then nothing is left of it and the shard is
/// written). A linked file is the other cache's inode, its owner and mode
/// included: only a file with those a written one would have (`like`:
/// owner, group, mode) is linked, so that the cache's files are alike and
/// no other user owns (and may write) a file in it.
fn link_whole(
    dir: &Path,
    n: usize,
    whole: &WholeShard<'_>,
    like: (u32, u32, u32),
) -> Option<(Result<FileInfo>, Result<FileInfo>)> {
    use std::os::unix::fs::MetadataExt;
    let (numbers, text) = (shard_file(n), text_file(n));
    let alike = |f: &File| {
        f.metadata()
            .is_ok_and(|m| (m.uid(), m.gid(), m.mode() & 0o7777) == like)
    };
    if !alike(whole.numbers) || !alike(whole.text) {
        return None;
    }
    let linked = |from: &File, name: &str| link_open_file(from, &dir.join(name)).is_ok();
    if !linked(whole.numbers, &numbers) {
        return None;
    }
    if !linked(whole.text, &text) {
        let _ = std::fs::remove_file(dir.join(&numbers));
        return None;
    }
    let info = |file: String, of: &FileInfo| FileInfo {
        file,
        bytes: of.bytes,
        xxh3: of.xxh3.clone(),
    };
    Some((
        Ok(info(numbers, &whole.info.numbers)),
        Ok(info(text, &whole.info.text)),
    ))
}

/// Shards a merge writes at once ([`CacheWriter::push_gathered`]): each
/// takes two threads and two `O_DIRECT` chunks of memory.
const GATHER_AT_ONCE: usize = 4;

/// A shard's counts for its [`ShardInfo`], taken before it is written.
#[derive(Debug, Default)]
struct ShardCounts {
    threads: u64,
    reactions: u64,
    first_source_id: u64,
    last_source_id: u64,
}

impl ShardCounts {
    /// Counts one more thread, of `reactions` reactions.
    fn add(&mut self, source_id: u64, reactions: usize) {
        if self.threads == 0 {
            self.first_source_id = source_id;
        }
        self.last_source_id = source_id;
        self.threads += 1;
        self.reactions += reactions as u64;
    }
}

/// A background shard write's thread: `Err(None)` if it never got its job.
type FlushThread = JoinHandle<std::result::Result<Flushed, Option<BuildError>>>;

/// The background write of one shard: its counts, and its thread.
#[derive(Default)]
struct PendingFlush(Option<(ShardCounts, FlushThread)>);

impl std::fmt::Debug for PendingFlush {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "PendingFlush(writing)"
        } else {
            "PendingFlush(idle)"
        })
    }
}

impl Drop for PendingFlush {
    fn drop(&mut self) {
        if let Some((_, handle)) = self.0.take() {
            let _ = handle.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One thread in about [`SHARD_START_EVERY`] starts a shard, whatever
    /// the shard before it holds, and never the first shard's first; the
    /// others start one only when it is full.
    #[test]
    fn a_shard_starts_where_its_thread_says_or_when_full() {
        let opts = WriterOptions {
            shard_bytes: 1000,
            ..WriterOptions::default()
        };
        let starting: Vec<u64> = (0..1u64 << 21).filter(|&id| starts_shard(id)).collect();
        let expected = (1u64 << 21) / SHARD_START_EVERY;
        assert!(
            (starting.len() as u64).abs_diff(expected) < expected / 5,
            "{} of 2^21 ids start a shard",
            starting.len()
        );
        let (start, plain) = (starting[0], (0..).find(|&i| !starts_shard(i)).unwrap());
        assert!(cut_before(&opts, (1, 0, 0), start, 1, 1));
        assert!(!cut_before(&opts, (0, 0, 0), start, 1, 1));
        assert!(!cut_before(&opts, (1, 0, 0), plain, 1, 1));
        assert!(!cut_before(&opts, (5, 900, 9), plain, 100, 1));
        assert!(cut_before(&opts, (5, 900, 9), plain, 101, 1));
        assert!(cut_before(&opts, (5, 0, u32::MAX as usize), plain, 1, 1));
    }
}
