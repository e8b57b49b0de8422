//! Incremental builds: re-read only the threads whose files changed, take
//! the others from the old cache, and publish a cache byte-identical to a
//! full build of the same corpus state.
//!
//! Change detection is by metadata: each thread's fingerprint is an xxh3 of
//! (name, size, mtime ns, ctime ns, inode) of every file it uses and of which
//! of its folders exist. ctime catches an in-place edit that restores the
//! mtime. Before reading any file, a build waits until the file system's
//! clock (its staging directory's mtime, set to now) has passed every time
//! its fingerprints saw, in whole seconds for files on a device where no
//! corpus file has a sub-second mtime (a file system with 1-second
//! timestamps), so a change after the fingerprints always changes them. A
//! file modified at or after that point counts as changed at the next build
//! (git's racy-clean rule), with or without content hashes (`--verify`: a
//! file edited and reverted while the build read it hashes as before). The
//! point is kept in the fingerprints, never in the cache's bytes.
//! Fingerprints are kept beside the cache in
//! `derived/fingerprints-<content id>.json`, so they belong to exactly one
//! cache content.
//!
//! `user_reliability` depends on every rumour source of the corpus. The new
//! rumour index is computed from the old cache for reused threads and from
//! the files for the others; if it differs from the old one, the reused
//! threads' values are recomputed from their reactions' author keys (each
//! reaction record of the cache carries its own). A full build is done
//! when anything makes reuse unsafe (no or a damaged old cache, other
//! options, another corpus root, no fingerprints, values computed by
//! another definition of the features: `crate::definition`), and the
//! summary says why.
//!
//! With the crawler's change list (`BuildOptions::changed`, `changed.rs`)
//! the threads it does not name are taken as the fingerprints left them:
//! no walk and no `stat` of their files.

use std::borrow::Cow;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use xxhash_rust::xxh3::Xxh3Default;

use crate::error::BuildError;
use crate::format::files::fingerprints_file;
use crate::format::gather;
use crate::format::report::BadInput;
use crate::format::user_key;
use crate::ingest::discover::ThreadDir;
use crate::ingest::extended::{rumour_index, rumour_index_with};
use crate::ingest::features::reliability::RumourIndex;
use crate::ingest::fingerprint::{Fp, How, Precision, fingerprints};
use crate::ingest::job::{Reuse, Started, Supply};
use crate::ingest::writer::remove_superseded_fingerprints;
use crate::ingest::{BuildOptions, BuildSummary, Progress, Tally, discover_checked};
use crate::read::{Cache, ThreadSource};

mod changed;
mod reuse;

use reuse::Reuser;

type Result<T, E = BuildError> = std::result::Result<T, E>;

/// Version of the fingerprints file; another version means a full build.
/// 2: per-thread report lines (`bad`); 3: content id and checksum; 4: what
/// discovery found of each thread (`dirs`, `layouts`), for `--changed`; 5:
/// no author keys (every reaction record of the cache carries its author's
/// key, format 5, so they were a second copy: ~8 bytes per reaction held,
/// parsed and written each night).
/// Only this version is read: a file of an earlier one was written by code
/// of another definition, whose cache is built again in full anyway.
const FINGERPRINTS_VERSION: u32 = 5;

/// The fingerprints of the threads of one cache content, as read back.
/// Derived data, never trusted as found: the file carries its own checksum
/// and the content id of the cache it was written with, and either not
/// matching means a full build. Read from the mapped file (file-backed
/// pages, not allocated ones), with the thread paths borrowed from it and
/// each per-thread map a flat sorted array ([`ByRelMap`]): at 256k threads
/// the owned `BTreeMap`s of earlier versions held ~0.4 KB per thread, and
/// the whole file once more while it was parsed.
#[derive(Deserialize)]
struct Fingerprints<'a> {
    #[serde(default)]
    version: u32,
    /// The content id of the cache these belong to.
    #[serde(default)]
    content_id: String,
    /// xxh3-64 of the file's JSON with this field empty, 16 hex digits.
    #[serde(default)]
    xxh3: String,
    corpus: String,
    strict: bool,
    max_file_bytes: u64,
    shard_bytes: u64,
    extended: bool,
    /// Whether the fingerprints include content hashes.
    #[serde(default)]
    verify: bool,
    /// The definition digest of the build that wrote these.
    #[serde(default)]
    definition: String,
    /// When the build that wrote these started reading (ns since the epoch,
    /// the file system's clock, after the fingerprinted times had passed):
    /// a file modified at or after it may have been read before the change.
    /// It lives here, beside the cache, never in the cache's bytes.
    started_ns: i128,
    /// Thread rel path -> fingerprint.
    #[serde(borrow)]
    threads: ByRelMap<'a, u64>,
    /// Thread rel path -> the report lines its assembly gave (discovery's
    /// lines are not among them: discovery gives them again each build).
    #[serde(default, borrow)]
    bad: ByRelMap<'a, Vec<BadInput>>,
    /// Thread rel path -> which tweet folders and side files discovery
    /// found (`ThreadDir::entries`): a build with a change list takes the
    /// threads it does not name from here, without a walk.
    #[serde(default, borrow)]
    dirs: ByRelMap<'a, u16>,
    /// Thread rel path -> its layout's name, where it is not PHEME's.
    #[serde(default, borrow)]
    layouts: ByRelMap<'a, String>,
}

