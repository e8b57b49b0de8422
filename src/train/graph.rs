//! Graph batches: threads as propagation trees (`FEATURES.md`, "Propagation
//! tree"), laid out as PyTorch Geometric's `Batch` lays out a batch of
//! graphs, for BiGCN and its successors.
//!
//! Each thread of a batch is one graph: a root node, then one node per
//! selected reaction (the [`Loader`]'s selection: kinds, window, the earliest
//! `max_cxt`), in the thread's `(created_at, id)` order. A selected
//! reaction's edge comes from its stored parent, or, when the selection
//! dropped that parent, from its nearest selected ancestor (the root if
//! none). Node ids are global across the batch, as in PyG: graph `b` holds
//! nodes `ptr[b]..ptr[b + 1]`, its root first.
//!
//! **The root row is all zeros** (as the loader's empty-thread row is, after
//! normalisation): the 28 features describe a reaction (its author, its
//! text, its delay and kind relative to the source), and the cache stores
//! none for the source tweet itself. A model that wants a source embedding
//! adds it at the root (`ptr[:-1]`).
//!
//! ```no_run
//! use socialctx::{Cache, GraphBatch, Loader, Selection};
//! let cache = Cache::open("target/socialctx-cache")?;
//! let loader = Loader::new(&cache, Selection::default());
//! let mut graphs = GraphBatch::default();
//! loader.fill_graph(&[0, 1, 2], None, &mut graphs)?;
//! let (td, bu) = graphs.edge_index.split_at(graphs.num_edges());
//! # let _ = (td, bu);
//! # Ok::<(), socialctx::Error>(())
//! ```

use super::loader::{BatchMut, Loader};
use super::outputs::{OutputBuf, Outputs};
use crate::error::LoadError;
use crate::format::PARENT_SOURCE;
use crate::read::ThreadSource;
use crate::schema::NUM_FEATURES;

type Result<T, E = LoadError> = std::result::Result<T, E>;

/// One batch of threads as graphs, in PyTorch Geometric's layout. The
/// vectors are reused by every [`Loader::fill_graph`]: once they have grown
/// to the largest batch, filling allocates nothing.
#[derive(Clone, Debug, Default)]
pub struct GraphBatch {
    /// Node features, `[num_nodes][28]` row-major: a zero row for each root,
    /// the (normalised) features of each selected reaction.
    pub features: Vec<f32>,
    /// `[2][num_edges]` row-major (PyG's `edge_index`, int64): the first
    /// half of the columns are the top-down edges (parent → child), one per
    /// non-root node in node order; the second half the same edges bottom-up
    /// (child → parent), in the same order. BiGCN's TD graph is
    /// `edge_index[:, :E/2]`, its BU graph `edge_index[:, E/2:]`.
    pub edge_index: Vec<i64>,
    /// `[num_nodes]`: the graph (thread slot) of each node (PyG's `batch`).
    pub batch: Vec<i64>,
    /// `[num_graphs + 1]`: graph `b` holds nodes `ptr[b]..ptr[b + 1]` (PyG's `ptr`).
    pub ptr: Vec<i64>,
    /// `[num_nodes]`: each node's parent node, -1 for roots.
    pub parent: Vec<i64>,
    /// `[num_nodes]`: each node's reaction (its index in the thread's
    /// order, as the loader's reaction slots), [`BatchMut::NO_REACTION`] for roots.
    pub reactions: Vec<u32>,
    /// `[num_graphs]`: each thread's position in the cache.
    pub positions: Vec<usize>,
    /// `[num_graphs]`: each thread's source id.
    pub source_ids: Vec<u64>,
    /// `[num_graphs]`: each thread's label (the cache's code, or the one given).
    pub labels: Vec<i8>,
    /// The outputs of the loader's [`BatchSpec`](crate::BatchSpec)
    /// ([`Loader::outputs`]), in its order, `[num_nodes]` or `[num_nodes, n]`
    /// each: a node's value is the one a flat [`Batch`](crate::Batch)'s row
    /// slot of its reaction gets, a root's that of a padding slot (an
    /// embedding index of -1, zero rows, padding token ids). Find one by
    /// name with [`output`](Self::output).
    pub outputs: Vec<OutputBuf>,
    /// Per reaction of the thread being filled: its node (reused).
    scratch: Vec<u32>,
}

impl GraphBatch {
    /// Number of graphs (threads).
    pub fn num_graphs(&self) -> usize {
        self.source_ids.len()
    }

    /// Number of nodes (roots and selected reactions).
    pub fn num_nodes(&self) -> usize {
        self.batch.len()
    }

    /// Number of edges, both directions: `2 * (num_nodes - num_graphs)`.
    pub fn num_edges(&self) -> usize {
        self.edge_index.len() / 2
    }

