//! Opening an embedding store (format: [`super::format`]): every check
//! once, at open, as for the cache's shards, then rows read straight from
//! the segments' memory maps.

use std::fs::File;
use std::path::{Path, PathBuf};

use memmap2::Mmap;
use zerocopy::FromBytes;

use super::format::{
    Dtype, INDEX_FILE, KEYS_FILE, META_FILE, NO_ROW, STORE_FORMAT, STORE_VERSION, STORES_DIR,
    StoreMeta, VERIFIED_FORMAT, VerifiedRecord, parse_npy, verified_name,
};
use crate::error::EmbeddingError;
use crate::format::files::{CacheFiles, DERIVED_DIR};
use crate::read::ThreadSource;

type Result<T, E = EmbeddingError> = std::result::Result<T, E>;

/// One row segment, mapped.
struct Segment {
    path: PathBuf,
    map: Mmap,
    /// Where the rows start in the map.
    at: usize,
    /// Its first global row.
    first: usize,
    rows: usize,
}

/// One embedding store of a cache, opened and verified: its metadata, its
/// row segments (`[rows, dim]` each, float32 or float16), each row's
/// content key and each reaction's global row.
///
/// [`EmbeddingStore::open`] checks everything once: the metadata, that the
/// store belongs to the cache's current content, every file's size and
/// xxh3 checksum, the `.npy` headers (dtype, C order, shape), every index
/// entry, and that every value is finite. After that, reads are copies
/// out of the memory maps.
pub struct EmbeddingStore {
    dir: PathBuf,
    meta: StoreMeta,
    dtype: Dtype,
    segments: Vec<Segment>,
    index: Mmap,
    index_at: usize,
    keys: Mmap,
    keys_at: usize,
    /// Segments whose bytes the open read and checked (all but those a
    /// [`Verify::Changed`] open found unchanged since verified).
    segments_read: usize,
}

impl std::fmt::Debug for EmbeddingStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddingStore")
            .field("dir", &self.dir)
            .field("name", &self.meta.name)
            .field("dtype", &self.dtype)
            .field("unique", &self.meta.unique)
            .field("rows", &self.meta.rows)
            .field("segments", &self.segments.len())
            .field("dim", &self.meta.dim)
            .finish()
    }
}

pub(super) fn damaged(path: &Path, reason: impl Into<String>) -> EmbeddingError {
    EmbeddingError::Damaged {
        path: path.to_owned(),
        reason: reason.into(),
    }
}

/// The stores under `derived/` (names of directories not starting with '.').
pub(crate) fn store_names(derived: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(derived.join(STORES_DIR))
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| !n.starts_with('.'))
        .collect();
    names.sort();
    names
}

/// How long an open waits for a build's swap to put `derived/` back:
/// [`PARKED_WAITS`] sleeps of this (5 s in all; the swap follows the move
/// at once, so only a build killed in between, or a machine stalled that
/// long, makes an open wait it all).
const PARKED_WAIT: std::time::Duration = std::time::Duration::from_millis(10);
const PARKED_WAITS: u32 = 500;
/// Opens of a store tried, besides the waits for a parked derived/, before
/// the last error is the answer (see `open_checked`).
const OPEN_TRIES: u32 = 8;

/// The `derived/` of the cache at `dir` that a build's temporary directory
/// holds, if any (see `ingest::publish`).
pub(super) fn parked_derived(dir: &Path) -> Option<PathBuf> {
    let files = CacheFiles::new(&std::fs::canonicalize(dir).ok()?).ok()?;
    std::fs::read_dir(files.parent())
        .ok()?
        .flatten()
        .filter(|e| files.is_temp_name(&e.file_name().to_string_lossy()))
        .map(|e| e.path().join(DERIVED_DIR))
        .find(|d| std::fs::symlink_metadata(d).is_ok())
}

