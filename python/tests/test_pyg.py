"""GraphDataset with the real PyTorch Geometric: its items are
``torch_geometric.data.Batch`` objects that PyG's own layers consume.
torch_geometric is optional for users; CI installs it and sets
SOCIALCTX_REQUIRE_TORCH=1, so that this fails there instead of skipping."""

from __future__ import annotations

import os

import numpy as np
import pytest

if os.environ.get("SOCIALCTX_REQUIRE_TORCH"):
    import torch
    import torch_geometric
else:
    torch = pytest.importorskip("torch")
    torch_geometric = pytest.importorskip("torch_geometric")

from torch_geometric.data import Batch  # noqa: E402
from torch_geometric.nn import GCNConv  # noqa: E402

import socialctx  # noqa: E402
from socialctx.torch import GraphDataset  # noqa: E402


def test_items_are_pyg_batches_that_a_bigcn_layer_consumes(built):
    cache = socialctx.open(built["sample"])
    positions = np.arange(len(cache))
    kw = dict(kinds="both", max_cxt=20)
    plain = list(GraphDataset(socialctx.open(built["sample"]), positions, 8, pyg=False, **kw))
    batches = list(GraphDataset(socialctx.open(built["sample"]), positions, 8, pyg=True, **kw))
    assert len(batches) == len(plain)
    conv_td = GCNConv(socialctx.NUM_FEATURES, 16)
    for got, want in zip(batches, plain):
        assert isinstance(got, Batch)
        for key in ("x", "edge_index", "batch", "ptr", "y"):
            assert torch.equal(getattr(got, key), want[key]), key
        assert got.num_graphs == len(want["y"])
        assert got.num_nodes == len(want["x"])
        # BiGCN: a top-down graph (the first half of the edges) and a
        # bottom-up one (the second half, the same edges reversed).
        e = got.edge_index.shape[1] // 2
        td, bu = got.edge_index[:, :e], got.edge_index[:, e:]
        assert torch.equal(bu, td.flip(0))
        out = conv_td(got.x, td)
        assert out.shape == (got.num_nodes, 16) and torch.isfinite(out).all()
        # Every non-root node has exactly one parent edge, inside its graph.
        roots = got.ptr[:-1]
        has_parent = torch.ones(got.num_nodes, dtype=torch.bool)
        has_parent[roots] = False
        assert torch.equal(td[1].sort().values, has_parent.nonzero().flatten())
        assert torch.equal(got.batch[td[0]], got.batch[td[1]])


def test_pyg_batches_carry_the_loaders_outputs_per_node(built):
    """GraphDataset(outputs...) was refused (a graph batch had no slots for
    the Loader's outputs); now a PyG Batch carries each by its name, per
    node, as the plain item does, and moves with the batch."""
    cache = socialctx.open(built["sample"])
    vocab = cache.vocabulary(max_size=30)
    kw = dict(kinds="both", max_cxt=20, token_ids=vocab, max_tokens=4, outputs=[])
    plain = list(GraphDataset(cache, range(len(cache)), 8, pyg=False, **kw))
    batches = list(GraphDataset(cache, range(len(cache)), 8, pyg=True, **kw))
    for got, want in zip(batches, plain):
        assert isinstance(got, Batch)
        assert torch.equal(got.token_ids, want["token_ids"])
        assert got.token_ids.shape == (got.num_nodes, 4)
        assert got.embedding_index == {} and got.store_ids == {}
        moved = got.to("cpu")
        assert torch.equal(moved.token_ids, want["token_ids"])
