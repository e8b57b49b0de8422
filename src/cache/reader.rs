//! Reading a cache: validate once, then zero-copy views into memory maps.
//!
//! [`Cache::open`] reads the manifest, memory-maps every shard file and
//! checks it (footer magic and version, length, xxh3 against the footer and
//! the manifest, rkyv bytecheck, and the invariants the views rely on: ids in
//! order, reaction ranges in bounds, one feature row per reaction, texts
//! aligned with numbers). Any failure is a typed [`Error`] naming the file.
//! After that, every access is a pointer into the map: no parsing, no copying.
//!
//! [`LazyCache`] does the same checks per file on first use, and keeps the
//! numbers (`shard-*.rkyv`) apart from the texts (`text-*.rkyv`): a training
//! loop that only reads features ([`NumView`]) never validates or pages in
//! the texts.
//!
//! ```no_run
//! use socialctx::cache::Cache;
//! let cache = Cache::open("target/socialctx-cache".as_ref())?;
//! for thread in cache.iter() {
//!     let features: &[[f32; 28]] = thread.features();
//!     println!("{} {} reactions", thread.source_id(), features.len());
//! }
//! if let Some(t) = cache.get(552783667052167168) {
//!     println!("{}", t.source_text());
//! }
//! # Ok::<(), socialctx::Error>(())
//! ```

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use memmap2::Mmap;
use xxhash_rust::xxh3::xxh3_64;
use zerocopy::{FromBytes, IntoBytes};

use super::manifest::FileInfo;
use super::manifest::{Manifest, hex64};
use super::{
    ArchivedReactionRecord, ArchivedShard, ArchivedSpan, ArchivedTextShard, ArchivedThreadRecord,
    FOOTER_LEN, FORMAT_NAME, FORMAT_VERSION, MANIFEST_FILE, SHARD_MAGIC, ShardInfo,
};
use crate::discover::ReactionKind;
use crate::error::{Error, Result};
use crate::features::{FEATURE_NAMES, FeatureVec, NUM_FEATURES};
use crate::report::{BadInput, read_jsonl};

#[cfg(not(target_endian = "little"))]
compile_error!("socialctx caches store little-endian f32; big-endian targets are not supported");

/// A checked, memory-mapped archive file.
struct Mapped {
    map: Mmap,
    archive_len: usize,
}

impl Mapped {
    fn bytes(&self) -> &[u8] {
        &self.map[..self.archive_len]
    }
}

/// Lazily mapped and validated files of one shard.
struct ShardSlot {
    numbers_path: PathBuf,
    text_path: PathBuf,
    /// Index of the shard's first thread in the whole cache.
    first_thread: usize,
    numbers: OnceLock<std::result::Result<Mapped, String>>,
    text: OnceLock<std::result::Result<Mapped, String>>,
}

/// What [`Cache`] and [`LazyCache`] share: the manifest and the shard slots.
struct Core {
    dir: PathBuf,
    manifest: Manifest,
    shards: Vec<ShardSlot>,
    len: usize,
}

/// Views a shard's feature block as native `f32` rows (zero-copy).
fn feature_rows(shard: &ArchivedShard) -> Option<&[FeatureVec]> {
    <[FeatureVec]>::ref_from_bytes(shard.features.as_slice().as_bytes()).ok()
}

fn plain_name(name: &str) -> bool {
    Path::new(name).file_name().is_some_and(|n| n == name)
}

/// Opens a cache file read-only without blocking (a FIFO put in place of a
/// shard must not hang `open`) and only if it is a regular file.
fn open_regular(path: &Path) -> Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| Error::io(path, e))?;
    let meta = file.metadata().map_err(|e| Error::io(path, e))?;
    if !meta.is_file() {
        return Err(Error::corrupt(path, "not a regular file"));
    }
    Ok(file)
}

