//! Partitioned builds: walk once into a [`Plan`], build partitions of it
//! anywhere (other processes, other machines mounting the corpus elsewhere),
//! then merge them into one cache byte-identical to a single build
//! ([`merge`](crate::merge)).
//!
//! The plan holds what features need across threads: the sorted thread list
//! (paths relative to the corpus root), what discovery reported, and the
//! corpus-wide rumour-source index behind `user_reliability`. Partition `i`
//! of `n` is a contiguous source-id range; it lists and reads only its own
//! threads. Each partition is an ordinary cache whose manifest says which
//! part of which plan it is (a checksummed [`PartitionInfo`], written and
//! published with the cache, so it cannot be left over from an earlier
//! build of the same directory).
//!
//! A plan is a listing walk down to the thread folders (issue 47: a plan
//! that `stat`ted every file, and partitions that walked the whole corpus
//! again, kept a scale-out slower than one build): the thread list, the
//! discovery report, and for extended builds each thread's share of the
//! rumour index (its source's author and time, if it is a rumour source).
//! A thread in a label folder (`rumours`, `non-rumours`) it takes by its
//! name without listing its folder, once a `stat` finds its source folder
//! ([`Scope::Plan`]; listing every thread folder was most of a plan), and
//! a rumour source's entry it reads from the file named after the thread;
//! both are guesses its partition checks (below). Partitions are balanced
//! by thread count. A plan made with [`Plan::create_pinned`] lists every
//! thread folder and its tweet folders (a [`Listing`](super::pin::Listing)
//! digest of the names and their count, which balances partitions by file
//! count; no file `stat`ted).
//!
//! A partition's walk lists every folder that is not another partition's
//! planned thread ([`Others`]): a thread added, gone or moved, or a
//! discovery report outside the threads, is refused by every partition.
//! Its own threads it lists as a build does: one whose folders or reports
//! changed, or whose rumour-index entry (read then, from the source as it
//! is) is not the plan's, is refused by it, naming the paths (of a thread
//! the plan took unlisted it compares only the place and the rumour
//! entry: its folders are read as they are, what the walk reports inside
//! it is the partition's report, and a thread below it, which the plan did
//! not see, is refused as new). With a plan
//! that pins files it also pins each of its threads (listing and the
//! `stat` of every file) before reading any, refusing one whose files were
//! added or removed since the plan, and again after reading them, before
//! publishing, refusing any that changed during its read (an in-place edit
//! that put the mtime back included).
//!
//! A content edit between the plan and a partition (and, unless the plan
//! pins files, a file added or removed) is read as it is when the
//! partition reads it: every thread is read by exactly one partition, and
//! what crosses threads (the thread list, the discovery report, the rumour
//! index) is checked by every partition (the list and what is reported
//! outside threads) or by the one that reads the thread (the index, what
//! is reported inside it). So a merged cache is exactly a single build of
//! the corpus as its partitions read it (a thread edited after its own
//! partition ran is read as it was then), never an index that disagrees
//! with the sources read; or there is none.

use std::fs;
use std::path::Path;

use serde::{Deserialize, Serialize};
use xxhash_rust::xxh3::xxh3_64;

use super::discover::{DUPLICATE_ID, Scope, ThreadDir};
use super::features::reliability::RumourIndex;
use super::layout::pheme::Pheme;
use super::layout::{Layout, layout_named};
use super::pin::{Pin, listing};
use super::{BuildJob, BuildOptions, BuildSummary, Progress, discover_checked_with};
use crate::error::BuildError;
use crate::format::manifest::PartitionInfo;
use crate::format::report::BadInput;

type Result<T, E = BuildError> = std::result::Result<T, E>;

const PLAN_FORMAT: &str = "socialctx-plan";
/// 2: the plan carries its checksum; 3: per-thread fingerprints; 4: the
/// fingerprints portable to a copy of the corpus (size and mtime, no inode
/// or change time): a version-3 plan would read as every thread changed;
/// 5: a listing per thread (names, no `stat`) and each thread's rumour
/// entry instead of fingerprints and one index: an older plan is refused,
/// naming its version; 6: listings only in plans that pin files
/// (`pin_files`), the others a listing of thread folders; 7: threads in
/// label folders taken unlisted (no `entries`) in plans that do not pin
/// files.
const PLAN_VERSION: u32 = 7;

/// One thread of a plan.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "StoredThread")]
struct PlanThread {
    rel: String,
    /// Its folder's name, not stored (read from `rel`; one that is no
    /// source id reads as 0, which [`Plan::check`] refuses).
    #[serde(skip)]
    source_id: u64,
    /// Its parent folder's name, stored only where `rel` does not end
    /// with it (a thread less than two folders deep); see
    /// [`label`](PlanThread::label). Stored, a plan was twice the size,
    /// and every partition parses it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    label: Option<String>,
    /// Its grandparent folder's name, stored likewise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    event: Option<String>,
    /// What its listing found (`ThreadDir::entries`); absent where the
    /// plan took the thread unlisted ([`Scope::Plan`]): its partition
    /// reads its folders as they are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    entries: Option<u16>,
    /// Its layout by name (absent for PHEME's and for unlisted threads, so that a PHEME plan reads
    /// and writes as it did before layouts had a seam).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    layout: Option<StoredLayout>,
    /// Files in its tweet folders, for balancing partitions (plans that
    /// pin files; 0 in the others, which balance by thread count).
    #[serde(default, skip_serializing_if = "is_zero")]
    files: u64,
    /// Its listing's digest ([`Listing`](super::pin::Listing)), 16 hex
    /// digits: the names of its files, not their metadata (plans that pin
    /// files; empty in the others).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    listing: String,
    /// Its share of the rumour index (extended plans): its source tweet's
    /// author key and time, if the thread is a rumour source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    rumour: Option<(u64, i64)>,
}

/// A [`PlanThread`] as stored: the same fields less its source id.
#[derive(Deserialize)]
struct StoredThread {
    rel: String,
    #[serde(default)]
    label: Option<String>,
    #[serde(default)]
    event: Option<String>,
    #[serde(default)]
    entries: Option<u16>,
    #[serde(default)]
    layout: Option<StoredLayout>,
    #[serde(default)]
    files: u64,
    #[serde(default)]
    listing: String,
    #[serde(default)]
    rumour: Option<(u64, i64)>,
}

impl From<StoredThread> for PlanThread {
    fn from(t: StoredThread) -> PlanThread {
        PlanThread {
            source_id: ancestor(&t.rel, 0)
                .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|n| n.parse().ok())
                .unwrap_or_default(),
            rel: t.rel,
            label: t.label,
            event: t.event,
            entries: t.entries,
            layout: t.layout,
            files: t.files,
            listing: t.listing,
            rumour: t.rumour,
        }
    }
}

