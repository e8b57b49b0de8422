//! Opening an embedding store (format: [`crate::format::embeddings`]):
//! every check once, at open, as for the cache's shards, then rows read
//! straight from the memory maps.

use std::fs::File;
use std::path::{Path, PathBuf};

use memmap2::Mmap;
use zerocopy::FromBytes;

use crate::error::EmbeddingError;
use crate::format::embeddings::{
    Dtype, INDEX_FILE, KEYS_FILE, META_FILE, NO_ROW, STORE_FORMAT, STORE_VERSION, STORES_DIR,
    StoreMeta, VECTORS_FILE, parse_npy,
};
use crate::train::loader::BatchMut;

type Result<T, E = EmbeddingError> = std::result::Result<T, E>;

/// One embedding store of a cache, opened and verified: its metadata, its
/// rows (`[unique, dim]`, float32 or float16) and each reaction's row.
///
/// [`ThreadSource::embeddings`](crate::ThreadSource::embeddings) checks everything once: the metadata, that the
/// store belongs to the cache's current content, both files' sizes and
/// xxh3 checksums, the `.npy` headers (dtype, C order, shape), every index
/// entry, and that every value is finite. After that, reads are copies
/// out of the memory maps.
pub struct EmbeddingStore {
    dir: PathBuf,
    meta: StoreMeta,
    dtype: Dtype,
    vectors: Mmap,
    vectors_at: usize,
    index: Mmap,
    index_at: usize,
    keys: Mmap,
    keys_at: usize,
}

impl std::fmt::Debug for EmbeddingStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddingStore")
            .field("dir", &self.dir)
            .field("name", &self.meta.name)
            .field("dtype", &self.dtype)
            .field("unique", &self.meta.unique)
            .field("dim", &self.meta.dim)
            .finish()
    }
}

fn damaged(path: &Path, reason: impl Into<String>) -> EmbeddingError {
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
    // SAFETY: the store is published whole by an atomic rename and never
    // written in place afterwards; a reader keeps the generation it mapped
    // (a republish replaces the directory, not these files' bytes).
    unsafe { Mmap::map(&file) }.map_err(|e| damaged(path, e.to_string()))
}

/// The position of the first element of `xs` that is `bad`, checked in
/// branch-free blocks: a store is checked in full at every open, and a
/// short-circuiting scan does not vectorise (opening a 25 MB float32 store
/// took 12 ms with one, 5 ms with blocks of 4,096).
fn first_where<T: Copy>(xs: &[T], bad: impl Fn(T) -> bool) -> Option<usize> {
    const BLOCK: usize = 4096;
    xs.chunks(BLOCK)
        .position(|c| c.iter().fold(false, |any, &x| any | bad(x)))
        .and_then(|b| {
            let at = b * BLOCK;
            xs[at..].iter().position(|&x| bad(x)).map(|i| at + i)
        })
}

