//! Writing an embedding store (format: [`super::format`]) from rows a
//! caller computes: the lock, the staging directory kept for resumption,
//! rows written and synced per batch, checksums, publication through the
//! crate's one directory swap.
//!
//! A nightly embed of a rebuilt cache links the previous store's segments
//! (rows are never copied) and writes one segment of the new inputs' rows,
//! so that its cost follows the night's change, not the store's size.
//! Compaction (on request, or when the rows no reaction uses exceed
//! [`COMPACT_DEAD_SHARE`] of all rows, or the segments
//! [`MAX_SEGMENTS`]) writes the store as one segment instead, byte for byte
//! what a from-scratch embed writes.

use std::fs::{self, File};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::format::{
    Dtype, INDEX_FILE, KEYS_FILE, META_FILE, NO_ROW, PROGRESS_FILE, STORE_FORMAT, STORE_VERSION,
    STORES_DIR, StoreFile, StoreMeta, StoreSegment, V2_VECTORS_FILE, lock_name, npy_header,
    segment_file, staging_name,
};
use super::read::{EmbeddingStore, Verify, check_name, non_finite};
use crate::error::EmbeddingError;
use crate::format::layout::{CacheLayout, DERIVED_DIR};
use crate::ingest::publish::{swap_dir, try_lock};
use crate::read::ThreadSource;
use crate::train::texts::{TextField, UniqueTexts};

type Result<T, E = EmbeddingError> = std::result::Result<T, E>;

/// Compaction runs when rows no reaction uses exceed this share of the
/// rows (1/4). Dead rows cost disk, a device table's memory and every
/// open's checksum pass; compaction costs a rewrite of the live rows. At
/// 1/4 the dead rows never exceed a third of the live ones, and since
/// every dead row was once a night's new row, the rewrites copy on average
/// at most 4 rows per new row: a night's amortised cost still follows its
/// change.
pub const COMPACT_DEAD_SHARE: (usize, usize) = (1, 4);
/// Compaction also runs when a store would have more segments than this
/// (a corpus that only grows leaves no dead rows): each segment is a file
/// to open and check, and readers locate a row's segment by a search.
pub const MAX_SEGMENTS: usize = 32;

fn io_err(path: &Path, source: std::io::Error) -> EmbeddingError {
    EmbeddingError::Io {
        path: path.to_owned(),
        source,
    }
}

fn io<T>(path: &Path, r: std::io::Result<T>) -> Result<T> {
    r.map_err(|e| io_err(path, e))
}

/// The `derived/` of the cache at `dir` that a build's temporary directory
/// holds, if any (see `ingest::publish`).
fn parked_derived(dir: &Path) -> Option<PathBuf> {
    let layout = CacheLayout::new(&fs::canonicalize(dir).ok()?).ok()?;
    fs::read_dir(layout.parent())
        .ok()?
        .flatten()
        .filter(|e| layout.is_temp_name(&e.file_name().to_string_lossy()))
        .map(|e| e.path().join(DERIVED_DIR))
        .find(|d| fs::symlink_metadata(d).is_ok())
}

/// Publishing replaces the store's directory and removes the old one:
/// refused up front when that would delete a file socialctx did not write
/// or cannot be done (a read-only store: the exchange succeeded, then
/// removing the old store failed, so the embed exited 1 with the new store
/// published, and every later embed failed on the read-only staging
/// directory the user never touched).
fn check_replaceable(target: &Path) -> Result<()> {
    let Ok(entries) = fs::read_dir(target) else {
        return Ok(());
    };
    let ours = |n: &str| {
        [META_FILE, INDEX_FILE, KEYS_FILE, V2_VECTORS_FILE].contains(&n)
            || n.strip_prefix("seg-")
                .and_then(|r| r.strip_suffix(".npy"))
                .is_some_and(|d| d.len() >= 5 && d.bytes().all(|b| b.is_ascii_digit()))
    };
    let mut foreign: Vec<String> = entries
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !ours(n))
        .collect();
    foreign.sort();
    if !foreign.is_empty() {
        return Err(EmbeddingError::Damaged {
            path: target.to_owned(),
            reason: format!(
                "holds files socialctx did not write ({}); an embed replaces this directory \
                 as a whole, so move them out of it first",
                foreign.join(", ")
            ),
        });
    }
    if rustix::fs::access(target, rustix::fs::Access::WRITE_OK).is_err() {
        return Err(EmbeddingError::Damaged {
            path: target.to_owned(),
            reason: "the store's directory is not writable: an embed replaces it and removes \
                     the old one; make it writable (or embed under another name)"
                .into(),
        });
    }
    Ok(())
}

