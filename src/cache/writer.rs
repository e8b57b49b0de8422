//! Writing a cache: shards as they fill up, then an atomic publish.
//!
//! Protocol (the reader never sees a half-written cache):
//! 1. take an exclusive lock on `.<name>.lock` beside the target (a second
//!    builder fails with [`Error::Locked`]; the OS drops the lock if the
//!    process dies, so there are no stale locks);
//! 2. remove leftovers of interrupted builds (`.<name>.tmp-*`);
//! 3. write everything into `.<name>.tmp-<pid>` and `fsync` each file and the
//!    directory;
//! 4. swap it with the target in one `renameat2(RENAME_EXCHANGE)` (or rename
//!    it into place when there is no target yet), delete the old cache, and
//!    `fsync` the parent.
//!
//! Dropping a [`CacheWriter`] before [`CacheWriter::finish`] removes the
//! temporary directory and leaves any existing cache untouched.

use std::fs::{self, File, TryLockError};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use rkyv::ser::writer::IoWriter;
use xxhash_rust::xxh3::{Xxh3Default, xxh3_64};

use super::manifest::{BuildInfo, FileInfo, Manifest, ShardInfo, hex64};
use super::{
    DEFAULT_SHARD_BYTES, FOOTER_LEN, FORMAT_NAME, FORMAT_VERSION, MANIFEST_FILE, REACTION_EXTRA,
    REPORT_FILE, SHARD_MAGIC, Shard, Span, THREAD_EXTRA, TextShard, ThreadData,
};
use crate::discover::ReactionKind;
use crate::error::{Error, Result};
use crate::features::{FEATURE_NAMES, REACTION_COLUMNS, THREAD_COLUMNS};
use crate::report::{BadInput, write_jsonl};

/// Largest archive a shard may hold: rkyv 0.8 uses 32-bit relative pointers.
const MAX_SHARD_BYTES: usize = 1 << 30;

/// Options of a [`CacheWriter`].
#[derive(Clone, Debug)]
pub struct WriterOptions {
    /// Start a new shard when the current one would grow past this many bytes.
    pub shard_bytes: usize,
    /// Recorded in the manifest.
    pub strict: bool,
    /// Recorded in the manifest.
    pub max_file_bytes: u64,
    /// Store the extended columns (`ThreadData::reaction_extra`, `thread_extra`).
    pub extended: bool,
}

impl Default for WriterOptions {
    fn default() -> Self {
        WriterOptions {
            shard_bytes: DEFAULT_SHARD_BYTES,
            strict: false,
            max_file_bytes: crate::parse::DEFAULT_MAX_FILE_BYTES,
            extended: true,
        }
    }
}

/// Builds a cache directory shard by shard and publishes it atomically.
pub struct CacheWriter {
    target: PathBuf,
    parent: PathBuf,
    name: String,
    tmp: PathBuf,
    _lock: File,
    opts: WriterOptions,
    current: Shard,
    current_text: TextShard,
    current_bytes: usize,
    shards: Vec<ShardInfo>,
    replies: u64,
    retweets: u64,
    published: bool,
}

fn io<T>(path: &Path, r: std::io::Result<T>) -> Result<T> {
    r.map_err(|e| Error::io(path, e))
}

/// Splits a target path into its parent directory and file name.
fn split_target(target: &Path) -> Result<(PathBuf, String)> {
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or_else(|| {
            Error::io(
                target,
                std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    "not a usable cache directory name",
                ),
            )
        })?;
    let parent = match target.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    Ok((parent, name))
}

/// Path of the lock file that guards builds of `target`.
pub fn lock_path(target: &Path) -> Result<PathBuf> {
    let (parent, name) = split_target(target)?;
    Ok(parent.join(format!(".{name}.lock")))
}

fn sync_dir(dir: &Path) -> Result<()> {
    io(dir, File::open(dir).and_then(|d| d.sync_all()))
}