fn read_manifest(dir: &Path) -> Result<Manifest> {
    let path = dir.join(MANIFEST_FILE);
    let mut bytes = Vec::new();
    match open_regular(&path) {
        Ok(mut f) => {
            std::io::Read::read_to_end(&mut f, &mut bytes).map_err(|e| Error::io(&path, e))?;
        }
        Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            return Err(Error::CacheMissing(dir.to_path_buf()));
        }
        Err(e) => return Err(e),
    }
    let manifest: Manifest = serde_json::from_slice(&bytes)
        .map_err(|e| Error::corrupt(&path, format!("manifest is not valid: {e}")))?;
    if manifest.format != FORMAT_NAME {
        return Err(Error::corrupt(
            &path,
            format!("format is {:?}, expected {FORMAT_NAME:?}", manifest.format),
        ));
    }
    if manifest.format_version != FORMAT_VERSION {
        return Err(Error::UnsupportedVersion {
            path,
            found: manifest.format_version,
            expected: FORMAT_VERSION,
        });
    }
    if manifest
        .feature_names
        .iter()
        .map(String::as_str)
        .ne(FEATURE_NAMES)
    {
        return Err(Error::corrupt(
            &path,
            "feature names differ from this library's",
        ));
    }
    if !plain_name(&manifest.report.file) {
        return Err(Error::corrupt(
            &path,
            format!(
                "report {:?} is not a plain file name inside the cache",
                manifest.report.file
            ),
        ));
    }
    let mut prev_last: Option<u64> = None;
    for info in &manifest.shards {
        if info.threads == 0
            || info.first_source_id > info.last_source_id
            || prev_last.is_some_and(|p| p >= info.first_source_id)
            || !plain_name(&info.file)
            || !plain_name(&info.text.file)
        {
            return Err(Error::corrupt(
                &path,
                format!(
                    "shard {:?} is empty, out of order or not a plain file name",
                    info.file
                ),
            ));
        }
        prev_last = Some(info.last_source_id);
    }
    // Checked sums: huge per-shard counts must not wrap around to the totals.
    let total = |count: fn(&ShardInfo) -> u64| {
        manifest
            .shards
            .iter()
            .try_fold(0u64, |sum, s| sum.checked_add(count(s)))
    };
    if total(|s| s.threads) != Some(manifest.threads)
        || total(|s| s.reactions) != Some(manifest.reactions)
        || usize::try_from(manifest.threads).is_err()
    {
        return Err(Error::corrupt(&path, "totals do not match the shards"));
    }
    Ok(manifest)
}

/// Maps `path` and checks its footer and checksum against `info`.
fn map_archive(path: &Path, info: &FileInfo) -> Result<Mapped> {
    let bad = |reason: String| Error::corrupt(path, reason);
    let file = open_regular(path)?;
    let file_len = file.metadata().map_err(|e| Error::io(path, e))?.len();
    if file_len != info.bytes {
        return Err(bad(format!(
            "file is {file_len} bytes, the manifest says {} (truncated or replaced)",
            info.bytes
        )));
    }
    if file_len < FOOTER_LEN as u64 {
        return Err(bad("file is too short to hold a footer".into()));
    }
    // SAFETY: the file is opened read-only and cache files are never modified
    // after publication: builds write a new directory and swap it in.
    // Populate: one pass of read-ahead faults instead of one fault per page
    // during the checksum.
    let map = unsafe { memmap2::MmapOptions::new().populate().map(&file) }
        .map_err(|e| Error::io(path, e))?;
    let footer = &map[map.len() - FOOTER_LEN..];
    if footer[..8] != SHARD_MAGIC {
        return Err(bad(
            "footer magic is missing (not a socialctx cache file)".into()
        ));
    }
    let version = u32::from_le_bytes(footer[8..12].try_into().unwrap_or_default());
    if version != FORMAT_VERSION {
        return Err(Error::UnsupportedVersion {
            path: path.to_path_buf(),
            found: version,
            expected: FORMAT_VERSION,
        });
    }
    if footer[12..16] != [0; 4] {
        return Err(bad("footer has unknown flags set".into()));
    }
    let archive_len = u64::from_le_bytes(footer[16..24].try_into().unwrap_or_default());
    if archive_len != file_len - FOOTER_LEN as u64 {
        return Err(bad(format!(
            "footer says the archive is {archive_len} bytes, the file holds {}",
            file_len - FOOTER_LEN as u64
        )));
    }
    let archive_len = archive_len as usize;
    let stored = u64::from_le_bytes(footer[24..32].try_into().unwrap_or_default());
    let actual = xxh3_64(&map[..archive_len]);
    if actual != stored || hex64(actual) != info.xxh3 {
        return Err(bad(format!(
            "checksum mismatch: content {}, footer {}, manifest {}",
            hex64(actual),
            hex64(stored),
            info.xxh3
        )));
    }
    Ok(Mapped { map, archive_len })
}