fn rows_err(reason: impl Into<String>) -> EmbeddingError {
    EmbeddingError::Rows {
        reason: reason.into(),
    }
}

fn sync_path(path: &Path) -> Result<()> {
    io(path, File::open(path).and_then(|f| f.sync_all()))
}

/// Writes a whole `.npy` file (synced with the rest at publication; a
/// resumed embed checks it against the returned size and checksum).
fn write_npy(path: &Path, dtype: Dtype, shape: &[usize], data: &[u8]) -> Result<StoreFile> {
    let mut bytes = npy_header(dtype, shape);
    bytes.extend_from_slice(data);
    let f = io(path, File::create(path))?;
    io(path, f.write_all_at(&bytes, 0))?;
    Ok(StoreFile {
        bytes: bytes.len() as u64,
        xxh3: format!("{:016x}", xxhash_rust::xxh3::xxh3_64(&bytes)),
    })
}

/// Hashes a file in blocks.
fn hash_file(path: &Path) -> Result<StoreFile> {
    let f = io(path, File::open(path))?;
    let len = io(path, f.metadata())?.len();
    let mut h = xxhash_rust::xxh3::Xxh3Default::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut at = 0u64;
    while at < len {
        let n = io(path, f.read_at(&mut buf, at))?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
        at += n as u64;
    }
    Ok(StoreFile {
        bytes: len,
        xxh3: format!("{:016x}", h.digest()),
    })
}

/// Creates a segment file of `rows` rows with all its blocks allocated
/// (a full disk fails here, not later); returns it and where rows start.
fn create_segment(path: &Path, dtype: Dtype, rows: usize, dim: usize) -> Result<(File, usize)> {
    let header = npy_header(dtype, &[rows, dim]);
    let size = (header.len() + rows * dim * dtype.size()) as u64;
    let f = io(
        path,
        File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path),
    )?;
    let made = f.write_all_at(&header, 0).and_then(|()| {
        match rustix::fs::fallocate(&f, rustix::fs::FallocateFlags::empty(), 0, size) {
            Ok(()) => Ok(()),
            Err(rustix::io::Errno::OPNOTSUPP | rustix::io::Errno::INVAL) => f.set_len(size),
            Err(e) => Err(e.into()),
        }
    });
    if let Err(e) = made {
        // Nothing of it is worth resuming from: leave no half file.
        let _ = fs::remove_file(path);
        return Err(io_err(path, e));
    }
    Ok((f, header.len()))
}

/// What an unfinished embed records in its staging directory; it resumes
/// only under the same plan.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct Plan {
    cache_content_id: String,
    field: String,
    dtype: String,
    batch_size: usize,
    unique: usize,
    reactions: usize,
    model_id: Option<String>,
    /// The reused store's keys file checksum, if any.
    source: Option<String>,
    todo: usize,
    compact: bool,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct Progress {
    plan: Plan,
    done: usize,
    dim: Option<usize>,
    /// Per batch written, the xxh3-64 of its rows' bytes: a resumed embed
    /// keeps the batches whose rows read back the same (rows are synced
    /// about once a second, not per batch, so after a power loss the
    /// progress may claim rows that never reached the disk).
    #[serde(default)]
    hashes: Vec<u64>,
    /// The index's and the keys' size and checksum, as written (they are
    /// synced only at publication).
    #[serde(default)]
    files: std::collections::BTreeMap<String, StoreFile>,
}

/// Rows are synced at most this often while batches come in (and always
/// before publication): a sync per batch cost 3.5 ms on the disk measured,
/// 40% of a from-scratch embed at 385 batches, and buys nothing the
/// per-batch hashes do not (at most this much model time is redone after a
/// power loss).
const SYNC_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// Writes an embedding store of a cache from rows the caller computes, one
/// batch of inputs at a time: configure it ([`new`](Self::new) and the
/// option methods), [`begin`](Self::begin) it on a cache, then for each
/// batch `b` in [`done`](Self::done)`..`[`batches`](Self::batches) embed the
/// inputs [`inputs`](Self::inputs)`(b)` names (positions in
/// [`unique`](Self::unique)) and hand the rows to
/// [`write_f32`](Self::write_f32) or [`write_f16`](Self::write_f16), and
/// [`finish`](Self::finish).
///
/// It holds the store's lock from `begin` until dropped. Rows are synced
/// batch by batch into a staging directory beside the store, so that an
/// interrupted embed (a crash, a kill) resumes at its next `begin`; the
/// store is published whole by one atomic directory swap, and readers see
/// the previous store or the new one. With a [`model_id`](Self::model_id),
/// a store of the cache's previous content gives back the rows of every
/// input it has (matched by content key), and only the new inputs are
/// left to embed.
#[derive(Debug)]
pub struct StoreWriter {
    name: String,
    field: TextField,
    dtype: Dtype,
    batch_size: usize,
    model_id: Option<String>,
    compact: bool,
    reuse: bool,
    resume: bool,
    run: Option<Run>,
}

