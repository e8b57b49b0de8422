//! `Batch`: one batch's NumPy buffers, sized once for `batch_size *
//! max_cxt` rows and refilled in place by a `Loader` (`loader.rs`). Each
//! fill writes its `[batch_size, width]` prefix contiguously (`width` is
//! `max_cxt` with `pad="max"`, the batch's longest selection rounded up with
//! `pad="longest"`) and the getters return views of that prefix, so nothing
//! is allocated or copied per batch.

use numpy::{PyArray1, PyArrayMethods, PyReadwriteArray1};
use pyo3::exceptions::{PyAttributeError, PyMemoryError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use socialctx as sc;

use crate::error::Result;

/// What a Batch was made for: fills by another Loader must match it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct BatchShape {
    pub(crate) max_cxt: usize,
    /// The Loader's outputs, one per buffer, in the crate's fill order.
    pub(crate) outputs: Vec<OutputShape>,
}

/// One output buffer: its name, key (a store's name), values per row slot
/// (None: one) and NumPy dtype, as the crate's `OutputBuf` says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct OutputShape {
    pub(crate) name: &'static str,
    pub(crate) key: Option<String>,
    pub(crate) per_slot: Option<usize>,
    pub(crate) dtype: &'static str,
}

impl BatchShape {
    /// The shape of batches of `max_cxt` rows for `spec`'s outputs.
    pub(crate) fn new(max_cxt: usize, spec: &sc::BatchSpec) -> Self {
        let outputs = (spec.buffers(0).into_iter())
            .map(|o| OutputShape {
                name: o.name,
                key: o.key.clone(),
                per_slot: o.per_slot,
                dtype: o.dtype(),
            })
            .collect();
        BatchShape { max_cxt, outputs }
    }

    /// The names of its outputs, each once, in order.
    pub(crate) fn names(&self) -> Vec<&'static str> {
        names(self.outputs.iter().map(|o| o.name))
    }
}

/// Output names, each once, in order.
pub(crate) fn names(all: impl Iterator<Item = &'static str>) -> Vec<&'static str> {
    let mut names: Vec<&'static str> = Vec::new();
    for name in all {
        if !names.contains(&name) {
            names.push(name);
        }
    }
    names
}

/// Names a Batch answers without the output: an empty dict for the keyed
/// ones (per store), None for the rest.
const KEYED: [&str; 2] = ["embedding_index", "embeddings"];
const UNKEYED: [&str; 1] = ["token_ids"];

/// Output `name` of a batch whose outputs are `outputs` (name and key
/// each), `array(i)` giving the `i`th's array: the array, or a dict of
/// them by key when it has keys (one per store).
pub(crate) fn by_name<'py, 'o>(
    py: Python<'py>,
    outputs: impl Iterator<Item = (&'static str, Option<&'o str>)>,
    name: &str,
    mut array: impl FnMut(usize) -> PyResult<Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let d = PyDict::new(py);
    for (i, (n, key)) in outputs.enumerate() {
        if n != name {
            continue;
        }
        match key {
            Some(k) => d.set_item(k, array(i)?)?,
            None => return array(i),
        }
    }
    Ok(d.into_any())
}

/// Every output by name (`names`), as `output(name)` gives each.
pub(crate) fn all_outputs<'py>(
    py: Python<'py>,
    names: &[&'static str],
    mut output: impl FnMut(&str) -> PyResult<Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for &name in names {
        d.set_item(name, output(name)?)?;
    }
    Ok(d)
}

/// What attribute `name` of a batch (`class`: "Batch", "GraphBatch") is
/// when its Loader lacks that output: an empty dict for a per-store one,
/// None for another output known by name, else an AttributeError.
pub(crate) fn absent_output<'py>(
    py: Python<'py>,
    class: &str,
    name: &str,
) -> PyResult<Bound<'py, PyAny>> {
    if KEYED.contains(&name) {
        return Ok(PyDict::new(py).into_any());
    }
    if UNKEYED.contains(&name) || sc::BatchSpec::output_names().contains(&name) {
        return Ok(py.None().into_bound(py));
    }
    Err(PyAttributeError::new_err(format!(
        "'socialctx.{class}' object has no attribute {name:?}"
    )))
}