fn file_info(info: &ShardInfo) -> FileInfo {
    FileInfo {
        file: info.file.clone(),
        bytes: info.bytes,
        xxh3: info.xxh3.clone(),
    }
}

/// Maps and fully checks a shard's numbers file.
fn map_numbers(path: &Path, info: &ShardInfo, columns: (usize, usize)) -> Result<Mapped> {
    let mapped = map_archive(path, &file_info(info))?;
    let shard = rkyv::access::<ArchivedShard, rkyv::rancor::Error>(mapped.bytes())
        .map_err(|e| Error::corrupt(path, format!("archive does not validate: {e}")))?;
    check_shard(shard, info).map_err(|r| Error::corrupt(path, r))?;
    if (shard.reaction_columns.len(), shard.thread_columns.len()) != columns {
        return Err(Error::corrupt(
            path,
            "number of extra columns differs from the manifest",
        ));
    }
    Ok(mapped)
}

/// Maps and fully checks a shard's text file.
fn map_text(path: &Path, info: &ShardInfo) -> Result<Mapped> {
    let mapped = map_archive(path, &info.text)?;
    let text = rkyv::access::<ArchivedTextShard, rkyv::rancor::Error>(mapped.bytes())
        .map_err(|e| Error::corrupt(path, format!("archive does not validate: {e}")))?;
    if text.threads.len() as u64 != info.threads || text.reactions.len() as u64 != info.reactions {
        return Err(Error::corrupt(
            path,
            "texts do not line up with the shard's threads and reactions",
        ));
    }
    // Every span must address whole characters of the arena, so that the
    // views can slice it without checks.
    let arena = text.arena.as_str();
    let ok = |s: &ArchivedSpan, nullable: bool| {
        let (start, len) = (s.start.to_native(), s.len.to_native());
        if nullable && start == u32::MAX && len == 0 {
            return true;
        }
        let (start, end) = (start as usize, start as usize + len as usize);
        end <= arena.len() && arena.is_char_boundary(start) && arena.is_char_boundary(end)
    };
    let threads_ok = text.threads.iter().all(|t| t.iter().all(|s| ok(s, false)));
    let reactions_ok = text
        .reactions
        .iter()
        .all(|[t, d]| ok(t, false) && ok(d, true));
    if !threads_ok || !reactions_ok {
        return Err(Error::corrupt(path, "a text span is out of bounds"));
    }
    Ok(mapped)
}