/// What a build of the whole corpus will do, computed once by
/// [`Plan::create`]: the threads, the discovery report, the rumour index and
/// the options. Save it with [`save`](Plan::save) and build its partitions
/// with [`build_partition`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    format: String,
    version: u32,
    strict: bool,
    max_file_bytes: u64,
    shard_bytes: u64,
    extended: bool,
    /// Whether its partitions pin their threads' files
    /// ([`create_pinned`](Plan::create_pinned)).
    pin_files: bool,
    threads: Vec<PlanThread>,
    bad: Vec<BadInput>,
    /// The definition digest of the library that made the plan (empty in
    /// plans made before it was recorded): its partitions are built only
    /// by a library of the same definition. Absent when empty, so that an
    /// older release's plan still matches its checksum and is refused as
    /// another version's, not as damaged.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    definition: String,
    /// xxh3-64 of the plan's JSON with this field empty, 16 hex digits (the
    /// plan's [`id`](Plan::id)); set by [`save`](Plan::save), checked by
    /// [`load`](Plan::load).
    #[serde(default)]
    checksum: String,
    /// Its id and inputs digest, computed once: each is a serialization of
    /// the whole plan (megabytes at 10^5 threads) that a partition needs
    /// more than once. No method changes a plan once made.
    #[serde(skip)]
    memo: Memo,
}

/// A JSON serializer's output hashed as it is written (xxh3-64, the same
/// digest as of the whole text at once), less its last `keep` bytes, held
/// in `held` for the caller to compare.
struct HashWriter {
    hash: xxhash_rust::xxh3::Xxh3Default,
    held: Vec<u8>,
    keep: usize,
}

impl HashWriter {
    fn holding_back(keep: usize) -> HashWriter {
        HashWriter {
            hash: xxhash_rust::xxh3::Xxh3Default::new(),
            held: Vec::with_capacity(2 * keep + 64),
            keep,
        }
    }
}