/// The reused previous store.
#[derive(Debug)]
struct Prev {
    store: EmbeddingStore,
    keys_xxh3: String,
}

#[derive(Debug)]
struct Run {
    root: PathBuf,
    partial: PathBuf,
    target: PathBuf,
    lock: File,
    unique: UniqueTexts,
    plan: Plan,
    prev: Option<Prev>,
    not_reused: Option<String>,
    /// Why an interrupted embed of another model was started over.
    restarted: Option<String>,
    reuse_from: Vec<Option<u32>>,
    todo: Vec<u32>,
    done: usize,
    resumed: usize,
    dim: Option<usize>,
    seg: Option<(File, usize)>,
    /// The new segment's number (the previous store's segment count when
    /// appending, 0 when compacting).
    seg_no: usize,
    dropped: usize,
    /// Per batch written, its rows' xxh3-64 ([`Progress::hashes`]).
    hashes: Vec<u64>,
    last_sync: std::time::Instant,
    /// [`Progress::files`].
    files: std::collections::BTreeMap<String, StoreFile>,
}

impl Drop for Run {
    fn drop(&mut self) {
        // Unlocked explicitly: a child forked meanwhile (a DataLoader
        // worker) shares the lock's open file.
        let _ = self.lock.unlock();
    }
}

impl StoreWriter {
    /// A writer of store `name` of the `field` inputs: float32 rows, 256
    /// inputs per batch, no model id, compaction when the rows no reaction
    /// uses exceed a quarter of the rows or the segments would exceed 32.
    pub fn new(name: &str, field: TextField) -> StoreWriter {
        StoreWriter {
            name: name.to_owned(),
            field,
            dtype: Dtype::F32,
            batch_size: 256,
            model_id: None,
            compact: false,
            reuse: true,
            resume: true,
            run: None,
        }
    }

    /// Stores float16 rows (handed over as their bits) instead of float32.
    pub fn half(mut self, half: bool) -> Self {
        self.dtype = if half { Dtype::F16 } else { Dtype::F32 };
        self
    }

    /// Inputs per batch (at least 1).
    pub fn batch_size(mut self, n: usize) -> Self {
        self.batch_size = n;
        self
    }

    /// The model's identity (e.g. a hash of its weights), stored in the
    /// metadata: rows of a previous store are reused only under the same id.
    pub fn model_id(mut self, id: Option<&str>) -> Self {
        self.model_id = id.map(str::to_owned);
        self
    }

    /// Writes the store as one segment, whatever share of dead rows.
    pub fn compact(mut self, compact: bool) -> Self {
        self.compact = compact;
        self
    }

    /// Whether to reuse a previous store's rows (default true; a model id
    /// is needed too).
    pub fn reuse(mut self, reuse: bool) -> Self {
        self.reuse = reuse;
        self
    }

    /// Whether to resume an interrupted embed of the same plan (default
    /// true; false starts over).
    pub fn resume(mut self, resume: bool) -> Self {
        self.resume = resume;
        self
    }