/// One per-thread map of a fingerprints file as read back: its entries in
/// the file's order, which is by thread rel path, each path once (refused
/// otherwise), so that a lookup is a binary search. The paths are borrowed
/// from the file's bytes where JSON needs no unescaping.
struct ByRelMap<'a, T>(Vec<(Cow<'a, str>, T)>);

impl<T> Default for ByRelMap<'_, T> {
    fn default() -> Self {
        ByRelMap(Vec::new())
    }
}

impl<T> ByRelMap<'_, T> {
    fn at(&self, rel: &str) -> Option<usize> {
        self.0.binary_search_by(|(k, _)| (**k).cmp(rel)).ok()
    }

    fn get(&self, rel: &str) -> Option<&T> {
        self.at(rel).map(|i| &self.0[i].1)
    }

    fn contains_key(&self, rel: &str) -> bool {
        self.at(rel).is_some()
    }

    fn len(&self) -> usize {
        self.0.len()
    }

    fn iter(&self) -> impl Iterator<Item = (&str, &T)> {
        self.0.iter().map(|(k, v)| (&**k, v))
    }

    fn values(&self) -> impl Iterator<Item = &T> {
        self.0.iter().map(|(_, v)| v)
    }

    /// The paths that start with `prefix`, in order.
    fn starting_with<'s>(&'s self, prefix: &'s str) -> impl Iterator<Item = &'s str> {
        let from = self.0.partition_point(|(k, _)| &**k < prefix);
        self.0[from..]
            .iter()
            .map(|(k, _)| &**k)
            .take_while(move |k| k.starts_with(prefix))
    }
}

impl<'de: 'a, 'a, T: Deserialize<'de>> Deserialize<'de> for ByRelMap<'a, T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct Entries<'a, T>(std::marker::PhantomData<(&'a (), T)>);
        impl<'de: 'a, 'a, T: Deserialize<'de>> serde::de::Visitor<'de> for Entries<'a, T> {
            type Value = ByRelMap<'a, T>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a map from thread paths, in order")
            }
            fn visit_map<M: serde::de::MapAccess<'de>>(
                self,
                mut m: M,
            ) -> std::result::Result<Self::Value, M::Error> {
                let mut v: Vec<(Cow<'a, str>, T)> = Vec::with_capacity(m.size_hint().unwrap_or(0));
                while let Some(Key(k)) = m.next_key::<Key<'a>>()? {
                    if v.last().is_some_and(|(last, _)| *last >= k) {
                        return Err(serde::de::Error::custom(format_args!(
                            "thread paths out of order or twice ({k})"
                        )));
                    }
                    let value = m.next_value()?;
                    v.push((k, value));
                }
                v.shrink_to_fit();
                Ok(ByRelMap(v))
            }
        }
        d.deserialize_map(Entries(std::marker::PhantomData))
    }
}

/// A map key borrowed from the input where it can be.
struct Key<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Key<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for V<'a> {
            type Value = Key<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a thread path")
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> std::result::Result<Key<'a>, E> {
                Ok(Key(Cow::Borrowed(s)))
            }
            fn visit_str<E>(self, s: &str) -> std::result::Result<Key<'a>, E> {
                Ok(Key(Cow::Owned(s.to_owned())))
            }
            fn visit_string<E>(self, s: String) -> std::result::Result<Key<'a>, E> {
                Ok(Key(Cow::Owned(s)))
            }
        }
        d.deserialize_str(V(std::marker::PhantomData))
    }
}

/// A fingerprints file, mapped (read-only; the file is ours, written once
/// by a rename and never modified in place, as the cache's shards are).
struct Mapped {
    file: PathBuf,
    map: memmap2::Mmap,
}

