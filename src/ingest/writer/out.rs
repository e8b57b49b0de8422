//! A cache file's bytes on their way to disk: serialized straight into the
//! file while hashed ([`write_archive`]), through [`DirectOut`]'s
//! `O_DIRECT` where the file system takes it.

use std::fs::File;
use std::io::Write;
use std::path::Path;

use rkyv::ser::writer::IoWriter;
use xxhash_rust::xxh3::Xxh3Default;

use super::super::publish::io;
use crate::error::BuildError;
use crate::format::files::{shard_file, text_file};
use crate::format::footer::{self, Footer};
use crate::format::manifest::{FileInfo, hex64};

type Result<T, E = BuildError> = std::result::Result<T, E>;

/// What [`write_archive`] serializes: an rkyv value, archived through the
/// hashing writer.
pub(super) trait Archivable:
    for<'a> rkyv::Serialize<
        rkyv::api::high::HighSerializer<
            IoWriter<HashingWriter>,
            rkyv::ser::allocator::ArenaHandle<'a>,
            rkyv::rancor::BoxedError,
        >,
    >
{
}

impl<T> Archivable for T where
    T: for<'a> rkyv::Serialize<
            rkyv::api::high::HighSerializer<
                IoWriter<HashingWriter>,
                rkyv::ser::allocator::ArenaHandle<'a>,
                rkyv::rancor::BoxedError,
            >,
        >
{
}

/// Shard `n`'s two files, its numbers and its text, written at once (each
/// waits on its own `fsync`): the text on a thread of its own, or after the
/// numbers where no thread can start.
pub(super) fn write_shard_files<N, T>(
    dir: &Path,
    n: usize,
    numbers: &N,
    text: &T,
) -> (Result<FileInfo>, Result<FileInfo>)
where
    N: Archivable,
    T: Archivable + Sync,
{
    std::thread::scope(|scope| {
        let texts = std::thread::Builder::new()
            .name("socialctx-text-writer".into())
            .spawn_scoped(scope, || write_archive(dir, text_file(n), text));
        let numbers = write_archive(dir, shard_file(n), numbers);
        let text = match texts {
            Ok(handle) => handle.join().unwrap_or_else(|_| {
                Err(BuildError::Internal {
                    path: text_file(n).into(),
                    message: "the text writer thread panicked".into(),
                })
            }),
            Err(_) => write_archive(dir, text_file(n), text),
        };
        (numbers, text)
    })
}

/// Serializes `value` straight into `file` (hashing on the way, so no
/// copy of the archive is held in memory), appends the footer, syncs,
/// and describes the file.
pub(super) fn write_archive<T: Archivable>(
    dir: &Path,
    file: String,
    value: &T,
) -> Result<FileInfo> {
    let path = dir.join(&file);
    let out = io(&path, DirectOut::create(&path))?;
    let failed = std::rc::Rc::new(std::cell::RefCell::new(None));
    let sink = HashingWriter {
        out,
        hasher: Xxh3Default::new(),
        len: 0,
        failed: std::rc::Rc::clone(&failed),
    };
    let written =
        rkyv::api::high::to_bytes_in::<_, rkyv::rancor::BoxedError>(value, IoWriter::new(sink))
            .map_err(|e| {
                // A write error inside serialization (a full disk) is the
                // file's I/O error, with its OS code: not an internal one.
                if let Some(io_err) = failed.borrow_mut().take() {
                    return BuildError::io(&path, io_err);
                }
                match io_cause(&e) {
                    Some(kind_msg) => BuildError::io(&path, std::io::Error::other(kind_msg)),
                    None => BuildError::Internal {
                        path: file.clone().into(),
                        message: format!("serializing the shard failed: {e}"),
                    },
                }
            })?;
    let HashingWriter {
        mut out,
        hasher,
        len,
        ..
    } = written.into_inner();
    let sum = hasher.digest();
    let footer = Footer {
        archive_len: len,
        xxh3: sum,
    };
    io(&path, out.write_all(&footer.encode()))?;
    let out = io(&path, out.finish())?;
    io(&path, out.sync_all())?;
    Ok(FileInfo {
        file,
        bytes: len + footer::LEN as u64,
        xxh3: hex64(sum),
    })
}

