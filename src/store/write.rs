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
//!
//! The segments it links are verified first (a damaged one linked unread
//! published a store every reader refused), but only those changed since
//! they were last verified: after publishing, the writer records each
//! segment's checksum and stat beside the store ([`VerifiedRecord`](super::format::VerifiedRecord)), and
//! the next nightly reads again only the segments whose stat moved. An
//! explicit verification ([`StoreWriter::verify`],
//! [`EmbeddingStore::verify`]) reads them all.

mod files;
mod record;
mod staging;

use std::fs::{self, File};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};

use super::format::{
    Dtype, INDEX_FILE, KEYS_FILE, META_FILE, PROGRESS_FILE, STORE_FORMAT, STORE_VERSION,
    STORES_DIR, StoreMeta, StoreSegment, lock_name, segment_file, staging_name, verified_name,
};
use super::read::{EmbeddingStore, Verify, check_name, non_finite, parked_derived, read_meta};
use crate::error::EmbeddingError;
use crate::ingest::publish::{swap_dir, try_lock};
use crate::read::ThreadSource;
use crate::read::texts::{TextField, UniqueTexts};
use files::{check_replaceable, create_segment, hash_file, io, io_err, rows_err, sync_path};
use staging::{Plan, Prev, Run};

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
/// a store of the cache's previous content made under the same id gives
/// back the rows of every input it has (matched by content key), and only
/// the new inputs are left to embed.
///
/// Rows of two models never mix: an interrupted embed resumes only under
/// the same model id (without one, whether it is the same model cannot be
/// known, and the embed starts over: [`restarted`](Self::restarted) says
/// why), and a previous store made by another model, or without an id, is
/// not reused ([`not_reused`](Self::not_reused)). The id is recorded in
/// `meta.json` ([`EmbeddingStore::require_model`] checks it on reading).
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
    verify: bool,
    run: Option<Run>,
    /// The cache's directory and its manifest's (device, inode) at
    /// `begin`: a build that publishes meanwhile swaps both.
    cache: Option<(PathBuf, (u64, u64))>,
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
            verify: false,
            run: None,
            cache: None,
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
    /// metadata: an interrupted embed is resumed, and rows of a previous
    /// store are reused, only under the same id (never without one).
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

    /// Whether to verify every segment of the previous store in full before
    /// reusing it (default false: only those whose stat changed since the
    /// writer that published them recorded them, see [`VerifiedRecord`](super::format::VerifiedRecord)).
    /// A segment damaged without a change to its stat (by the disk itself)
    /// is caught by every reader, and by this.
    pub fn verify(mut self, verify: bool) -> Self {
        self.verify = verify;
        self
    }

    /// Takes the store's lock, finds the inputs, the previous store's rows
    /// to reuse, and the batches an interrupted embed already wrote.
    pub fn begin<C: ThreadSource + Sync + ?Sized>(mut self, cache: &C) -> Result<StoreWriter> {
        check_name(&self.name)?;
        if self.batch_size == 0 {
            return Err(rows_err("batch_size must be at least 1"));
        }
        if self.model_id.as_deref() == Some("") {
            // An empty id would make every unnamed model "the same".
            return Err(rows_err("model_id must not be empty (None: unknown model)"));
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
        // A cache object opened before a rebuild: its texts are the old
        // content's, and the store would be stale on arrival.
        let opened = cache.content_id();
        if let Some(now) = current_content_id(cache.dir())
            && now != opened
        {
            return Err(EmbeddingError::Damaged {
                path: cache.dir().to_owned(),
                reason: format!(
                    "the cache was rebuilt since it was opened (content {opened} then, {now} \
                     now): its store would be of the old content, which every reader refuses; \
                     open the cache again (socialctx.open) and embed that"
                ),
            });
        }
        self.cache = Some((cache.dir().to_owned(), manifest_id(cache.dir())));
        let root = derived.join(STORES_DIR);
        io(&root, fs::create_dir_all(&root))?;
        let target = root.join(&self.name);
        let lock_path = root.join(lock_name(&self.name));
        let Some(lock) = io(&lock_path, try_lock(&lock_path))? else {
            return Err(EmbeddingError::Locked { path: target });
        };
        // A store moved to a bigger disk and linked here (`NAME ->
        // /big/NAME`) is replaced where the link points, staged beside it
        // there (a swap within that file system), and the link stays.
        let home = io(&target, crate::output::resolve_symlinks(&target))?;
        let home_dir = home
            .parent()
            .map_or_else(|| root.clone(), Path::to_path_buf);
        let home_name = home
            .file_name()
            .map_or_else(|| self.name.clone(), |n| n.to_string_lossy().into_owned());
        check_replaceable(&home)?;
        let unique =
            UniqueTexts::collect(cache, self.field, None).map_err(|e| EmbeddingError::Damaged {
                path: cache.dir().to_owned(),
                reason: e.to_string(),
            })?;
        let mut not_reused = None;
        let prev = if self.reuse && self.model_id.is_some() && target.join(META_FILE).exists() {
            // The model first, from meta.json alone: rows of another model,
            // or of one made without an id, are never appended to (and the
            // store is not read in full for nothing).
            let made_by = read_meta(&target, &derived, &self.name).map(|m| m.model_id);
            match made_by {
                Ok(id) if id != self.model_id => {
                    not_reused = Some(format!(
                        "made by {}, not by model {:?}: every input is embedded again",
                        crate::error::made_by(&id),
                        self.model_id.as_deref().unwrap_or_default()
                    ));
                    None
                }
                _ => self.previous(&derived, &mut not_reused),
            }
        } else {
            None
        };
        let (reuse_from, todo, compact, dropped) = {
            let reuse_from = match &prev {
                Some(p) => unique.positions_in(&p.store.keys().collect::<Vec<_>>()),
                None => vec![None; unique.len()],
            };
            let todo: Vec<u32> = (0..unique.len() as u32)
                .filter(|&u| reuse_from[u as usize].is_none())
                .collect();
            let reused = unique.len() - todo.len();
            match &prev {
                None => (reuse_from, todo, true, 0),
                Some(p) => {
                    let rows = p.store.rows() + todo.len();
                    let dead = rows - unique.len();
                    let (num, den) = COMPACT_DEAD_SHARE;
                    let segments = p.store.meta().segments.len() + usize::from(!todo.is_empty());
                    let compact =
                        self.compact || dead * den > rows * num || segments > MAX_SEGMENTS;
                    (reuse_from, todo, compact, p.store.rows() - reused)
                }
            }
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
        let segments_read = prev.as_ref().map_or(0, |p| p.store.segments_read());
        let mut run = Run {
            record: root.join(verified_name(&self.name)),
            segments_read,
            partial: home_dir.join(staging_name(&home_name)),
            root: home_dir,
            target: home,
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

    /// The previous store, verified (as every reader does: its segments
    /// are linked into, or compacting copied to, the new store, and a
    /// damaged one linked unread published a store every reader refused
    /// while the embed reported success), if its rows fit this embed's
    /// (model, field, dtype). A damaged store is named (`not_reused`) and
    /// its rows computed again.
    fn previous(&self, derived: &std::path::Path, not_reused: &mut Option<String>) -> Option<Prev> {
        let verify = if self.verify {
            Verify::Checksums
        } else {
            Verify::Changed
        };
        match EmbeddingStore::open_checked(derived, None, &self.name, verify) {
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
                *not_reused = Some(e.to_string());
                None
            }
        }
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

    /// Segments of the previous store read and checked before reusing it:
    /// those changed since last verified, or all of them with
    /// [`verify`](Self::verify) (0 without a previous store).
    pub fn segments_read(&self) -> usize {
        self.run.as_ref().map_or(0, |r| r.segments_read)
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
    /// not be read or was made by another model (or without a model id)
    /// than this embed's model id.
    pub fn not_reused(&self) -> Option<&str> {
        self.run.as_ref().and_then(|r| r.not_reused.as_deref())
    }

    /// Why an interrupted embed was not resumed, where it was of another
    /// model or no model id was given (it is started over, never mixed).
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
        let r = self.write_rows(b, bytes, dim);
        r.map_err(|e| explain(self.cache.as_ref(), e))
    }

    fn write_rows(&mut self, b: usize, bytes: &[u8], dim: usize) -> Result<()> {
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
        let cache = self.cache.take();
        self.publish(cache.as_ref().map(|(dir, _)| dir.as_path()))
            .map_err(|e| explain(cache.as_ref(), e))
    }

    /// Publishes the staged store; `cache` is the cache's directory, read
    /// again around the swap: a build that published the cache while the
    /// embed ran makes the store stale on arrival (readers refuse it), so
    /// that is an error naming the fix, never a success.
    fn publish(&mut self, cache: Option<&Path>) -> Result<StoreMeta> {
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
        // Before the progress goes: the next embed then says why it
        // starts over.
        let rebuilt = |published: bool| -> Result<()> {
            let Some(dir) = cache else { return Ok(()) };
            let now = current_content_id(dir);
            if now.as_deref() == Some(run.plan.cache_content_id.as_str()) {
                return Ok(());
            }
            Err(EmbeddingError::Damaged {
                path: dir.to_path_buf(),
                reason: format!(
                    "a build published this cache while the embed ran (content {} when the \
                     embed began, {} now): {}; run the embed again, for the new content",
                    run.plan.cache_content_id,
                    now.as_deref().unwrap_or("unreadable"),
                    if published {
                        "the store just published is of the old content, which every reader \
                         refuses"
                    } else {
                        "its store would be of the old content, which every reader refuses, so \
                         it was not published"
                    }
                ),
            })
        };
        rebuilt(false)?;
        let progress = run.partial.join(PROGRESS_FILE);
        if progress.exists() {
            io(&progress, fs::remove_file(&progress))?;
        }
        sync_path(&run.partial)?;
        // Links keep the previous store's segments alive in the new one.
        let prev = run.prev.take();
        drop(prev);
        // The new store's directory keeps what the operator set on the
        // old one (mode, group).
        if let Ok(old) = fs::metadata(&run.target) {
            io(
                &run.partial,
                crate::output::keep_metadata(&run.partial, &old),
            )?;
        }
        match swap_dir(&run.partial, &run.target) {
            Ok(false) => {}
            Ok(true) => io(&run.partial, fs::remove_dir_all(&run.partial))?,
            Err(e) if e.kind() == std::io::ErrorKind::Unsupported => {
                // No atomic exchange here: replace in two renames, the old
                // store parked at the staging path (a kill in between
                // leaves no store; the next embed recomputes it).
                let parked = run.root.join(format!(
                    ".{}.old",
                    run.target.file_name().unwrap_or_default().to_string_lossy()
                ));
                let _ = fs::remove_dir_all(&parked);
                io(&run.target, fs::rename(&run.target, &parked))?;
                io(&run.target, fs::rename(&run.partial, &run.target))?;
                io(&parked, fs::remove_dir_all(&parked))?;
            }
            Err(e) => return Err(io_err(&run.target, e)),
        }
        sync_path(&run.root)?;
        // A build that published between the check and the swap.
        rebuilt(true)?;
        // The record last, still under the lock: after the old store's
        // links are gone (removing them changed the shared segments'
        // ctime). A kill before it leaves no record of the new store, and
        // the next nightly verifies it in full.
        record::fault_before_record();
        record::write(&run.record, &run.target, &meta);
        Ok(meta)
    }
}

/// The content id of the cache at `dir` now (as `ThreadSource::content_id`:
/// the xxh3 of its manifest's bytes), None if it cannot be read.
fn current_content_id(dir: &Path) -> Option<String> {
    let bytes = fs::read(dir.join(crate::format::files::MANIFEST_FILE)).ok()?;
    Some(format!("{:016x}", xxhash_rust::xxh3::xxh3_64(&bytes)))
}

/// The (device, inode) of the manifest of the cache at `dir`; (0, 0) if
/// there is none.
fn manifest_id(dir: &Path) -> (u64, u64) {
    fs::metadata(dir.join(crate::format::files::MANIFEST_FILE))
        .map_or((0, 0), |m| (m.dev(), m.ino()))
}

/// A file of the embed's own gone missing, said as what happened: a build
/// published the cache meanwhile (it carries derived/, and so this embed's
/// staging files, into the new cache), rather than a bare "No such file or
/// directory".
fn explain(cache: Option<&(PathBuf, (u64, u64))>, e: EmbeddingError) -> EmbeddingError {
    let EmbeddingError::Io { path, source } = &e else {
        return e;
    };
    let Some((dir, id)) = cache else {
        return e;
    };
    if source.kind() != std::io::ErrorKind::NotFound
        || !(parked_derived(dir).is_some() || manifest_id(dir) != *id)
    {
        return e;
    }
    EmbeddingError::Damaged {
        path: dir.clone(),
        reason: format!(
            "a build published this cache while the embed ran, and {} went with the old \
             cache's derived/ ({source}): run the embed again, for the new content",
            path.display()
        ),
    }
}