    /// Takes the store's lock, finds the inputs, the previous store's rows
    /// to reuse, and the batches an interrupted embed already wrote.
    pub fn begin<C: ThreadSource + Sync + ?Sized>(mut self, cache: &C) -> Result<StoreWriter> {
        check_name(&self.name)?;
        if self.batch_size == 0 {
            return Err(rows_err("batch_size must be at least 1"));
        }
        let derived = cache.derived_dir();
        if let Some(parked) = parked_derived(cache.dir()) {
            // A build publishing, or killed while publishing, moved the
            // cache's derived/ (its stores) there: an embed now would make
            // a fresh derived/ and compute every row again, and the store
            // it wrote would then keep the build from putting them back.
            return Err(EmbeddingError::Damaged {
                path: parked,
                reason: "a build of the cache moved its derived/ (the embedding stores) here \
                         while publishing and was interrupted, or is publishing now: run the \
                         build again (it puts derived/ back) before embedding"
                    .into(),
            });
        }
        let root = derived.join(STORES_DIR);
        io(&root, fs::create_dir_all(&root))?;
        let target = root.join(&self.name);
        let lock_path = root.join(lock_name(&self.name));
        let Some(lock) = io(&lock_path, try_lock(&lock_path))? else {
            return Err(EmbeddingError::Locked { path: target });
        };
        check_replaceable(&target)?;
        let unique =
            UniqueTexts::collect(cache, self.field, None).map_err(|e| EmbeddingError::Damaged {
                path: cache.dir().to_owned(),
                reason: e.to_string(),
            })?;
        let mut not_reused = None;
        let prev = if self.reuse && self.model_id.is_some() && target.join(META_FILE).exists() {
            match EmbeddingStore::open_checked(&derived, None, &self.name, Verify::ForLinking) {
                Ok(store) => {
                    let m = store.meta();
                    let fits = m.model_id == self.model_id
                        && m.field == self.field.as_str()
                        && m.dtype == self.dtype.meta_name()
                        && m.dim > 0;
                    let keys_xxh3 = m.files.get(KEYS_FILE).map(|f| f.xxh3.clone());
                    fits.then(|| Prev {
                        keys_xxh3: keys_xxh3.unwrap_or_default(),
                        store,
                    })
                }
                Err(e) => {
                    not_reused = Some(e.to_string());
                    None
                }
            }
        } else {
            None
        };
        let mut prev = prev;
        let (reuse_from, todo, compact, dropped) = loop {
            let reuse_from = match &prev {
                Some(p) => unique.positions_in(&p.store.keys().collect::<Vec<_>>()),
                None => vec![None; unique.len()],
            };
            let todo: Vec<u32> = (0..unique.len() as u32)
                .filter(|&u| reuse_from[u as usize].is_none())
                .collect();
            let reused = unique.len() - todo.len();
            let Some(p) = &prev else {
                break (reuse_from, todo, true, 0);
            };
            let rows = p.store.rows() + todo.len();
            let dead = rows - unique.len();
            let (num, den) = COMPACT_DEAD_SHARE;
            let segments = p.store.meta().segments.len() + usize::from(!todo.is_empty());
            let compact = self.compact || dead * den > rows * num || segments > MAX_SEGMENTS;
            // Compaction copies the reused rows, so it verifies them in
            // full first: a copy must not give damaged rows a fresh
            // checksum. (Appending links them instead, and every reader of
            // the new store verifies them.)
            if compact
                && let Err(e) =
                    EmbeddingStore::open_checked(&derived, None, &self.name, Verify::All)
            {
                not_reused = Some(e.to_string());
                prev = None;
                continue;
            }
            break (reuse_from, todo, compact, p.store.rows() - reused);
        };
        let plan = Plan {
            cache_content_id: cache.content_id(),
            field: self.field.as_str().into(),
            dtype: self.dtype.meta_name().into(),
            batch_size: self.batch_size,
            unique: unique.len(),
            reactions: unique.index().len(),
            model_id: self.model_id.clone(),
            source: prev.as_ref().map(|p| p.keys_xxh3.clone()),
            todo: todo.len(),
            compact,
        };
        let seg_no = match (&prev, compact) {
            (Some(p), false) => p.store.meta().segments.len(),
            _ => 0,
        };
        let mut run = Run {
            partial: root.join(staging_name(&self.name)),
            root,
            target,
            lock,
            unique,
            plan,
            prev,
            not_reused,
            restarted: None,
            reuse_from,
            todo,
            done: 0,
            resumed: 0,
            dim: None,
            seg: None,
            seg_no,
            dropped,
            hashes: Vec::new(),
            last_sync: std::time::Instant::now(),
            files: Default::default(),
        };
        match self.resume.then(|| run.resumable()).flatten() {
            Some(p) => run.resume_from(p)?,
            None => run.start()?,
        }
        self.run = Some(run);
        Ok(self)
    }

    /// The distinct inputs (the batches' inputs are positions in it).
    pub fn unique(&self) -> Option<&UniqueTexts> {
        self.run.as_ref().map(|r| &r.unique)
    }

    /// Batches in all: the new inputs in batches of `batch_size`.
    pub fn batches(&self) -> usize {
        self.run
            .as_ref()
            .map_or(0, |r| r.todo.len().div_ceil(self.batch_size))
    }

    /// Batches already written (by an interrupted embed, or by this one).
    pub fn done(&self) -> usize {
        self.run.as_ref().map_or(0, |r| r.done)
    }

    /// Batches an interrupted embed had written.
    pub fn resumed(&self) -> usize {
        self.run.as_ref().map_or(0, |r| r.resumed)
    }

    /// The inputs of batch `b` (positions in [`unique`](Self::unique),
    /// increasing).
    pub fn inputs(&self, b: usize) -> &[u32] {
        match &self.run {
            Some(r) => {
                let from = (b * self.batch_size).min(r.todo.len());
                &r.todo[from..((b + 1) * self.batch_size).min(r.todo.len())]
            }
            None => &[],
        }
    }