/// The invariants the views rely on, so that a consistent-looking but wrong
/// archive can never index out of bounds or return another thread's data.
fn check_shard(shard: &ArchivedShard, info: &ShardInfo) -> Result<(), String> {
    let (threads, reactions) = (shard.threads.len(), shard.reactions.len());
    if threads as u64 != info.threads || reactions as u64 != info.reactions {
        return Err(format!(
            "holds {threads} threads and {reactions} reactions, the manifest says {} and {}",
            info.threads, info.reactions
        ));
    }
    if shard.features.len() != reactions {
        return Err(format!(
            "{} feature rows for {reactions} reactions",
            shard.features.len()
        ));
    }
    let Some(rows) = feature_rows(shard) else {
        return Err("feature block is misaligned".into());
    };
    if shard.reaction_columns.iter().any(|c| c.len() != reactions)
        || shard.thread_columns.iter().any(|c| c.len() != threads)
    {
        return Err("an extra column has the wrong length".into());
    }
    let mut next_reaction = 0u64;
    let mut prev_id: Option<u64> = None;
    for t in shard.threads.iter() {
        let id = t.source_id.to_native();
        if prev_id.is_some_and(|p| p >= id) {
            return Err(format!("source ids out of order at {id}"));
        }
        prev_id = Some(id);
        let (first, count) = (
            u64::from(t.first_reaction.to_native()),
            u64::from(t.reaction_count.to_native()),
        );
        if first != next_reaction || first + count > reactions as u64 {
            return Err(format!("thread {id} has a bad reaction range"));
        }
        next_reaction = first + count;
        if !(-1..=1).contains(&t.label_code) {
            return Err(format!(
                "thread {id} has label code {}, not -1, 0 or 1",
                t.label_code
            ));
        }
        // The loader's time window and "earliest max_cxt" rely on this order.
        let range = &shard.reactions[first as usize..(first + count) as usize];
        if let Some(w) = range.windows(2).find(|w| {
            (w[0].created_at.to_native(), w[0].id.to_native())
                > (w[1].created_at.to_native(), w[1].id.to_native())
        }) {
            return Err(format!(
                "thread {id}: reaction {} is out of (created_at, id) order",
                w[1].id.to_native()
            ));
        }
    }
    if next_reaction != reactions as u64 {
        return Err("reactions not covered by any thread".into());
    }
    if shard
        .reactions
        .iter()
        .any(|r| ReactionKind::from_u8(r.kind).is_none())
    {
        return Err("a reaction has an unknown kind".into());
    }
    let c_type = crate::features::index_of("c_type").unwrap_or(NUM_FEATURES - 2);
    if let Some((r, _)) = shard.reactions.iter().zip(rows).find(|(r, f)| {
        let reply = ReactionKind::from_u8(r.kind) == Some(ReactionKind::Reply);
        f[c_type] != if reply { 1.0 } else { 0.0 }
    }) {
        return Err(format!(
            "reaction {}: its kind contradicts its c_type feature",
            r.id.to_native()
        ));
    }
    // Branch-free so that it vectorises: this runs over every feature of the
    // shard when it is first used.
    const EXPONENT: u32 = 0x7f80_0000;
    let non_finite = rows
        .iter()
        .flatten()
        .fold(false, |any, x| any | (x.to_bits() & EXPONENT == EXPONENT));
    if non_finite {
        return Err("a feature is not finite (NaN or infinite)".into());
    }
    let first = shard.threads.first().map_or(0, |t| t.source_id.to_native());
    let last = shard.threads.last().map_or(0, |t| t.source_id.to_native());
    if threads > 0 && (first != info.first_source_id || last != info.last_source_id) {
        return Err("source id range differs from the manifest".into());
    }
    Ok(())
}

/// Runs `check` until it succeeds or finds the file invalid, remembering that
/// outcome; the typed error is returned the first time, a [`Error::Corrupt`]
/// with the same reason after. I/O errors (EMFILE, EIO, a file not there
/// yet) are transient, not verdicts on the file: they are returned and the
/// next access tries again.
fn checked<'s>(
    cell: &'s OnceLock<std::result::Result<Mapped, String>>,
    path: &Path,
    check: impl FnOnce() -> Result<Mapped>,
) -> Result<&'s Mapped> {
    if cell.get().is_none() {
        let outcome = check();
        let keep = match &outcome {
            Ok(_) | Err(Error::Io { .. }) => None,
            Err(Error::Corrupt { reason, .. }) => Some(reason.clone()),
            Err(other) => Some(other.to_string()),
        };
        match (outcome, keep) {
            (Ok(m), _) => {
                let _ = cell.set(Ok(m));
            }
            (Err(e), Some(reason)) => {
                let _ = cell.set(Err(reason));
                return Err(e);
            }
            (Err(e), None) => return Err(e),
        }
    }
    match cell.get() {
        Some(Ok(m)) => Ok(m),
        Some(Err(r)) => Err(Error::corrupt(path, r.clone())),
        None => Err(Error::corrupt(path, "not validated")),
    }
}

impl Core {
    fn open(dir: &Path) -> Result<Core> {
        let manifest = read_manifest(dir)?;
        let mut first_thread = 0usize;
        let shards = manifest
            .shards
            .iter()
            .map(|info| {
                let slot = ShardSlot {
                    numbers_path: dir.join(&info.file),
                    text_path: dir.join(&info.text.file),
                    first_thread,
                    numbers: OnceLock::new(),
                    text: OnceLock::new(),
                };
                first_thread += info.threads as usize;
                slot
            })
            .collect();
        Ok(Core {
            dir: dir.to_path_buf(),
            len: manifest.threads as usize,
            manifest,
            shards,
        })
    }