/// Checks a mapped `.npy` file against its metadata entry and its expected
/// dtype and shape; returns where the data starts.
fn check_npy(
    path: &Path,
    bytes: &[u8],
    meta: &StoreMeta,
    name: &str,
    dtype: Dtype,
    shape: &[usize],
) -> Result<usize> {
    let want = meta
        .files
        .get(name)
        .ok_or_else(|| damaged(path, format!("{META_FILE} lists no {name}")))?;
    if bytes.len() as u64 != want.bytes {
        return Err(damaged(
            path,
            format!(
                "{} bytes, the metadata says {} (damaged store)",
                bytes.len(),
                want.bytes
            ),
        ));
    }
    let hash = format!("{:016x}", xxhash_rust::xxh3::xxh3_64(bytes));
    if hash != want.xxh3 {
        return Err(damaged(path, "checksum mismatch (damaged store)"));
    }
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

impl EmbeddingStore {
    /// "No row": the [`index`](Self::index) entry of a reaction with no
    /// input (a retweet, a reply whose tokens are `[]`, no description),
    /// which reads as zeros; also [`UniqueTexts::NONE`](crate::UniqueTexts::NONE).
    pub const NO_ROW: u32 = crate::schema::NO_ROW;

    /// Opens store `name` under `derived/` verified in full, of whatever
    /// cache content it was computed for (`for_content` checks it: the
    /// content id and the reaction count), e.g. to reuse its rows.
    pub(crate) fn open_checked(
        derived: &Path,
        for_content: Option<(&str, u64)>,
        name: &str,
    ) -> Result<EmbeddingStore> {
        check_name(name)?;
        let dir = derived.join(STORES_DIR).join(name);
        let meta_path = dir.join(META_FILE);
        let text = match std::fs::read(&meta_path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(EmbeddingError::Missing {
                    path: dir,
                    name: name.to_owned(),
                    have: store_names(derived),
                });
            }
            Err(e) => return Err(damaged(&meta_path, e.to_string())),
        };
        let meta: StoreMeta = serde_json::from_slice(&text)
            .map_err(|e| damaged(&meta_path, format!("unreadable store metadata: {e}")))?;
        if meta.format != STORE_FORMAT || meta.version != STORE_VERSION {
            return Err(damaged(
                &meta_path,
                format!(
                    "not a socialctx embedding store of version {STORE_VERSION} (format {:?}, version {})",
                    meta.format, meta.version
                ),
            ));
        }
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
        let dtype = Dtype::of_meta(&meta.dtype).ok_or_else(|| {
            damaged(
                &meta_path,
                format!("dtype {:?} is not float32 or float16", meta.dtype),
            )
        })?;
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
        if (meta.dim == 0) != (meta.unique == 0) {
            return Err(damaged(
                &meta_path,
                format!("{} rows of dimension {}", meta.unique, meta.dim),
            ));
        }
        let vpath = dir.join(VECTORS_FILE);
        let vectors = map(&vpath)?;
        let vectors_at = check_npy(
            &vpath,
            &vectors,
            &meta,
            VECTORS_FILE,
            dtype,
            &[meta.unique, meta.dim],
        )?;
        let ipath = dir.join(INDEX_FILE);
        let index = map(&ipath)?;
        let index_at = check_npy(
            &ipath,
            &index,
            &meta,
            INDEX_FILE,
            Dtype::U32,
            &[meta.reactions],
        )?;
        let kpath = dir.join(KEYS_FILE);
        let keys = map(&kpath)?;
        let keys_at = check_npy(
            &kpath,
            &keys,
            &meta,
            KEYS_FILE,
            Dtype::U64,
            &[meta.unique, 2],
        )?;
        let store = EmbeddingStore {
            dir,
            meta,
            dtype,
            vectors,
            vectors_at,
            index,
            index_at,
            keys,
            keys_at,
        };
        let unique = store.meta.unique;
        if let Some(at) = first_where(store.index(), |r| r != NO_ROW && r as usize >= unique) {
            return Err(damaged(
                &ipath,
                format!("entry {at} points past the {unique} rows"),
            ));
        }
        // An all-ones exponent is an infinity or a NaN.
        const F32_EXPONENT: u32 = 0x7f80_0000;
        const F16_EXPONENT: u16 = 0x7c00;
        let non_finite = match store.dtype {
            Dtype::F16 => first_where(store.rows_f16(), |h| h & F16_EXPONENT == F16_EXPONENT),
            _ => first_where(store.rows_f32(), |x| {
                x.to_bits() & F32_EXPONENT == F32_EXPONENT
            }),
        };
        if non_finite.is_some() {
            return Err(damaged(&vpath, "non-finite values (damaged store)"));
        }
        Ok(store)
    }

    /// The store's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Its metadata.
    pub fn meta(&self) -> &StoreMeta {
        &self.meta
    }

    /// Row width.
    pub fn dim(&self) -> usize {
        self.meta.dim
    }

    /// Number of rows (distinct inputs).
    pub fn unique(&self) -> usize {
        self.meta.unique
    }

    /// Whether rows are float16 (else float32).
    pub fn is_half(&self) -> bool {
        self.dtype == Dtype::F16
    }

    /// Each reaction's row (cache order), [`NO_ROW`](Self::NO_ROW) for none.
    pub fn index(&self) -> &[u32] {
        <[u32]>::ref_from_bytes(&self.index[self.index_at..]).unwrap_or(&[])
    }

    /// Each row's content key, as [`UniqueTexts::key`](crate::UniqueTexts::key)
    /// computes it.
    pub fn keys(&self) -> impl Iterator<Item = u128> + '_ {
        <[u64]>::ref_from_bytes(&self.keys[self.keys_at..])
            .unwrap_or(&[])
            .chunks_exact(2)
            .map(|k| u128::from(k[0]) | (u128::from(k[1]) << 64))
    }

    /// The rows of a float32 store, `[unique * dim]` (empty for float16).
    pub fn rows_f32(&self) -> &[f32] {
        match self.dtype {
            Dtype::F32 => <[f32]>::ref_from_bytes(&self.vectors[self.vectors_at..]).unwrap_or(&[]),
            _ => &[],
        }
    }

    /// The rows of a float16 store as raw bits, `[unique * dim]` (empty for float32).
    pub fn rows_f16(&self) -> &[u16] {
        match self.dtype {
            Dtype::F16 => <[u16]>::ref_from_bytes(&self.vectors[self.vectors_at..]).unwrap_or(&[]),
            _ => &[],
        }
    }

    /// For the row slots of a batch (`positions`' threads, `width` slots
    /// each, `reactions` as [`BatchMut::with_reactions`](crate::BatchMut::with_reactions)
    /// recorded them), each slot's row in this store, or -1 for none.
    /// `offsets[p]` is thread `p`'s first reaction in cache order
    /// ([`reaction_offsets`](crate::ThreadSource::reaction_offsets)). Slots of threads
    /// past `positions` get -1.
    pub fn rows_of_slots(
        &self,
        offsets: &[u64],
        positions: &[usize],
        reactions: &[u32],
        width: usize,
        out: &mut [i32],
    ) {
        let index = self.index();
        for (slot, (o, &r)) in out.iter_mut().zip(reactions).enumerate() {
            let row = if width == 0 || r == BatchMut::NO_REACTION {
                None
            } else {
                positions
                    .get(slot / width)
                    .and_then(|&p| offsets.get(p))
                    .and_then(|&first| index.get((first + u64::from(r)) as usize))
                    .filter(|&&row| row != NO_ROW)
            };
            *o = row.map_or(-1, |&row| row as i32);
        }
    }

    /// Copies the rows named by `rows` (-1: zeros) into `out`, `dim` values
    /// each: float32 stores into `f32`, float16 stores into `u16` bits.
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
        let dim = self.meta.dim;
        let src: &[T] = <[T]>::ref_from_bytes(&self.vectors[self.vectors_at..]).unwrap_or(&[]);
        let fits = std::mem::size_of::<T>() == self.dtype.size();
        for (slot, (dst, &row)) in out.chunks_exact_mut(dim.max(1)).zip(rows).enumerate() {
            if row < 0 && previous.is_some_and(|p| p.get(slot) == Some(&-1)) {
                continue;
            }
            match usize::try_from(row)
                .ok()
                .filter(|_| fits)
                .and_then(|r| src.get(r * dim..(r + 1) * dim))
            {
                Some(from) => dst.copy_from_slice(from),
                None => dst.fill(T::default()),
            }
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