    /// The row width fixed so far (by the reused store, a resumed embed or
    /// the first batch), if any.
    pub fn dim(&self) -> Option<usize> {
        self.run.as_ref().and_then(|r| r.dim)
    }

    /// Inputs to embed (not reused).
    pub fn new_inputs(&self) -> usize {
        self.run.as_ref().map_or(0, |r| r.todo.len())
    }

    /// Inputs whose rows come from the previous store.
    pub fn reused(&self) -> usize {
        self.run
            .as_ref()
            .map_or(0, |r| r.unique.len() - r.todo.len())
    }

    /// Rows of the previous store no reaction uses any more (dropped if
    /// this embed compacts, else kept until a later one does).
    pub fn dropped(&self) -> usize {
        self.run.as_ref().map_or(0, |r| r.dropped)
    }

    /// Whether the store is written as one segment (compacted or from
    /// scratch).
    pub fn compacting(&self) -> bool {
        self.run.as_ref().is_some_and(|r| r.plan.compact)
    }

    /// Why a previous store of this name was not reused, where it could
    /// not be read.
    pub fn not_reused(&self) -> Option<&str> {
        self.run.as_ref().and_then(|r| r.not_reused.as_deref())
    }

    /// Why an interrupted embed was not resumed, where it was of another
    /// model (it is started over, never mixed).
    pub fn restarted(&self) -> Option<&str> {
        self.run.as_ref().and_then(|r| r.restarted.as_deref())
    }

    /// Writes batch `b`'s float32 rows (`[inputs(b).len(), dim]`, C order).
    pub fn write_f32(&mut self, b: usize, rows: &[f32], dim: usize) -> Result<()> {
        if self.dtype != Dtype::F32 {
            return Err(rows_err("the store is float16: hand its rows to write_f16"));
        }
        self.write(b, zerocopy::IntoBytes::as_bytes(rows), dim)
    }

    /// Writes batch `b`'s float16 rows as their bits.
    pub fn write_f16(&mut self, b: usize, rows: &[u16], dim: usize) -> Result<()> {
        if self.dtype != Dtype::F16 {
            return Err(rows_err("the store is float32: hand its rows to write_f32"));
        }
        self.write(b, zerocopy::IntoBytes::as_bytes(rows), dim)
    }

    fn write(&mut self, b: usize, bytes: &[u8], dim: usize) -> Result<()> {
        let n = self.inputs(b).len();
        let batch_size = self.batch_size;
        let dtype = self.dtype;
        let run = self
            .run
            .as_mut()
            .ok_or_else(|| rows_err("StoreWriter: call begin() first"))?;
        if b != run.done {
            return Err(rows_err(format!(
                "batch {b} handed over, the next to write is batch {}",
                run.done
            )));
        }
        if n == 0 {
            return Err(rows_err(format!("there is no batch {b}")));
        }
        if dim == 0 {
            return Err(rows_err("rows of dimension 0"));
        }
        if let Some(d) = run.dim
            && d != dim
        {
            return Err(rows_err(format!(
                "rows of dimension {dim}, the store being written has {d}"
            )));
        }
        let row = dim * dtype.size();
        if bytes.len() != n * row {
            return Err(rows_err(format!(
                "{} values for {n} inputs of dimension {dim}",
                bytes.len() / dtype.size()
            )));
        }
        if non_finite(dtype, bytes) {
            return Err(rows_err(format!(
                "values that are not finite as {} in batch {b}",
                dtype.meta_name()
            )));
        }
        let path = run.partial.join(segment_file(run.seg_no));
        if run.seg.is_none() {
            let rows = if run.plan.compact {
                run.unique.len()
            } else {
                run.todo.len()
            };
            run.seg = Some(create_segment(&path, dtype, rows, dim)?);
            run.dim = Some(dim);
        }
        let (file, at) = run.seg.as_ref().expect("created above");
        for (from, to, off) in run.batch_runs(b, batch_size, *at, row) {
            io(&path, file.write_all_at(&bytes[from..to], off))?;
        }
        if run.last_sync.elapsed() >= SYNC_EVERY {
            io(&path, file.sync_data())?;
            run.last_sync = std::time::Instant::now();
        }
        run.hashes.push(xxhash_rust::xxh3::xxh3_64(bytes));
        run.done = b + 1;
        run.save_progress()
    }