impl Mapped {
    /// The fingerprints file of `cache`, mapped, or why it cannot be.
    fn of(cache: &Cache) -> std::result::Result<Mapped, String> {
        let file = cache
            .derived_dir()
            .join(fingerprints_file(&cache.content_id()));
        let f = open_regular(&file).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => "the old cache has no fingerprints".to_string(),
            _ => format!("fingerprints unreadable ({}: {e})", file.display()),
        })?;
        // SAFETY: read-only map of a regular file that builds only ever
        // replace by a rename (`Written::write`), never modify in place.
        let map = unsafe { memmap2::Mmap::map(&f) }
            .map_err(|e| format!("fingerprints unreadable ({}: {e})", file.display()))?;
        Ok(Mapped { file, map })
    }

    /// The fingerprints, checked against their checksum and `cache`, or
    /// why they cannot be used.
    fn read(&self, cache: &Cache) -> std::result::Result<Fingerprints<'_>, String> {
        let file = &self.file;
        let fp: Fingerprints = serde_json::from_slice(&self.map)
            .map_err(|e| format!("fingerprints unreadable ({}: {e})", file.display()))?;
        if fp.version != FINGERPRINTS_VERSION {
            return Err(format!(
                "the fingerprints are of version {} (this build writes {FINGERPRINTS_VERSION})",
                fp.version
            ));
        }
        if raw_checksum(&self.map, &fp.xxh3).as_deref() != Some(fp.xxh3.as_str()) {
            return Err(format!(
                "the fingerprints do not match their checksum (edited or damaged: {})",
                file.display()
            ));
        }
        if fp.content_id != cache.content_id() {
            return Err(format!(
                "the fingerprints are of another cache content ({}, not {}: {})",
                fp.content_id,
                cache.content_id(),
                file.display()
            ));
        }
        Ok(fp)
    }
}

/// The checksum of a fingerprints file's bytes as [`Written::write`]
/// seals them: xxh3-64 of its JSON with the checksum field empty, which is
/// the file with the 16 digits of `"xxh3":"<digits>"` (the field as parsed,
/// `stored`) left out. `None` if the field is not where the writer puts it.
/// Hashing the bytes as they are, not a re-serialisation of what was
/// parsed: no second copy of the fingerprints in memory.
fn raw_checksum(bytes: &[u8], stored: &str) -> Option<String> {
    let field = format!("\"xxh3\":\"{stored}\"");
    let at = bytes
        .windows(field.len())
        .position(|w| w == field.as_bytes())?;
    let digits = at + field.len() - stored.len() - 1;
    let mut h = Xxh3Default::new();
    h.update(&bytes[..digits]);
    h.update(&bytes[digits + stored.len()..]);
    Some(format!("{:016x}", h.digest()))
}

/// xxh3-64 of `value`'s JSON, hashed as it is written.
fn hash_json(value: &impl Serialize) -> u64 {
    struct Hasher(Xxh3Default);
    impl std::io::Write for Hasher {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.update(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut h = Hasher(Xxh3Default::new());
    match serde_json::to_writer(&mut h, value) {
        Ok(()) => h.0.digest(),
        Err(_) => 0,
    }
}

/// The regular file `path`, opened for reading, refusing anything else
/// without waiting on it: a FIFO planted at the fingerprints path cannot
/// hang the build (`O_NONBLOCK`), nor a symlink send it elsewhere
/// (`O_NOFOLLOW`).
fn open_regular(path: &Path) -> std::io::Result<fs::File> {
    use rustix::fs::{CWD, Mode, OFlags, openat};
    let flags = OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW | OFlags::NONBLOCK;
    let file = fs::File::from(openat(CWD, path, flags, Mode::empty()).map_err(|e| {
        if e == rustix::io::Errno::LOOP {
            std::io::Error::other("it is a symbolic link")
        } else {
            e.into()
        }
    })?);
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::other("it is not a regular file"));
    }
    Ok(file)
}

/// The fingerprints of `list` as the fingerprints file stores them,
/// serialised straight from the build's own vectors: the same JSON as
/// [`Fingerprints`] (same fields in the same order, maps sorted by thread
/// rel path), without building its maps or the JSON in memory first.
#[derive(Serialize)]
struct Written<'a> {
    version: u32,
    content_id: &'a str,
    xxh3: String,
    corpus: &'a str,
    strict: bool,
    max_file_bytes: u64,
    shard_bytes: u64,
    extended: bool,
    verify: bool,
    definition: &'a str,
    started_ns: i128,
    threads: ByRel<'a, u64>,
    bad: ByRel<'a, Vec<BadInput>>,
    dirs: ByRel<'a, u16>,
    layouts: ByRel<'a, Option<&'static str>>,
}

