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
//! use socialctx::Cache;
//! let cache = Cache::open("target/socialctx-cache")?;
//! for thread in cache.iter() {
//!     let features: &[[f32; 28]] = thread.features();
//!     println!("{} {} reactions", thread.source_id(), features.len());
//! }
//! if let Some(t) = cache.get(552783667052167168) {
//!     println!("{}", t.source_text());
//! }
//! # Ok::<(), socialctx::Error>(())
//! ```

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use super::validate::{CheckedNumbers, CheckedText, feature_rows, read_manifest, read_report};
use super::view::{NumView, ThreadView};
use crate::error::OpenError;
use crate::format::manifest::Manifest;
use crate::format::report::BadInput;
use crate::format::{ArchivedShard, ArchivedTextShard};

type Result<T, E = OpenError> = std::result::Result<T, E>;

/// Lazily mapped and validated files of one shard.
struct ShardSlot {
    numbers_path: PathBuf,
    text_path: PathBuf,
    /// Index of the shard's first thread in the whole cache.
    first_thread: usize,
    numbers: OnceLock<std::result::Result<CheckedNumbers, String>>,
    text: OnceLock<std::result::Result<CheckedText, String>>,
}

/// What [`Cache`] and [`LazyCache`] share: the manifest and the shard slots.
struct Core {
    dir: PathBuf,
    manifest: Manifest,
    shards: Vec<ShardSlot>,
    len: usize,
}

/// Runs `check` until it succeeds or finds the file invalid, remembering that
/// outcome; the typed error is returned the first time, a [`OpenError::Corrupt`]
/// with the same reason after. I/O errors (EMFILE, EIO, a file not there
/// yet) are transient, not verdicts on the file: they are returned and the
/// next access tries again.
fn checked<'s, T>(
    cell: &'s OnceLock<std::result::Result<T, String>>,
    path: &Path,
    check: impl FnOnce() -> Result<T>,
) -> Result<&'s T> {
    if cell.get().is_none() {
        let outcome = check();
        let keep = match &outcome {
            Ok(_) | Err(OpenError::Io { .. }) => None,
            Err(OpenError::Corrupt { reason, .. }) => Some(reason.clone()),
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
        Some(Err(r)) => Err(OpenError::corrupt(path, r.clone())),
        None => Err(OpenError::corrupt(path, "not validated")),
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
                    numbers_path: dir.join(&info.numbers.file),
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
            CheckedNumbers::open(&slot.numbers_path, info, columns)
        })?;
        Ok(m.shard())
    }

    /// Shard `i`'s texts, validated on first use.
    fn text(&self, i: usize) -> Result<&ArchivedTextShard> {
        let slot = &self.shards[i];
        let info = &self.manifest.shards[i];
        let m = checked(&slot.text, &slot.text_path, || {
            CheckedText::open(&slot.text_path, info)
        })?;
        Ok(m.texts())
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
            OpenError::corrupt(
                &self.shards[shard].numbers_path,
                "thread index out of range",
            )
        })?;
        Ok(NumView::new(
            s,
            rec,
            index,
            feature_rows(s).unwrap_or_default(),
        ))
    }

    fn view(&self, shard: usize, index: usize) -> Result<ThreadView<'_>> {
        let num = self.num_view(shard, index)?;
        let text = self.text(shard)?;
        let thread_text = text.threads.get(index).ok_or_else(|| {
            OpenError::corrupt(&self.shards[shard].text_path, "thread index out of range")
        })?;
        Ok(ThreadView::new(num, text, thread_text))
    }

    fn numbers_at(&self, i: usize) -> Result<Option<NumView<'_>>> {
        self.locate(i).map(|(s, j)| self.num_view(s, j)).transpose()
    }

    fn thread(&self, i: usize) -> Result<Option<ThreadView<'_>>> {
        self.locate(i).map(|(s, j)| self.view(s, j)).transpose()
    }

    fn reaction_column(&self, name: &str) -> Option<usize> {
        self.manifest
            .reaction_columns
            .iter()
            .position(|n| n == name)
    }

    fn thread_column(&self, name: &str) -> Option<usize> {
        self.manifest.thread_columns.iter().position(|n| n == name)
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
    /// Errors: [`OpenError::CacheMissing`] when there is no manifest,
    /// [`OpenError::UnsupportedVersion`] for another format version,
    /// [`OpenError::Corrupt`] (naming the file) for any damage or inconsistency.
    /// For training loops that should start before every shard is read, see
    /// [`LazyCache`].
    pub fn open(dir: impl AsRef<Path>) -> Result<Cache> {
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
        self.core.reaction_column(name)
    }

    /// Index of the extra per-thread column `name` (e.g. `"veracity"`), for
    /// [`NumView::thread_value`].
    pub fn thread_column(&self, name: &str) -> Option<usize> {
        self.core.thread_column(name)
    }

    /// Number of threads.
    pub fn len(&self) -> usize {
        self.core.len
    }

    /// True when the cache holds no thread.
    pub fn is_empty(&self) -> bool {
        self.core.len == 0
    }

    /// The numbers of the thread at position `i` (0-based, source-id order).
    pub fn numbers(&self, i: usize) -> Option<NumView<'_>> {
        self.core.numbers_at(i).ok().flatten()
    }

    /// The thread at position `i` (0-based, source-id order), texts included.
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

impl std::fmt::Debug for LazyCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LazyCache")
            .field("dir", &self.core.dir)
            .field("threads", &self.core.len)
            .field("shards", &self.core.shards.len())
            .finish()
    }
}

impl LazyCache {
    /// Reads and checks the manifest of the cache in `dir`.
    pub fn open(dir: impl AsRef<Path>) -> Result<LazyCache> {
        Ok(LazyCache {
            core: Core::open(dir.as_ref())?,
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

    /// Index of the extra per-reaction column `name`, as [`Cache::reaction_column`].
    pub fn reaction_column(&self, name: &str) -> Option<usize> {
        self.core.reaction_column(name)
    }

    /// Index of the extra per-thread column `name`, as [`Cache::thread_column`].
    pub fn thread_column(&self, name: &str) -> Option<usize> {
        self.core.thread_column(name)
    }

    /// Number of threads (from the manifest).
    pub fn len(&self) -> usize {
        self.core.len
    }

    /// True when the cache holds no thread.
    pub fn is_empty(&self) -> bool {
        self.core.len == 0
    }

    /// The numbers of the thread at position `i` (validates only its shard's
    /// numbers file, never its texts).
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