/// A store name must be a plain file name not starting with '.'.
pub(crate) fn check_name(name: &str) -> Result<()> {
    if name.is_empty() || name.starts_with('.') || name.contains(['/', '\0']) {
        return Err(EmbeddingError::Damaged {
            path: PathBuf::from(name),
            reason: "a store name must be a non-empty file name not starting with '.'".into(),
        });
    }
    Ok(())
}

fn map(path: &Path) -> Result<Mmap> {
    let file = File::open(path).map_err(|e| damaged(path, e.to_string()))?;
    map_file(path, &file)
}

fn map_file(path: &Path, file: &File) -> Result<Mmap> {
    // SAFETY: every file of a store is written whole before it is
    // published (by an atomic rename of its directory) and never written
    // in place afterwards: a later embed writes new files and links the
    // old segments, whose bytes stay as they are.
    unsafe { Mmap::map(file) }.map_err(|e| damaged(path, e.to_string()))
}

/// The position of the first element of `xs` that is `bad`, checked in
/// branch-free blocks: a store is checked in full at every open, and a
/// short-circuiting scan does not vectorise (opening a 25 MB float32 store
/// took 12 ms with one, 5 ms with blocks of 4,096).
pub(super) fn first_where<T: Copy>(xs: &[T], bad: impl Fn(T) -> bool) -> Option<usize> {
    const BLOCK: usize = 4096;
    xs.chunks(BLOCK)
        .position(|c| c.iter().fold(false, |any, &x| any | bad(x)))
        .and_then(|b| {
            let at = b * BLOCK;
            xs[at..].iter().position(|&x| bad(x)).map(|i| at + i)
        })
}

/// Whether any value of a row buffer (`dtype` as raw bytes) is an infinity
/// or a NaN: an all-ones exponent.
pub(super) fn non_finite(dtype: Dtype, bytes: &[u8]) -> bool {
    const F32_EXPONENT: u32 = 0x7f80_0000;
    const F16_EXPONENT: u16 = 0x7c00;
    match dtype {
        Dtype::F16 => <[u16]>::ref_from_bytes(bytes)
            .ok()
            .and_then(|xs| first_where(xs, |h| h & F16_EXPONENT == F16_EXPONENT))
            .is_some(),
        _ => <[u32]>::ref_from_bytes(bytes)
            .ok()
            .and_then(|xs| first_where(xs, |x| x & F32_EXPONENT == F32_EXPONENT))
            .is_some(),
    }
}

/// Size and checksum of `bytes` against what the metadata records.
fn check_sum(path: &Path, bytes: &[u8], want_bytes: u64, want_xxh3: &str) -> Result<()> {
    if bytes.len() as u64 != want_bytes {
        return Err(damaged(
            path,
            format!(
                "{} bytes, the metadata says {want_bytes} (damaged store)",
                bytes.len()
            ),
        ));
    }
    if format!("{:016x}", xxhash_rust::xxh3::xxh3_64(bytes)) != want_xxh3 {
        return Err(damaged(path, "checksum mismatch (damaged store)"));
    }
    Ok(())
}

/// Checks a mapped `.npy` file's header against its expected dtype and
/// shape; returns where the data starts.
pub(super) fn check_npy(path: &Path, bytes: &[u8], dtype: Dtype, shape: &[usize]) -> Result<usize> {
    let header = parse_npy(bytes).map_err(|r| damaged(path, r))?;
    if header.descr != dtype.descr() {
        return Err(damaged(
            path,
            format!("dtype {}, expected {}", header.descr, dtype.descr()),
        ));
    }
    if header.fortran_order {
        return Err(damaged(path, "Fortran-ordered array; stores are C-ordered"));
    }
    if header.shape != shape {
        return Err(damaged(
            path,
            format!("shape {:?}, expected {shape:?}", header.shape),
        ));
    }
    let data = shape.iter().product::<usize>() * dtype.size();
    if header.data_offset % dtype.size() != 0
        || bytes.len() - header.data_offset.min(bytes.len()) != data
    {
        return Err(damaged(
            path,
            format!(
                "{} bytes of data after the header, the shape needs {data}",
                bytes.len().saturating_sub(header.data_offset)
            ),
        ));
    }
    Ok(header.data_offset)
}