    /// Writes the index, keys and metadata, and publishes the store in
    /// place of the previous one. Returns the new store's metadata.
    pub fn finish(mut self) -> Result<StoreMeta> {
        let batches = self.batches();
        let (name, batch_size) = (self.name.clone(), self.batch_size);
        let run = self
            .run
            .as_mut()
            .ok_or_else(|| rows_err("StoreWriter: call begin() first"))?;
        if run.done < batches {
            return Err(rows_err(format!(
                "{} of {batches} batches written",
                run.done
            )));
        }
        let dim = run.dim.unwrap_or(0);
        let mut segments = Vec::new();
        if let Some(p) = run.prev.as_ref().filter(|_| !run.plan.compact) {
            segments.extend(p.store.meta().segments.iter().enumerate().map(|(k, s)| {
                StoreSegment {
                    file: segment_file(k),
                    ..s.clone()
                }
            }));
        }
        let mut to_sync = vec![
            run.partial.join(INDEX_FILE),
            run.partial.join(KEYS_FILE),
            run.partial.join(META_FILE),
        ];
        if let Some((file, _)) = run.seg.take() {
            let path = run.partial.join(segment_file(run.seg_no));
            drop(file);
            let f = hash_file(&path)?;
            to_sync.push(path);
            segments.push(StoreSegment {
                file: segment_file(run.seg_no),
                rows: if run.plan.compact {
                    run.unique.len()
                } else {
                    run.todo.len()
                },
                bytes: f.bytes,
                xxh3: f.xxh3,
            });
        }
        let mut files = run.files.clone();
        for name in [INDEX_FILE, KEYS_FILE] {
            if !files.contains_key(name) {
                files.insert(name.to_owned(), hash_file(&run.partial.join(name))?);
            }
        }
        let rows = segments.iter().map(|s| s.rows).sum();
        let meta = StoreMeta {
            format: STORE_FORMAT.into(),
            version: STORE_VERSION,
            name,
            field: run.plan.field.clone(),
            dtype: run.plan.dtype.clone(),
            dim,
            unique: run.unique.len(),
            rows,
            reactions: run.plan.reactions,
            cache_content_id: run.plan.cache_content_id.clone(),
            model_id: run.plan.model_id.clone(),
            batch_size,
            calls: run.unique.len().div_ceil(batch_size),
            files,
            segments,
        };
        let meta_path = run.partial.join(META_FILE);
        let mut text = serde_json::to_vec_pretty(&meta).map_err(|e| rows_err(e.to_string()))?;
        text.push(b'\n');
        let f = io(&meta_path, File::create(&meta_path))?;
        io(&meta_path, f.write_all_at(&text, 0))?;
        drop(f);
        // Every file synced at once, from one thread each: the file system
        // commits them together rather than one journal commit per file.
        std::thread::scope(|s| {
            let syncs: Vec<_> = to_sync.iter().map(|p| s.spawn(|| sync_path(p))).collect();
            syncs.into_iter().try_for_each(|t| {
                t.join()
                    .unwrap_or_else(|_| Err(rows_err("a sync thread panicked")))
            })
        })?;
        let progress = run.partial.join(PROGRESS_FILE);
        if progress.exists() {
            io(&progress, fs::remove_file(&progress))?;
        }
        sync_path(&run.partial)?;
        // Links keep the previous store's segments alive in the new one.
        let prev = run.prev.take();
        drop(prev);
        match swap_dir(&run.partial, &run.target) {
            Ok(false) => {}
            Ok(true) => io(&run.partial, fs::remove_dir_all(&run.partial))?,
            Err(e) if e.kind() == std::io::ErrorKind::Unsupported => {
                // No atomic exchange here: replace in two renames, the old
                // store parked at the staging path (a kill in between
                // leaves no store; the next embed recomputes it).
                let parked = run.root.join(format!(".{}.old", self.name));
                let _ = fs::remove_dir_all(&parked);
                io(&run.target, fs::rename(&run.target, &parked))?;
                io(&run.target, fs::rename(&run.partial, &run.target))?;
                io(&parked, fs::remove_dir_all(&parked))?;
            }
            Err(e) => return Err(io_err(&run.target, e)),
        }
        sync_path(&run.root)?;
        Ok(meta)
    }
}

