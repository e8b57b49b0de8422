//! The embedding store's format, both directions: what
//! [`StoreWriter`](crate::StoreWriter) writes under
//! `CACHE_DIR/derived/embeddings/<name>/` and what
//! [`EmbeddingStore`](crate::EmbeddingStore) reads.
//!
//! ```text
//! <name>/
//!   seg-00000.npy  [rows, dim] float32 or float16, C order: immutable row
//!   seg-00001.npy  segments; global row r is row r of their concatenation
//!   ...            (segment k holds rows sum(rows of 0..k) ..), so a row's
//!                  segment follows from meta.json's row counts
//!   index.npy      uint32 [reactions]: each reaction's global row (cache
//!                  order: threads by position, reactions by time), NO_ROW
//!                  for none
//!   keys.npy       uint64 [rows, 2]: each global row's input as a content
//!                  key (xxh3-128 of its tokens, low then high half), what a
//!                  later embed of a rebuilt cache reuses rows by
//!   meta.json      StoreMeta: field, dtype, dim, counts, the cache's content
//!                  id, the model's id, size and xxh3-64 of every file
//! ```
//!
//! A from-scratch embed writes one segment, its rows in
//! [`UniqueTexts`](crate::UniqueTexts) order. A nightly embed of a rebuilt
//! cache hard-links the previous store's segments into the new store
//! (never copying a row), adds one segment of the new inputs' rows, and
//! writes a new index and keys. Rows no reaction uses any more stay until
//! compaction rewrites the store as one segment in `UniqueTexts` order:
//! byte for byte what a from-scratch embed writes.
//!
//! The `.npy` files are NumPy's format 1.0 (a 64-byte-aligned text header,
//! then the raw little-endian array), so that NumPy memory-maps each of
//! them as it is and the rows start aligned.
//!
//! Version 2 (one `vectors.npy`, no segments) is read as a store of one
//! segment ([`StoreMeta::upgrade`]).
//!
//! Beside the store, `.<name>.verified` ([`VerifiedRecord`]) records the
//! segments a writer last saw whole: per segment its checksum and stat. It
//! is not a file of the store: a store stays byte for byte what its embed
//! wrote (compaction's promise), and its files are never rewritten after
//! publication.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// `meta.json`'s `format`.
pub const STORE_FORMAT: &str = "socialctx-embeddings";
/// `meta.json`'s `version` (3: rows in segments).
pub const STORE_VERSION: u32 = 3;
/// Version 2: one rows file, [`V2_VECTORS_FILE`]; read as one segment.
pub const STORE_VERSION_V2: u32 = 2;
/// Version 2's rows file.
pub const V2_VECTORS_FILE: &str = "vectors.npy";
/// The per-reaction index file.
pub const INDEX_FILE: &str = "index.npy";
/// The per-row content keys file.
pub const KEYS_FILE: &str = "keys.npy";
/// The metadata file.
pub const META_FILE: &str = "meta.json";
/// An unfinished embed's progress, in the staging directory only.
pub const PROGRESS_FILE: &str = "progress.json";
/// Where stores live under the cache's `derived/`.
pub const STORES_DIR: &str = "embeddings";
pub use crate::schema::NO_ROW;

/// The file name of segment `n` of a store.
pub fn segment_file(n: usize) -> String {
    format!("seg-{n:05}.npy")
}

/// The staging directory of store `name`, beside it: an unfinished embed,
/// kept across interruptions so that the next one resumes.
pub fn staging_name(name: &str) -> String {
    format!(".{name}.partial")
}

/// The lock file of store `name`, beside it.
pub fn lock_name(name: &str) -> String {
    format!(".{name}.lock")
}

/// The verified record of store `name`, beside it ([`VerifiedRecord`]).
pub fn verified_name(name: &str) -> String {
    format!(".{name}.verified")
}

/// `.<name>.verified`'s `format`.
pub const VERIFIED_FORMAT: &str = "socialctx-embeddings-verified";