/// How much of a store [`EmbeddingStore::open_checked`] verifies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verify {
    /// Everything: every file's checksum, every index entry, finite rows.
    All,
    /// Every file's checksum and index entry, but not the values: a
    /// nightly embed about to link the segments. The writer refused
    /// non-finite rows and the checksum proves the bytes unchanged since;
    /// the finite pass doubled the nightly's cost at 1,024 dimensions.
    Checksums,
    /// As `Checksums`, but a segment the store's verified record
    /// ([`VerifiedRecord`]) vouches for, its stat unchanged since, is not
    /// read: a nightly embed, whose cost then follows the night's change
    /// and not the store's size. Its header is still checked (one page).
    Changed,
}

/// The verified record of store `name` under `derived/`, if there is one
/// that reads as one: anything else (unreadable, mangled, of another
/// store) is no record, never an error, so that a bad record costs a full
/// verification and nothing more.
pub(super) fn read_record(derived: &Path, name: &str) -> Option<VerifiedRecord> {
    let path = derived.join(STORES_DIR).join(verified_name(name));
    // Not blocking (a FIFO there would hang the embed), a plain file, and
    // a few hundred bytes per segment: a huge file is not a record.
    use std::os::unix::fs::OpenOptionsExt;
    let file = File::options()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(&path)
        .ok()?;
    let stat = file.metadata().ok()?;
    if !stat.is_file() || stat.len() > 1 << 20 {
        return None;
    }
    let record: VerifiedRecord = serde_json::from_reader(std::io::BufReader::new(file)).ok()?;
    (record.format == VERIFIED_FORMAT && record.name == name).then_some(record)
}

/// Reads and checks a store's `meta.json` (version 2 upgraded to 3).
pub(super) fn read_meta(dir: &Path, derived: &Path, name: &str) -> Result<StoreMeta> {
    let meta_path = dir.join(META_FILE);
    let text = match std::fs::read(&meta_path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(EmbeddingError::Missing {
                path: dir.to_owned(),
                name: name.to_owned(),
                have: store_names(derived),
            });
        }
        Err(e) => return Err(damaged(&meta_path, e.to_string())),
    };
    let meta: StoreMeta = serde_json::from_slice(&text)
        .map_err(|e| damaged(&meta_path, format!("unreadable store metadata: {e}")))?;
    let meta = meta.upgrade();
    if meta.format != STORE_FORMAT || meta.version != STORE_VERSION {
        return Err(damaged(
            &meta_path,
            format!(
                "not a socialctx embedding store of version 2 or {STORE_VERSION} (format {:?}, \
                 version {}); embed it again with this version (socialctx.embed)",
                meta.format, meta.version
            ),
        ));
    }
    if Dtype::of_meta(&meta.dtype).is_none() {
        return Err(damaged(
            &meta_path,
            format!("dtype {:?} is not float32 or float16", meta.dtype),
        ));
    }
    if let Some(s) = meta
        .segments
        .iter()
        .find(|s| s.file.starts_with('.') || s.file.contains(['/', '\\', '\0']))
    {
        return Err(damaged(
            &meta_path,
            format!("segment file {:?} is not a file name in the store", s.file),
        ));
    }
    let in_segments: usize = meta.segments.iter().map(|s| s.rows).sum();
    if in_segments != meta.rows
        || meta.unique > meta.rows
        || (meta.dim == 0) != (meta.rows == 0)
        || meta.segments.iter().any(|s| s.rows == 0)
    {
        return Err(damaged(
            &meta_path,
            format!(
                "{} rows of dimension {} ({} of them used) in segments of {:?} rows",
                meta.rows,
                meta.dim,
                meta.unique,
                meta.segments.iter().map(|s| s.rows).collect::<Vec<_>>()
            ),
        ));
    }
    Ok(meta)
}