impl Run {
    /// The progress of an interrupted embed with the same plan whose files
    /// are there, else None.
    fn resumable(&mut self) -> Option<Progress> {
        let text = fs::read(self.partial.join(PROGRESS_FILE)).ok()?;
        let p: Progress = serde_json::from_slice(&text).ok()?;
        if p.plan.model_id != self.plan.model_id {
            let show =
                |id: &Option<String>| id.as_ref().map_or("None".into(), |s| format!("{s:?}"));
            self.restarted = Some(format!(
                "{}: the interrupted embed was of model {}, not {}; starting over",
                self.partial.display(),
                show(&p.plan.model_id),
                show(&self.plan.model_id)
            ));
            return None;
        }
        if p.plan != self.plan {
            return None;
        }
        // Index and keys as written, and every linked segment there (none
        // of them synced before publication).
        let files = [INDEX_FILE, KEYS_FILE].iter().all(|f| {
            hash_file(&self.partial.join(f))
                .is_ok_and(|h| p.files.get(*f).is_some_and(|want| *want == h))
        });
        let linked = match (&self.prev, self.plan.compact) {
            (Some(prev), false) => prev.store.meta().segments.iter().enumerate().all(|(k, s)| {
                fs::metadata(self.partial.join(segment_file(k))).is_ok_and(|m| m.len() == s.bytes)
            }),
            _ => true,
        };
        // Compacting with a previous store, the segment holds the reused
        // rows from the start.
        let seg = self.partial.join(segment_file(self.seg_no));
        let seg_needed = p.done > 0 || (self.plan.compact && self.prev.is_some());
        (files && linked && (!seg_needed || seg.is_file())).then_some(p)
    }

    fn resume_from(&mut self, p: Progress) -> Result<()> {
        if p.hashes.len() != p.done {
            return self.start();
        }
        self.done = p.done;
        self.resumed = p.done;
        self.dim = p.dim;
        self.hashes = p.hashes;
        self.files = p.files;
        let path = self.partial.join(segment_file(self.seg_no));
        if let Some(dim) = p.dim
            && path.is_file()
        {
            let header = npy_header(
                Dtype::of_meta(&self.plan.dtype).unwrap_or(Dtype::F32),
                &[self.seg_rows(), dim],
            );
            let f = io(&path, File::options().read(true).write(true).open(&path))?;
            let mut head = vec![0u8; header.len()];
            io(&path, f.read_exact_at(&mut head, 0))?;
            if head != header {
                return self.start();
            }
            // Keep the batches whose rows read back as written.
            let (at, row) = (
                header.len(),
                dim * Dtype::of_meta(&self.plan.dtype)
                    .unwrap_or(Dtype::F32)
                    .size(),
            );
            let mut good = 0;
            let mut buf = Vec::new();
            while good < self.done {
                let n = (self.todo.len() - good * self.plan.batch_size).min(self.plan.batch_size);
                buf.resize(n * row, 0);
                for (from, to, off) in self.batch_runs(good, self.plan.batch_size, at, row) {
                    io(&path, f.read_exact_at(&mut buf[from..to], off))?;
                }
                if xxhash_rust::xxh3::xxh3_64(&buf) != self.hashes[good] {
                    break;
                }
                good += 1;
            }
            self.done = good;
            self.resumed = good;
            self.hashes.truncate(good);
            self.seg = Some((f, header.len()));
        } else if p.done > 0 {
            return self.start();
        }
        Ok(())
    }

    /// Where batch `b`'s rows go: (start, end) in the batch's bytes and the
    /// file offset, per run of rows (one run when appending; when
    /// compacting, rows go to their inputs' positions, in runs of
    /// consecutive ones).
    fn batch_runs(
        &self,
        b: usize,
        batch_size: usize,
        at: usize,
        row: usize,
    ) -> Vec<(usize, usize, u64)> {
        let first = b * batch_size;
        let picked =
            &self.todo[first.min(self.todo.len())..(first + batch_size).min(self.todo.len())];
        if !self.plan.compact {
            return vec![(0, picked.len() * row, (at + first * row) as u64)];
        }
        let mut runs = Vec::new();
        let mut i = 0;
        while i < picked.len() {
            let mut j = i + 1;
            while j < picked.len() && picked[j] == picked[j - 1] + 1 {
                j += 1;
            }
            runs.push((i * row, j * row, (at + picked[i] as usize * row) as u64));
            i = j;
        }
        runs
    }

    fn seg_rows(&self) -> usize {
        if self.plan.compact {
            self.unique.len()
        } else {
            self.todo.len()
        }
    }