impl std::io::Write for HashWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.keep == 0 {
            self.hash.update(buf);
            return Ok(buf.len());
        }
        self.held.extend_from_slice(buf);
        if self.held.len() > self.keep {
            let n = self.held.len() - self.keep;
            self.hash.update(&self.held[..n]);
            self.held.drain(..n);
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// [`Plan::id`] and [`Plan::inputs`], once computed; not part of a plan's
/// value (equal plans are equal whichever were asked for).
#[derive(Clone, Debug, Default)]
struct Memo {
    id: std::sync::OnceLock<String>,
    inputs: std::sync::OnceLock<String>,
    /// The threads' source ids, dense: a partition's walk looks up a
    /// planned thread for every thread folder of the corpus, and a binary
    /// search over the threads themselves missed the cache at every step.
    ids: std::sync::OnceLock<Vec<u64>>,
}

impl PartialEq for Memo {
    fn eq(&self, _: &Memo) -> bool {
        true
    }
}

impl Eq for Memo {}

/// What a partition finds of one of its own threads before reading it: its
/// pin (plans that pin files) and (extended plans) its rumour entry.
pub(super) type Own = (Option<Pin>, Option<(u64, i64)>);

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The name of `rel`'s `up`-th ancestor inside the corpus (1: its parent),
/// `None` where it has no such one.
fn ancestor(rel: &str, up: usize) -> Option<&str> {
    rel.rsplit('/').nth(up)
}

impl PlanThread {
    /// Its parent folder's name (its label folder).
    fn label(&self) -> &str {
        self.label
            .as_deref()
            .or_else(|| ancestor(&self.rel, 1))
            .unwrap_or_default()
    }

    /// Its grandparent folder's name (its event folder).
    fn event(&self) -> &str {
        self.event
            .as_deref()
            .or_else(|| ancestor(&self.rel, 2))
            .unwrap_or_default()
    }
}

/// An `InvalidData` error about the plan file `path`.
fn invalid(path: &Path, why: String) -> BuildError {
    BuildError::io(
        path,
        std::io::Error::new(std::io::ErrorKind::InvalidData, why),
    )
}

impl Plan {
    /// Walks `corpus` and plans a build with `opts` (the same walk, checks
    /// and rumour index as [`build`](crate::build)): a listing of the
    /// thread folders, none of their tweet folders listed. Partitions are
    /// balanced by thread count; each reads its threads as they are when it
    /// reads them, and refuses a corpus whose threads (added, gone, moved),
    /// discovery report or rumour sources are not the plan's.
    pub fn create(corpus: impl AsRef<Path>, opts: &BuildOptions) -> Result<Plan> {
        Plan::create_with(corpus.as_ref(), opts, false)
    }

    /// [`create`](Plan::create), also listing every thread's tweet folders:
    /// partitions are balanced by file count, and each refuses a thread of
    /// its own whose files were added or removed since the plan, or that
    /// changed while it read it (its files `stat`ted before and after its
    /// read; an in-place edit that put the mtime back too). Costs a listing
    /// of every tweet folder in the plan and two `stat`s of every file in
    /// each partition (benches/README.md).
    pub fn create_pinned(corpus: impl AsRef<Path>, opts: &BuildOptions) -> Result<Plan> {
        Plan::create_with(corpus.as_ref(), opts, true)
    }

    fn create_with(corpus: &Path, opts: &BuildOptions, pin_files: bool) -> Result<Plan> {
        if !corpus.is_dir() {
            return Err(BuildError::CorpusMissing(corpus.to_path_buf()));
        }
        let threads = super::threads_that_fit(opts.threads.max(1));
        // One walk: each thread's listing (plans that pin files) and
        // (extended) rumour entry taken as it is found. Plans that pin
        // files list every thread folder; the others take threads in
        // label folders unlisted (`Scope::Plan`).
        let look = |td: &ThreadDir, _| pin_files.then(|| listing(td));
        let scope = if pin_files { Scope::All } else { Scope::Plan };
        let (list, bad, _, found) =
            discover_checked_with(corpus, threads, opts, opts.extended, &look, scope)?;
        // A plan holds paths as text: a thread under a name that is not
        // UTF-8 would be planned under another (lossy) path, and read by
        // no partition.
        if let Some(td) = list.iter().find(|td| {
            let rel = td.path.strip_prefix(corpus).unwrap_or(&td.path);
            rel.to_str().is_none()
        }) {
            return Err(BuildError::io(
                &td.path,
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    "a thread whose path is not UTF-8 cannot be planned (a plan holds paths as text): rename the folder, or build this corpus without partitions",
                ),
            ));
        }
        // The corpus folder itself a thread: a plan holds threads by their
        // paths inside the corpus, and its partitions would refuse a thread
        // at "." (no folder named by its source id) as not inside it.
        if let Some(td) = list
            .iter()
            .find(|td| td.path.strip_prefix(corpus) == Ok(Path::new("")))
        {
            return Err(BuildError::io(
                &td.path,
                std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    "the corpus folder is itself a thread, and a plan holds threads inside its corpus: plan the folder that holds it, or build this thread without partitions",
                ),
            ));
        }
        // The walk's list is consumed: its strings move into the plan.
        let threads = list
            .into_iter()
            .zip(found)
            .map(|(td, (l, rumour))| PlanThread {
                layout: td.listed.then(|| StoredLayout::of(&td)).flatten(),
                entries: td.listed.then_some(td.entries),
                source_id: td.source_id,
                label: (ancestor(&td.rel, 1) != Some(td.label.as_str())).then_some(td.label),
                event: (ancestor(&td.rel, 2) != Some(td.event.as_str())).then_some(td.event),
                rel: td.rel,
                files: l.map_or(0, |l| l.files),
                listing: l.map_or_else(String::new, |l| format!("{:016x}", l.digest)),
                rumour,
            })
            .collect();
        Ok(Plan {
            format: PLAN_FORMAT.into(),
            version: PLAN_VERSION,
            strict: opts.strict,
            max_file_bytes: opts.max_file_bytes,
            shard_bytes: opts.shard_bytes as u64,
            extended: opts.extended,
            pin_files,
            threads,
            bad,
            definition: crate::definition::definition().to_owned(),
            checksum: String::new(),
            memo: Memo::default(),
        })
    }

    /// Writes the plan as JSON, with its checksum, by a rename (a failed
    /// write leaves no partial plan behind).
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        let json = self
            .sealed_json()
            .map_err(|e| BuildError::io(path, e.into()))?;
        crate::output::replace_file(path, |f| std::io::Write::write_all(f, &json))
            .map_err(|e| BuildError::io(path, e))
    }

    /// The plan's JSON with its checksum. A plan made here (checksum
    /// empty) is serialized once: those bytes, whose last field is the
    /// empty checksum, are what its id hashes, and the id then goes into
    /// that field. Any other is copied with its checksum set.
    fn sealed_json(&self) -> serde_json::Result<Vec<u8>> {
        const EMPTY: &[u8] = br#","checksum":""}"#;
        if self.checksum.is_empty() {
            let mut json = serde_json::to_vec(self)?;
            if json.ends_with(EMPTY) {
                let id = format!("{:016x}", xxh3_64(&json));
                let _ = self.memo.id.set(id.clone());
                json.truncate(json.len() - 2);
                json.extend_from_slice(id.as_bytes());
                json.extend_from_slice(b"\"}");
                return Ok(json);
            }
        }
        let mut sealed = self.clone();
        sealed.checksum = self.id();
        serde_json::to_vec(&sealed)
    }

    /// Reads a plan written by [`save`](Plan::save), and checks it: its
    /// checksum (an edited or damaged plan is refused), threads in strictly
    /// ascending source-id order (so each once), each thread's folder named
    /// by its source id and inside the corpus (no absolute path, no `..`).
    pub fn load(path: impl AsRef<Path>) -> Result<Plan> {
        let path = path.as_ref();
        let bytes = fs::read(path).map_err(|e| BuildError::io(path, e))?;
        let refused = |format: &str, version: u32| {
            invalid(
                path,
                format!(
                    "plan format {format:?} version {version}, expected {PLAN_FORMAT:?} version {PLAN_VERSION}; make the plan again"
                ),
            )
        };
        // Parsed once (megabytes at 10^5 threads); only when that fails is
        // the header read alone: an older plan has other fields, and is
        // refused as that version, not as "missing field".
        let plan: Plan = match serde_json::from_slice(&bytes) {
            Ok(plan) => plan,
            Err(e) => {
                #[derive(Deserialize)]
                struct Header {
                    format: String,
                    version: u32,
                }
                return Err(match serde_json::from_slice::<Header>(&bytes) {
                    Ok(h) if h.format != PLAN_FORMAT || h.version != PLAN_VERSION => {
                        refused(&h.format, h.version)
                    }
                    _ => invalid(path, format!("not a plan: {e}")),
                });
            }
        };
        if plan.format != PLAN_FORMAT || plan.version != PLAN_VERSION {
            return Err(refused(&plan.format, plan.version));
        }
        plan.digest_as_saved(&bytes);
        if plan.checksum != plan.id() {
            return Err(invalid(
                path,
                "the plan does not match its checksum (edited or damaged); make the plan again"
                    .into(),
            ));
        }
        plan.check().map_err(|why| invalid(path, why))?;
        Ok(plan)
    }

    /// Takes the id and the inputs digest from `json`, the plan's own bytes,
    /// where they are the JSON [`save`](Plan::save) writes: then the id is
    /// the checksum it ends with (the bytes with that field empty hash to
    /// it), and the inputs are its `threads` and `bad` as they stand in it.
    /// Both are otherwise a serialization of the whole plan, which cost a
    /// partition more than parsing it (70 and 60 ms at 64k threads). Text
    /// of any other shape (pretty-printed, say) is left to [`id`](Plan::id)
    /// and [`inputs`](Plan::inputs), which serialize it.
    fn digest_as_saved(&self, json: &[u8]) {
        #[derive(Deserialize)]
        struct Sections<'a> {
            #[serde(borrow)]
            threads: &'a serde_json::value::RawValue,
            #[serde(borrow)]
            bad: &'a serde_json::value::RawValue,
        }
        let Ok(value) = serde_json::to_string(&self.checksum) else {
            return;
        };
        let sealed_tail = format!(",\"checksum\":{value}}}");
        let Some(head) = json.strip_suffix(sealed_tail.as_bytes()) else {
            return;
        };
        let mut hash = xxhash_rust::xxh3::Xxh3Default::new();
        hash.update(head);
        hash.update(br#","checksum":""}"#);
        let id = format!("{:016x}", hash.digest());
        if id != self.checksum {
            return;
        }
        // The bytes are what `save` wrote (they hash as it hashed them):
        // serde_json's compact output, whose sections are the inputs'.
        let Ok(sections) = serde_json::from_slice::<Sections<'_>>(json) else {
            return;
        };
        let mut hash = xxhash_rust::xxh3::Xxh3Default::new();
        for piece in ["[", sections.threads.get(), ",", sections.bad.get(), "]"] {
            hash.update(piece.as_bytes());
        }
        let _ = self.memo.inputs.set(format!("{:016x}", hash.digest()));
        let _ = self.memo.id.set(id);
    }

    /// The checks of [`load`](Plan::load) that do not need the checksum.
    pub(super) fn check(&self) -> std::result::Result<(), String> {
        let mut last: Option<&PlanThread> = None;
        for t in &self.threads {
            let rel = Path::new(&t.rel);
            let inside = !t.rel.is_empty()
                && rel
                    .components()
                    .all(|c| matches!(c, std::path::Component::Normal(_)));
            if !inside {
                return Err(format!(
                    "thread path {:?} is not a path inside the corpus",
                    t.rel
                ));
            }
            // The source id is read from the name (0 where it is none).
            let name = rel.file_name().unwrap_or_default().to_string_lossy();
            if !name.bytes().all(|b| b.is_ascii_digit()) || name.parse::<u64>() != Ok(t.source_id) {
                return Err(format!(
                    "thread {:?}: its folder is named {name:?}, not by a source id",
                    t.rel
                ));
            }
            if let Some(prev) = last
                && prev.source_id >= t.source_id
            {
                return Err(format!(
                    "threads out of order or repeated: {} ({}) after {} ({})",
                    t.source_id, t.rel, prev.source_id, prev.rel
                ));
            }
            last = Some(t);
            layout_index(t.layout.as_ref()).map_err(|why| format!("thread {:?}: {why}", t.rel))?;
            if t.entries.is_none() && (self.pin_files || t.layout.is_some()) {
                return Err(format!(
                    "thread {:?} is unlisted (no entries) but {}",
                    t.rel,
                    if self.pin_files {
                        "the plan pins files"
                    } else {
                        "has a layout"
                    }
                ));
            }
            if t.listing.is_empty() == self.pin_files {
                return Err(format!(
                    "thread {:?} {} a listing in a plan that {} files",
                    t.rel,
                    if self.pin_files { "lacks" } else { "has" },
                    if self.pin_files {
                        "pins"
                    } else {
                        "does not pin"
                    }
                ));
            }
            if t.rumour.is_some() && !self.extended {
                return Err(format!(
                    "thread {:?} has a rumour entry in a plan without the extended features",
                    t.rel
                ));
            }
        }
        Ok(())
    }

    /// Whether its partitions pin their threads' files
    /// ([`create_pinned`](Plan::create_pinned)).
    pub fn pins_files(&self) -> bool {
        self.pin_files
    }

    /// The definition digest of the library that made the plan.
    pub(crate) fn definition(&self) -> &str {
        &self.definition
    }

    /// What discovery skipped (reported by the merged cache).
    pub(crate) fn skipped(&self) -> &[BadInput] {
        &self.bad
    }

    /// Number of threads planned.
    pub fn len(&self) -> usize {
        self.threads.len()
    }

    /// True when no thread was found.
    pub fn is_empty(&self) -> bool {
        self.threads.is_empty()
    }

    /// The plan's identity: 16 hex digits of the xxh3 of its JSON (without
    /// its checksum field's value, which is this id).
    pub fn id(&self) -> String {
        self.memo
            .id
            .get_or_init(|| format!("{:016x}", self.unsealed_hash()))
            .clone()
    }

    /// xxh3-64 of the plan's JSON with its checksum empty, streamed into
    /// the hash: no copy of the plan and no JSON held (each is tens of
    /// megabytes at 10^5 threads). The checksum is the JSON's last field,
    /// so the writer holds back the tail it would end with and hashes the
    /// empty field's tail in its place; should the JSON end otherwise, the
    /// plan is copied with its checksum cleared and hashed whole.
    fn unsealed_hash(&self) -> u64 {
        self.streamed_unsealed_hash().unwrap_or_else(|| {
            let mut unsealed = self.clone();
            unsealed.checksum.clear();
            xxh3_64(&serde_json::to_vec(&unsealed).unwrap_or_default())
        })
    }

    /// [`unsealed_hash`](Plan::unsealed_hash) streamed, or `None` where the
    /// JSON does not end with the checksum.
    fn streamed_unsealed_hash(&self) -> Option<u64> {
        let value = serde_json::to_string(&self.checksum).ok()?;
        let sealed_tail = format!(",\"checksum\":{value}}}");
        let mut w = HashWriter::holding_back(sealed_tail.len());
        serde_json::to_writer(&mut w, self).ok()?;
        (w.held == sealed_tail.as_bytes()).then(|| {
            w.hash.update(br#","checksum":""}"#);
            w.hash.digest()
        })
    }

    /// For tests: `json` (a plan's JSON, possibly edited) with its checksum
    /// made to match, so that only [`load`](Plan::load)'s other checks can
    /// refuse it.
    #[doc(hidden)]
    pub fn reseal(json: &[u8]) -> Option<Vec<u8>> {
        let mut plan: Plan = serde_json::from_slice(json).ok()?;
        plan.checksum = plan.id();
        serde_json::to_vec(&plan).ok()
    }

    /// The thread range of partition `index` of `count`: contiguous, in
    /// source-id order, cut where the cumulative file count (thread count,
    /// in plans that do not pin files) passes `k / count` of the total.
    pub fn partition_range(&self, index: usize, count: usize) -> std::ops::Range<usize> {
        let total: u64 = self.threads.iter().map(|t| t.files.max(1)).sum();
        let cut = |k: usize| -> usize {
            if k == 0 {
                return 0;
            }
            if k >= count {
                return self.threads.len();
            }
            let goal = total as u128 * k as u128 / count as u128;
            let mut acc = 0u128;
            for (i, t) in self.threads.iter().enumerate() {
                if acc >= goal {
                    return i;
                }
                acc += u128::from(t.files.max(1));
            }
            self.threads.len()
        };
        cut(index)..cut(index + 1)
    }

    /// Which of the options a partition build was given differ from the
    /// plan's (`None`: not given), said as the command-line option and the
    /// plan's value; a partition is always built with the plan's options,
    /// so a caller refuses these rather than have them ignored.
    #[doc(hidden)]
    pub fn differing_options(
        &self,
        strict: Option<bool>,
        max_file_bytes: Option<u64>,
        shard_bytes: Option<u64>,
        extended: Option<bool>,
    ) -> Vec<String> {
        let mut out = Vec::new();
        if strict.is_some_and(|s| s != self.strict) {
            out.push(format!(
                "--strict (the plan is {})",
                if self.strict { "strict" } else { "not strict" }
            ));
        }
        if let Some(b) = max_file_bytes.filter(|b| *b != self.max_file_bytes) {
            out.push(format!(
                "--max-file-bytes {b} (the plan has {})",
                self.max_file_bytes
            ));
        }
        if let Some(b) = shard_bytes.filter(|b| *b != self.shard_bytes) {
            out.push(format!(
                "--shard-mib {} (the plan has {})",
                b as f64 / 1048576.0,
                self.shard_bytes as f64 / 1048576.0
            ));
        }
        if extended.is_some_and(|e| e != self.extended) {
            out.push(format!(
                "--no-extended (the plan {} the extended features)",
                if self.extended { "has" } else { "has not" }
            ));
        }
        out
    }

    /// Compares the corpus's listing as a partition build's walk finds it
    /// (no file read, no tweet `stat`ted) with the plan's: every thread's
    /// identity (place, source id, label, event, folders, layout) and what
    /// discovery reported. Cheap, and on every partition: a thread added,
    /// gone or moved since the plan is refused wherever it would land.
    /// Of a thread of its own the plan took unlisted, its identity only:
    /// the plan has no folders of it to compare, and what the walk
    /// reported inside it is the partition's to report (returned, sorted).
    /// Otherwise returns the changes, each naming a path.
    pub(super) fn verify_listing(
        &self,
        list: &[ThreadDir],
        bad: &[BadInput],
        others: &Others<'_>,
    ) -> std::result::Result<Vec<BadInput>, Vec<String>> {
        let mut changed = Vec::new();
        let found: std::collections::BTreeMap<&str, &ThreadDir> =
            list.iter().map(|t| (t.rel.as_str(), t)).collect();
        for (at, t) in self.threads.iter().enumerate() {
            if others.takes(at) {
                // Taken as planned where the walk found its folder.
                if !others.seen[at].load(std::sync::atomic::Ordering::Relaxed) {
                    changed.push(format!("{} (gone)", t.rel));
                }
                continue;
            }
            match found.get(t.rel.as_str()) {
                // Where the walk said why (a folder it could not list, a
                // source folder that is not one), that is said too: of a
                // thread the plan took unlisted, the plan has no report.
                None => match bad.iter().find(|b| {
                    b.path
                        .strip_prefix(t.rel.as_str())
                        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
                }) {
                    Some(b) if t.entries.is_none() => {
                        changed.push(format!("{} (gone: {}: {})", t.rel, b.path, b.reason))
                    }
                    _ => changed.push(format!("{} (gone)", t.rel)),
                },
                Some(td)
                    if td.source_id != t.source_id
                        || td.label != t.label()
                        || td.event != t.event()
                        || t.entries.is_some_and(|e| {
                            td.entries != e || Ok(td.layout) != layout_index(t.layout.as_ref())
                        }) =>
                {
                    changed.push(format!("{} (its folders changed)", t.rel));
                }
                Some(_) => {}
            }
        }
        // A planned thread is found by its folder's name (its source id).
        for rel in found.keys().filter(|r| self.by_rel(r).is_none()) {
            match self.unlisted_holding(others.range.clone(), rel) {
                Some(at) => changed.push(format!(
                    "{rel} (new: inside {}, a thread the plan took without listing its folder; a plan made with --pin-files lists every thread folder)",
                    self.threads[at].rel
                )),
                None => changed.push(format!("{rel} (new)")),
            }
        }
        // What was reported inside the threads this walk did not list is
        // their own partitions' to compare; inside its own unlisted
        // threads, this partition's to report.
        let (own, bad): (Vec<BadInput>, Vec<BadInput>) = bad.iter().cloned().partition(|b| {
            self.unlisted_holding(others.range.clone(), &b.path)
                .is_some()
        });
        let planned_bad: Vec<&BadInput> = self
            .bad
            .iter()
            .filter(|b| !others.covers(&b.path))
            .collect();
        if !bad.iter().eq(planned_bad.iter().copied()) {
            let was: std::collections::BTreeSet<_> = planned_bad.into_iter().collect();
            let now: std::collections::BTreeSet<_> = bad.iter().collect();
            for b in was.symmetric_difference(&now) {
                changed.push(format!("{} (reported: {})", b.path, b.reason));
            }
        }
        if changed.is_empty() {
            Ok(own)
        } else {
            Err(changed)
        }
    }

    /// The thread of `range` the plan took unlisted whose folder is
    /// `path` (relative to the corpus) or holds it.
    fn unlisted_holding(&self, range: std::ops::Range<usize>, path: &str) -> Option<usize> {
        let mut end = path.len();
        loop {
            let prefix = &path[..end];
            if let Some(at) = self.by_rel(prefix)
                && range.contains(&at)
                && self.threads[at].entries.is_none()
            {
                return Some(at);
            }
            end = prefix.rfind('/')?;
        }
    }

    /// Compares what partition `range` found of its own threads just
    /// before reading them (each one's pin and, in extended plans, its
    /// rumour entry read then) with the plan: a file added or removed since
    /// the plan, or a source whose rumour entry is no longer the plan's
    /// (the index the partition computes with is the plan's), is refused.
    /// A content edit with the same names is not: the partition reads it as
    /// it is. Returns the changes, each naming a path.
    pub(super) fn verify_own(
        &self,
        range: std::ops::Range<usize>,
        found: &[Own],
    ) -> std::result::Result<(), Vec<String>> {
        let mut changed = Vec::new();
        for (t, (p, rumour)) in self.threads[range].iter().zip(found) {
            if let Some(p) = p
                && format!("{:016x}", p.listing.digest) != t.listing
            {
                changed.push(format!("{} (files added or removed)", t.rel));
            } else if self.extended && *rumour != t.rumour && t.entries.is_some() {
                changed.push(format!(
                    "{} (its source tweet changed: its rumour-index entry is not the plan's)",
                    t.rel
                ));
            } else if self.extended && *rumour != t.rumour {
                // The plan read the file named after the thread, unlisted;
                // the build's rule takes the last source file listed.
                changed.push(format!(
                    "{} (its rumour-index entry is not the plan's: its source tweet changed, or the plan, which read the source file named after the thread without listing its folder, read another file than a build takes (the last .json listed) or one it cannot; make the plan again, with --pin-files if the folder holds other source files)",
                    t.rel
                ));
            }
        }
        if changed.is_empty() {
            Ok(())
        } else {
            Err(changed)
        }
    }

    /// Compares the pins of partition `range`'s threads taken after it read
    /// them with those taken before: a thread edited (or a file added,
    /// removed or replaced) during the read is refused. Returns the
    /// changes, each naming a path.
    pub(super) fn verify_read(
        &self,
        range: std::ops::Range<usize>,
        before: &[Pin],
        after: &[Pin],
    ) -> std::result::Result<(), Vec<String>> {
        let changed: Vec<String> = self.threads[range]
            .iter()
            .zip(before.iter().zip(after))
            .filter(|(_, (b, a))| b != a)
            .map(|(t, _)| format!("{} (files changed while this partition read them)", t.rel))
            .collect();
        if changed.is_empty() {
            Ok(())
        } else {
            Err(changed)
        }
    }

    /// The threads partition `range`'s walk takes as found without listing
    /// them (see [`Others`]).
    pub(super) fn others(&self, range: std::ops::Range<usize>) -> Others<'_> {
        // A thread with a planned thread below it is listed (the walk goes
        // on below it): rare, and found from the ids in the paths.
        let mut nested = vec![false; self.threads.len()];
        for t in &self.threads {
            let mut at = 0;
            while let Some(slash) = t.rel[at..].find('/') {
                let prefix = &t.rel[..at + slash];
                at += slash + 1;
                if let Some(j) = self.by_rel(prefix) {
                    nested[j] = true;
                }
            }
        }
        Others {
            plan: self,
            range,
            nested,
            seen: (0..self.threads.len())
                .map(|_| std::sync::atomic::AtomicBool::new(false))
                .collect(),
        }
    }

    /// The index of the planned thread whose path is `rel`.
    fn by_rel(&self, rel: &str) -> Option<usize> {
        self.by_name(rel).filter(|&at| self.threads[at].rel == rel)
    }

    /// The index of the planned thread whose source id is the name of the
    /// folder at `rel`, wherever it was planned.
    fn by_name(&self, rel: &str) -> Option<usize> {
        // Sorted by source id; the folder's name is the source id.
        let name = rel.rsplit('/').next()?;
        if !name.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let id: u64 = name.parse().ok()?;
        let ids = self
            .memo
            .ids
            .get_or_init(|| self.threads.iter().map(|t| t.source_id).collect());
        ids.binary_search(&id).ok()
    }

    /// The planned thread whose source id the folder at `rel` also has,
    /// where the plan reports that folder as a duplicate (a build keeps one
    /// folder of a source id, the first by path, and reports the others)
    /// and neither a planned thread nor another such folder holds it (the
    /// walk of the partition reading that id then reaches it: it skips
    /// only other partitions' threads and duplicates).
    fn reported_duplicate(&self, rel: &str) -> Option<usize> {
        let at = self.duplicate_of(rel)?;
        let mut above = rel.match_indices('/').map(|(i, _)| &rel[..i]);
        let held = above.any(|p| self.by_rel(p).is_some() || self.duplicate_of(p).is_some());
        (!held).then_some(at)
    }

    /// The planned thread whose source id the folder at `rel` has, where
    /// the plan reports that folder as a duplicate of it.
    fn duplicate_of(&self, rel: &str) -> Option<usize> {
        let at = self.by_name(rel)?;
        if self.threads[at].rel == rel {
            return None;
        }
        // The report is sorted (by path, then reason).
        let from = self.bad.partition_point(|b| b.path.as_str() < rel);
        self.bad[from..]
            .iter()
            .take_while(|b| b.path == rel)
            .any(|b| b.reason.starts_with(DUPLICATE_ID))
            .then_some(at)
    }

    /// The index of partition `range`'s thread whose path is `rel`.
    pub(super) fn position_in(&self, range: std::ops::Range<usize>, rel: &str) -> Option<usize> {
        self.by_rel(rel)
            .filter(|at| range.contains(at))
            .map(|at| at - range.start)
    }

    /// The digest of the plan's inputs (threads with their listings and
    /// rumour entries, discovery report) every partition records; a merge
    /// compares them.
    pub(super) fn inputs(&self) -> String {
        self.memo
            .inputs
            .get_or_init(|| {
                let inputs = (&self.threads, &self.bad);
                let mut w = HashWriter::holding_back(0);
                let hash = match serde_json::to_writer(&mut w, &inputs) {
                    Ok(()) => w.hash.digest(),
                    Err(_) => xxh3_64(&serde_json::to_vec(&inputs).unwrap_or_default()),
                };
                format!("{hash:016x}")
            })
            .clone()
    }

    /// `base` with the options this plan fixes (everything that shapes the
    /// cache's bytes); the worker and prefetch counts stay `base`'s.
    pub(super) fn options(&self, base: BuildOptions) -> BuildOptions {
        base.strict(self.strict)
            .max_file_bytes(self.max_file_bytes)
            .shard_bytes(self.shard_bytes as usize)
            .extended(self.extended)
    }

    /// Partition `index` of `count` (a valid one) with its threads under
    /// `corpus`: the thread list, the rumour index (extended plans) and the
    /// record its manifest carries.
    /// `found`: the partition's walk's threads, for those the plan took
    /// unlisted (their folders as the walk listed them); a planned thread
    /// missing from it is taken as planned.
    pub(super) fn partition(
        &self,
        corpus: &Path,
        index: usize,
        count: usize,
        found: &[ThreadDir],
    ) -> (Vec<ThreadDir>, Option<RumourIndex>, PartitionInfo) {
        let range = self.partition_range(index, count);
        let planned = &self.threads[range.clone()];
        let info = PartitionInfo {
            plan_id: self.id(),
            index: index as u64,
            count: count as u64,
            plan_threads: self.threads.len() as u64,
            first_thread: range.start as u64,
            end_thread: range.end as u64,
            first_source_id: planned.first().map_or(0, |t| t.source_id),
            last_source_id: planned.last().map_or(0, |t| t.source_id),
            bad: self.bad.clone(),
            inputs: String::new(),
            threads_by_event: Default::default(),
            xxh3: String::new(),
        };
        let listed: std::collections::HashMap<&str, &ThreadDir> =
            found.iter().map(|td| (td.rel.as_str(), td)).collect();
        let list = planned
            .iter()
            .map(|t| {
                let walked = listed.get(t.rel.as_str()).filter(|_| t.entries.is_none());
                ThreadDir {
                    source_id: t.source_id,
                    path: corpus.join(&t.rel),
                    rel: t.rel.clone(),
                    label: t.label().to_owned(),
                    event: t.event().to_owned(),
                    entries: walked.map_or(t.entries.unwrap_or_default(), |td| td.entries),
                    // `check` has resolved every thread's layout.
                    layout: walked.map_or_else(
                        || layout_index(t.layout.as_ref()).unwrap_or_default(),
                        |td| td.layout,
                    ),
                    listed: true,
                }
            })
            .collect();
        let index = self.extended.then(|| {
            let mut idx = RumourIndex::default();
            for &(author, t) in self.threads.iter().filter_map(|t| t.rumour.as_ref()) {
                idx.add(author, t);
            }
            idx
        });
        (list, index, info)
    }
}