impl EmbeddingStore {
    /// "No row": the [`index`](Self::index) entry of a reaction with no
    /// input (a retweet, a reply whose tokens are `[]`, no description),
    /// which reads as zeros; also [`UniqueTexts::NONE`](crate::UniqueTexts::NONE).
    pub const NO_ROW: u32 = crate::schema::NO_ROW;

    /// Opens embedding store `name` of `cache` (made by
    /// [`StoreWriter`](crate::StoreWriter) or `socialctx.embed`), verified
    /// in full and checked to belong to this content of the cache.
    pub fn open<C: ThreadSource + ?Sized>(cache: &C, name: &str) -> Result<EmbeddingStore> {
        let content = cache.content_id();
        let reactions = cache.manifest().reactions;
        Self::open_checked(
            &cache.derived_dir(),
            Some((&content, reactions)),
            name,
            Verify::All,
        )
    }

    /// Opens embedding store `name` of `cache` verified in full, whatever
    /// cache content it was computed for.
    pub fn open_any_content<C: ThreadSource + ?Sized>(
        cache: &C,
        name: &str,
    ) -> Result<EmbeddingStore> {
        Self::open_checked(&cache.derived_dir(), None, name, Verify::All)
    }

    /// Opens store `name` under `derived/`, of whatever cache content it
    /// was computed for unless `for_content` checks it (the content id and
    /// the reaction count), verified as `verify` says.
    pub(crate) fn open_checked(
        derived: &Path,
        for_content: Option<(&str, u64)>,
        name: &str,
        verify: Verify,
    ) -> Result<EmbeddingStore> {
        check_name(name)?;
        let dir = derived.join(STORES_DIR).join(name);
        // An embed publishes by swapping in a new directory: files opened
        // by path across a swap mix two stores (the old metadata, the new
        // segments: a "checksum mismatch (damaged store)" for a store that
        // is fine). The directory held open cannot be reused and a
        // swapped-out store never comes back, so the path naming it at the
        // end means no swap happened in between; else open again.
        //
        // A build publishing the cache moves derived/ (the stores) into its
        // staging directory just before its swap and back with it: an open
        // overlapping that fails on whatever file it reached while derived/
        // was away, or finds it back before it looks for it parked. So an
        // error is the answer only when nothing is parked and the next open
        // gives the same one (a store that is missing or damaged is opened
        // twice, a moved one is found).
        let (mut replaced, mut waited, mut tries) = (0, 0, 0);
        let mut last_error: Option<String> = None;
        loop {
            tries += 1;
            let held = File::open(&dir).ok();
            let opened = Self::open_once(derived, &dir, for_content, name, verify);
            // Whether the path names the held directory still (`same`), or
            // another one now (`swapped`: an embed published meanwhile).
            let (same, swapped) = held.as_ref().map_or((false, false), |h| {
                use std::os::unix::fs::MetadataExt;
                match (h.metadata(), std::fs::metadata(&dir)) {
                    (Ok(a), Ok(b)) => {
                        let same = (a.dev(), a.ino()) == (b.dev(), b.ino());
                        (same, !same)
                    }
                    _ => (false, false),
                }
            });
            // The directory was swapped while being opened: an embed
            // published (or derived/ was away when it was taken). An error
            // from an open across a swap may be the swap's (two such opens
            // in a row gave the same "checksum mismatch (damaged store)"
            // for a store that is fine): counted as a swap, never the answer.
            let across_swap = match &opened {
                Ok(_) => !same,
                Err(_) => swapped,
            };
            if across_swap {
                if held.is_some() {
                    replaced += 1;
                }
                if replaced == 3 || tries >= OPEN_TRIES {
                    return Err(damaged(
                        &dir,
                        "the store was replaced three times while being opened (an embed \
                         is publishing it); open it again",
                    ));
                }
                continue;
            }
            let error = match opened {
                Ok(store) => return Ok(store),
                Err(e) => e,
            };
            if let Some(parked) = derived.parent().and_then(parked_derived) {
                if waited < PARKED_WAITS {
                    waited += 1;
                    std::thread::sleep(PARKED_WAIT);
                    continue;
                }
                return Err(damaged(
                    &parked,
                    "a build of the cache moved its derived/ (the embedding stores) here while \
                     publishing and was interrupted, or is still publishing: run the build \
                     again (it puts derived/ back), then open the store again",
                ));
            }
            let said = error.to_string();
            if last_error.as_deref() == Some(said.as_str()) || tries >= OPEN_TRIES {
                return Err(error);
            }
            last_error = Some(said);
        }
    }