/// One per-thread map of the fingerprints file: `values[i]` under
/// `list[i].rel`, in rel order (`order`), empty vectors left out.
struct ByRel<'a, T> {
    list: &'a [ThreadDir],
    order: &'a [u32],
    values: &'a [T],
}

/// Whether a per-thread value is stored (non-empty vectors only).
trait Stored {
    fn stored(&self) -> bool;
}
impl Stored for u64 {
    fn stored(&self) -> bool {
        true
    }
}
impl Stored for u16 {
    fn stored(&self) -> bool {
        true
    }
}
impl<T> Stored for Option<T> {
    fn stored(&self) -> bool {
        self.is_some()
    }
}
impl<T> Stored for Vec<T> {
    fn stored(&self) -> bool {
        !self.is_empty()
    }
}

impl<T: Serialize + Stored> Serialize for ByRel<'_, T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_map(self.order.iter().filter_map(|&i| {
            let v = &self.values[i as usize];
            v.stored().then(|| (self.list[i as usize].rel.as_str(), v))
        }))
    }
}

impl Written<'_> {
    /// Writes these fingerprints, sealed for their cache content, into
    /// `derived` by a rename: a failed write leaves no partial file and the
    /// error names the file. Whatever is not a regular file at the path (a
    /// symlink, a FIFO: the name is ours, in the cache's own `derived/`) is
    /// removed first, so the write neither goes through a link nor waits
    /// on a pipe.
    fn write(mut self, derived: &Path) -> Result<()> {
        self.xxh3 = format!("{:016x}", hash_json(&self));
        let file = derived.join(fingerprints_file(self.content_id));
        fs::create_dir_all(derived).map_err(|e| BuildError::io(derived, e))?;
        if fs::symlink_metadata(&file).is_ok_and(|m| !m.is_file()) {
            fs::remove_file(&file).map_err(|e| BuildError::io(&file, e))?;
        }
        // The one routine for replacing a file: a killed build's temporary
        // file is removed by the next write of the same fingerprints.
        crate::output::replace_file(&file, |f| {
            let mut out = std::io::BufWriter::with_capacity(1 << 16, f);
            serde_json::to_writer(&mut out, &self)?;
            std::io::Write::flush(&mut out)
        })
        .map_err(|e| BuildError::io(&file, e))?;
        Ok(())
    }
}

/// The file system's clock now: the mtime the kernel gives the directory
/// `dir` (the build's staging directory) when told to set it to now. File
/// times come from the kernel's coarse clock (a tick behind the wall
/// clock) in the file system's granularity (on NFS the server's); `None` if
/// the time could not be set. No file is made: a stamp file, created and
/// removed, outlived a build killed in between and was published with the
/// next build's cache as if the operator's.
fn file_clock(dir: &Path) -> Option<i128> {
    // Opened read-only: a directory can be, and its times set through it.
    let m = crate::output::touch_now(&fs::File::open(dir).ok()?).ok()?;
    Some(i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()))
}

/// Waits until file times have moved past every time the fingerprints saw
/// (in each file system's precision: [`Precision`]), so that any later
/// change of a fingerprinted file gets a time of its own and shows in the
/// next build's fingerprints; the build reads files only after this.
/// Returns the start time that the next build's racy-clean rule uses.
/// Times more than a second ahead (a skewed clock) are not waited for:
/// those files stay racy and are read again by the next build.
fn settle(dir: &Path, fps: &[Fp], precision: &Precision) -> i128 {
    let now = || {
        file_clock(dir).unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as i128)
        })
    };
    let second = 1_000_000_000i128;
    let Some(need) = precision.settled_at(fps) else {
        return now();
    };
    let mut t = now();
    if need - t <= second + second / 10 {
        while t < need {
            let left = (need - t).clamp(1_000_000, 50_000_000);
            std::thread::sleep(std::time::Duration::from_nanos(left as u64));
            t = now();
        }
    }
    t
}

/// The old cache and what of it can be reused, or why nothing can.
struct Old<'a> {
    /// Shared with the writer, which copies the reused threads' bytes.
    cache: Arc<Cache>,
    /// By position in the build's list, for threads whose files are
    /// unchanged: the position in the old cache (None: the thread was
    /// skipped, its report lines say why). Indexed, not keyed by rel: no
    /// copy of every rel path (memory that grew with the corpus).
    reuse: Vec<Option<Option<usize>>>,
    /// How many threads `reuse` has.
    reused: usize,
    /// Report lines of the old cache's threads' assembly by thread rel
    /// (not discovery's).
    report: ByRelMap<'a, Vec<BadInput>>,
}