/// The planned threads of other partitions that a partition's walk takes
/// as found without listing their folders (issue 47: listing every thread
/// of the corpus in every partition was a tenth of a build). What changed
/// in one of them (gone, its folders, files added, what discovery reports
/// inside it) is refused by the partition that reads it; a folder that is
/// no planned thread is still listed by every partition, so a thread added
/// anywhere is refused by all.
pub(super) struct Others<'p> {
    plan: &'p Plan,
    /// The partition's own threads.
    range: std::ops::Range<usize>,
    /// Per planned thread: another planned thread lies below it.
    nested: Vec<bool>,
    /// Per planned thread: the walk took it as found ([`Others::skip`]).
    seen: Vec<std::sync::atomic::AtomicBool>,
}

impl Others<'_> {
    /// Whether the folder at `rel` is another partition's planned thread,
    /// which the walk then takes as found without listing it; it is marked
    /// seen for [`Plan::verify_listing`] (no copy of it is made: at 10^5
    /// threads those copies were tens of megabytes in every partition).
    pub(super) fn skip(&self, rel: &str) -> bool {
        let Some(at) = self.plan.by_rel(rel) else {
            // A duplicate of another partition's thread, as the plan
            // reported it: that partition lists both and compares the
            // report (listed here, it would read as a new thread).
            return self
                .plan
                .reported_duplicate(rel)
                .is_some_and(|at| self.takes(at));
        };
        if !self.takes(at) {
            return false;
        }
        self.seen[at].store(true, std::sync::atomic::Ordering::Relaxed);
        true
    }

    /// Whether planned thread `at` is one the walk takes as found.
    fn takes(&self, at: usize) -> bool {
        !self.range.contains(&at) && !self.nested[at]
    }

    /// Whether `path` (relative to the corpus) is a thread or reported
    /// duplicate `skip` takes, or lies inside one.
    pub(super) fn covers(&self, path: &str) -> bool {
        let mut end = path.len();
        loop {
            let prefix = &path[..end];
            if let Some(at) = self
                .plan
                .by_rel(prefix)
                .or_else(|| self.plan.reported_duplicate(prefix))
                && self.takes(at)
            {
                return true;
            }
            match prefix.rfind('/') {
                Some(slash) => end = slash,
                None => return false,
            }
        }
    }
}