    fn open_once(
        derived: &Path,
        dir: &Path,
        for_content: Option<(&str, u64)>,
        name: &str,
        verify: Verify,
    ) -> Result<EmbeddingStore> {
        let dir = dir.to_owned();
        let meta = read_meta(&dir, derived, name)?;
        let record = match verify {
            Verify::Changed => read_record(derived, name),
            _ => None,
        };
        let meta_path = dir.join(META_FILE);
        if let Some((content_id, _)) = for_content
            && meta.cache_content_id != content_id
        {
            return Err(EmbeddingError::OtherContent {
                path: dir,
                name: name.to_owned(),
                found: meta.cache_content_id,
                expected: content_id.to_owned(),
            });
        }
        if let Some((_, reactions)) = for_content
            && meta.reactions as u64 != reactions
        {
            return Err(damaged(
                &meta_path,
                format!(
                    "the store indexes {} reactions, the cache has {reactions}",
                    meta.reactions
                ),
            ));
        }
        let dtype = Dtype::of_meta(&meta.dtype).unwrap_or(Dtype::F32);
        let small = |file: &str, elem: Dtype, shape: &[usize]| -> Result<(Mmap, usize)> {
            let path = dir.join(file);
            let want = meta
                .files
                .get(file)
                .ok_or_else(|| damaged(&meta_path, format!("{META_FILE} lists no {file}")))?;
            let m = map(&path)?;
            check_sum(&path, &m, want.bytes, &want.xxh3)?;
            let at = check_npy(&path, &m, elem, shape)?;
            Ok((m, at))
        };
        let (index, index_at) = small(INDEX_FILE, Dtype::U32, &[meta.reactions])?;
        let (keys, keys_at) = small(KEYS_FILE, Dtype::U64, &[meta.rows, 2])?;
        let mut segments = Vec::with_capacity(meta.segments.len());
        let starts = meta.segment_starts();
        let mut segments_read = 0;
        for (s, &first) in meta.segments.iter().zip(&starts) {
            let path = dir.join(&s.file);
            let file = File::open(&path).map_err(|e| damaged(&path, e.to_string()))?;
            // The stat of the file mapped, not of whatever the path names
            // a moment later.
            let vouched = record.as_ref().is_some_and(|r| {
                file.metadata()
                    .is_ok_and(|stat| r.segments.iter().any(|v| v.vouches_for(s, &stat, r.at_ns)))
            });
            let m = map_file(&path, &file)?;
            if !vouched {
                check_sum(&path, &m, s.bytes, &s.xxh3)?;
                segments_read += 1;
            }
            let at = check_npy(&path, &m, dtype, &[s.rows, meta.dim])?;
            if verify == Verify::All && non_finite(dtype, &m[at..]) {
                return Err(damaged(&path, "non-finite values (damaged store)"));
            }
            segments.push(Segment {
                path,
                map: m,
                at,
                first,
                rows: s.rows,
            });
        }
        let store = EmbeddingStore {
            dir,
            meta,
            dtype,
            segments,
            index,
            index_at,
            keys,
            keys_at,
            segments_read,
        };
        let rows = store.meta.rows;
        if let Some(at) = first_where(store.index(), |r| r != NO_ROW && r as usize >= rows) {
            return Err(damaged(
                &store.dir.join(INDEX_FILE),
                format!("entry {at} points past the {rows} rows"),
            ));
        }
        Ok(store)
    }