fn canonical(p: &Path) -> String {
    p.canonicalize()
        .unwrap_or_else(|_| p.to_path_buf())
        .to_string_lossy()
        .into_owned()
}

/// The old cache at `cache_dir` and its fingerprints file, mapped, or why
/// they cannot serve an incremental build (see [`check_old`]).
fn open_old(cache_dir: &Path) -> std::result::Result<(Cache, Mapped), String> {
    let cache = Cache::open(cache_dir).map_err(|e| format!("no usable old cache ({e})"))?;
    let m = cache.manifest();
    // Values computed by other code are never reused: checked first, so
    // that the summary says why.
    let ours = crate::definition::definition();
    if m.definition != ours {
        return Err(format!(
            "definition changed (the old cache's values were computed by definition {}, this build's is {ours})",
            crate::definition::shown(&m.definition)
        ));
    }
    let mapped = Mapped::of(&cache)?;
    Ok((cache, mapped))
}

/// The fingerprints of the old cache `cache`, read from `mapped`, or why
/// they cannot serve an incremental build of `corpus` with `opts`.
fn check_old<'m>(
    corpus: &Path,
    cache: &Cache,
    mapped: &'m Mapped,
    opts: &BuildOptions,
) -> std::result::Result<Fingerprints<'m>, String> {
    let m = cache.manifest();
    let ours = crate::definition::definition();
    let old = mapped.read(cache)?;
    if old.definition != ours {
        return Err(format!(
            "definition changed (the old fingerprints were written by definition {}, this build's is {ours})",
            crate::definition::shown(&old.definition)
        ));
    }
    if old.corpus != canonical(corpus) {
        return Err(format!("the old cache was built from {}", old.corpus));
    }
    if old.verify != opts.verify {
        return Err(if opts.verify {
            "the old fingerprints have no content hashes (--verify)".into()
        } else {
            "the old fingerprints were made with --verify".into()
        });
    }
    if (
        old.strict,
        old.max_file_bytes,
        old.shard_bytes,
        old.extended,
    ) != (
        opts.strict,
        opts.max_file_bytes,
        opts.shard_bytes as u64,
        opts.extended,
    ) || (
        m.options.strict,
        m.options.max_file_bytes,
        m.options.shard_bytes,
    ) != (opts.strict, opts.max_file_bytes, opts.shard_bytes as u64)
    {
        return Err("the old cache was built with other options".into());
    }
    Ok(old)
}

/// What the old cache offers a build of the threads `list` with
/// fingerprints `fps`.
fn reuse_of<'a>(cache: Cache, old: Fingerprints<'a>, list: &[ThreadDir], fps: &[Fp]) -> Old<'a> {
    // Each thread's own report lines, as its last assembly gave them.
    let report = old.bad;
    let precision = Precision::of(fps);
    let mut reuse = vec![None; list.len()];
    for (i, (td, f)) in list.iter().zip(fps).enumerate() {
        // The racy-clean rule, with or without content hashes: a file
        // modified at or after the previous build's start (in its file
        // system's precision) may have been read (or hashed) before that
        // change or a revert of it.
        if old.threads.get(&td.rel) != Some(&f.hash)
            || f.newest >= precision.racy_from(old.started_ns, f)
        {
            continue;
        }
        match cache.position(td.source_id) {
            Some(pos) => reuse[i] = Some(Some(pos)),
            // Skipped last time, and unchanged: skipped again, same lines.
            None if report
                .get(&td.rel)
                .is_some_and(|lines| lines.iter().any(|l| l.path == td.rel)) =>
            {
                reuse[i] = Some(None);
            }
            None => {}
        }
    }
    Old {
        cache: Arc::new(cache),
        reused: reuse.iter().flatten().count(),
        reuse,
        report,
    }
}

/// Builds `corpus` into `cache` as [`build`](crate::build) does, re-reading
/// only the threads that changed since the cache there was built (see the
/// module docs). The summary's `incremental` says what was reused or why a
/// full build was done.
pub fn build_incremental(
    corpus: impl AsRef<Path>,
    cache: impl AsRef<Path>,
    opts: &BuildOptions,
    progress: &dyn Progress,
) -> Result<BuildSummary> {
    // The job started as every build starts (lock, staging, workers), then
    // supplied with its own walk and reuse: no trait object in `job.rs`.
    let (corpus, cache) = (corpus.as_ref(), cache.as_ref());
    // A change list is read (and refused if bad) whether or not it can be
    // used, and before the lock is taken: a crawler slow to write it (a
    // FIFO, a pipe) holds up this build only, never the next one.
    let rels = match &opts.changed {
        Some(file) => Some((file.clone(), changed::read_list(corpus, file, progress)?)),
        None => None,
    };
    let mut started = Started::new(corpus, cache, opts.clone())?;
    started.progress = progress;
    run(corpus, cache, started, rels)
}

