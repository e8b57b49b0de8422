//! Texts for embedding: the distinct inputs of a text field
//! (`Cache.unique_texts`), the helpers `socialctx.embed` writes its store
//! with (checksums, atomic publication), and the row gather that fills
//! `Batch.embeddings` in `Loader.fill`.

use std::path::PathBuf;

use numpy::{PyArray1, PyArray2, PyArray3, PyArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use socialctx as sc;

use crate::{AnyCache, Error, PyCache, load_err};

/// The distinct non-empty inputs of one text field over a set of threads,
/// ordered by token count, with their counts and a per-reaction index.
/// Made by `Cache.unique_texts`.
#[pyclass(frozen, module = "socialctx", name = "UniqueTexts")]
pub(crate) struct PyUniqueTexts {
    pub(crate) cache: Py<PyCache>,
    pub(crate) inner: sc::UniqueTexts,
}

pub(crate) fn collect(
    py: Python<'_>,
    cache: &Bound<'_, PyCache>,
    field: &str,
    positions: Option<Vec<usize>>,
) -> PyResult<PyUniqueTexts> {
    let field: sc::TextField = field.parse().map_err(PyValueError::new_err)?;
    let inner = {
        let c: &AnyCache = &cache.get().inner;
        py.detach(|| sc::UniqueTexts::collect(c, field, positions.as_deref()))
            .map_err(load_err)?
    };
    Ok(PyUniqueTexts {
        cache: cache.clone().unbind(),
        inner,
    })
}

impl PyUniqueTexts {
    fn tokens_at(&self, i: usize) -> PyResult<Vec<String>> {
        let cache: &AnyCache = &self.cache.get().inner;
        let t = self.inner.tokens(cache, i).map_err(load_err)?;
        Ok(t.iter().map(str::to_owned).collect())
    }

    fn check(&self, i: isize) -> PyResult<usize> {
        crate::py_index(i, self.inner.len(), |i, len| {
            format!("input {i} out of range for {len} unique texts")
        })
    }
}

#[pymethods]
impl PyUniqueTexts {
    fn __len__(&self) -> usize {
        self.inner.len()
    }

    /// The tokens of input `i`.
    fn __getitem__(&self, i: isize) -> PyResult<Vec<String>> {
        self.tokens_at(self.check(i)?)
    }

    fn __repr__(&self) -> String {
        format!(
            "socialctx.UniqueTexts(field={:?}, unique={}, reactions={})",
            self.inner.field().as_str(),
            self.inner.len(),
            self.inner.index().len()
        )
    }

    /// "reply" or "description".
    #[getter]
    fn field(&self) -> &'static str {
        self.inner.field().as_str()
    }

    /// The token lists of inputs `start..stop`, in order.
    fn batch(&self, start: usize, stop: usize) -> PyResult<Vec<Vec<String>>> {
        let stop = stop.min(self.inner.len());
        (start.min(stop)..stop).map(|i| self.tokens_at(i)).collect()
    }

    /// np.uint32 [unique]: reactions per input.
    #[getter]
    fn counts<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<u32>> {
        let v: Vec<u32> = (0..self.inner.len()).map(|i| self.inner.count(i)).collect();
        PyArray1::from_vec(py, v)
    }

    /// np.uint32 [unique]: tokens per input (non-decreasing).
    #[getter]
    fn token_counts<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<u32>> {
        let v: Vec<u32> = (0..self.inner.len())
            .map(|i| self.inner.token_count(i))
            .collect();
        PyArray1::from_vec(py, v)
    }

    /// np.uint32 [reactions]: per reaction of the threads (thread order,
    /// then time order), its input, or 0xFFFFFFFF (NONE) for none.
    #[getter]
    fn index<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<u32>> {
        PyArray1::from_slice(py, self.inner.index())
    }

    /// np.uint64 [threads + 1]: where each thread's reactions start in `index`.
    #[getter]
    fn offsets<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<u64>> {
        PyArray1::from_slice(py, self.inner.offsets())
    }

    /// The value of `index` for a reaction with no input.
    #[classattr]
    #[allow(non_snake_case)]
    fn NONE() -> u32 {
        sc::UniqueTexts::NONE
    }
}