/// An `io::Write` that hashes and counts what it passes on, and keeps a
/// copy of the first write error (rkyv's error type hides it).
pub(super) struct HashingWriter {
    out: DirectOut,
    hasher: Xxh3Default,
    len: u64,
    failed: std::rc::Rc<std::cell::RefCell<Option<std::io::Error>>>,
}

impl Write for HashingWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = match self.out.write(buf) {
            Ok(n) => n,
            Err(e) => {
                let copy = e.raw_os_error().map_or_else(
                    || std::io::Error::new(e.kind(), e.to_string()),
                    std::io::Error::from_raw_os_error,
                );
                self.failed.borrow_mut().get_or_insert(copy);
                return Err(e);
            }
        };
        self.hasher.update(&buf[..n]);
        self.len += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

/// Block size that direct writes are aligned to (in memory and in the file):
/// a multiple of every device's logical block size in use.
const DIRECT_ALIGN: usize = 4096;
/// Bytes gathered per write.
const DIRECT_CHUNK: usize = 1 << 20;

/// A shard file written with `O_DIRECT` where the file system allows it:
/// from an aligned buffer of ours straight to the device, not copied into
/// newly allocated page-cache pages. That copy was 5% of a warm build's CPU
/// (first-touch pages cost a VM more than a copy), and unlinking the
/// replaced cache's pages at publication another 12 ms. The tail (less than
/// a block) is written through the page cache, so the file is never padded.
/// Where `O_DIRECT` is refused (at open, or by a first write), this is a
/// plain buffered writer. The bytes written are the same either way.
pub(super) struct DirectOut {
    file: File,
    buf: AlignedChunk,
    filled: usize,
    direct: bool,
}

/// A buffer of [`DIRECT_CHUNK`] bytes aligned to [`DIRECT_ALIGN`] (rkyv's
/// aligned vector, already a dependency: no allocation code of our own).
type AlignedChunk = rkyv::util::AlignedVec<DIRECT_ALIGN>;

fn aligned_chunk() -> AlignedChunk {
    let mut buf = AlignedChunk::with_capacity(DIRECT_CHUNK);
    buf.resize(DIRECT_CHUNK, 0);
    buf
}

/// Whether `e` is EINVAL: how a file system refuses `O_DIRECT`.
fn is_einval(e: &std::io::Error) -> bool {
    e.raw_os_error() == Some(rustix::io::Errno::INVAL.raw_os_error())
}

impl DirectOut {
    fn create(path: &Path) -> std::io::Result<Self> {
        use std::os::unix::fs::OpenOptionsExt;
        let mut o = std::fs::OpenOptions::new();
        o.write(true).create(true).truncate(true);
        let direct = rustix::fs::OFlags::DIRECT.bits() as i32;
        let (file, direct) = match o.clone().custom_flags(direct).open(path) {
            Ok(f) => (f, true),
            Err(e) if is_einval(&e) => (o.open(path)?, false),
            Err(e) => return Err(e),
        };
        Ok(DirectOut {
            file,
            buf: aligned_chunk(),
            filled: 0,
            direct,
        })
    }

    /// Leaves direct I/O (for the tail, or when the file system refuses it).
    fn buffered(&mut self) -> std::io::Result<()> {
        if self.direct {
            let flags = rustix::fs::fcntl_getfl(&self.file)?;
            rustix::fs::fcntl_setfl(&self.file, flags - rustix::fs::OFlags::DIRECT)?;
            self.direct = false;
        }
        Ok(())
    }