/// A thread's layout as a plan stores it: its name; in plans written before
/// layouts were stored by name, its index in that release's `LAYOUTS`
/// (kept as read, so that such a plan still matches its checksum).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
enum StoredLayout {
    Name(String),
    Index(u8),
}

/// The layouts in the order of the releases that stored an index: PHEME,
/// and in unit tests the toy after it.
const INDEXED_LAYOUTS: [&str; 2] = ["pheme", "toy"];

impl StoredLayout {
    /// What a plan stores of `td`'s layout (nothing for PHEME's).
    fn of(td: &ThreadDir) -> Option<StoredLayout> {
        let name = td.layout().name();
        (name != Pheme.name()).then(|| StoredLayout::Name(name.to_owned()))
    }
}

/// The index in this build's `LAYOUTS` of the layout `stored` names
/// (`None`: PHEME's), or why there is none.
fn layout_index(stored: Option<&StoredLayout>) -> std::result::Result<u8, String> {
    let name = match stored {
        None => Pheme.name(),
        Some(StoredLayout::Name(name)) => name.as_str(),
        Some(StoredLayout::Index(i)) => INDEXED_LAYOUTS
            .get(usize::from(*i))
            .ok_or_else(|| format!("layout {i} is none this build knows"))?,
    };
    layout_named(name).ok_or_else(|| format!("layout {name:?} is none this build knows"))
}