/// What a writer records after publishing a store, under its lock: the
/// segments it had verified (or written), each with its checksum and stat,
/// and `at_ns`, the file system's clock when the record was made (the
/// mtime of a file touched just then). A nightly embed
/// (`Verify::Changed`) reads again only the segments whose stat no longer
/// matches, as git's index does for the work tree: a write changes a
/// file's mtime and ctime, a replacement its inode, and ctime cannot be set
/// back. Git's racy-clean rule applies: a segment whose recorded mtime or
/// ctime is not strictly older than `at_ns` may have changed within the
/// same clock tick after it was stat'ed, and is not trusted. The record is
/// advisory: anything unreadable or inconsistent in it reads as no record
/// (every segment verified), and readers never consult it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerifiedRecord {
    /// [`VERIFIED_FORMAT`].
    pub format: String,
    /// The store's name.
    pub name: String,
    /// The file system's clock when the record was made, in ns since the
    /// epoch.
    pub at_ns: i64,
    /// The segments as they were verified.
    pub segments: Vec<VerifiedSegment>,
}

/// One segment of a [`VerifiedRecord`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerifiedSegment {
    /// Its file name in the store.
    pub file: String,
    /// Size in bytes (the metadata's and the stat's).
    pub bytes: u64,
    /// xxh3-64 of the bytes verified, 16 hex digits.
    pub xxh3: String,
    /// `st_dev`.
    pub dev: u64,
    /// `st_ino`.
    pub ino: u64,
    /// `st_mtime` in ns.
    pub mtime_ns: i64,
    /// `st_ctime` in ns.
    pub ctime_ns: i64,
}

impl VerifiedSegment {
    /// Whether `seg` (of the metadata), with stat `stat`, is the segment
    /// this entry verified, and not racily so (see [`VerifiedRecord`]).
    pub fn vouches_for(&self, seg: &StoreSegment, stat: &std::fs::Metadata, at_ns: i64) -> bool {
        use std::os::unix::fs::MetadataExt;
        self.file == seg.file
            && self.bytes == seg.bytes
            && self.xxh3 == seg.xxh3
            && self.bytes == stat.size()
            && (self.dev, self.ino) == (stat.dev(), stat.ino())
            && self.mtime_ns == stat_ns(stat.mtime(), stat.mtime_nsec())
            && self.ctime_ns == stat_ns(stat.ctime(), stat.ctime_nsec())
            && self.mtime_ns < at_ns
            && self.ctime_ns < at_ns
    }
}

/// A stat time in ns (saturating: a hostile or absurd time matches nothing
/// real rather than wrapping onto it).
pub fn stat_ns(secs: i64, nsecs: i64) -> i64 {
    secs.saturating_mul(1_000_000_000).saturating_add(nsecs)
}

/// Size and checksum of one file of a store.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoreFile {
    /// Size in bytes.
    pub bytes: u64,
    /// xxh3-64 of the bytes, 16 hex digits.
    pub xxh3: String,
}

/// One row segment of a store.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoreSegment {
    /// Its file name.
    pub file: String,
    /// Its rows.
    pub rows: usize,
    /// Size in bytes.
    pub bytes: u64,
    /// xxh3-64 of the bytes, 16 hex digits.
    pub xxh3: String,
}

