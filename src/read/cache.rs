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

use std::fs::File;

use super::validate::{
    CheckedNumbers, CheckedText, feature_rows, open_dir, open_file, read_manifest, read_report,
};
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
    /// The files, opened with the manifest so that they are of its
    /// generation; `None` only when the process ran out of descriptors
    /// (then they are opened on first use, from the same directory handle).
    numbers_file: Option<File>,
    text_file: Option<File>,
    /// Index of the shard's first thread in the whole cache.
    first_thread: usize,
    numbers: OnceLock<std::result::Result<CheckedNumbers, String>>,
    text: OnceLock<std::result::Result<CheckedText, String>>,
}

/// What [`Cache`] and [`LazyCache`] share: the manifest and the shard
/// slots. Every read of either goes through it (see
/// [`ThreadSource`](super::ThreadSource)); `pub` only so that the sealed
/// trait can name it: the module is private.
pub struct Core {
    dir: PathBuf,
    /// The directory as opened: files not opened yet are opened through it.
    dir_file: File,
    report_file: Option<File>,
    /// xxh3 of the manifest's bytes.
    content_id: u64,
    manifest: Manifest,
    shards: Vec<ShardSlot>,
    len: usize,
    /// The bad-input report, once validated (a [`Cache`]'s, at open).
    report: Option<Vec<BadInput>>,
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

/// How many times an open starts over when a build published a new
/// generation while it was opening the old one. Each start-over needs a
/// publish in between, so this bounds only a reader starved by a
/// back-to-back stream of builds.
const OPEN_ATTEMPTS: usize = 64;

/// Opens a cache file now if descriptors allow, else leaves it for later.
fn pin(dir: &File, dir_path: &Path, name: &str) -> Result<Option<File>> {
    match open_file(dir, dir_path, name) {
        Ok(f) => Ok(Some(f)),
        Err(OpenError::Io { source, .. })
            if source.raw_os_error() == Some(rustix::io::Errno::MFILE.raw_os_error()) =>
        {
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// What one open read from one generation of the cache directory.
struct Generation {
    manifest: Manifest,
    content_id: u64,
    report_file: Option<File>,
    shards: Vec<ShardSlot>,
}

/// Whether `dir` still names the directory `opened`.
fn same_dir(opened: &File, dir: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (opened.metadata(), std::fs::metadata(dir)) {
        (Ok(a), Ok(b)) => (a.dev(), a.ino()) == (b.dev(), b.ino()),
        _ => false,
    }
}

impl std::fmt::Debug for Core {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.debug("Core", f)
    }
}

impl Core {
    fn debug(&self, name: &str, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct(name)
            .field("dir", &self.dir)
            .field("threads", &self.len)
            .field("shards", &self.shards.len())
            .finish()
    }

    pub(super) fn dir(&self) -> &Path {
        &self.dir
    }

    pub(super) fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    pub(super) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn content_id(&self) -> u64 {
        self.content_id
    }

    /// Reads the manifest and opens every file it names, all through one
    /// directory handle: the cache then reads the generation it opened, for
    /// every shard, even after a rebuild swaps in the next one. If a
    /// publish swapped the directory while this ran (its old files, the
    /// manifest included, may be gone already), the open starts over on the
    /// new one, whatever the error was: it said nothing of the cache at
    /// `dir` now.
    fn open(dir: &Path) -> Result<Core> {
        let mut attempt = 1;
        loop {
            let dir_file = open_dir(dir)?;
            match Core::open_in(dir_file, dir) {
                Err((e, dir_file)) => {
                    if attempt < OPEN_ATTEMPTS && !same_dir(&dir_file, dir) {
                        attempt += 1;
                        continue;
                    }
                    return Err(e);
                }
                Ok(core) => return Ok(core),
            }
        }
    }

    /// [`Core::open`]'s one attempt; on failure the directory handle comes
    /// back with the error, so that the caller can tell a swap from damage.
    fn open_in(dir_file: File, dir: &Path) -> std::result::Result<Core, (OpenError, File)> {
        match Core::read_generation(&dir_file, dir) {
            Ok(g) => Ok(Core {
                dir: dir.to_path_buf(),
                dir_file,
                report_file: g.report_file,
                content_id: g.content_id,
                len: g.manifest.threads as usize,
                manifest: g.manifest,
                shards: g.shards,
                report: None,
            }),
            Err(e) => Err((e, dir_file)),
        }
    }

    fn read_generation(dir_file: &File, dir: &Path) -> Result<Generation> {
        let (manifest, content_id) = read_manifest(dir_file, dir)?;
        let pinned = |name: &str| match pin(dir_file, dir, name) {
            // A file the manifest names is gone: if the directory at `dir`
            // is no longer the one we opened, a publish swapped it and the
            // caller starts over; otherwise the cache is damaged, and the
            // error says which file is missing.
            Err(OpenError::Io { path, source })
                if source.kind() == std::io::ErrorKind::NotFound && same_dir(dir_file, dir) =>
            {
                Err(OpenError::Io {
                    path,
                    source: std::io::Error::other(format!(
                        "{source} (the manifest names it: the cache is incomplete)"
                    )),
                })
            }
            other => other,
        };
        let report_file = pinned(&manifest.report.file)?;
        let mut first_thread = 0usize;
        let mut shards = Vec::with_capacity(manifest.shards.len());
        for info in &manifest.shards {
            shards.push(ShardSlot {
                numbers_path: dir.join(&info.numbers.file),
                text_path: dir.join(&info.text.file),
                numbers_file: pinned(&info.numbers.file)?,
                text_file: pinned(&info.text.file)?,
                first_thread,
                numbers: OnceLock::new(),
                text: OnceLock::new(),
            });
            first_thread += info.threads as usize;
        }
        Ok(Generation {
            manifest,
            content_id,
            report_file,
            shards,
        })
    }

    /// Runs `f` on the pinned `file`, or on the file opened now through the
    /// directory handle.
    fn with_file<T>(
        &self,
        file: &Option<File>,
        name: &str,
        f: impl FnOnce(&File) -> Result<T>,
    ) -> Result<T> {
        match file {
            Some(file) => f(file),
            None => f(&open_file(&self.dir_file, &self.dir, name)?),
        }
    }

    /// Shard `i`'s two archives, each checked on its first use.
    fn archives(&self, i: usize) -> Result<(&ArchivedShard, &ArchivedTextShard)> {
        if i >= self.shards.len() {
            return Err(OpenError::corrupt(&self.dir, format!("no shard {i}")));
        }
        Ok((self.numbers(i)?, self.text(i)?))
    }

    /// Shard `i`'s two files as opened with the manifest (the generation
    /// the cache read), if they are held open (they are unless the process
    /// ran out of descriptors): a merge links them into its cache instead
    /// of copying their bytes.
    fn shard_files(&self, i: usize) -> Option<(&File, &File)> {
        let s = self.shards.get(i)?;
        Some((s.numbers_file.as_ref()?, s.text_file.as_ref()?))
    }

    /// The bad-input report, checked against the manifest.
    pub(super) fn report(&self) -> Result<Vec<BadInput>> {
        if let Some(report) = &self.report {
            return Ok(report.clone());
        }
        let name = &self.manifest.report.file;
        self.with_file(&self.report_file, name, |file| {
            read_report(file, &self.dir.join(name), &self.manifest)
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
            self.with_file(&slot.numbers_file, &info.numbers.file, |file| {
                CheckedNumbers::open(file, &slot.numbers_path, info, columns)
            })
        })?;
        Ok(m.shard())
    }

    /// Shard `i`'s texts, validated on first use.
    fn text(&self, i: usize) -> Result<&ArchivedTextShard> {
        let slot = &self.shards[i];
        let info = &self.manifest.shards[i];
        let m = checked(&slot.text, &slot.text_path, || {
            self.with_file(&slot.text_file, &info.text.file, |file| {
                CheckedText::open(file, &slot.text_path, info)
            })
        })?;
        Ok(m.texts())
    }

    /// Validates every file, and the manifest's retweet count against the
    /// shards' reactions (replies are the rest: the manifest's totals are
    /// checked against each other when it is read).
    /// Checks every file, on up to as many threads as there are cores
    /// (scoped threads, no pool that a forked worker would inherit dead):
    /// checking is hashing and walking the archives, and a merge opens
    /// whole partitions. The first error in shard order is the one
    /// returned, whatever thread found it.
    fn validate_all(&self) -> Result<()> {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let n = self.shards.len();
        let check = |i: usize| -> Result<u64> {
            let shard = self.numbers(i)?;
            self.text(i)?;
            Ok(shard
                .reactions
                .iter()
                .filter(|r| r.kind == crate::schema::ReactionKind::Retweet as u8)
                .count() as u64)
        };
        let next = AtomicUsize::new(0);
        let worker = || {
            let mut out = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    return out;
                }
                out.push((i, check(i)));
            }
        };
        let threads = std::thread::available_parallelism()
            .map_or(1, |c| c.get())
            .min(n)
            .min(8);
        let mut results: Vec<(usize, Result<u64>)> = std::thread::scope(|scope| {
            let helpers: Vec<_> = (1..threads)
                .filter_map(|_| {
                    std::thread::Builder::new()
                        .name("socialctx-check".into())
                        .spawn_scoped(scope, worker)
                        .ok()
                })
                .collect();
            let mut all = worker();
            for h in helpers {
                // A checker that panicked left its shards unchecked: they
                // are checked again below.
                all.extend(h.join().unwrap_or_default());
            }
            all
        });
        results.sort_by_key(|(i, _)| *i);
        let mut retweets = 0u64;
        let mut at = 0;
        for (i, r) in results {
            // Shards a panicked checker took are checked here, in order.
            for j in at..i {
                retweets += check(j)?;
            }
            retweets += r?;
            at = i + 1;
        }
        for j in at..n {
            retweets += check(j)?;
        }
        if retweets != self.manifest.retweets {
            return Err(OpenError::corrupt(
                self.dir.join(crate::format::files::MANIFEST_FILE),
                format!(
                    "the manifest says {} retweets and {} replies; the shards hold {retweets} retweets",
                    self.manifest.retweets, self.manifest.replies
                ),
            ));
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

    pub(super) fn numbers_at(&self, i: usize) -> Result<Option<NumView<'_>>> {
        self.locate(i).map(|(s, j)| self.num_view(s, j)).transpose()
    }

    pub(super) fn thread(&self, i: usize) -> Result<Option<ThreadView<'_>>> {
        self.locate(i).map(|(s, j)| self.view(s, j)).transpose()
    }

    pub(super) fn reaction_column(&self, name: &str) -> Option<usize> {
        self.manifest
            .reaction_columns
            .iter()
            .position(|n| n == name)
    }

    pub(super) fn thread_column(&self, name: &str) -> Option<usize> {
        self.manifest.thread_columns.iter().position(|n| n == name)
    }

    pub(super) fn position(&self, source_id: u64) -> Result<Option<usize>> {
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

/// An open cache whose every file has been validated: reads cannot fail.
///
/// Reading is the [`ThreadSource`](super::ThreadSource) trait, shared with
/// [`LazyCache`]; the inherent [`numbers`](Self::numbers),
/// [`thread`](Self::thread), [`position`](Self::position),
/// [`get`](Self::get) and [`report`](Self::report) are the same reads
/// without the `Result` that a validated cache never returns.
pub struct Cache {
    core: Core,
}

impl std::fmt::Debug for Cache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.core.debug("Cache", f)
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

    /// The bad-input report of the build that wrote this cache.
    pub fn report(&self) -> &[BadInput] {
        self.core.report.as_deref().unwrap_or_default()
    }

    /// The numbers of the thread at position `i` (0-based, source-id order).
    pub fn numbers(&self, i: usize) -> Option<NumView<'_>> {
        // Every file was validated at open, so errors cannot occur here.
        self.core.numbers_at(i).ok().flatten()
    }

    /// The thread at position `i` (0-based, source-id order), texts included.
    pub fn thread(&self, i: usize) -> Option<ThreadView<'_>> {
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

    /// Shard `i`'s two archives, checked at open (a merge copies their
    /// bytes: `format::gather`).
    pub(crate) fn archives(&self, i: usize) -> Option<(&ArchivedShard, &ArchivedTextShard)> {
        Some((self.core.numbers(i).ok()?, self.core.text(i).ok()?))
    }

    /// The shard holding thread `i` (0-based, source-id order) and the
    /// thread's index in it.
    pub(crate) fn shard_of(&self, i: usize) -> Option<(usize, usize)> {
        self.core.locate(i)
    }

    /// All threads in source-id order.
    pub fn iter(&self) -> impl Iterator<Item = ThreadView<'_>> + '_ {
        (0..self.core.shards.len()).flat_map(move |si| {
            let n = self.core.manifest.shards[si].threads as usize;
            (0..n).filter_map(move |i| self.core.view(si, i).ok())
        })
    }
}

impl crate::format::gather::Archives for Cache {
    fn archives(&self, i: usize) -> Option<(&ArchivedShard, &ArchivedTextShard)> {
        Cache::archives(self, i)
    }

