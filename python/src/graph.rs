//! `GraphBatch`: a batch of threads as propagation trees, in PyTorch
//! Geometric's layout (the crate's `GraphBatch`), filled by
//! `Loader.fill_graph` with the GIL released. The Rust buffers are reused by
//! every fill; the getters copy them into fresh NumPy arrays (a graph batch's
//! size varies from fill to fill, so there is no fixed buffer to view).

use numpy::{IntoPyArray, PyArray1, PyArray2, PyArrayMethods};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use socialctx as sc;

use crate::batch::{absent_output, all_outputs, by_name, names};
use crate::convert::Reader;
use crate::error::Result;

/// A batch of threads as graphs: node features [N, 28] (a zero row for each
/// thread's root, then its selected reactions), edge_index [2, E] (the
/// top-down edges parent -> child in the first E/2 columns, the same edges
/// bottom-up in the last E/2), batch [N] and ptr [B + 1] as
/// torch_geometric's Batch has them, parent [N] (-1 for roots), reactions
/// [N] (each node's reaction index in its thread, 2**32-1 for roots), and
/// per graph source_ids, labels and positions. Then the Loader's outputs,
/// per node, each by its name as a Batch has them (`output_names()`,
/// `outputs`, or as an attribute): `[N]` or `[N, ...]`, a node's value
/// the one a Batch's row slot of its reaction gets, a root's that of a
/// padding slot (`embedding_index[name]` -1, zero `embeddings[name]`,
/// padding `token_ids`).
#[pyclass(module = "socialctx", name = "GraphBatch")]
#[derive(Default)]
pub(crate) struct PyGraphBatch {
    pub(crate) inner: sc::GraphBatch,
}

fn copy1<'py, T: numpy::Element + Copy>(py: Python<'py>, v: &[T]) -> Bound<'py, PyArray1<T>> {
    v.to_vec().into_pyarray(py)
}

#[pymethods]
impl PyGraphBatch {
    #[new]
    fn new() -> Self {
        Self::default()
    }

    /// Number of graphs (threads) of the last fill.
    #[getter]
    fn num_graphs(&self) -> usize {
        self.inner.num_graphs()
    }

    /// Number of nodes of the last fill.
    #[getter]
    fn num_nodes(&self) -> usize {
        self.inner.num_nodes()
    }

    /// Number of edges of the last fill (both directions).
    #[getter]
    fn num_edges(&self) -> usize {
        self.inner.num_edges()
    }

    /// np.float32 [N, 28].
    #[getter]
    fn x<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray2<f32>>> {
        let n = self.inner.num_nodes();
        copy1(py, &self.inner.features).reshape([n, sc::Feature::COUNT])
    }

    /// np.int64 [2, E].
    #[getter]
    fn edge_index<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray2<i64>>> {
        let e = self.inner.num_edges();
        copy1(py, &self.inner.edge_index).reshape([2, e])
    }

    /// np.int64 [N]: each node's graph.
    #[getter]
    fn batch<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<i64>> {
        copy1(py, &self.inner.batch)
    }

    /// np.int64 [B + 1]: graph b holds nodes ptr[b]:ptr[b + 1], its root first.
    #[getter]
    fn ptr<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<i64>> {
        copy1(py, &self.inner.ptr)
    }

    /// np.int64 [N]: each node's parent node, -1 for roots.
    #[getter]
    fn parent<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<i64>> {
        copy1(py, &self.inner.parent)
    }

    /// np.uint32 [N]: each node's reaction (index in its thread), 2**32-1 for roots.
    #[getter]
    fn reactions<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<u32>> {
        copy1(py, &self.inner.reactions)
    }

    /// np.uint64 [B].
    #[getter]
    fn source_ids<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<u64>> {
        copy1(py, &self.inner.source_ids)
    }

    /// np.int8 [B].
    #[getter]
    fn labels<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<i8>> {
        copy1(py, &self.inner.labels)
    }

    /// np.int64 [B]: each thread's position in the cache.
    #[getter]
    fn positions<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<i64>> {
        let v: Vec<i64> = self.inner.positions.iter().map(|&p| p as i64).collect();
        v.into_pyarray(py)
    }

    /// The names of the Loader's outputs of the last fill, in order.
    fn output_names(&self) -> Vec<&'static str> {
        names(self.inner.outputs.iter().map(|o| o.name))
    }

    /// Every output of the last fill by name: an array `[N, ...]`, or for
    /// one per store a dict of them by store name.
    #[getter]
    fn outputs<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        all_outputs(py, &self.output_names(), |name| self.output(py, name))
    }

    /// An output by name (`graph.token_ids`, `graph.embedding_index`...),
    /// as `outputs` has it. A known output the Loader lacks is None (an
    /// empty dict for the per-store ones).
    fn __getattr__<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyAny>> {
        if self.output_names().contains(&name) {
            return self.output(py, name);
        }
        absent_output(py, "GraphBatch", name)
    }

    fn __len__(&self) -> usize {
        self.inner.num_graphs()
    }

    fn __repr__(&self) -> String {
        format!(
            "GraphBatch(num_graphs={}, num_nodes={}, num_edges={})",
            self.inner.num_graphs(),
            self.inner.num_nodes(),
            self.inner.num_edges()
        )
    }
}

impl PyGraphBatch {
    /// Output `name`: a fresh array `[N, ...]` of it, or a dict by key.
    fn output<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyAny>> {
        let outputs = &self.inner.outputs;
        by_name(
            py,
            outputs.iter().map(|o| (o.name, o.key.as_deref())),
            name,
            |i| {
                let o = &outputs[i];
                let mut shape = vec![self.inner.num_nodes()];
                shape.extend(o.per_slot);
                let flat = match o.dtype() {
                    "int32" => copy1(py, o.as_i32()).into_any(),
                    "float32" => copy1(py, o.as_f32()).into_any(),
                    _ => copy1(py, o.as_f16()).call_method1("view", ("float16",))?,
                };
                flat.call_method1("reshape", (PyTuple::new(py, shape)?,))
            },
        )
    }
}

/// `Loader.fill_graph`'s body: fills `graph` with the GIL released.
pub(crate) fn fill(
    py: Python<'_>,
    loader: &sc::Loader<'_, Reader>,
    positions: &[usize],
    labels: Option<&[i8]>,
    graph: &Bound<'_, PyGraphBatch>,
) -> Result<()> {
    let mut g = graph.try_borrow_mut().map_err(|_| {
        PyRuntimeError::new_err("this GraphBatch is in use (filled from another thread?)")
    })?;
    let out = &mut g.inner;
    Ok(py.detach(|| loader.fill_graph(positions, labels, out))?)
}