    /// Writes the first `n` buffered bytes (a whole chunk unless finishing).
    fn drain(&mut self, n: usize) -> std::io::Result<()> {
        let mut done = 0;
        while done < n {
            match self.file.write(&self.buf[done..n]) {
                Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
                Ok(k) => done += k,
                // Some file systems take the O_DIRECT open and refuse the
                // write: the rest goes on buffered, from where it stopped.
                Err(e) if self.direct && is_einval(&e) => self.buffered()?,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        self.filled = 0;
        Ok(())
    }

    /// Writes what is buffered and returns the file (not yet synced).
    fn finish(mut self) -> std::io::Result<File> {
        let whole = self.filled / DIRECT_ALIGN * DIRECT_ALIGN;
        if whole > 0 {
            let tail = self.filled - whole;
            self.drain(whole)?;
            self.buf.as_mut_slice().copy_within(whole..whole + tail, 0);
            self.filled = tail;
        }
        if self.filled > 0 {
            self.buffered()?;
            self.drain(self.filled)?;
        }
        Ok(self.file)
    }
}

impl Write for DirectOut {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        let n = data.len().min(DIRECT_CHUNK - self.filled);
        self.buf.as_mut_slice()[self.filled..self.filled + n].copy_from_slice(&data[..n]);
        self.filled += n;
        if self.filled == DIRECT_CHUNK {
            self.drain(DIRECT_CHUNK)?;
        }
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        // Only whole chunks are written before `finish`: alignment.
        Ok(())
    }
}

/// The I/O error message inside a serialization error, if that is its cause
/// (rkyv wraps the writer's error in its own type).
pub(super) fn io_cause(e: &rkyv::rancor::BoxedError) -> Option<String> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = source {
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            return Some(io.to_string());
        }
        source = err.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic bytes that differ at every offset of interest.
    fn pattern(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 131 + i / 4096) as u8).collect()
    }

    /// Writes `data` through a `DirectOut` in `pieces`-sized writes.
    fn write_through(path: &Path, data: &[u8], piece: usize) -> bool {
        let mut out = DirectOut::create(path).unwrap();
        let direct = out.direct;
        for chunk in data.chunks(piece.max(1)) {
            out.write_all(chunk).unwrap();
        }
        out.finish().unwrap().sync_all().unwrap();
        direct
    }

    /// Every size around the block and chunk boundaries comes back exactly,
    /// whatever the write sizes, on the repository's file system (where
    /// direct I/O is taken) and on /dev/shm (tmpfs: taken or refused,
    /// depending on the kernel).
    #[test]
    fn direct_out_writes_exactly_the_bytes() {
        let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("target");
        std::fs::create_dir_all(&target).unwrap();
        let mut dirs = vec![tempfile::tempdir_in(&target).unwrap()];
        if let Ok(shm) = tempfile::tempdir_in("/dev/shm") {
            dirs.push(shm);
        }
        let mut any_direct = false;
        for dir in &dirs {
            for size in [
                0,
                1,
                DIRECT_ALIGN - 1,
                DIRECT_ALIGN,
                DIRECT_ALIGN + 1,
                DIRECT_CHUNK - 1,
                DIRECT_CHUNK,
                DIRECT_CHUNK + 1,
                3 * DIRECT_CHUNK + DIRECT_ALIGN + 17,
            ] {
                let data = pattern(size);
                for piece in [7, 4096, 1 << 20, 3 << 20] {
                    let path = dir.path().join(format!("f-{size}-{piece}"));
                    any_direct |= write_through(&path, &data, piece);
                    let back = std::fs::read(&path).unwrap();
                    assert!(back == data, "{} bytes in {piece}-byte writes", size);
                }
            }
        }
        // Where direct I/O was taken, a refused write must fall back.
        if any_direct {
            let path = dirs[0].path().join("refused");
            let mut out = DirectOut::create(&path).unwrap();
            if out.direct {
                out.write_all(&pattern(100)).unwrap();
                // An unaligned direct write: the kernel refuses it (EINVAL).
                out.drain(100).unwrap();
                assert!(!out.direct, "the refusal switched to buffered writes");
                out.write_all(&pattern(5000)[100..]).unwrap();
                out.finish().unwrap();
                assert!(std::fs::read(&path).unwrap() == pattern(5000));
            }
        }
    }
}