/// xxh3-64 of a file's bytes as 16 hex digits (read in blocks, GIL released).
#[pyfunction]
pub(crate) fn _xxh3_file(py: Python<'_>, path: PathBuf) -> PyResult<String> {
    use std::io::Read;
    let hash = py.detach(|| -> std::io::Result<u64> {
        let mut f = std::fs::File::open(&path)?;
        let mut h = xxhash_rust::xxh3::Xxh3Default::new();
        let mut buf = vec![0u8; 1 << 20];
        loop {
            let n = f.read(&mut buf)?;
            if n == 0 {
                return Ok(h.digest());
            }
            h.update(&buf[..n]);
        }
    });
    hash.map(|h| format!("{h:016x}"))
        .map_err(|e| Error::new_err(format!("{}: {e}", path.display())))
}

/// Publishes the finished directory `staging` as `target` atomically: a
/// plain rename when `target` does not exist, else an exchange of the two
/// (renameat2 RENAME_EXCHANGE), after which `staging` holds the old store
/// for the caller to remove. Readers see the old store or the new, never a
/// mixture or nothing. Returns whether an old store was exchanged out.
#[pyfunction]
pub(crate) fn _publish_dir(staging: PathBuf, target: PathBuf) -> PyResult<bool> {
    use rustix::fs::{CWD, RenameFlags, renameat_with};
    let err = |e: rustix::io::Errno| {
        Error::new_err(format!(
            "publishing {} as {}: {e}",
            staging.display(),
            target.display()
        ))
    };
    match renameat_with(CWD, &staging, CWD, &target, RenameFlags::NOREPLACE) {
        Ok(()) => Ok(false),
        Err(rustix::io::Errno::EXIST) => {
            renameat_with(CWD, &staging, CWD, &target, RenameFlags::EXCHANGE).map_err(err)?;
            Ok(true)
        }
        Err(e) => Err(err(e)),
    }
}

/// One embedding store as a Loader reads it: its row matrix and its
/// per-reaction index (NumPy arrays, usually memory maps).
pub(crate) struct LoaderEmbedding {
    pub(crate) name: String,
    /// [unique, dim] float32, or float16 viewed as uint16.
    pub(crate) vectors: Py<PyAny>,
    /// [reactions] uint32.
    pub(crate) index: Py<PyAny>,
    pub(crate) dim: usize,
    pub(crate) half: bool,
}

impl LoaderEmbedding {
    /// Opens store `name` of `cache` through `socialctx.embed` (which checks
    /// that it belongs to this cache's content).
    pub(crate) fn open(cache: &Bound<'_, PyCache>, name: &str) -> PyResult<Self> {
        let py = cache.py();
        let module = py.import("socialctx.embed")?;
        let opened = module.call_method1("_open_for_loader", (cache, name))?;
        let (vectors, index, dim, half): (Bound<'_, PyAny>, Bound<'_, PyAny>, usize, bool) =
            opened.extract()?;
        let reactions = cache.get().inner.manifest().reactions as usize;
        let index_len = index.len()?;
        if index_len != reactions {
            return Err(Error::new_err(format!(
                "embedding store {name:?}: index of {index_len} reactions, the cache has {reactions}"
            )));
        }
        Ok(LoaderEmbedding {
            name: name.to_owned(),
            vectors: vectors.unbind(),
            index: index.unbind(),
            dim,
            half,
        })
    }

    /// A zeroed output array [batch_size, max_cxt, dim] and the array the
    /// user sees (the same memory; float16 for a half store).
    pub(crate) fn new_output<'py>(
        &self,
        py: Python<'py>,
        batch_size: usize,
        max_cxt: usize,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
        let shape = [batch_size, max_cxt, self.dim];
        if self.half {
            let raw = PyArray3::<u16>::zeros(py, shape, false).into_any();
            let numpy = py.import("numpy")?;
            let user = raw.call_method1("view", (numpy.getattr("float16")?,))?;
            Ok((raw, user))
        } else {
            let raw = PyArray3::<f32>::zeros(py, shape, false).into_any();
            Ok((raw.clone(), raw))
        }
    }
}