    fn checked(
        &self,
        i: usize,
    ) -> std::result::Result<(&ArchivedShard, &ArchivedTextShard), String> {
        self.core.archives(i).map_err(|e| e.to_string())
    }
}

impl crate::format::gather::Archives for LazyCache {
    fn archives(&self, i: usize) -> Option<(&ArchivedShard, &ArchivedTextShard)> {
        self.core.archives(i).ok()
    }

    fn checked(
        &self,
        i: usize,
    ) -> std::result::Result<(&ArchivedShard, &ArchivedTextShard), String> {
        self.core.archives(i).map_err(|e| e.to_string())
    }
}

/// An open cache that validates each file on its first use.
///
/// Opening reads only the manifest, so it takes the same few microseconds
/// whatever the number of shards; the first access to a shard maps its
/// numbers file and checks it completely (footer, checksum, bytecheck,
/// invariants), and the first access to a text does the same for the text
/// file. Every read ([`ThreadSource`](super::ThreadSource)) returns that
/// check's error if it fails.
pub struct LazyCache {
    core: Core,
}

impl std::fmt::Debug for LazyCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.core.debug("LazyCache", f)
    }
}

impl LazyCache {
    /// Reads and checks the manifest of the cache in `dir`.
    pub fn open(dir: impl AsRef<Path>) -> Result<LazyCache> {
        Ok(LazyCache {
            core: Core::open(dir.as_ref())?,
        })
    }