/// A NumPy array of `n` zeros of `dtype`, allocated by NumPy (so that a
/// size that cannot be had is a MemoryError, never an abort).
fn zeros<'py>(py: Python<'py>, n: usize, dtype: &str) -> PyResult<Bound<'py, PyAny>> {
    py.import("numpy")?.call_method1("zeros", (n, dtype))
}

/// `flat[:rows * inner].reshape(rows, *shape)` for the user.
fn prefix<'py>(flat: &Bound<'py, PyAny>, shape: &[usize]) -> PyResult<Bound<'py, PyAny>> {
    let py = flat.py();
    let n: usize = shape.iter().product();
    let slice = pyo3::types::PySlice::new(py, 0, n as isize, 1);
    let head = flat.get_item(slice)?;
    head.call_method1("reshape", (PyTuple::new(py, shape)?,))
}

/// Output buffers of one batch, allocated once and refilled in place.
///
/// `features` ``[batch_size, width, 28]`` float32, `mask` ``[batch_size,
/// width]`` uint8, `lengths` uint32, `source_ids` uint64 and `labels` int8
/// ``[batch_size]``; then the Loader's outputs, each by its name
/// (`output_names()`, `outputs`, or as an attribute): `embedding_index[name]`
/// int32 ``[batch_size, width]`` (the row in store `name`, -1 for none)
/// and, for a Loader with ``dense=True``, `embeddings[name]`
/// ``[batch_size, width, dim]``; `token_ids` ``[batch_size, width, L]``;
/// the outputs named by the Loader's `outputs=`. Only the first `size`
/// threads are real; the rest is zero padding (mask 0). Every property is
/// a view of memory the next fill overwrites: copy what you keep, and
/// treat the views as read-only (the next fill relies on what it wrote:
/// padding rows it zeroed are not zeroed again).
#[pyclass(module = "socialctx", name = "Batch")]
pub(crate) struct PyBatch {
    pub(crate) features: Py<PyArray1<f32>>,
    pub(crate) mask: Py<PyArray1<u8>>,
    pub(crate) lengths: Py<PyArray1<u32>>,
    pub(crate) source_ids: Py<PyArray1<u64>>,
    pub(crate) labels: Py<PyArray1<i8>>,
    /// Per slot, the reaction of its thread filling it (sc::BatchMut::NO_REACTION: none).
    pub(crate) reactions: Vec<u32>,
    /// Per output of the shape: the buffer the crate fills (int32,
    /// float32, or uint16 for float16) and the user's view of it (float16
    /// for uint16).
    pub(crate) outputs: Vec<(Py<PyAny>, Py<PyAny>)>,
    pub(crate) shape: BatchShape,
    /// Threads filled by the last fill (the rest is zero padding).
    #[pyo3(get)]
    pub(crate) size: usize,
    /// Rows per thread of the last fill.
    #[pyo3(get)]
    pub(crate) width: usize,
    pub(crate) batch_size: usize,
}