    /// Shard `i`'s numbers, validated on first use.
    fn numbers(&self, i: usize) -> Result<&ArchivedShard> {
        let slot = &self.shards[i];
        let info = &self.manifest.shards[i];
        let m = checked(&slot.numbers, &slot.numbers_path, || {
            let columns = (
                self.manifest.reaction_columns.len(),
                self.manifest.thread_columns.len(),
            );
            map_numbers(&slot.numbers_path, info, columns)
        })?;
        // SAFETY: `map_numbers` ran `rkyv::access` (bytecheck) and
        // `check_shard` on exactly these bytes, and the map is read-only over
        // a file that is never modified after publication.
        Ok(unsafe { rkyv::access_unchecked::<ArchivedShard>(m.bytes()) })
    }

    /// Shard `i`'s texts, validated on first use.
    fn text(&self, i: usize) -> Result<&ArchivedTextShard> {
        let slot = &self.shards[i];
        let info = &self.manifest.shards[i];
        let m = checked(&slot.text, &slot.text_path, || {
            map_text(&slot.text_path, info)
        })?;
        // SAFETY: as in `numbers`, validated by `map_text`.
        Ok(unsafe { rkyv::access_unchecked::<ArchivedTextShard>(m.bytes()) })
    }

    fn validate_all(&self) -> Result<()> {
        for i in 0..self.shards.len() {
            self.numbers(i)?;
            self.text(i)?;
        }
        Ok(())
    }

    fn locate(&self, i: usize) -> Option<(usize, usize)> {
        if i >= self.len {
            return None;
        }
        let shard = self
            .shards
            .partition_point(|s| s.first_thread <= i)
            .checked_sub(1)?;
        Some((shard, i - self.shards[shard].first_thread))
    }

    fn num_view(&self, shard: usize, index: usize) -> Result<NumView<'_>> {
        let s = self.numbers(shard)?;
        let rec = s.threads.get(index).ok_or_else(|| {
            Error::corrupt(
                &self.shards[shard].numbers_path,
                "thread index out of range",
            )
        })?;
        Ok(NumView {
            shard: s,
            rec,
            index,
            rows: feature_rows(s).unwrap_or_default(),
        })
    }

    fn view(&self, shard: usize, index: usize) -> Result<ThreadView<'_>> {
        let num = self.num_view(shard, index)?;
        let text = self.text(shard)?;
        let thread_text = text.threads.get(index).ok_or_else(|| {
            Error::corrupt(&self.shards[shard].text_path, "thread index out of range")
        })?;
        Ok(ThreadView {
            num,
            text,
            thread_text,
        })
    }

    fn numbers_at(&self, i: usize) -> Result<Option<NumView<'_>>> {
        self.locate(i).map(|(s, j)| self.num_view(s, j)).transpose()
    }

    fn thread(&self, i: usize) -> Result<Option<ThreadView<'_>>> {
        self.locate(i).map(|(s, j)| self.view(s, j)).transpose()
    }

    fn position(&self, source_id: u64) -> Result<Option<usize>> {
        let infos = &self.manifest.shards;
        let shard = infos.partition_point(|s| s.last_source_id < source_id);
        if shard >= infos.len() || infos[shard].first_source_id > source_id {
            return Ok(None);
        }
        let s = self.numbers(shard)?;
        Ok(s.threads
            .binary_search_by_key(&source_id, |t| t.source_id.to_native())
            .ok()
            .map(|i| self.shards[shard].first_thread + i))
    }
}

/// An open cache whose every file has been validated: the accessors cannot fail.
pub struct Cache {
    core: Core,
    report: Vec<BadInput>,
}

impl std::fmt::Debug for Cache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cache")
            .field("dir", &self.core.dir)
            .field("threads", &self.core.len)
            .field("shards", &self.core.shards.len())
            .finish()
    }
}