    /// Output `name` (of key `key`: an embedding store's name), if the
    /// batch has it.
    pub fn output(&self, name: &str, key: Option<&str>) -> Option<&OutputBuf> {
        super::outputs::find(&self.outputs, name, key)
    }

    fn clear(&mut self) {
        self.features.clear();
        self.edge_index.clear();
        self.batch.clear();
        self.ptr.clear();
        self.parent.clear();
        self.reactions.clear();
        self.positions.clear();
        self.source_ids.clear();
        self.labels.clear();
        for o in &mut self.outputs {
            o.clear();
        }
    }
}

impl<C: ThreadSource + ?Sized> Loader<'_, C> {
    /// Fills `out` with the threads at `positions` as graphs (see
    /// [`GraphBatch`]); `labels`, when given, holds one label per position.
    /// Every thread has its root, even with no reaction selected, so the
    /// loader's [`EmptyThreads`](crate::EmptyThreads) does not apply. The
    /// loader's outputs ([`outputs`](Self::outputs)) are filled per node
    /// into `out.outputs` (made there at the first fill, or when the
    /// spec changed).
    pub fn fill_graph(
        &self,
        positions: &[usize],
        labels: Option<&[i8]>,
        out: &mut GraphBatch,
    ) -> Result<()> {
        // Refused before anything is written: `out` keeps its last fill.
        if let Some(labels) = labels
            && labels.len() != positions.len()
        {
            return Err(LoadError::BufferSize {
                buffer: "labels argument",
                expected: positions.len(),
                found: labels.len(),
            });
        }
        self.spec().check_content(self.cache())?;
        let filled = self.graphs_into(positions, labels, out);
        if filled.is_err() {
            // Failed midway: no half-filled batch (outputs of fewer nodes
            // than the graphs).
            out.clear();
        }
        filled
    }

    fn graphs_into(
        &self,
        positions: &[usize],
        labels: Option<&[i8]>,
        out: &mut GraphBatch,
    ) -> Result<()> {
        let spec = self.spec();
        out.clear();
        if !spec.fits(&out.outputs) {
            out.outputs = spec.buffers(0);
        }
        let sel = *self.selection();
        // Per reaction of the current thread: its node if selected, else
        // its nearest selected ancestor's (the root's, 0), local to the graph.
        let mut node_of = std::mem::take(&mut out.scratch);
        for (b, &pos) in positions.iter().enumerate() {
            let t = self.thread(pos)?;
            let base = out.batch.len() as i64;
            out.ptr.push(base);
            out.positions.push(pos);
            out.source_ids.push(t.source_id());
            out.labels.push(labels.map_or(t.label_code(), |l| l[b]));
            out.batch.push(b as i64);
            out.parent.push(-1);
            out.reactions.push(BatchMut::NO_REACTION);
            out.features.extend_from_slice(&[0.0; NUM_FEATURES]);
            let rows = t.features();
            let mut picked = sel.indices(&t).peekable();
            node_of.clear();
            let mut next_node = 1u32;
            for (i, r) in t.reaction_records().enumerate() {
                let Some(&want) = picked.peek() else { break };
                let up = if r.parent == PARENT_SOURCE {
                    0
                } else {
                    // Validated at open: the parent comes earlier.
                    node_of.get(r.parent as usize).copied().unwrap_or(0)
                };
                if i != want {
                    node_of.push(up);
                    continue;
                }
                picked.next();
                node_of.push(next_node);
                next_node += 1;
                out.batch.push(b as i64);
                out.parent.push(base + i64::from(up));
                out.reactions.push(i as u32);
                let start = out.features.len();
                out.features.extend_from_slice(&rows[i]);
                if let Some(norm) = self.normalizer() {
                    for (f, x) in out.features[start..].iter_mut().enumerate() {
                        *x = norm.apply(f, *x);
                    }
                }
            }
            if spec.has_outputs() {
                // The graph's nodes are its slots: every output of the
                // thread while it is at hand.
                let at = base as usize..out.batch.len();
                for o in &mut out.outputs {
                    o.resize(at.end)?;
                }
                let picked = &out.reactions[at.clone()];
                let outs = &mut Outputs::Owned(&mut out.outputs);
                spec.fill_thread(self.cache(), (b, Some(pos)), picked, at, false, outs)?;
            }
        }
        out.ptr.push(out.batch.len() as i64);
        // edge_index: [parents; children] top-down, then [children; parents].
        let (edges, parent) = (&mut out.edge_index, &out.parent);
        let child = || (0i64..).zip(parent).filter(|&(_, &p)| p >= 0);
        edges.extend(child().map(|(_, &p)| p));
        edges.extend(child().map(|(c, _)| c));
        edges.extend(child().map(|(c, _)| c));
        edges.extend(child().map(|(_, &p)| p));
        out.scratch = node_of;
        Ok(())
    }
}