impl CacheWriter {
    /// Locks `target`, cleans up after interrupted builds and opens a
    /// temporary directory beside it.
    ///
    /// Fails if another build holds the lock, or if `target` exists and is
    /// not a cache (it would be replaced).
    pub fn create(target: &Path, opts: WriterOptions) -> Result<Self> {
        let (parent, name) = split_target(target)?;
        io(&parent, fs::create_dir_all(&parent))?;
        let lock_file = parent.join(format!(".{name}.lock"));
        let lock = io(
            &lock_file,
            File::options()
                .create(true)
                .truncate(false)
                .write(true)
                .open(&lock_file),
        )?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                return Err(Error::Locked {
                    cache: target.to_path_buf(),
                    lock: lock_file,
                });
            }
            Err(TryLockError::Error(e)) => return Err(Error::io(&lock_file, e)),
        }

        // We hold the lock, so any temporary directory is a dead build's. A
        // build killed between the two renames of the fallback publish (no
        // atomic exchange) left no target and the old cache parked as
        // `<prefix>old-<pid>`: put it back first.
        let prefix = format!(".{name}.tmp-");
        let parked = format!("{prefix}old-");
        for entry in io(&parent, fs::read_dir(&parent))?.flatten() {
            let file_name = entry.file_name().to_string_lossy().into_owned();
            if file_name.starts_with(&parked)
                && !target.exists()
                && entry.path().join(MANIFEST_FILE).is_file()
            {
                io(target, fs::rename(entry.path(), target))?;
            }
        }
        for entry in io(&parent, fs::read_dir(&parent))?.flatten() {
            if entry.file_name().to_string_lossy().starts_with(&prefix) {
                let p = entry.path();
                io(&p, fs::remove_dir_all(&p))?;
            }
        }

        if target.exists() {
            let is_cache = target.join(MANIFEST_FILE).is_file();
            let is_empty_dir = fs::read_dir(target).is_ok_and(|mut d| d.next().is_none());
            if !is_cache && !is_empty_dir {
                return Err(Error::io(
                    target,
                    std::io::Error::new(
                        std::io::ErrorKind::AlreadyExists,
                        "exists and is not a socialctx cache; refusing to replace it",
                    ),
                ));
            }
        }

        let tmp = parent.join(format!("{prefix}{}", std::process::id()));
        io(&tmp, fs::create_dir(&tmp))?;
        Ok(CacheWriter {
            target: target.to_path_buf(),
            parent,
            name,
            tmp,
            _lock: lock,
            opts,
            current: Shard::default(),
            current_text: TextShard::default(),
            current_bytes: 0,
            shards: Vec::new(),
            replies: 0,
            retweets: 0,
            published: false,
        })
    }

    /// The temporary directory being written (for tests).
    pub fn temp_dir(&self) -> &Path {
        &self.tmp
    }

    /// Appends one thread. Threads must come in strictly ascending source-id order.
    pub fn push(&mut self, mut t: ThreadData, rel_path: &str) -> Result<()> {
        let bytes = t.estimated_bytes();
        if bytes > MAX_SHARD_BYTES || t.reactions.len() > u32::MAX as usize / 2 {
            return Err(Error::ThreadTooLarge {
                path: rel_path.to_string(),
                bytes: bytes as u64,
            });
        }
        if let Some(last) = self
            .current
            .threads
            .last()
            .map(|t| t.source_id)
            .or_else(|| self.shards.last().map(|s| s.last_source_id))
        {
            debug_assert!(t.record.source_id > last, "threads out of order");
        }
        if !self.current.threads.is_empty()
            && (self.current_bytes + bytes > self.opts.shard_bytes.min(MAX_SHARD_BYTES)
                || self.current.reactions.len() + t.reactions.len() > u32::MAX as usize)
        {
            self.flush()?;
        }
        t.record.first_reaction = self.current.reactions.len() as u32;
        t.record.reaction_count = t.reactions.len() as u32;
        for r in &t.reactions {
            if r.kind == ReactionKind::Retweet as u8 {
                self.retweets += 1;
            } else {
                self.replies += 1;
            }
        }
        if self.opts.extended {
            if t.reaction_extra.len() != t.reactions.len() {
                return Err(Error::Internal {
                    path: rel_path.to_string(),
                    message: "extended columns do not match the reactions".into(),
                });
            }
            let shard = &mut self.current;
            shard.reaction_columns.resize_with(REACTION_EXTRA, Vec::new);
            shard.thread_columns.resize_with(THREAD_EXTRA, Vec::new);
            for row in &t.reaction_extra {
                for (col, v) in shard.reaction_columns.iter_mut().zip(row) {
                    col.push(*v);
                }
            }
            for (col, v) in shard.thread_columns.iter_mut().zip(&t.thread_extra) {
                col.push(*v);
            }
        }
        self.current.threads.push(t.record);
        self.current.reactions.append(&mut t.reactions);
        self.current.features.append(&mut t.features);
        let text = &mut self.current_text;
        let thread_spans = [
            &t.text.event,
            &t.text.label,
            &t.text.source_user_id,
            &t.text.source_text,
        ]
        .map(|s| Span::push(&mut text.arena, s));
        text.threads.push(thread_spans);
        let base = text.arena.len() as u32;
        text.arena.push_str(&t.text_arena);
        text.reactions.extend(
            t.reaction_texts
                .iter()
                .map(|spans| spans.map(|s| s.shifted(base))),
        );
        self.current_bytes += bytes;
        Ok(())
    }

    fn write_synced(&self, name: &str, parts: &[&[u8]]) -> Result<()> {
        let path = self.tmp.join(name);
        let mut f = io(&path, File::create(&path))?;
        for p in parts {
            io(&path, f.write_all(p))?;
        }
        io(&path, f.sync_all())
    }

    /// Serializes `value` straight into `file` (hashing on the way, so no
    /// copy of the archive is held in memory), appends the footer, syncs,
    /// and describes the file.
    fn write_archive<T>(&self, file: String, value: &T) -> Result<FileInfo>
    where
        T: for<'a> rkyv::Serialize<
                rkyv::api::high::HighSerializer<
                    IoWriter<HashingWriter>,
                    rkyv::ser::allocator::ArenaHandle<'a>,
                    rkyv::rancor::Error,
                >,
            >,
    {
        let path = self.tmp.join(&file);
        let out = io(&path, File::create(&path))?;
        let sink = HashingWriter {
            out: BufWriter::with_capacity(1 << 20, out),
            hasher: Xxh3Default::new(),
            len: 0,
        };
        let written =
            rkyv::api::high::to_bytes_in::<_, rkyv::rancor::Error>(value, IoWriter::new(sink))
                .map_err(|e| match io_cause(&e) {
                    Some(kind_msg) => Error::io(&path, std::io::Error::other(kind_msg)),
                    None => Error::Internal {
                        path: file.clone(),
                        message: format!("serializing the shard failed: {e}"),
                    },
                })?;
        let HashingWriter {
            mut out,
            hasher,
            len,
        } = written.into_inner();
        let sum = hasher.digest();
        let mut footer = [0u8; FOOTER_LEN];
        footer[..8].copy_from_slice(&SHARD_MAGIC);
        footer[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        footer[16..24].copy_from_slice(&len.to_le_bytes());
        footer[24..32].copy_from_slice(&sum.to_le_bytes());
        io(&path, out.write_all(&footer))?;
        let out = out
            .into_inner()
            .map_err(|e| Error::io(&path, e.into_error()))?;
        io(&path, out.sync_all())?;
        Ok(FileInfo {
            file,
            bytes: len + FOOTER_LEN as u64,
            xxh3: hex64(sum),
        })
    }

    /// Serializes and writes the current shard (numbers and texts), then
    /// clears it, keeping its buffers for the next shard (no allocation churn).
    fn flush(&mut self) -> Result<()> {
        let n = self.shards.len();
        let numbers = self.write_archive(format!("shard-{n:05}.rkyv"), &self.current)?;
        let text = self.write_archive(format!("text-{n:05}.rkyv"), &self.current_text)?;
        let shard = &mut self.current;
        self.shards.push(ShardInfo {
            file: numbers.file,
            bytes: numbers.bytes,
            xxh3: numbers.xxh3,
            text,
            threads: shard.threads.len() as u64,
            reactions: shard.reactions.len() as u64,
            first_source_id: shard.threads.first().map_or(0, |t| t.source_id),
            last_source_id: shard.threads.last().map_or(0, |t| t.source_id),
        });
        shard.threads.clear();
        shard.reactions.clear();
        shard.features.clear();
        shard.reaction_columns.iter_mut().for_each(Vec::clear);
        shard.thread_columns.iter_mut().for_each(Vec::clear);
        let text = &mut self.current_text;
        text.arena.clear();
        text.threads.clear();
        text.reactions.clear();
        self.current_bytes = 0;
        Ok(())
    }

    /// Writes the last shard, the report and the manifest, and publishes the
    /// cache at the target path. `report` should be sorted (it is stored as given).
    pub fn finish(mut self, report: &[BadInput]) -> Result<Manifest> {
        if !self.current.threads.is_empty() {
            self.flush()?;
        }
        let mut report_bytes = Vec::new();
        write_jsonl(&mut report_bytes, report)
            .map_err(|e| Error::io(self.tmp.join(REPORT_FILE), e))?;
        self.write_synced(REPORT_FILE, &[&report_bytes])?;

        let manifest = Manifest {
            format: FORMAT_NAME.into(),
            format_version: FORMAT_VERSION,
            feature_names: FEATURE_NAMES.iter().map(|s| s.to_string()).collect(),
            threads: self.shards.iter().map(|s| s.threads).sum(),
            reactions: self.shards.iter().map(|s| s.reactions).sum(),
            replies: self.replies,
            retweets: self.retweets,
            skipped: report.len() as u64,
            options: BuildInfo {
                strict: self.opts.strict,
                max_file_bytes: self.opts.max_file_bytes,
                shard_bytes: self.opts.shard_bytes as u64,
            },
            shards: std::mem::take(&mut self.shards),
            report: FileInfo {
                file: REPORT_FILE.into(),
                bytes: report_bytes.len() as u64,
                xxh3: hex64(xxh3_64(&report_bytes)),
            },
            reaction_columns: if self.opts.extended {
                REACTION_COLUMNS.iter().map(|s| s.to_string()).collect()
            } else {
                Vec::new()
            },
            thread_columns: if self.opts.extended {
                THREAD_COLUMNS.iter().map(|s| s.to_string()).collect()
            } else {
                Vec::new()
            },
        };
        let mut json = serde_json::to_vec_pretty(&manifest).map_err(|e| Error::Internal {
            path: MANIFEST_FILE.into(),
            message: e.to_string(),
        })?;
        json.push(b'\n');
        self.write_synced(MANIFEST_FILE, &[&json])?;
        sync_dir(&self.tmp)?;
        self.publish()?;
        Ok(manifest)
    }

    fn publish(&mut self) -> Result<()> {
        if self.target.exists() {
            if !exchange(&self.tmp, &self.target)? {
                // No atomic exchange on this system or file system: two renames,
                // with the old cache parked beside the target in between.
                let old =
                    self.parent
                        .join(format!(".{}.tmp-old-{}", self.name, std::process::id()));
                io(&self.target, fs::rename(&self.target, &old))?;
                io(&self.target, fs::rename(&self.tmp, &self.target))?;
                io(&old, fs::remove_dir_all(&old))?;
                self.published = true;
                return sync_dir(&self.parent);
            }
            // The old cache now sits at the temporary path.
            self.published = true;
            io(&self.tmp, fs::remove_dir_all(&self.tmp))?;
        } else {
            io(&self.target, fs::rename(&self.tmp, &self.target))?;
            self.published = true;
        }
        sync_dir(&self.parent)
    }
}