/// The incremental supplier of a started build: walks the corpus,
/// fingerprints its threads, and runs the pass with the unchanged ones taken
/// from the old cache at `cache` (or keeps that cache when nothing changed).
fn run(
    corpus: &Path,
    cache: &Path,
    started: Started<'_>,
    rels: Option<(PathBuf, Vec<String>)>,
) -> Result<BuildSummary> {
    let opts = started.opts.clone();
    let workers = started.workers;
    let how = if opts.verify {
        How::Content
    } else {
        How::Local
    };
    // The fingerprints borrow their paths from the mapped file, which lives
    // as long as this build.
    let (old_cache, mapped) = match open_old(cache) {
        Ok((c, m)) => (Ok(c), Some(m)),
        Err(why) => (Err(why), None),
    };
    let opened = old_cache.and_then(|c| match &mapped {
        Some(m) => check_old(corpus, &c, m, &opts).map(|fp| (c, fp)),
        None => Err("the old cache has no fingerprints".into()),
    });
    // With a change list and a usable old cache: the threads it does not
    // name as they were, no walk.
    let mut listed = None;
    let mut note = String::new();
    if let (Some((file, rels)), Ok((cache, old))) = (&rels, &opened) {
        match changed::supply(corpus, rels, old, cache, workers, how) {
            Ok(found) => {
                note = format!(" (change list {}: {} paths)", file.display(), rels.len());
                listed = Some(found);
            }
            Err(why) => {
                note = format!(
                    " (change list {} not used: {why}; the corpus was walked)",
                    file.display()
                );
            }
        }
    }
    // The rumour index comes later: from the old cache where it can.
    let (list, report, fps) = match listed {
        Some((list, fps)) => (list, Vec::new(), fps),
        None => {
            let (list, report, _) = discover_checked(corpus, workers, &opts, false)?;
            let fps = fingerprints(&list, workers, how);
            (list, report, fps)
        }
    };
    let list = &list;
    let started_ns = settle(started.writer.temp_dir(), &fps, &Precision::of(&fps));
    let old = opened.map(|(cache, old)| reuse_of(cache, old, list, &fps));
    let index = opts.extended.then(|| match &old {
        Ok(o) => o.rumour_index(list, workers, opts.max_file_bytes),
        Err(_) => rumour_index(list, workers, opts.max_file_bytes),
    });
    // Did the rumour sources change? Then reused threads get their
    // user_reliability recomputed from their records' author keys.
    let index_changed = match (&index, &old) {
        (Some(new_index), Ok(o)) => o.rumour_sources_changed(new_index),
        _ => false,
    };
    let reused = old.as_ref().map_or(0, |o| o.reused as u64);
    if let Ok(o) = &old
        && !index_changed
        && o.unchanged(list, &report)
    {
        return Ok(o.kept(started, &note));
    }
    let mut started = started;
    if let Ok(o) = &old
        && !index_changed
    {
        started
            .writer
            .carry_from(Arc::clone(&o.cache) as Arc<dyn gather::Archives>);
    }
    let reuser = old.as_ref().ok().map(|old| Reuser {
        old,
        list,
        extended: opts.extended,
        recompute: if index_changed { index.as_ref() } else { None },
    });
    // Fingerprints of what is about to be published, for the next run:
    // written before the swap, so a cache is never published without them.
    let corpus_id = canonical(corpus);
    // The fingerprints file's maps are in rel order; `list` is in
    // source-id order.
    let mut order: Vec<u32> = (0..list.len() as u32).collect();
    order.sort_unstable_by(|&a, &b| list[a as usize].rel.cmp(&list[b as usize].rel));
    let mut write_fingerprints =
        |content_id: &str, derived: &Path, thread_bad: &[Vec<BadInput>]| -> Result<()> {
            let hashes: Vec<u64> = fps.iter().map(|f| f.hash).collect();
            let entries: Vec<u16> = list.iter().map(|td| td.entries).collect();
            let layouts: Vec<_> = list.iter().map(changed::layout_name).collect();
            Written {
                version: FINGERPRINTS_VERSION,
                content_id,
                xxh3: String::new(),
                corpus: &corpus_id,
                strict: opts.strict,
                max_file_bytes: opts.max_file_bytes,
                shard_bytes: opts.shard_bytes as u64,
                extended: opts.extended,
                verify: opts.verify,
                definition: crate::definition::definition(),
                started_ns,
                threads: ByRel {
                    list,
                    order: &order,
                    values: &hashes,
                },
                bad: ByRel {
                    list,
                    order: &order,
                    values: thread_bad,
                },
                dirs: ByRel {
                    list,
                    order: &order,
                    values: &entries,
                },
                layouts: ByRel {
                    list,
                    order: &order,
                    values: &layouts,
                },
            }
            .write(derived)
        };
    let mut summary = started.execute(Supply {
        list,
        index: index.as_ref(),
        report,
        reuse: reuser.as_ref().map(|r| r as &dyn Reuse),
        before_publish: Some(&mut write_fingerprints),
    })?;
    summary.incremental = Some(match &old {
        Ok(_) => format!(
            "incremental: {reused} threads reused, {} re-read{}{note}",
            list.len() as u64 - reused,
            if index_changed {
                "; rumour sources changed, user_reliability recomputed"
            } else {
                ""
            }
        ),
        Err(why) => format!("full build: {why}"),
    });
    summary.reused = reused;
    Ok(summary)
}