impl Cache {
    /// Opens the cache in `dir` and validates all of it (every shard file and the report).
    ///
    /// Errors: [`Error::CacheMissing`] when there is no manifest,
    /// [`Error::UnsupportedVersion`] for another format version,
    /// [`Error::Corrupt`] (naming the file) for any damage or inconsistency.
    /// For training loops that should start before every shard is read, see
    /// [`LazyCache`].
    pub fn open(dir: &Path) -> Result<Cache> {
        LazyCache::open(dir)?.validate_all()
    }

    /// The cache directory.
    pub fn dir(&self) -> &Path {
        &self.core.dir
    }

    /// The manifest (counts, build options, shards).
    pub fn manifest(&self) -> &Manifest {
        &self.core.manifest
    }

    /// The bad-input report of the build that wrote this cache.
    pub fn report(&self) -> &[BadInput] {
        &self.report
    }

    /// Index of the extra per-reaction column `name` (e.g. `"depth"`), for
    /// [`NumView::column`].
    pub fn reaction_column(&self, name: &str) -> Option<usize> {
        self.core
            .manifest
            .reaction_columns
            .iter()
            .position(|n| n == name)
    }

    /// Index of the extra per-thread column `name` (e.g. `"veracity"`), for
    /// [`NumView::thread_value`].
    pub fn thread_column(&self, name: &str) -> Option<usize> {
        self.core
            .manifest
            .thread_columns
            .iter()
            .position(|n| n == name)
    }

    /// Number of threads.
    pub fn len(&self) -> usize {
        self.core.len
    }

    /// True when the cache holds no thread.
    pub fn is_empty(&self) -> bool {
        self.core.len == 0
    }

    /// The thread at position `i` (0-based, source-id order).
    pub fn thread(&self, i: usize) -> Option<ThreadView<'_>> {
        // Every file was validated at open, so errors cannot occur here.
        self.core.thread(i).ok().flatten()
    }

    /// Position of the thread with this source id, by binary search: O(log n).
    pub fn position(&self, source_id: u64) -> Option<usize> {
        self.core.position(source_id).ok().flatten()
    }

    /// The thread with this source id: O(log n).
    pub fn get(&self, source_id: u64) -> Option<ThreadView<'_>> {
        self.thread(self.position(source_id)?)
    }

    /// All threads in source-id order.
    pub fn iter(&self) -> impl Iterator<Item = ThreadView<'_>> + '_ {
        (0..self.core.shards.len()).flat_map(move |si| {
            let n = self.core.manifest.shards[si].threads as usize;
            (0..n).filter_map(move |i| self.core.view(si, i).ok())
        })
    }
}

/// An open cache that validates each file on its first use.
///
/// Opening reads only the manifest, so it takes the same few microseconds
/// whatever the number of shards; the first access to a shard maps its
/// numbers file and checks it completely (footer, checksum, bytecheck,
/// invariants), and the first access to a text does the same for the text
/// file. Every accessor returns that check's error if it fails.
pub struct LazyCache {
    core: Core,
}

impl LazyCache {
    /// Reads and checks the manifest of the cache in `dir`.
    pub fn open(dir: &Path) -> Result<LazyCache> {
        Ok(LazyCache {
            core: Core::open(dir)?,
        })
    }

    /// Validates every file and the report, giving a [`Cache`].
    pub fn validate_all(self) -> Result<Cache> {
        self.core.validate_all()?;
        let report = read_report(&self.core.dir, &self.core.manifest)?;
        Ok(Cache {
            core: self.core,
            report,
        })
    }

    /// The manifest (counts, build options, shards).
    pub fn manifest(&self) -> &Manifest {
        &self.core.manifest
    }

    /// Number of threads (from the manifest).
    pub fn len(&self) -> usize {
        self.core.len
    }

    /// True when the cache holds no thread.
    pub fn is_empty(&self) -> bool {
        self.core.len == 0
    }