/// An `io::Write` that hashes and counts what it passes on.
struct HashingWriter {
    out: BufWriter<File>,
    hasher: Xxh3Default,
    len: u64,
}

impl Write for HashingWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.out.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.len += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

/// The I/O error message inside a serialization error, if that is its cause
/// (rkyv wraps the writer's error in its own type).
fn io_cause(e: &rkyv::rancor::Error) -> Option<String> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = source {
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            return Some(io.to_string());
        }
        source = err.source();
    }
    None
}

impl Drop for CacheWriter {
    fn drop(&mut self) {
        if !self.published {
            let _ = fs::remove_dir_all(&self.tmp);
        }
    }
}

/// Atomically swaps two directories. `Ok(false)` when the system cannot.
#[cfg(target_os = "linux")]
fn exchange(a: &Path, b: &Path) -> Result<bool> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let ca = CString::new(a.as_os_str().as_bytes()).map_err(|e| Error::io(a, e.into()))?;
    let cb = CString::new(b.as_os_str().as_bytes()).map_err(|e| Error::io(b, e.into()))?;
    // SAFETY: both arguments are valid NUL-terminated paths that outlive the call.
    let rc = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            ca.as_ptr(),
            libc::AT_FDCWD,
            cb.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    if rc == 0 {
        return Ok(true);
    }
    let err = std::io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::EINVAL) | Some(libc::ENOSYS) | Some(libc::EOPNOTSUPP) => Ok(false),
        _ => Err(Error::io(b, err)),
    }
}

#[cfg(not(target_os = "linux"))]
fn exchange(_a: &Path, _b: &Path) -> Result<bool> {
    Ok(false)
}