/// `meta.json` of a store.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StoreMeta {
    /// [`STORE_FORMAT`].
    pub format: String,
    /// [`STORE_VERSION`].
    pub version: u32,
    /// The store's name (its directory).
    pub name: String,
    /// `"reply"` or `"description"`.
    pub field: String,
    /// `"float32"` or `"float16"`.
    pub dtype: String,
    /// Row width (0 for a store with no rows).
    pub dim: usize,
    /// Distinct inputs of the cache: the rows some reaction uses.
    pub unique: usize,
    /// Rows in all segments: `unique` plus the rows no reaction uses any
    /// more (until compaction).
    #[serde(default)]
    pub rows: usize,
    /// Index entries: the cache's reactions.
    pub reactions: usize,
    /// The content id of the cache the store was computed from.
    pub cache_content_id: String,
    /// The identity of the model the rows were made with (the caller's id,
    /// e.g. a hash of its weights, or one the command derived); None when
    /// unknown (stores of every version before it was recorded read so).
    /// Rows are reused, and an interrupted embed resumed, only under the
    /// same id, never under None; a reader can require one
    /// ([`EmbeddingStore::require_model`](crate::EmbeddingStore::require_model)).
    #[serde(default)]
    pub model_id: Option<String>,
    /// Inputs per model call.
    pub batch_size: usize,
    /// Model calls a from-scratch embed makes.
    #[serde(default)]
    pub calls: usize,
    /// [`INDEX_FILE`] and [`KEYS_FILE`]: size and checksum.
    pub files: BTreeMap<String, StoreFile>,
    /// The row segments, in global row order.
    #[serde(default)]
    pub segments: Vec<StoreSegment>,
}

impl StoreMeta {
    /// A version-2 store's metadata as version 3's: its one rows file is
    /// the one segment. Later versions are left as they are (and refused).
    pub fn upgrade(mut self) -> StoreMeta {
        if self.version == STORE_VERSION_V2 {
            self.rows = self.unique;
            if let Some(f) = self.files.remove(V2_VECTORS_FILE)
                && self.unique > 0
            {
                self.segments = vec![StoreSegment {
                    file: V2_VECTORS_FILE.into(),
                    rows: self.unique,
                    bytes: f.bytes,
                    xxh3: f.xxh3,
                }];
            }
            self.version = STORE_VERSION;
        }
        self
    }

    /// Each segment's first global row, and the total rows at the end.
    pub fn segment_starts(&self) -> Vec<usize> {
        let mut starts = Vec::with_capacity(self.segments.len() + 1);
        let mut at = 0;
        for s in &self.segments {
            starts.push(at);
            at += s.rows;
        }
        starts.push(at);
        starts
    }
}

/// Element types of `.npy` files in a store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dtype {
    /// `<f4`.
    F32,
    /// `<f2`.
    F16,
    /// `<u4`.
    U32,
    /// `<u8`.
    U64,
}

impl Dtype {
    /// NumPy's `descr`.
    pub fn descr(self) -> &'static str {
        match self {
            Dtype::F32 => "<f4",
            Dtype::F16 => "<f2",
            Dtype::U32 => "<u4",
            Dtype::U64 => "<u8",
        }
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            Dtype::F16 => 2,
            Dtype::F32 | Dtype::U32 => 4,
            Dtype::U64 => 8,
        }
    }

    /// The vectors' dtype named in `meta.json`.
    pub fn of_meta(name: &str) -> Option<Dtype> {
        match name {
            "float32" => Some(Dtype::F32),
            "float16" => Some(Dtype::F16),
            _ => None,
        }
    }

    /// The name `meta.json` gives a vectors' dtype.
    pub fn meta_name(self) -> &'static str {
        match self {
            Dtype::F16 => "float16",
            _ => "float32",
        }
    }
}

/// A parsed `.npy` header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NpyHeader {
    /// `descr`, e.g. `<f4`.
    pub descr: String,
    /// `fortran_order`.
    pub fortran_order: bool,
    /// `shape`.
    pub shape: Vec<usize>,
    /// Where the array's bytes start.
    pub data_offset: usize,
}

const NPY_MAGIC: &[u8] = b"\x93NUMPY";