    /// The numbers of the thread at position `i` (validates only its shard's numbers file).
    pub fn numbers(&self, i: usize) -> Result<Option<NumView<'_>>> {
        self.core.numbers_at(i)
    }

    /// The thread at position `i`, texts included.
    pub fn thread(&self, i: usize) -> Result<Option<ThreadView<'_>>> {
        self.core.thread(i)
    }

    /// Position of the thread with this source id: O(log n).
    pub fn position(&self, source_id: u64) -> Result<Option<usize>> {
        self.core.position(source_id)
    }

    /// The thread with this source id, texts included.
    pub fn get(&self, source_id: u64) -> Result<Option<ThreadView<'_>>> {
        match self.position(source_id)? {
            Some(i) => self.thread(i),
            None => Ok(None),
        }
    }
}

/// Reads and checks the bad-input report of a cache.
fn read_report(dir: &Path, manifest: &Manifest) -> Result<Vec<BadInput>> {
    let path = dir.join(&manifest.report.file);
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut open_regular(&path)?, &mut bytes)
        .map_err(|e| Error::io(&path, e))?;
    if bytes.len() as u64 != manifest.report.bytes || hex64(xxh3_64(&bytes)) != manifest.report.xxh3
    {
        return Err(Error::corrupt(
            &path,
            "size or checksum differs from the manifest",
        ));
    }
    let report = read_jsonl(&bytes).map_err(|e| Error::corrupt(&path, e.to_string()))?;
    if report.len() as u64 != manifest.skipped {
        return Err(Error::corrupt(
            &path,
            "line count differs from the manifest",
        ));
    }
    Ok(report)
}

/// A zero-copy view of one thread's numbers: ids, times, kinds, features.
#[derive(Clone, Copy)]
pub struct NumView<'a> {
    shard: &'a ArchivedShard,
    rec: &'a ArchivedThreadRecord,
    /// Position of the thread within its shard.
    index: usize,
    rows: &'a [FeatureVec],
}

impl<'a> NumView<'a> {
    /// Source tweet id.
    pub fn source_id(&self) -> u64 {
        self.rec.source_id.to_native()
    }
    /// 1 rumour, 0 non-rumour, -1 unknown.
    pub fn label_code(&self) -> i8 {
        self.rec.label_code
    }
    /// Source tweet `created_at`, seconds since the epoch.
    pub fn source_created_at(&self) -> i64 {
        self.rec.source_created_at.to_native()
    }
    fn range(&self) -> std::ops::Range<usize> {
        let first = self.rec.first_reaction.to_native() as usize;
        first..first + self.rec.reaction_count.to_native() as usize
    }
    /// Number of reactions (replies and retweets).
    pub fn reaction_count(&self) -> usize {
        self.rec.reaction_count.to_native() as usize
    }
    /// The features of all reactions, in reaction order: one contiguous slice.
    pub fn features(&self) -> &'a [[f32; NUM_FEATURES]] {
        &self.rows[self.range()]
    }
    /// Values of extra per-reaction column `c` (see the manifest's
    /// `reaction_columns`; [`Cache::reaction_column`] finds it by name) for
    /// this thread's reactions, aligned with [`features`](Self::features).
    /// Empty if the column does not exist.
    pub fn column(&self, c: usize) -> &'a [f32] {
        self.shard
            .reaction_columns
            .get(c)
            .and_then(|col| <[f32]>::ref_from_bytes(col.as_slice().as_bytes()).ok())
            .and_then(|col| col.get(self.range()))
            .unwrap_or_default()
    }

    /// Value of extra per-thread column `c` (see the manifest's
    /// `thread_columns`), or None if the column does not exist.
    pub fn thread_value(&self, c: usize) -> Option<f32> {
        let col = self.shard.thread_columns.get(c)?;
        let i = self.index;
        col.get(i).map(|v| v.to_native())
    }

    /// Reactions' numbers, in `(created_at, id)` order, aligned with [`features`](Self::features).
    pub fn reaction_records(&self) -> impl ExactSizeIterator<Item = ReactionNum> + 'a {
        self.shard.reactions[self.range()]
            .iter()
            .map(|r| ReactionNum {
                id: r.id.to_native(),
                created_at: r.created_at.to_native(),
                // Validated at open.
                kind: ReactionKind::from_u8(r.kind).unwrap_or(ReactionKind::Reply),
            })
    }
}