/// Builds partition `index` of `count` of `plan` into the cache directory
/// `out`, reading the threads under `corpus` (the corpus root as mounted
/// here), on `workers` worker threads (`None`: as many as
/// [`BuildOptions::default`] has). The result is an ordinary cache of those
/// threads whose manifest records the partition. A partition that does not
/// exist is [`BuildError::PartitionOutOfRange`]; a corpus that no longer
/// matches the plan (a thread added, gone or moved since; in one of this
/// partition's threads its folders or reports changed, or a rumour source,
/// since the plan; with a plan that pins files, also a file added or
/// removed since the plan, or one of its threads edited while it read
/// them) is [`BuildError::PlanStale`], naming what changed.
pub fn build_partition(
    corpus: impl AsRef<Path>,
    plan: &Plan,
    (index, count): (usize, usize),
    out: impl AsRef<Path>,
    workers: impl Into<Option<usize>>,
    progress: &dyn Progress,
) -> Result<BuildSummary> {
    let mut opts = BuildOptions::default();
    if let Some(n) = workers.into() {
        opts = opts.threads(n);
    }
    BuildJob::new(corpus, out)
        .options(opts)
        .progress(progress)
        .partition(plan, index, count)
        .run()
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;
    use crate::{Cache, NoProgress};

    const AT: &str = "Wed Jan 07 11:06:08 +0000 2015";

    /// A corpus of one PHEME thread (5) and one of the unit tests' toy
    /// layout (7, labelled by its own file).
    fn corpus(root: &Path) {
        let toy = root.join("forum/threads/7");
        fs::create_dir_all(toy.join("source-tweets")).unwrap();
        let post = format!(r#"{{"at": "{AT}", "body": "a post", "by": "u1"}}"#);
        fs::write(toy.join("source-tweets/7.json"), post).unwrap();
        fs::write(toy.join("toy.json"), r#"{"label": "rumour"}"#).unwrap();
        let pheme = root.join("ev/rumours/5");
        fs::create_dir_all(pheme.join("source-tweets")).unwrap();
        let src = format!(
            r#"{{"created_at": "{AT}", "text": "a tweet", "user": {{"id_str": "3", "screen_name": "s"}}}}"#
        );
        fs::write(pheme.join("source-tweets/5.json"), src).unwrap();
    }

    /// The id and inputs digest streamed into the hash equal those of the
    /// whole JSON: of a plan as made (checksum empty), as loaded (checksum
    /// set), and with any checksum text (escaped in its JSON).
    #[test]
    fn streamed_digests_equal_the_whole_json() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("corpus");
        corpus(&root);
        let whole_id = |p: &Plan| {
            let mut unsealed = p.clone();
            unsealed.checksum.clear();
            format!("{:016x}", xxh3_64(&serde_json::to_vec(&unsealed).unwrap()))
        };
        let made = Plan::create(&root, &BuildOptions::default()).unwrap();
        // The streamed path, not the copy it falls back to.
        assert_eq!(
            made.streamed_unsealed_hash().map(|h| format!("{h:016x}")),
            Some(whole_id(&made))
        );
        assert_eq!(made.id(), whole_id(&made));
        let inputs = (&made.threads, &made.bad);
        let whole_inputs = format!("{:016x}", xxh3_64(&serde_json::to_vec(&inputs).unwrap()));
        assert_eq!(made.inputs(), whole_inputs);
        let file = dir.path().join("plan.json");
        made.save(&file).unwrap();
        // Saved from one serialization: the bytes of a copy sealed whole.
        let mut sealed = made.clone();
        sealed.checksum = whole_id(&made);
        assert_eq!(
            fs::read(&file).unwrap(),
            serde_json::to_vec(&sealed).unwrap()
        );
        let fresh = Plan::create(&root, &BuildOptions::default()).unwrap();
        fresh.save(&file).unwrap();
        assert_eq!(
            fresh.memo.id.get(),
            Some(&whole_id(&made)),
            "set by the save"
        );
        assert_eq!(
            fs::read(&file).unwrap(),
            serde_json::to_vec(&sealed).unwrap()
        );
        let loaded = Plan::load(&file).unwrap();
        assert!(!loaded.checksum.is_empty());
        // Taken from the bytes as saved, not serialized again.
        assert!(loaded.memo.id.get().is_some() && loaded.memo.inputs.get().is_some());
        assert_eq!(loaded.id(), made.id());
        assert_eq!(loaded.inputs(), whole_inputs);
        // The same plan pretty-printed: serialized again, the same digests.
        let pretty = dir.path().join("pretty.json");
        let value: serde_json::Value = serde_json::from_slice(&fs::read(&file).unwrap()).unwrap();
        fs::write(&pretty, serde_json::to_vec_pretty(&value).unwrap()).unwrap();
        let reread = Plan::load(&pretty).unwrap();
        assert!(reread.memo.inputs.get().is_none());
        assert_eq!(reread.id(), made.id());
        assert_eq!(reread.inputs(), whole_inputs);
        // A byte of a thread changed: refused, the bytes' hash not the
        // checksum.
        let text = String::from_utf8(fs::read(&file).unwrap()).unwrap();
        let edited = dir.path().join("edited.json");
        fs::write(&edited, text.replacen("\"entries\":", "\"entries\": ", 1)).unwrap();
        assert!(Plan::load(&edited).is_ok(), "whitespace is no change");
        let bumped = text.replacen("/rumours/", "/rumourz/", 1);
        assert_ne!(bumped, text);
        fs::write(&edited, bumped).unwrap();
        let e = Plan::load(&edited).unwrap_err().to_string();
        assert!(e.contains("does not match its checksum"), "{e}");
        for checksum in ["x", "a\"quote", "back\\slash", "\u{e9}t\u{e9}", "\n"] {
            let mut odd: Plan = serde_json::from_slice(&fs::read(&file).unwrap()).unwrap();
            odd.checksum = checksum.into();
            let streamed = odd.streamed_unsealed_hash().map(|h| format!("{h:016x}"));
            assert_eq!(
                streamed.as_deref(),
                Some(made.id().as_str()),
                "{checksum:?}"
            );
        }
    }

    /// A corpus folder that is itself a thread (a single build takes it) is
    /// refused when planned, naming it: its partitions would refuse the
    /// thread at "." as not inside the corpus.
    #[test]
    fn a_corpus_that_is_one_thread_is_not_planned() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("corpus");
        corpus(&root);
        let thread = root.join("ev/rumours/5");
        let e = Plan::create(&thread, &BuildOptions::default())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("is itself a thread") && e.contains("ev/rumours/5"),
            "{e}"
        );
        // The folder that holds it plans.
        Plan::create(root.join("ev"), &BuildOptions::default()).unwrap();
    }

    /// A thread in a label folder is planned unlisted, its layout guessed
    /// (the first with such a source folder: PHEME's, labelled by its
    /// folder). The toy layout's thread there, labelled rumour by its own
    /// file, has a rumour entry the plan lacks: its partition, which lists
    /// it, refuses, naming it; a plan that lists threads builds it as the
    /// toy's, a rumour source.
    #[test]
    fn a_wrong_layout_guess_is_refused_by_the_partition_that_lists_the_thread() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("corpus");
        corpus(&root);
        fs::create_dir_all(root.join("ev/non-rumours")).unwrap();
        fs::rename(root.join("forum/threads/7"), root.join("ev/non-rumours/7")).unwrap();
        let plan = Plan::create(&root, &BuildOptions::default()).unwrap();
        let t = plan.threads.iter().find(|t| t.source_id == 7).unwrap();
        assert!(t.entries.is_none() && t.layout.is_none() && t.rumour.is_none());
        let out = dir.path().join("part");
        let e = build_partition(&root, &plan, (0, 1), &out, 1, &NoProgress).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("ev/non-rumours/7") && msg.contains("rumour-index entry"),
            "{msg}"
        );
        assert!(!out.exists());
        let listed = Plan::create_pinned(&root, &BuildOptions::default()).unwrap();
        build_partition(&root, &listed, (0, 1), &out, 1, &NoProgress).unwrap();
        let c = Cache::open(&out).unwrap();
        let got: Vec<_> = c.iter().map(|t| (t.source_id(), t.label_code())).collect();
        assert_eq!(got, [(5, 1), (7, 1)]);
    }

    /// A plan stores a layout by its name (PHEME's by nothing, as before
    /// layouts were stored); a plan written when it was stored by index
    /// (`"layout": 1`, the toy in that release's unit tests) still loads,
    /// matches its checksum and builds the toy's thread as the toy's; an
    /// unknown name or index is refused, naming it.
    #[test]
    fn plans_store_a_layout_by_name_and_read_the_old_index() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("corpus");
        corpus(&root);
        let plan = Plan::create(&root, &BuildOptions::default()).unwrap();
        let file = dir.path().join("plan.json");
        plan.save(&file).unwrap();
        let json = fs::read_to_string(&file).unwrap();
        assert_eq!(json.matches(r#""layout":"toy""#).count(), 1, "{json}");
        assert_eq!(json.matches(r#""layout""#).count(), 1, "{json}");

        let old = json.replace(r#""layout":"toy""#, r#""layout":1"#);
        let old = Plan::reseal(old.as_bytes()).unwrap();
        assert!(String::from_utf8_lossy(&old).contains(r#""layout":1,"#));
        fs::write(&file, &old).unwrap();
        // Read as written: the checksum is of the old form.
        let loaded = Plan::load(&file).unwrap();
        let out = dir.path().join("part");
        build_partition(&root, &loaded, (0, 1), &out, 1, &NoProgress).unwrap();
        let c = Cache::open(&out).unwrap();
        let got: Vec<_> = c
            .iter()
            .map(|t| (t.source_id(), t.label().to_owned(), t.label_code()))
            .collect();
        assert_eq!(got, [(5, "rumours".into(), 1), (7, "rumour".into(), 1)]);

        for (stored, named) in [(r#""forum""#, "\"forum\""), ("7", "layout 7")] {
            let bad = json.replace(r#""toy""#, stored);
            fs::write(&file, Plan::reseal(bad.as_bytes()).unwrap()).unwrap();
            let e = Plan::load(&file).unwrap_err().to_string();
            assert!(e.contains(named) && e.contains("forum/threads/7"), "{e}");
        }
    }
}