#[pymethods]
impl PyBatch {
    /// Capacity in threads.
    #[getter]
    fn batch_size(&self) -> usize {
        self.batch_size
    }
    /// Rows per thread the buffers hold (the Loader's `max_cxt`).
    #[getter]
    fn max_cxt(&self) -> usize {
        self.shape.max_cxt
    }
    /// float32 [batch_size, width, 28]: the selected reactions' features in time order.
    #[getter]
    fn features<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        prefix(
            self.features.bind(py).as_any(),
            &[self.batch_size, self.width, sc::Feature::COUNT],
        )
    }
    /// uint8 [batch_size, width]: 1 for a real row, 0 for padding.
    #[getter]
    fn mask<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        prefix(self.mask.bind(py).as_any(), &[self.batch_size, self.width])
    }
    /// uint32 [batch_size]: real rows per thread.
    #[getter]
    fn lengths<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<u32>> {
        self.lengths.bind(py).clone()
    }
    /// uint64 [batch_size]: each thread's source id.
    #[getter]
    fn source_ids<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<u64>> {
        self.source_ids.bind(py).clone()
    }
    /// int8 [batch_size]: each thread's label (1 rumour, 0 non-rumour, -1 unknown, or the given ones).
    #[getter]
    fn labels<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<i8>> {
        self.labels.bind(py).clone()
    }
    /// The names of the Loader's outputs, in order (`embedding_index`,
    /// `embeddings`, `token_ids`, those of `outputs=`).
    fn output_names(&self) -> Vec<&'static str> {
        self.shape.names()
    }
    /// Every output by name: an array `[batch_size, width, ...]`, or for
    /// one per store a dict of them by store name.
    #[getter]
    fn outputs<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        all_outputs(py, &self.shape.names(), |name| self.output(py, name))
    }
    /// An output by name (`batch.token_ids`, `batch.embedding_index`...):
    /// the array, or a dict of arrays by store name. A known output the
    /// Loader lacks is None (an empty dict for the per-store ones).
    fn __getattr__<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyAny>> {
        if self.shape.names().contains(&name) {
            return self.output(py, name);
        }
        absent_output(py, "Batch", name)
    }
    fn __len__(&self) -> usize {
        self.size
    }
    fn __repr__(&self) -> String {
        format!(
            "socialctx.Batch(size={}, batch_size={}, width={}, max_cxt={})",
            self.size, self.batch_size, self.width, self.shape.max_cxt
        )
    }
}

impl PyBatch {
    /// Output `name`: its array, or a dict by key when it has keys.
    fn output<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyAny>> {
        let outputs = self.shape.outputs.iter();
        by_name(py, outputs.map(|o| (o.name, o.key.as_deref())), name, |i| {
            let mut shape = vec![self.batch_size, self.width];
            shape.extend(self.shape.outputs[i].per_slot);
            prefix(self.outputs[i].1.bind(py), &shape)
        })
    }

    /// Buffers for `batch_size` threads of `shape`: zeros, allocated by
    /// NumPy (MemoryError, not an abort, when they cannot be had).
    pub(crate) fn allocate(
        py: Python<'_>,
        shape: &BatchShape,
        batch_size: usize,
    ) -> PyResult<Self> {
        if batch_size == 0 {
            return Err(PyValueError::new_err("batch_size must be at least 1"));
        }
        let t = shape.max_cxt;
        let slots = size_of("mask", &[batch_size, t])?;
        let feats = size_of("features", &[batch_size, t, sc::Feature::COUNT])?;
        let mut reactions = Vec::new();
        reactions.try_reserve_exact(slots).map_err(|_| {
            PyMemoryError::new_err(format!(
                "cannot allocate a Batch of {batch_size} x {t} rows"
            ))
        })?;
        reactions.resize(slots, sc::BatchMut::NO_REACTION);
        let mut outputs = Vec::with_capacity(shape.outputs.len());
        for o in &shape.outputs {
            let mut dims = vec![batch_size, t];
            dims.extend(o.per_slot);
            let n = size_of(o.name, &dims)?;
            if o.dtype == "float16" {
                let raw = zeros(py, n, "uint16")?;
                let user = raw.call_method1("view", ("float16",))?;
                outputs.push((raw.unbind(), user.unbind()));
            } else {
                let raw = zeros(py, n, o.dtype)?;
                outputs.push((raw.clone().unbind(), raw.unbind()));
            }
        }
        Ok(PyBatch {
            features: zeros(py, feats, "float32")?.cast_into()?.unbind(),
            mask: zeros(py, slots, "uint8")?.cast_into()?.unbind(),
            lengths: zeros(py, batch_size, "uint32")?.cast_into()?.unbind(),
            source_ids: zeros(py, batch_size, "uint64")?.cast_into()?.unbind(),
            labels: zeros(py, batch_size, "int8")?.cast_into()?.unbind(),
            reactions,
            outputs,
            shape: shape.clone(),
            size: 0,
            width: t,
            batch_size,
        })
    }
}