/// One reaction's numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReactionNum {
    /// Tweet id.
    pub id: u64,
    /// `created_at`, seconds since the epoch.
    pub created_at: i64,
    /// Reply or retweet.
    pub kind: ReactionKind,
}

/// A zero-copy view of one thread: its numbers and texts.
#[derive(Clone, Copy)]
pub struct ThreadView<'a> {
    num: NumView<'a>,
    text: &'a ArchivedTextShard,
    thread_text: &'a [ArchivedSpan; 4],
}

/// The text a validated span addresses ("" if it is null).
fn span_text<'a>(arena: &'a str, s: &ArchivedSpan) -> &'a str {
    let start = s.start.to_native() as usize;
    // Spans were checked against the arena at validation; `get` keeps even a
    // broken invariant from panicking.
    arena
        .get(start..start + s.len.to_native() as usize)
        .unwrap_or("")
}

impl<'a> std::ops::Deref for ThreadView<'a> {
    type Target = NumView<'a>;
    fn deref(&self) -> &NumView<'a> {
        &self.num
    }
}

impl<'a> ThreadView<'a> {
    /// The numbers alone.
    pub fn numbers(&self) -> NumView<'a> {
        self.num
    }
    fn thread_text(&self, i: usize) -> &'a str {
        span_text(self.text.arena.as_str(), &self.thread_text[i])
    }
    /// Event (grandparent folder name).
    pub fn event(&self) -> &'a str {
        self.thread_text(0)
    }
    /// Label folder name (`rumours`, `non-rumours`, ...).
    pub fn label(&self) -> &'a str {
        self.thread_text(1)
    }
    /// Source author's `id_str`.
    pub fn source_user_id(&self) -> &'a str {
        self.thread_text(2)
    }
    /// Source tweet text.
    pub fn source_text(&self) -> &'a str {
        self.thread_text(3)
    }
    /// The reaction at `i` within this thread.
    pub fn reaction(&self, i: usize) -> Option<ReactionView<'a>> {
        let r = self.num.range();
        (i < r.len()).then(|| ReactionView {
            rec: &self.num.shard.reactions[r.start + i],
            arena: self.text.arena.as_str(),
            spans: &self.text.reactions[r.start + i],
            features: &self.num.rows[r.start + i],
        })
    }
    /// Reactions in `(created_at, id)` order.
    pub fn reactions(&self) -> impl ExactSizeIterator<Item = ReactionView<'a>> + 'a {
        let r = self.num.range();
        let recs = &self.num.shard.reactions[r.clone()];
        let texts = &self.text.reactions[r.clone()];
        let rows = &self.num.rows[r];
        let arena = self.text.arena.as_str();
        recs.iter()
            .zip(texts)
            .zip(rows)
            .map(move |((rec, spans), features)| ReactionView {
                rec,
                arena,
                spans,
                features,
            })
    }
}

/// A zero-copy view of one reaction.
#[derive(Clone, Copy)]
pub struct ReactionView<'a> {
    rec: &'a ArchivedReactionRecord,
    arena: &'a str,
    spans: &'a [ArchivedSpan; 2],
    features: &'a FeatureVec,
}

impl<'a> ReactionView<'a> {
    /// Tweet id.
    pub fn id(&self) -> u64 {
        self.rec.id.to_native()
    }
    /// Reply or retweet.
    pub fn kind(&self) -> ReactionKind {
        // Validated at open.
        ReactionKind::from_u8(self.rec.kind).unwrap_or(ReactionKind::Reply)
    }
    /// `created_at`, seconds since the epoch.
    pub fn created_at(&self) -> i64 {
        self.rec.created_at.to_native()
    }
    /// Reaction text.
    pub fn text(&self) -> &'a str {
        span_text(self.arena, &self.spans[0])
    }
    /// Author's description, if not null.
    pub fn user_description(&self) -> Option<&'a str> {
        let d = &self.spans[1];
        let null = d.start.to_native() == u32::MAX && d.len.to_native() == 0;
        (!null).then(|| span_text(self.arena, d))
    }
    /// The 28 features.
    pub fn features(&self) -> &'a FeatureVec {
        self.features
    }
}