/// The header of a format-1.0 `.npy` file of `dtype` and `shape`, padded
/// with spaces so that the data starts at a multiple of 64 bytes.
pub fn npy_header(dtype: Dtype, shape: &[usize]) -> Vec<u8> {
    let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
    let shape = match dims.len() {
        1 => format!("({},)", dims[0]),
        _ => format!("({})", dims.join(", ")),
    };
    let mut dict = format!(
        "{{'descr': '{}', 'fortran_order': False, 'shape': {shape}, }}",
        dtype.descr()
    );
    let unpadded = NPY_MAGIC.len() + 2 + 2 + dict.len() + 1;
    dict.push_str(&" ".repeat(unpadded.next_multiple_of(64) - unpadded));
    dict.push('\n');
    let mut out = Vec::with_capacity(unpadded.next_multiple_of(64));
    out.extend_from_slice(NPY_MAGIC);
    out.extend_from_slice(&[1, 0]);
    out.extend_from_slice(&(dict.len() as u16).to_le_bytes());
    out.extend_from_slice(dict.as_bytes());
    out
}

/// Parses the header of a `.npy` file (versions 1 to 3). The reason on
/// failure says what is wrong.
pub fn parse_npy(bytes: &[u8]) -> Result<NpyHeader, String> {
    if bytes.len() < 10 || &bytes[..6] != NPY_MAGIC {
        return Err("not a .npy file (no \\x93NUMPY magic)".into());
    }
    let (len, start) = match bytes[6] {
        1 => (usize::from(u16::from_le_bytes([bytes[8], bytes[9]])), 10),
        2 | 3 if bytes.len() >= 12 => (
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
            12,
        ),
        v => return Err(format!(".npy format version {v} is not supported")),
    };
    let text = bytes
        .get(start..start + len)
        .ok_or("the .npy header is cut short")?;
    let text = std::str::from_utf8(text).map_err(|_| "the .npy header is not text")?;
    let value = |key: &str| -> Result<&str, String> {
        let at = text
            .find(&format!("'{key}':"))
            .ok_or_else(|| format!("the .npy header has no {key:?}"))?;
        Ok(text[at + key.len() + 3..].trim_start())
    };
    let descr = value("descr")?;
    let descr = descr
        .strip_prefix('\'')
        .and_then(|d| d.split_once('\''))
        .map(|(d, _)| d.to_owned())
        .ok_or("the .npy header's descr is not a string")?;
    let fortran_order = match value("fortran_order")? {
        v if v.starts_with("False") => false,
        v if v.starts_with("True") => true,
        _ => return Err("the .npy header's fortran_order is not a boolean".into()),
    };
    let shape = value("shape")?;
    let shape = shape
        .strip_prefix('(')
        .and_then(|s| s.split_once(')'))
        .map(|(s, _)| s)
        .ok_or("the .npy header's shape is not a tuple")?;
    let shape = shape
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.trim_end_matches('L').parse::<usize>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| "the .npy header's shape is not a tuple of sizes")?;
    Ok(NpyHeader {
        descr,
        fortran_order,
        shape,
        data_offset: start + len,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips_and_aligns() {
        for (dtype, shape) in [
            (Dtype::F32, vec![10, 4]),
            (Dtype::F16, vec![0, 0]),
            (Dtype::U32, vec![123_456]),
        ] {
            let h = npy_header(dtype, &shape);
            assert_eq!(h.len() % 64, 0);
            let p = parse_npy(&h).unwrap();
            assert_eq!(p.descr, dtype.descr());
            assert!(!p.fortran_order);
            assert_eq!(p.shape, shape);
            assert_eq!(p.data_offset, h.len());
        }
    }

    #[test]
    fn bad_headers_say_why() {
        assert!(parse_npy(b"PK\x03\x04 zip").unwrap_err().contains("magic"));
        let mut h = npy_header(Dtype::F32, &[2, 2]);
        h.truncate(20);
        assert!(parse_npy(&h).unwrap_err().contains("cut short"));
        let mut f = npy_header(Dtype::F32, &[2, 2]);
        let at = f.windows(5).position(|w| w == b"False").unwrap();
        f[at..at + 5].copy_from_slice(b"True ");
        assert!(parse_npy(&f).unwrap().fortran_order);
    }
}