/// An output's buffer, borrowed for a fill.
enum Guard<'py> {
    I32(PyReadwriteArray1<'py, i32>),
    F32(PyReadwriteArray1<'py, f32>),
    F16(PyReadwriteArray1<'py, u16>),
}

impl PyBatch {
    /// Runs `fill` (the crate's one fill, with the GIL released) over every
    /// buffer of this Batch, borrowed as a `sc::BatchMut`; records its width.
    pub(crate) fn fill_with<F>(&mut self, py: Python<'_>, fill: F) -> Result<()>
    where
        F: for<'b> FnOnce(&mut sc::BatchMut<'b>) -> std::result::Result<(), sc::LoadError> + Send,
    {
        let busy = |_| {
            PyRuntimeError::new_err(
                "this Batch's arrays are borrowed elsewhere (another thread filling it?); \
                 give each thread its own Batch (loader.new_batch)",
            )
        };
        let mut features = self.features.bind(py).try_readwrite().map_err(busy)?;
        let mut mask = self.mask.bind(py).try_readwrite().map_err(busy)?;
        let mut lengths = self.lengths.bind(py).try_readwrite().map_err(busy)?;
        let mut ids = self.source_ids.bind(py).try_readwrite().map_err(busy)?;
        let mut labels = self.labels.bind(py).try_readwrite().map_err(busy)?;
        let mut guards = Vec::with_capacity(self.outputs.len());
        for ((raw, _), o) in self.outputs.iter().zip(&self.shape.outputs) {
            let raw = raw.bind(py);
            guards.push(match o.dtype {
                "int32" => Guard::I32(raw.cast::<PyArray1<i32>>()?.try_readwrite().map_err(busy)?),
                "float32" => {
                    Guard::F32(raw.cast::<PyArray1<f32>>()?.try_readwrite().map_err(busy)?)
                }
                _ => Guard::F16(raw.cast::<PyArray1<u16>>()?.try_readwrite().map_err(busy)?),
            });
        }
        let mut outputs = Vec::with_capacity(guards.len());
        for g in &mut guards {
            outputs.push(match g {
                Guard::I32(a) => sc::OutputMut::I32(a.as_slice_mut()?),
                Guard::F32(a) => sc::OutputMut::F32(a.as_slice_mut()?),
                Guard::F16(a) => sc::OutputMut::F16(a.as_slice_mut()?),
            });
        }
        let (f, m, l, s, y) = (
            features.as_slice_mut()?,
            mask.as_slice_mut()?,
            lengths.as_slice_mut()?,
            ids.as_slice_mut()?,
            labels.as_slice_mut()?,
        );
        let (max_cxt, previous) = (self.shape.max_cxt, self.width);
        let reactions = &mut self.reactions;
        self.width = py.detach(|| {
            let out = sc::BatchMut::new(max_cxt, f, m, l, s, y)?;
            let mut out = out.with_reactions(reactions)?.reusing(previous);
            if !outputs.is_empty() {
                out = out.with_outputs(&mut outputs);
            }
            fill(&mut out)?;
            Ok::<_, sc::LoadError>(out.width())
        })?;
        Ok(())
    }
}

pub(crate) fn borrow_batch<'py>(batch: &Bound<'py, PyBatch>) -> PyResult<PyRefMut<'py, PyBatch>> {
    batch.try_borrow_mut().map_err(|_| {
        PyRuntimeError::new_err(
            "this Batch is being filled by another thread; give each thread its own Batch \
             (loader.new_batch)",
        )
    })
}

/// Checked `a * b * ...` for buffer sizes: ValueError on overflow.
fn size_of(what: &str, dims: &[usize]) -> PyResult<usize> {
    dims.iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .filter(|&n| n <= isize::MAX as usize / 8)
        .ok_or_else(|| {
            PyValueError::new_err(format!("a Batch's {what} of shape {dims:?} is too large"))
        })
}

/// What `Vocabulary.token_ids` (vocab.rs) reads of a Batch.
impl PyBatch {
    /// The last fill's per-slot reactions `[batch_size * width]`, its
    /// `batch_size` and `width`, and its threads' source ids (`size` of them).
    pub(crate) fn filled_slots(
        &self,
        py: Python<'_>,
    ) -> PyResult<(&[u32], usize, usize, Vec<u64>)> {
        let ids = self.source_ids.bind(py).try_readonly()?;
        let ids = ids.as_slice()?[..self.size].to_vec();
        let slots = &self.reactions[..self.batch_size * self.width];
        Ok((slots, self.batch_size, self.width, ids))
    }
}