    /// Shard `i`'s two files as opened with the manifest (see
    /// `Core::shard_files`).
    pub(crate) fn shard_files(&self, i: usize) -> Option<(&File, &File)> {
        self.core.shard_files(i)
    }

    /// The bad-input report, read and checked against the manifest.
    pub(crate) fn read_report(&self) -> Result<Vec<BadInput>> {
        self.core.report()
    }

    /// Validates every file and the report, giving a [`Cache`].
    pub fn validate_all(mut self) -> Result<Cache> {
        self.core.validate_all()?;
        self.core.report = Some(self.core.report()?);
        Ok(Cache { core: self.core })
    }
}

impl super::source::Sealed for Cache {
    fn core(&self) -> &Core {
        &self.core
    }
}

impl super::source::Sealed for LazyCache {
    fn core(&self) -> &Core {
        &self.core
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A verdict on a file is remembered; an I/O error (EMFILE, EIO) is
    /// not: the next access runs the check again.
    #[test]
    fn checked_memoises_verdicts_not_io_errors() {
        let path = Path::new("shard-00000.rkyv");
        let cell = OnceLock::new();
        let io = || Err(OpenError::io(path, std::io::Error::from_raw_os_error(24)));
        assert!(matches!(
            checked::<u32>(&cell, path, io),
            Err(OpenError::Io { .. })
        ));
        assert!(cell.get().is_none());
        assert_eq!(*checked(&cell, path, || Ok(7u32)).unwrap(), 7);
        // Once valid, no further check runs.
        assert_eq!(
            *checked(&cell, path, || panic!("checked twice")).unwrap(),
            7
        );

        let bad = OnceLock::new();
        let corrupt = || Err(OpenError::corrupt(path, "checksum mismatch"));
        assert!(matches!(
            checked::<u32>(&bad, path, corrupt),
            Err(OpenError::Corrupt { .. })
        ));
        match checked::<u32>(&bad, path, || panic!("a verdict is not re-checked")) {
            Err(OpenError::Corrupt { reason, .. }) => assert_eq!(reason, "checksum mismatch"),
            other => panic!("{:?}", other.map(|_| ())),
        }
    }
}
