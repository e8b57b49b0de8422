//! The store's files on disk: `.npy` files written whole or allocated
//! up front, checksums read back in blocks, syncs, and the check that a
//! publish may replace the directory it replaces.

use std::fs::{self, File};
use std::os::unix::fs::FileExt;
use std::path::Path;

use super::super::format::{
    Dtype, INDEX_FILE, KEYS_FILE, META_FILE, StoreFile, V2_VECTORS_FILE, npy_header,
};
use super::Result;
use crate::error::EmbeddingError;

pub(super) fn io_err(path: &Path, source: std::io::Error) -> EmbeddingError {
    EmbeddingError::Io {
        path: path.to_owned(),
        source,
    }
}

pub(super) fn io<T>(path: &Path, r: std::io::Result<T>) -> Result<T> {
    r.map_err(|e| io_err(path, e))
}

/// Publishing replaces the store's directory and removes the old one:
/// refused up front when that would delete a file socialctx did not write
/// or cannot be done (a read-only store: the exchange succeeded, then
/// removing the old store failed, so the embed exited 1 with the new store
/// published, and every later embed failed on the read-only staging
/// directory the user never touched).
pub(super) fn check_replaceable(target: &Path) -> Result<()> {
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

pub(super) fn rows_err(reason: impl Into<String>) -> EmbeddingError {
    EmbeddingError::Rows {
        reason: reason.into(),
    }
}

pub(super) fn sync_path(path: &Path) -> Result<()> {
    io(path, File::open(path).and_then(|f| f.sync_all()))
}

/// Writes a whole `.npy` file (synced with the rest at publication; a
/// resumed embed checks it against the returned size and checksum).
pub(super) fn write_npy(
    path: &Path,
    dtype: Dtype,
    shape: &[usize],
    data: &[u8],
) -> Result<StoreFile> {
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
pub(super) fn hash_file(path: &Path) -> Result<StoreFile> {
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
pub(super) fn create_segment(
    path: &Path,
    dtype: Dtype,
    rows: usize,
    dim: usize,
) -> Result<(File, usize)> {
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
