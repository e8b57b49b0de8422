//! The extended features' glue: the corpus-wide rumour index, and turning
//! what a thread's side files gave (read by the thread's assembly) into
//! the extra columns ([`REACTION_COLUMNS`](crate::schema::REACTION_COLUMNS),
//! [`THREAD_COLUMNS`](crate::schema::THREAD_COLUMNS)). The values themselves
//! are computed in [`features`](super::features).

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Mutex, PoisonError};

use rayon::prelude::*;

use super::discover::{Discovery, Scope, ThreadDir, discover_scoped};
use super::features::labels::Annotation;
use super::features::relations::FollowGraph;
use super::features::reliability::RumourIndex;
use super::files::{Names, Row};
use super::parse::{TweetReader, user_key};
use super::thread::{read_source, thread_label};
use crate::error::BuildError;
use crate::schema::Label;
use crate::schema::REACTION_EXTRA;

/// What the thread files of one thread gave.
#[derive(Default)]
pub(super) struct Extended {
    pub(super) depths: Option<HashMap<u64, u32>>,
    pub(super) follows: Option<FollowGraph>,
    pub(super) annotation: Annotation,
}

impl Extended {
    /// The extended values of one reaction, in `REACTION_COLUMNS` order.
    pub(super) fn reaction_values(
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
                flag(g.follows(r.rec.user_key, source_author)),
                flag(g.follows(source_author, r.rec.user_key)),
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
            counts.get(&r.rec.user_key).copied().unwrap_or(1) as f32,
            follows,
            followed,
            reciprocal,
            index.reliability(r.rec.user_key, r.rec.created_at),
        ]
    }
}

/// Builds the corpus-wide rumour index from the source tweets of the
/// threads labelled rumour, by their layout's rule (`thread::thread_label`;
/// PHEME: in a `rumours` folder, or in a folder that is neither `rumours`
/// nor `non-rumours` with an `annotation.json` that says
/// `"is_rumour": "rumour"`, the PHEME journalism layout). A thread whose
/// source cannot be read is skipped here and reported by the main pass.
pub(crate) fn rumour_index(
    threads: &[ThreadDir],
    workers: usize,
    max_file_bytes: u64,
) -> RumourIndex {
    rumour_index_with(threads, workers, max_file_bytes, None)
}

/// What an incremental build already knows of thread `i`: `Some(entry)` (its
/// rumour-source entry, or None if it is not a rumour source) for a thread
/// taken from the old cache, `None` to read it.
pub(crate) type Known<'a> = &'a (dyn Fn(usize) -> Option<Option<(u64, i64)>> + Sync);

/// The rumour-index entry of one thread: `(author, created_at)` of its
/// source tweet if the thread is labelled rumour and that tweet is usable.
fn rumour_entry(
    td: &ThreadDir,
    reader: &mut TweetReader,
    names: &mut Names,
    max_file_bytes: u64,
) -> Option<(u64, i64)> {
    // The cache's own label rule (a rumour source is a thread the cache
    // labels rumour), without reporting: the main pass reports bad files.
    let (label, _) = thread_label(td, reader, max_file_bytes, None, None);
    let is_rumour = label == Label::Rumour;
    if !is_rumour {
        return None;
    }
    // A thread a plan took unlisted: its source file is taken to be the
    // one PHEME's collector writes, named after the thread (three system
    // calls where listing the folder took seven). A guess, checked by the
    // partition that lists the thread and reads its entry by the rule
    // below, which refuses a plan whose entry is not that one.
    let guessed = !td.listed
        && td.source_dir().is_some_and(|dir| {
            let file = td.path.join(dir).join(format!("{}.json", td.source_id));
            reader.read_file(&file, max_file_bytes).is_ok()
        });
    if !guessed {
        read_source(td, reader, names, max_file_bytes).ok()?;
    }
    reader
        .parse(|v| {
            (td.layout().source_fields(v))
                .map(|s| (user_key(s.user_id_str), s.created_at.unix_seconds()))
        })
        .ok()?
        .ok()
}

/// Scratch buffers for reading rumour entries on a walk's threads, one per
/// walk thread (a walk thread takes only its own).
pub(crate) struct EntryReaders {
    scratch: Vec<Mutex<(TweetReader, Names)>>,
    max_file_bytes: u64,
}

impl EntryReaders {
    /// Buffers for a walk of `threads` threads.
    pub(crate) fn new(threads: usize, max_file_bytes: u64) -> Self {
        EntryReaders {
            scratch: (0..threads.max(1))
                .map(|_| Mutex::new((TweetReader::new(), Names::default())))
                .collect(),
            max_file_bytes,
        }
    }

    /// The rumour-index entry of `td` (`None`: no rumour source, or not a
    /// usable one), read on walk thread `worker`.
    pub(crate) fn entry(&self, td: &ThreadDir, worker: usize) -> Option<(u64, i64)> {
        let mut guard = self.scratch[worker.min(self.scratch.len() - 1)]
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let (reader, names) = &mut *guard;
        rumour_entry(td, reader, names, self.max_file_bytes)
    }
}

/// Discovery and the rumour index in one walk: each thread's entry is read
/// on the walk's threads as the thread is found, instead of in a second pass
/// over the list (its own pool, its own start-up, 17 ms of a warm
/// PHEME-sized build at 60% of the cores). `index` false: no index.
/// Also computes `pre` of each thread on the walk's threads (with the walk
/// thread's index, below `threads`); the values come back in
/// [`Discovery::threads`] order, each with the thread's own rumour entry
/// (a plan records them per thread, so that a partition can check its own
/// threads' share of the index).
#[allow(clippy::type_complexity)]
pub(crate) fn discover_indexed_with<P: Send>(
    root: &Path,
    threads: usize,
    max_file_bytes: u64,
    index: bool,
    pre: &(dyn Fn(&ThreadDir, usize) -> P + Sync),
    scope: Scope<'_>,
) -> Result<(Discovery, Option<RumourIndex>, Vec<(P, Option<(u64, i64)>)>), BuildError> {
    if !index {
        let hook = |td: &ThreadDir, w| (pre(td, w), None);
        let (found, pres) = discover_scoped(root, threads, &hook, scope)?;
        return Ok((found, None, pres));
    }
    let readers = EntryReaders::new(threads, max_file_bytes);
    let hook = |td: &ThreadDir, worker: usize| (pre(td, worker), readers.entry(td, worker));
    let (found, values) = discover_scoped(root, threads, &hook, scope)?;
    let mut index = RumourIndex::default();
    for (author, at) in values.iter().filter_map(|(_, e)| *e) {
        index.add(author, at);
    }
    Ok((found, Some(index), values))
}

/// [`rumour_index`], taking what `known` says instead of reading.
pub(crate) fn rumour_index_with(
    threads: &[ThreadDir],
    workers: usize,
    max_file_bytes: u64,
    known: Option<Known<'_>>,
) -> RumourIndex {
    let one = |i: usize, reader: &mut TweetReader, names: &mut Names| {
        if let Some(entry) = known.and_then(|k| k(i)) {
            return entry;
        }
        rumour_entry(&threads[i], reader, names, max_file_bytes)
    };
    let collect = || {
        (0..threads.len())
            .into_par_iter()
            .map_init(
                || (TweetReader::new(), Names::default()),
                |(reader, names), i| one(i, reader, names),
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
            (0..threads.len())
                .filter_map(|i| one(i, &mut reader, &mut names))
                .collect()
        }
    };
    let mut index = RumourIndex::default();
    for (author, at) in found {
        index.add(author, at);
    }
    index
}