    /// Verifies store `name` of `cache` in full, whatever cache content it
    /// was computed for and whatever its verified record says: every
    /// file's size and checksum, the headers, every index entry, finite
    /// rows, as every reader's open does (an explicit check, e.g. after a
    /// disk fault, or before trusting the record of a nightly embed: a
    /// segment damaged without a change to its stat, by the disk itself,
    /// is linked unread by a nightly embed and refused by every reader).
    /// Damage found drops the store's verified record, so that the next
    /// nightly embed verifies every segment and recomputes the damaged
    /// rows. Returns the store's metadata.
    pub fn verify<C: ThreadSource + ?Sized>(cache: &C, name: &str) -> Result<StoreMeta> {
        let derived = cache.derived_dir();
        match Self::open_checked(&derived, None, name, Verify::All) {
            Ok(store) => Ok(store.meta),
            Err(e) => {
                if matches!(e, EmbeddingError::Damaged { .. }) && check_name(name).is_ok() {
                    let record = derived.join(STORES_DIR).join(verified_name(name));
                    let _ = std::fs::remove_file(record);
                }
                Err(e)
            }
        }
    }

    /// Segments whose bytes the open read and checked: all of them, but
    /// for a nightly embed's open of the store it reuses.
    pub(crate) fn segments_read(&self) -> usize {
        self.segments_read
    }

    /// The store's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Its metadata.
    pub fn meta(&self) -> &StoreMeta {
        &self.meta
    }

    /// The model id the store was made with (`meta.json`'s `model_id`),
    /// if it was given one.
    pub fn model_id(&self) -> Option<&str> {
        self.meta.model_id.as_deref()
    }

    /// Refuses a store made by another model than `model_id`, or made
    /// without a model id ([`EmbeddingError::OtherModel`], naming both):
    /// rows of two models have the same shape, and a training run given
    /// the wrong one reads it without a word.
    pub fn require_model(&self, model_id: &str) -> Result<()> {
        if self.model_id() == Some(model_id) {
            return Ok(());
        }
        Err(EmbeddingError::OtherModel {
            path: self.dir.clone(),
            name: self.meta.name.clone(),
            found: self.meta.model_id.clone(),
            expected: model_id.to_owned(),
        })
    }

    /// Row width.
    pub fn dim(&self) -> usize {
        self.meta.dim
    }

    /// Distinct inputs of the cache (the rows some reaction uses).
    pub fn unique(&self) -> usize {
        self.meta.unique
    }

    /// Rows in all segments (global rows are `0..rows`).
    pub fn rows(&self) -> usize {
        self.meta.rows
    }

    /// Whether rows are float16 (else float32).
    pub fn is_half(&self) -> bool {
        self.dtype == Dtype::F16
    }

    /// Each reaction's global row (cache order), [`NO_ROW`](Self::NO_ROW) for none.
    pub fn index(&self) -> &[u32] {
        <[u32]>::ref_from_bytes(&self.index[self.index_at..]).unwrap_or(&[])
    }

