//! Merging partition caches into one: re-packs their threads, in source-id
//! order, into shards exactly as a single build would, so the merged cache
//! is byte-identical to a single build of the same corpus. A merged shard
//! that is one whole partition shard (the writer cuts a partition's shards
//! where a single build does from its first thread that starts a shard:
//! `ingest::writer::cut_before`) is that partition's files, hard-linked
//! and not read (their bytes are checked by every reader, against the
//! checksums the partition wrote); the others, around the partitions'
//! edges, are read, checked and copied.
//!
//! A partition is a cache built by [`build_partition`](crate::build_partition)
//! whose manifest records which part of which plan it is (checksummed). The
//! set must be every partition of one plan, each once, their ranges covering
//! the plan's threads, each partition's threads inside its range; anything
//! else is an error and nothing is published.

use std::fmt::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::error::BuildError;
use crate::format::MAX_SHARD_BYTES;
use crate::format::footer::{self, Footer};
use crate::format::gather::{self, Archives, Run};
use crate::format::manifest::PartitionInfo;
use crate::format::manifest::hex64;
use crate::format::report::BadInput;
use crate::ingest::writer::{
    CacheWriter, Gathered, ThreadData, WholeShard, WriterOptions, anon_ruler, cut_before,
    estimated_bytes, starts_shard,
};
use crate::ingest::{BuildSummary, Phases, Tally};
use crate::read::{LazyCache, ThreadSource};
use crate::repack::refill;

type Result<T, E = BuildError> = std::result::Result<T, E>;