/// Where rows come from for one batch: per thread slot, the selected
/// reactions' positions in the store's index (None = padding).
pub(crate) struct Picks {
    /// `rows[b * max_cxt + t]`: global reaction index, or u64::MAX for zeros.
    pub(crate) rows: Vec<u64>,
}

impl Picks {
    /// The reactions `selection` picks for each thread of `positions`, as
    /// global reaction indices (`offsets[pos] + i`), laid out like the
    /// batch's mask.
    pub(crate) fn new(
        cache: &AnyCache,
        offsets: &[u64],
        positions: &[usize],
        selection: sc::Selection,
        batch_size: usize,
        max_cxt: usize,
    ) -> Result<Picks, sc::LoadError> {
        let mut rows = vec![u64::MAX; batch_size * max_cxt];
        let sel = sc::Selection {
            max_cxt: max_cxt.min(selection.max_cxt),
            ..selection
        };
        for (b, &pos) in positions.iter().enumerate() {
            let t = cache
                .numbers(pos)?
                .ok_or(sc::LoadError::NoSuchThread { position: pos })?;
            for (n, i) in sel.indices(&t).enumerate() {
                rows[b * max_cxt + n] = offsets[pos] + i as u64;
            }
        }
        Ok(Picks { rows })
    }
}

/// Copies each picked reaction's row (zeros where it has none) into `out`.
fn gather<T: Copy + Default + Send + Sync>(
    picks: &Picks,
    index: &[u32],
    vectors: &[T],
    dim: usize,
    out: &mut [T],
) {
    for (slot, &g) in picks.rows.iter().enumerate() {
        let dst = &mut out[slot * dim..(slot + 1) * dim];
        let row = index
            .get(g as usize)
            .copied()
            .unwrap_or(sc::UniqueTexts::NONE);
        match vectors.get(row as usize * dim..(row as usize + 1) * dim) {
            Some(src) if g != u64::MAX && row != sc::UniqueTexts::NONE => dst.copy_from_slice(src),
            _ => dst.fill(T::default()),
        }
    }
}

/// Fills the output `out` of embedding `e` for `picks` (GIL released for the copy).
pub(crate) fn fill_embedding(
    py: Python<'_>,
    e: &LoaderEmbedding,
    picks: &Picks,
    out: &Bound<'_, PyAny>,
) -> PyResult<()> {
    let index = e.index.bind(py).cast::<PyArray1<u32>>()?.try_readonly()?;
    let index = index.as_slice()?;
    if e.half {
        let vectors = e.vectors.bind(py).cast::<PyArray2<u16>>()?.try_readonly()?;
        let mut dst = out.cast::<PyArray3<u16>>()?.try_readwrite()?;
        let (v, d) = (vectors.as_slice()?, dst.as_slice_mut()?);
        py.detach(|| gather(picks, index, v, e.dim, d));
    } else {
        let vectors = e.vectors.bind(py).cast::<PyArray2<f32>>()?.try_readonly()?;
        let mut dst = out.cast::<PyArray3<f32>>()?.try_readwrite()?;
        let (v, d) = (vectors.as_slice()?, dst.as_slice_mut()?);
        py.detach(|| gather(picks, index, v, e.dim, d));
    }
    Ok(())
}

/// Per thread position, its first reaction's global index (cache order),
/// plus the total: what a store's per-reaction index is addressed by.
pub(crate) fn reaction_offsets(cache: &AnyCache) -> Result<Vec<u64>, sc::LoadError> {
    let mut offsets = Vec::with_capacity(cache.len() + 1);
    let mut next = 0u64;
    for i in 0..cache.len() {
        offsets.push(next);
        let t = cache
            .numbers(i)?
            .ok_or(sc::LoadError::NoSuchThread { position: i })?;
        next += t.reaction_count() as u64;
    }
    offsets.push(next);
    Ok(offsets)
}