    /// Starts the staging directory afresh: the index, the keys, the
    /// previous store's segments (linked when appending, their reused rows
    /// copied when compacting), all synced before the first progress file.
    fn start(&mut self) -> Result<()> {
        if fs::symlink_metadata(&self.partial).is_ok() {
            io(&self.partial, fs::remove_dir_all(&self.partial))?;
        }
        io(&self.partial, fs::create_dir(&self.partial))?;
        self.done = 0;
        self.hashes.clear();
        self.resumed = 0;
        self.dim = None;
        self.seg = None;
        let dtype = Dtype::of_meta(&self.plan.dtype).unwrap_or(Dtype::F32);
        let n = self.unique.len();
        let (index, keys): (Vec<u32>, Vec<u128>) = match (&self.prev, self.plan.compact) {
            (Some(p), false) => {
                let base = p.store.rows() as u32;
                let mut global = vec![0u32; n];
                let mut next = base;
                for (u, g) in global.iter_mut().enumerate() {
                    *g = match self.reuse_from[u] {
                        Some(r) => r,
                        None => {
                            next += 1;
                            next - 1
                        }
                    };
                }
                let index = self
                    .unique
                    .index()
                    .iter()
                    .map(|&u| {
                        if u == NO_ROW {
                            NO_ROW
                        } else {
                            global[u as usize]
                        }
                    })
                    .collect();
                let keys = p
                    .store
                    .keys()
                    .chain(self.todo.iter().map(|&u| self.unique.key(u as usize)))
                    .collect();
                (index, keys)
            }
            _ => (
                self.unique.index().to_vec(),
                (0..n).map(|u| self.unique.key(u)).collect(),
            ),
        };
        let key_words: Vec<u64> = keys
            .iter()
            .flat_map(|&k| [k as u64, (k >> 64) as u64])
            .collect();
        let index = write_npy(
            &self.partial.join(INDEX_FILE),
            Dtype::U32,
            &[index.len()],
            zerocopy::IntoBytes::as_bytes(index.as_slice()),
        )?;
        let keys = write_npy(
            &self.partial.join(KEYS_FILE),
            Dtype::U64,
            &[keys.len(), 2],
            zerocopy::IntoBytes::as_bytes(key_words.as_slice()),
        )?;
        self.files = [(INDEX_FILE.to_owned(), index), (KEYS_FILE.to_owned(), keys)].into();
        if let Some(p) = &self.prev {
            let dim = p.store.dim();
            self.dim = Some(dim);
            if self.plan.compact {
                self.copy_reused(dtype, dim)?;
            } else {
                for (k, (from, _, _)) in p.store.segments().enumerate() {
                    let to = self.partial.join(segment_file(k));
                    if fs::hard_link(from, &to).is_err() {
                        // No links here (another file system below?): a copy.
                        io(&to, fs::copy(from, &to))?;
                        sync_path(&to)?;
                    }
                }
                if !self.todo.is_empty() {
                    let path = self.partial.join(segment_file(self.seg_no));
                    self.seg = Some(create_segment(&path, dtype, self.todo.len(), dim)?);
                }
            }
        }
        self.save_progress()
    }

    /// Compacting with a previous store (verified in full by `begin`): its
    /// rows of reused inputs, copied to their inputs' positions in the one
    /// new segment, and synced.
    fn copy_reused(&mut self, dtype: Dtype, dim: usize) -> Result<()> {
        let Some(p) = &self.prev else { return Ok(()) };
        let path = self.partial.join(segment_file(0));
        let (file, at) = create_segment(&path, dtype, self.unique.len(), dim)?;
        let row = dim * dtype.size();
        let chunk_rows = ((8 << 20) / row.max(1)).max(1);
        let mut buf = Vec::with_capacity(chunk_rows * row);
        let mut u = 0;
        let n = self.unique.len();
        while u < n {
            if self.reuse_from[u].is_none() {
                u += 1;
                continue;
            }
            let start = u;
            buf.clear();
            while u < n && u - start < chunk_rows {
                let Some(r) = self.reuse_from[u] else { break };
                let bytes =
                    p.store
                        .row_bytes(r as usize)
                        .ok_or_else(|| EmbeddingError::Damaged {
                            path: p.store.dir().to_owned(),
                            reason: format!("no row {r}"),
                        })?;
                buf.extend_from_slice(bytes);
                u += 1;
            }
            io(&path, file.write_all_at(&buf, (at + start * row) as u64))?;
        }
        io(&path, file.sync_data())?;
        self.seg = Some((file, at));
        Ok(())
    }

    /// Records how far the embed is: not synced, as it only ever claims
    /// rows already synced (a lost one means redoing work, never trusting
    /// rows that are not there).
    fn save_progress(&self) -> Result<()> {
        let p = Progress {
            plan: self.plan.clone(),
            done: self.done,
            dim: self.dim,
            hashes: self.hashes.clone(),
            files: self.files.clone(),
        };
        let path = self.partial.join(PROGRESS_FILE);
        let tmp = self.partial.join(format!("{PROGRESS_FILE}.tmp"));
        let text = serde_json::to_vec(&p).map_err(|e| rows_err(e.to_string()))?;
        io(&tmp, fs::write(&tmp, text))?;
        io(&path, fs::rename(&tmp, &path))
    }
}