fn bad(path: &Path, reason: impl Into<String>) -> BuildError {
    BuildError::BadPartition {
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}

/// Merges the partition caches `parts` (every partition of one plan, in any
/// order) into the cache at `out`, published atomically.
///
/// ```no_run
/// # use socialctx::{BuildOptions, NoProgress, Plan, build_partition, merge};
/// let plan = Plan::create("corpus", &BuildOptions::default())?;
/// for i in 0..3 {
///     build_partition("corpus", &plan, (i, 3), format!("part-{i}"), None, &NoProgress)?;
/// }
/// merge("cache", &["part-0", "part-1", "part-2"])?;
/// # Ok::<(), socialctx::Error>(())
/// ```
pub fn merge(out: impl AsRef<Path>, parts: &[impl AsRef<Path>]) -> Result<BuildSummary> {
    let start = Instant::now();
    let out = out.as_ref();
    let parts: Vec<&Path> = parts.iter().map(AsRef::as_ref).collect();
    // The output replaces what is there: never one of the inputs.
    let same = |a: &Path, b: &Path| match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    if let Some(p) = parts.iter().find(|p| same(out, p)) {
        return Err(bad(
            p,
            format!(
                "is both a partition to merge and the output {}; merge into another directory",
                out.display()
            ),
        ));
    }
    Partitions::open(out, &parts)?.repack(out, start)
}

/// A complete, consistent set of partition caches of one plan, in
/// partition order.
struct Partitions {
    /// Each partition's record, directory and cache (its manifest read and
    /// checked, its shards each read and checked only if it is copied).
    parts: Vec<(PartitionInfo, PathBuf, LazyCache)>,
    /// What the plan's discovery reported.
    discovered: Vec<BadInput>,
    /// The options every partition was built with.
    options: WriterOptions,
}

impl Partitions {
    /// Opens `parts` and checks that they are every partition of one plan,
    /// each once, built with the same options, each holding only threads of
    /// its range (errors name the partition at fault; `out` when none was
    /// given).
    fn open(out: &Path, parts: &[&Path]) -> Result<Partitions> {
        if parts.is_empty() {
            return Err(bad(out, "no partitions to merge"));
        }
        // Each partition proves what it holds with the record its manifest
        // carries (written and published with the cache, checksummed).
        let mut infos: Vec<(PartitionInfo, PathBuf, LazyCache)> = Vec::new();
        for &p in parts {
            let cache = LazyCache::open(p).map_err(|e| bad(p, e.to_string()))?;
            let m = cache.manifest();
            let Some(info) = m.partition.clone() else {
                return Err(bad(
                    p,
                    "not a partition (its manifest has no partition record)",
                ));
            };
            if m.partition_checksum().as_deref() != Some(info.xxh3.as_str()) {
                return Err(bad(
                    p,
                    "the partition record in its manifest does not match its checksum (edited or damaged); rebuild this partition",
                ));
            }
            infos.push((info, p.to_path_buf(), cache));
        }
        let (first, first_path) = (infos[0].0.clone(), infos[0].1.clone());
        // Values computed by different code never mix (src/definition.rs).
        let shown = crate::definition::shown;
        let first_def = infos[0].2.manifest().definition.clone();
        for (_, p, cache) in &infos {
            let d = &cache.manifest().definition;
            if *d != first_def {
                return Err(bad(
                    p,
                    format!(
                        "built by definition {} of the stored values, but {} by definition {}: partitions of different versions never mix; build every partition with one version",
                        shown(d),
                        first_path.display(),
                        shown(&first_def)
                    ),
                ));
            }
        }
        let ours = crate::definition::definition();
        if first_def != ours {
            return Err(bad(
                &first_path,
                format!(
                    "built by definition {} of the stored values, but this library computes definition {ours}: merge with the version that built the partitions, or build them again with this one",
                    shown(&first_def)
                ),
            ));
        }
        for (info, p, _) in &infos {
            if info.plan_id == first.plan_id && info.inputs != first.inputs {
                return Err(bad(
                    p,
                    format!(
                        "built from other corpus inputs ({}) than {} ({}): the corpus changed between the partition builds; make the plan again and build every partition of it",
                        info.inputs,
                        first_path.display(),
                        first.inputs
                    ),
                ));
            }
            if info.plan_id != first.plan_id
                || info.count != first.count
                || info.plan_threads != first.plan_threads
                || info.bad != first.bad
            {
                return Err(bad(
                    p,
                    format!(
                        "partition of plan {} ({} parts), but {} is of plan {} ({} parts)",
                        info.plan_id,
                        info.count,
                        first_path.display(),
                        first.plan_id,
                        first.count
                    ),
                ));
            }
        }
        infos.sort_by_key(|(i, _, _)| i.index);
        for (k, (info, p, _)) in infos.iter().enumerate() {
            if info.index != k as u64 {
                let what = if info.index < k as u64 {
                    "appears twice"
                } else {
                    "is missing"
                };
                let which = if info.index < k as u64 {
                    info.index
                } else {
                    k as u64
                };
                return Err(bad(
                    p,
                    format!("partition {which} of {} {what}", first.count),
                ));
            }
        }
        if infos.len() as u64 != first.count {
            return Err(bad(
                &first_path,
                format!("partition {} of {} is missing", infos.len(), first.count),
            ));
        }
        // The partitions' ranges cover the plan's threads, each once, in order;
        // each partition holds only threads of its range, no more than planned.
        let mut next = 0u64;
        for (info, p, cache) in &infos {
            if info.first_thread != next || info.end_thread < info.first_thread {
                return Err(bad(
                    p,
                    format!(
                        "partition {} of {} covers the plan's threads {}..{}, but the partitions before it end at {next}",
                        info.index, info.count, info.first_thread, info.end_thread
                    ),
                ));
            }
            next = info.end_thread;
            let planned = info.end_thread - info.first_thread;
            if cache.len() as u64 > planned {
                return Err(bad(
                    p,
                    format!(
                        "holds {} threads, but its range of the plan has {planned}",
                        cache.len()
                    ),
                ));
            }
            // The manifest's shards are in order, each its first and last
            // source id (checked when it was read; each shard's file
            // against its entry when it is read, here or by any reader of
            // the merged cache).
            let range = info.first_source_id..=info.last_source_id;
            if let Some(s) =
                cache.manifest().shards.iter().find(|s| {
                    !range.contains(&s.first_source_id) || !range.contains(&s.last_source_id)
                })
            {
                let outside = if range.contains(&s.first_source_id) {
                    s.last_source_id
                } else {
                    s.first_source_id
                };
                return Err(bad(
                    p,
                    format!(
                        "holds thread {outside}, outside its range of the plan ({}..={})",
                        info.first_source_id, info.last_source_id
                    ),
                ));
            }
        }
        if next != first.plan_threads {
            return Err(bad(
                &first_path,
                format!(
                    "the partitions cover {next} of the plan's {} threads",
                    first.plan_threads
                ),
            ));
        }
        let caches: Vec<&LazyCache> = infos.iter().map(|(_, _, c)| c).collect();
        let options = &caches[0].manifest().options;
        let extended = !caches[0].manifest().reaction_columns.is_empty();
        for (c, (_, p, _)) in caches.iter().zip(&infos) {
            let m = c.manifest();
            if &m.options != options || m.reaction_columns.is_empty() == extended {
                return Err(bad(p, "built with other options than the first partition"));
            }
        }
        let options = WriterOptions {
            shard_bytes: options.shard_bytes as usize,
            strict: options.strict,
            max_file_bytes: options.max_file_bytes,
            extended,
        };
        Ok(Partitions {
            parts: infos,
            discovered: first.bad,
            options,
        })
    }

    /// Which shards of each partition a single build writes as they are,
    /// from the manifests alone: a partition cuts where the single build
    /// does once its state is the single build's, at its start when no
    /// thread comes before it, else from its first shard whose first thread
    /// starts a shard whatever precedes it (`starts_shard`); its last shard
    /// ends where the single build cuts when it is the corpus's last or the
    /// next partition's first thread starts a shard. A shard whose files
    /// are not held open is copied.
    fn linkable(&self) -> Vec<Vec<bool>> {
        let firsts: Vec<Option<u64>> = self
            .parts
            .iter()
            .map(|(_, _, c)| c.manifest().shards.first().map(|s| s.first_source_id))
            .collect();
        self.parts
            .iter()
            .enumerate()
            .map(|(k, (_, _, cache))| {
                let shards = &cache.manifest().shards;
                let mut aligned = firsts[..k].iter().all(Option::is_none);
                let end_cut = firsts[k + 1..]
                    .iter()
                    .flatten()
                    .next()
                    .is_none_or(|&id| starts_shard(id));
                shards
                    .iter()
                    .enumerate()
                    .map(|(s, info)| {
                        aligned |= starts_shard(info.first_source_id);
                        let last = s + 1 == shards.len();
                        aligned && (!last || end_cut) && cache.shard_files(s).is_some()
                    })
                    .collect()
            })
            .collect()
    }

    /// Writes every partition's threads, in order, into the cache at `out`
    /// and publishes it. The shards a single build writes as a partition
    /// wrote them ([`linkable`](Self::linkable)) are linked, checked
    /// against their records (size and footer: their bytes are checked by
    /// every reader, against the checksums the partition wrote), and not
    /// read; the others are read, checked and copied run by run
    /// ([`gather`]) when every thread is laid out as this library's writer
    /// lays it out (always, for partitions it built), else every thread is
    /// re-packed ([`repack_each`](Self::repack_each)). Both write the same
    /// bytes.
    fn repack(self, out: &Path, start: Instant) -> Result<BuildSummary> {
        let linkable = self.linkable();
        // The copied shards read and checked first: a thread laid out
        // otherwise sends the merge down the slow path.
        let mut canonical = true;
        for ((_, p, cache), links) in self.parts.iter().zip(&linkable) {
            for (s, &link) in links.iter().enumerate() {
                if link {
                    check_footers(p, cache, s)?;
                    continue;
                }
                let (n, t) = cache.checked(s).map_err(|e| bad(p, e))?;
                canonical &= (0..n.threads.len()).all(|i| gather::canonical(n, t, i));
            }
        }
        if !canonical {
            return self.repack_each(out, start);
        }
        let extended = self.options.extended;
        // The tally from the partitions' records where every partition
        // holding threads has one (else counted from the threads, read).
        let recorded = self
            .parts
            .iter()
            .all(|(info, _, c)| c.is_empty() || !info.threads_by_event.is_empty());
        let mut tally = Tally::default();
        if recorded {
            for (info, _, _) in &self.parts {
                tally.add_counts(&info.threads_by_event);
            }
        }
        let (replies, retweets) = self.parts.iter().fold((0, 0), |(r, t), (_, _, c)| {
            (r + c.manifest().replies, t + c.manifest().retweets)
        });
        let mut report = self.discovered.clone();
        let mut last_id = None;
        // The new shards: whole partition shards, and runs of the others'
        // threads cut where the writer cuts a build's (`cut_before`).
        let mut shards: Vec<Gathered<'_>> = Vec::new();
        let mut runs: Vec<Run<'_>> = Vec::new();
        let (mut bytes_in, mut reactions_in, mut arena_in, mut longest) = (0usize, 0usize, 0, 0);
        for ((_, p, cache), links) in self.parts.iter().zip(&linkable) {
            report.extend(cache.read_report().map_err(|e| bad(p, e.to_string()))?);
            for (s, &link) in links.iter().enumerate() {
                let info = &cache.manifest().shards[s];
                if link {
                    if last_id.is_some_and(|l| l >= info.first_source_id) {
                        return Err(bad(p, "threads overlap another partition's"));
                    }
                    last_id = Some(info.last_source_id);
                    if !recorded {
                        let (numbers, text) = cache.checked(s).map_err(|e| bad(p, e))?;
                        tally_threads(&mut tally, numbers, text);
                    }
                    // A single build cuts before it: the runs before it are
                    // a shard.
                    if !runs.is_empty() {
                        shards.push(Gathered::Runs(std::mem::take(&mut runs)));
                        longest = longest.max(arena_in);
                        (bytes_in, reactions_in, arena_in) = (0, 0, 0);
                    }
                    let Some((numbers, text)) = cache.shard_files(s) else {
                        return Err(bad(p, "a shard file held open was closed"));
                    };
                    shards.push(Gathered::Whole(WholeShard {
                        numbers,
                        text,
                        info,
                        from: cache,
                        index: s,
                        dir: p,
                    }));
                    continue;
                }
                let (numbers, text) = cache.checked(s).map_err(|e| bad(p, e))?;
                for (i, rec) in numbers.threads.iter().enumerate() {
                    let id = rec.source_id.to_native();
                    if last_id.is_some_and(|l| l >= id) {
                        return Err(bad(p, "threads overlap another partition's"));
                    }
                    last_id = Some(id);
                    let arena = text.arena.as_str();
                    if !recorded {
                        let event = &text.threads[i].event;
                        let event_start = event.start.to_native() as usize;
                        tally.add(
                            rec.label_code,
                            arena
                                .get(event_start..event_start + event.len.to_native() as usize)
                                .unwrap_or(""),
                        );
                    }
                    let region = gather::thread_arena(text, i).len();
                    let n = rec.reaction_count.to_native() as usize;
                    let bytes = estimated_bytes(region, n, if extended { n } else { 0 });
                    if bytes > MAX_SHARD_BYTES || n > u32::MAX as usize / 2 {
                        return Err(BuildError::ThreadTooLarge {
                            path: id.to_string().into(),
                            bytes: bytes as u64,
                        });
                    }
                    if !runs.is_empty()
                        && cut_before(&self.options, (1, bytes_in, reactions_in), id, bytes, n)
                    {
                        shards.push(Gathered::Runs(std::mem::take(&mut runs)));
                        longest = longest.max(arena_in);
                        (bytes_in, reactions_in, arena_in) = (0, 0, 0);
                    }
                    match runs.last_mut() {
                        Some(r) if std::ptr::eq(r.numbers, numbers) && r.threads.end == i => {
                            r.threads.end = i + 1;
                        }
                        _ => runs.push(Run {
                            numbers,
                            text,
                            threads: i..i + 1,
                        }),
                    }
                    bytes_in += bytes;
                    reactions_in += n;
                    arena_in += region;
                }
            }
        }
        if !runs.is_empty() {
            shards.push(Gathered::Runs(runs));
            longest = longest.max(arena_in);
        }
        report.sort();
        let ruler = anon_ruler(longest).map_err(|e| BuildError::io(out, e))?;
        let mut writer = CacheWriter::create(out, self.options.clone())?;
        writer.push_gathered(&shards, ruler.as_str(), (replies, retweets))?;
        let t = Instant::now();
        let (manifest, warnings) = writer.finish_with(&report, None)?;
        Self::summary(manifest, report, tally, warnings, start, t)
    }

    /// [`repack`](Self::repack) thread by thread: each decoded into a
    /// [`ThreadData`] and written as a build writes it (partitions whose
    /// texts are laid out otherwise than this library's writer does).
    fn repack_each(self, out: &Path, start: Instant) -> Result<BuildSummary> {
        let extended = self.options.extended;
        let parts = self
            .parts
            .into_iter()
            .map(|(_, p, c)| match c.validate_all() {
                Ok(c) => Ok((p, c)),
                Err(e) => Err(bad(&p, e.to_string())),
            })
            .collect::<Result<Vec<_>>>()?;
        let mut writer = CacheWriter::create(out, self.options)?;
        let mut tally = Tally::default();
        let mut report = self.discovered;
        let mut last_id = None;
        // One thread's buffers and name, refilled for each (no allocation
        // per thread).
        let mut data = ThreadData::default();
        let mut rel = String::new();
        for (p, cache) in &parts {
            report.extend_from_slice(cache.report());
            for t in cache.iter() {
                if last_id.is_some_and(|l| l >= t.source_id()) {
                    return Err(bad(p, "threads overlap another partition's"));
                }
                last_id = Some(t.source_id());
                tally.add(t.label_code(), t.event());
                refill(&mut data, &t, extended);
                rel.clear();
                write!(rel, "{}", t.source_id()).expect("writing to a String");
                writer.push_ref(&data, &rel)?;
            }
        }
        report.sort();
        let t = Instant::now();
        let (manifest, warnings) = writer.finish_with(&report, None)?;
        Self::summary(manifest, report, tally, warnings, start, t)
    }

    /// The merge's summary; `publish`: when the last shard's write began.
    fn summary(
        manifest: crate::format::manifest::Manifest,
        report: Vec<BadInput>,
        tally: Tally,
        warnings: Vec<String>,
        start: Instant,
        publish: Instant,
    ) -> Result<BuildSummary> {
        let phases = Phases {
            publish: publish.elapsed(),
            ..Phases::default()
        };
        Ok(BuildSummary {
            manifest,
            report,
            elapsed: start.elapsed(),
            phases,
            labels: tally.labels,
            events: tally.events,
            incremental: None,
            reused: 0,
            files_read: 0,
            workers: 1,
            warnings,
        })
    }
}

/// Counts the threads of a shard into `tally`.
fn tally_threads(
    tally: &mut Tally,
    numbers: &crate::format::ArchivedShard,
    text: &crate::format::ArchivedTextShard,
) {
    let arena = text.arena.as_str();
    for (rec, spans) in numbers.threads.iter().zip(text.threads.iter()) {
        let start = spans.event.start.to_native() as usize;
        let event = arena
            .get(start..start + spans.event.len.to_native() as usize)
            .unwrap_or("");
        tally.add(rec.label_code, event);
    }
}

/// Checks shard `s` of `cache` (at `p`), which a merge links without
/// reading it, against its record: each file's size and footer (its
/// archive's length and checksum). Its bytes are checked against that
/// checksum by every reader of the merged cache. A file that fails is
/// read and checked whole, for the error that says what is wrong.
fn check_footers(p: &Path, cache: &LazyCache, s: usize) -> Result<()> {
    use std::os::unix::fs::FileExt;
    let info = &cache.manifest().shards[s];
    let Some((numbers, text)) = cache.shard_files(s) else {
        return Ok(());
    };
    let matches = |file: &std::fs::File, of: &crate::format::manifest::FileInfo| {
        let len = file.metadata().map_or(0, |m| m.len());
        let mut tail = [0u8; footer::LEN];
        len == of.bytes
            && len >= footer::LEN as u64
            && file
                .read_exact_at(&mut tail, len - footer::LEN as u64)
                .is_ok()
            && Footer::decode(&tail).is_ok_and(|f| {
                f.archive_len + footer::LEN as u64 == len && hex64(f.xxh3) == of.xxh3
            })
    };
    if matches(numbers, &info.numbers) && matches(text, &info.text) {
        return Ok(());
    }
    Err(bad(
        p,
        match cache.checked(s) {
            Err(why) => why,
            Ok(_) => format!(
                "{} or {} does not end as its manifest entry says",
                info.numbers.file, info.text.file
            ),
        },
    ))
}