impl Old<'_> {
    /// The corpus's rumour index: the reused threads' entries from the old
    /// cache, the others' from their files.
    fn rumour_index(&self, list: &[ThreadDir], workers: usize, max_file_bytes: u64) -> RumourIndex {
        let known = |i: usize| match self.reuse[i]? {
            Some(pos) => {
                let t = self.cache.thread(pos)?;
                Some(
                    (t.label_code() == 1)
                        .then(|| (user_key(t.source_user_id()), t.source_created_at())),
                )
            }
            None => Some(None),
        };
        rumour_index_with(list, workers, max_file_bytes, Some(&known))
    }

    /// Whether `new_index` has other rumour sources than the old cache.
    fn rumour_sources_changed(&self, new_index: &RumourIndex) -> bool {
        let mut previous = RumourIndex::default();
        for t in self.cache.iter() {
            if t.label_code() == 1 {
                previous.add(user_key(t.source_user_id()), t.source_created_at());
            }
        }
        let sorted = |i: &RumourIndex| {
            let mut v: Vec<_> = i.entries().collect();
            v.sort_unstable();
            v
        };
        sorted(&previous) != sorted(new_index)
    }

    /// Whether nothing changed at all: every thread of `list` reused, none
    /// added or gone, and the report the build would write (discovery's
    /// lines now, `report`, and each reused thread's own) is the old one.
    /// The old cache is then exactly what a full build would publish.
    fn unchanged(&self, list: &[ThreadDir], report: &[BadInput]) -> bool {
        if self.reused != list.len()
            || self.cache.len() != self.reuse.iter().flatten().flatten().count()
        {
            return false;
        }
        let mut expected = report.to_vec();
        for td in list {
            expected.extend(self.report.get(&td.rel).into_iter().flatten().cloned());
        }
        expected.sort();
        expected == self.cache.report()
    }

    /// Keeps the old cache as it is (nothing changed): releases the lock and
    /// staging directory of `started`, and summarises the old cache; `note`
    /// says what became of a change list (one not used must be said).
    fn kept(&self, started: Started<'_>, note: &str) -> BuildSummary {
        let reused = self.reused as u64;
        started.progress.discovered(reused);
        let (elapsed, phases) = started.discovered_so_far();
        drop(started);
        remove_superseded_fingerprints(&self.cache.derived_dir(), &self.cache.content_id());
        let mut tally = Tally::default();
        let mut threads = 0u64;
        for t in self.cache.iter() {
            tally.add(t.label_code(), t.event());
            threads += 1;
        }
        // Thread folders whose source was skipped are reused (as skipped)
        // but are no thread of the cache: the summary's "threads" line
        // counts the cache's, so this one says both.
        let count = if threads == reused {
            format!("{threads} threads")
        } else {
            format!(
                "{threads} threads; {} more thread folders skipped, see the report",
                reused.saturating_sub(threads)
            )
        };
        BuildSummary {
            manifest: self.cache.manifest().clone(),
            report: self.cache.report().to_vec(),
            elapsed,
            phases,
            labels: tally.labels,
            events: tally.events,
            incremental: Some(format!(
                "incremental: nothing changed; the cache is kept as it is ({count}){note}"
            )),
            reused,
            files_read: 0,
            workers: 0,
            warnings: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The clock is read without making a file (CI, 2026-12-07: a kill
    /// between a stamp's creation and removal left `.build-start` in the
    /// staging directory, which the next build published), and it moves
    /// with the system clock.
    #[test]
    fn the_file_clock_makes_no_file_and_tells_the_time() {
        let dir = tempfile::tempdir().unwrap();
        let wall = |t: std::time::SystemTime| {
            t.duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as i128
        };
        let before = wall(std::time::SystemTime::now());
        let t = file_clock(dir.path()).unwrap();
        let after = wall(std::time::SystemTime::now());
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
        // A coarse tick (at most 10 ms here) behind the wall clock.
        assert!(
            t >= before - 20_000_000 && t <= after,
            "{before} {t} {after}"
        );
        assert_eq!(file_clock(&dir.path().join("missing")), None);
    }

    #[test]
    fn a_map_borrows_plain_paths_owns_escaped_ones_and_finds_both() {
        let json = br#"{"a/1":1,"a/2\"q":2,"b/x":4,"b/\u00e9":3}"#;
        let m: ByRelMap<u64> = serde_json::from_slice(json).unwrap();
        assert!(matches!(m.0[0].0, Cow::Borrowed("a/1")));
        assert!(matches!(m.0[1].0, Cow::Owned(_)));
        assert_eq!(m.get("a/2\"q"), Some(&2));
        assert_eq!(m.get("b/é"), Some(&3));
        assert_eq!(m.get("b/y"), None);
        assert!(m.contains_key("b/x"));
        assert_eq!(m.starting_with("a/").collect::<Vec<_>>(), ["a/1", "a/2\"q"]);
        assert_eq!(m.starting_with("b/").count(), 2);
        assert_eq!(m.starting_with("c/").count(), 0);
    }

    #[test]
    fn a_map_out_of_order_or_with_a_path_twice_is_refused() {
        for json in [&br#"{"b":1,"a":2}"#[..], br#"{"a":1,"a":2}"#] {
            let e = serde_json::from_slice::<ByRelMap<u64>>(json).err().unwrap();
            assert!(e.to_string().contains("out of order or twice"), "{e}");
        }
    }

    /// The checksum of the bytes as written equals the writer's (its JSON
    /// with the field empty), and any other byte changes it.
    #[test]
    fn the_raw_checksum_is_the_writers() {
        let list: Vec<ThreadDir> = ["e/rumours/2", "e/non-rumours/1"]
            .iter()
            .enumerate()
            .map(|(i, rel)| ThreadDir {
                source_id: i as u64 + 1,
                path: PathBuf::from(rel),
                rel: (*rel).to_string(),
                label: String::new(),
                event: "e".into(),
                entries: 3,
                layout: 0,
                listed: true,
            })
            .collect();
        let order = [1u32, 0];
        let (hashes, bad) = ([7u64, 9], [vec![], vec![]]);
        let (entries, layouts) = ([3u16, 3], [None, Some("x")]);
        let mut w = Written {
            version: FINGERPRINTS_VERSION,
            content_id: "c0ffee",
            xxh3: String::new(),
            corpus: "/c",
            strict: false,
            max_file_bytes: 1,
            shard_bytes: 2,
            extended: true,
            verify: false,
            definition: "d",
            started_ns: 5,
            threads: ByRel {
                list: &list,
                order: &order,
                values: &hashes,
            },
            bad: ByRel {
                list: &list,
                order: &order,
                values: &bad,
            },
            dirs: ByRel {
                list: &list,
                order: &order,
                values: &entries,
            },
            layouts: ByRel {
                list: &list,
                order: &order,
                values: &layouts,
            },
        };
        let sum = format!("{:016x}", hash_json(&w));
        w.xxh3 = sum.clone();
        let bytes = serde_json::to_vec(&w).unwrap();
        assert_eq!(raw_checksum(&bytes, &sum).as_deref(), Some(sum.as_str()));
        let fp: Fingerprints = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(
            fp.threads.iter().collect::<Vec<_>>(),
            [("e/non-rumours/1", &9), ("e/rumours/2", &7)]
        );
        assert_eq!(
            fp.layouts.get("e/non-rumours/1").map(String::as_str),
            Some("x")
        );
        for at in [0, bytes.len() / 2, bytes.len() - 1] {
            let mut edited = bytes.clone();
            edited[at] ^= 1;
            assert_ne!(
                raw_checksum(&edited, &sum).as_deref(),
                Some(sum.as_str()),
                "byte {at}"
            );
        }
    }
}