    /// Each global row's content key, as [`UniqueTexts::key`](crate::UniqueTexts::key)
    /// computes it.
    pub fn keys(&self) -> impl Iterator<Item = u128> + '_ {
        <[u64]>::ref_from_bytes(&self.keys[self.keys_at..])
            .unwrap_or(&[])
            .chunks_exact(2)
            .map(|k| u128::from(k[0]) | (u128::from(k[1]) << 64))
    }

    /// The segments: per segment its file, its first global row and its
    /// rows' bytes (`[rows, dim]` of the store's dtype, little-endian).
    pub fn segments(&self) -> impl Iterator<Item = (&Path, usize, &[u8])> + '_ {
        self.segments
            .iter()
            .map(|s| (s.path.as_path(), s.first, &s.map[s.at..]))
    }

    /// The bytes of global row `row`, if there is one.
    pub fn row_bytes(&self, row: usize) -> Option<&[u8]> {
        let k = self
            .segments
            .partition_point(|s| s.first <= row)
            .checked_sub(1)?;
        let s = &self.segments[k];
        let width = self.meta.dim * self.dtype.size();
        let local = row - s.first;
        (local < s.rows).then(|| &s.map[s.at + local * width..s.at + (local + 1) * width])
    }

    /// Copies the rows named by `rows` (global rows, -1: zeros) into `out`,
    /// `dim` values each: float32 stores into `f32`, float16 stores into
    /// `u16` bits.
    pub fn gather<T: Copy + Default + FromBytes + zerocopy::Immutable>(
        &self,
        rows: &[i32],
        out: &mut [T],
    ) {
        self.gather_over(rows, None, out);
    }

    /// As [`gather`](Self::gather) into an `out` that already holds the
    /// rows of `previous` (the same layout): slots that were and stay -1
    /// are left as they are (zeros), so a `[B, max_cxt]` batch, mostly
    /// padding, costs only its real rows.
    pub fn gather_over<T: Copy + Default + FromBytes + zerocopy::Immutable>(
        &self,
        rows: &[i32],
        previous: Option<&[i32]>,
        out: &mut [T],
    ) {
        let mut seg = None;
        for (slot, (dst, &row)) in out
            .chunks_exact_mut(self.meta.dim.max(1))
            .zip(rows)
            .enumerate()
        {
            if row < 0 && previous.is_some_and(|p| p.get(slot) == Some(&-1)) {
                continue;
            }
            self.copy_row(row, &mut seg, dst);
        }
    }

    /// Copies global row `row` (-1: zeros) into `dst`, `dim` values, through
    /// `seg`, the segment the caller's last row fell in: consecutive rows
    /// of a batch mostly fall in the same one, so the search runs at
    /// segment changes only (start with `None`).
    pub(crate) fn copy_row<'s, T: Copy + Default + FromBytes + zerocopy::Immutable>(
        &'s self,
        row: i32,
        seg: &mut Option<(usize, usize, &'s [T])>,
        dst: &mut [T],
    ) {
        let dim = self.meta.dim;
        let fits = std::mem::size_of::<T>() == self.dtype.size();
        let Some(r) = usize::try_from(row).ok().filter(|_| fits) else {
            dst.fill(T::default());
            return;
        };
        if !seg.is_some_and(|(first, end, _)| (first..end).contains(&r)) {
            let k = self.segments.partition_point(|s| s.first <= r);
            *seg = k.checked_sub(1).map(|k| {
                let s = &self.segments[k];
                let data = <[T]>::ref_from_bytes(&s.map[s.at..]).unwrap_or(&[]);
                (s.first, s.first + s.rows, data)
            });
        }
        match seg.and_then(|(first, _, data)| data.get((r - first) * dim..(r - first + 1) * dim)) {
            Some(from) => dst.copy_from_slice(from),
            None => dst.fill(T::default()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::first_where;

    #[test]
    fn first_where_finds_the_first_bad_element_in_any_block() {
        let n = 3 * 4096 + 17;
        assert_eq!(first_where(&vec![1.0f32; n], |x| !x.is_finite()), None);
        for at in [0, 1, 4095, 4096, 8191, 2 * 4096 + 5, n - 1] {
            let mut xs = vec![1.0f32; n];
            xs[at] = f32::INFINITY;
            // A later one never hides the first.
            xs[n - 1] = f32::NAN;
            assert_eq!(first_where(&xs, |x| !x.is_finite()), Some(at), "{at}");
        }
        assert_eq!(first_where::<u32>(&[], |_| true), None);
    }
}
