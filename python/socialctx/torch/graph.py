"""GraphDataset: CacheDataset's epochs of graph batches (propagation
trees), as torch_geometric batches when PyG is installed."""

from __future__ import annotations

import importlib
import os
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from .. import Cache, GraphBatch, Loader, Vocabulary
from ._common import _used
from .dataset import CacheDataset, _can_pin, _into


def _pyg_batch() -> Any:
    """torch_geometric.data.Batch if PyG is importable, else None (PyG is
    optional, never a dependency)."""
    try:
        return importlib.import_module("torch_geometric.data").Batch
    except ImportError:
        return None


class GraphDataset(CacheDataset):
    """One epoch of graph batches (threads as propagation trees, see
    :class:`socialctx.GraphBatch`) over ``positions`` of a cache, for a
    DataLoader with ``batch_size=None``; batching, shuffling, bucketing, DDP
    sharding, generations, epochs, resumption and the Loader's outputs
    (``embeddings``, ``dense``, ``token_ids``, ``outputs``) as
    :class:`CacheDataset`. An item is already a batch of graphs: never
    collate items again (PyG's own ``DataLoader`` offsets ``edge_index``
    but not ``parent``, so the second item's parents would point into the
    first's nodes).

    Each item is a dict of fresh tensors: ``x`` float32 ``[N, 28]`` (each
    graph's root first, a zero row; then its selected reactions in time
    order), ``edge_index`` int64 ``[2, E]`` (the first ``E/2`` columns
    top-down, parent to child; the last ``E/2`` the same edges bottom-up),
    ``batch`` int64 ``[N]``, ``ptr`` int64 ``[B + 1]``, ``parent`` int64
    ``[N]`` (-1 for roots), ``y`` int64 ``[B]`` (the labels), ``source_ids``
    and ``positions`` int64 ``[B]``; the Loader's outputs per node, each by
    its name as :class:`CacheDataset`'s items have them per row slot:
    ``embedding_index[name]`` int32 ``[N]`` (-1 for none: roots too) for
    :class:`EmbeddingTable`, with ``dense=True`` ``embeddings[name]`` ``[N,
    dim]`` (zeros at roots), ``token_ids`` int32 ``[N, max_tokens]`` (roots
    all padding), every output of ``outputs=`` ``[N, ...]``; and its place:
    ``epoch``, ``plan_index``, ``content_id`` and ``store_ids``. When ``torch_geometric`` is
    importable (and ``pyg`` is not False) the item is a
    ``torch_geometric.data.Batch`` with these attributes instead;
    ``pyg=True`` requires it.

    ``pin_memory=True`` (in-process, ``num_workers=0``) copies each graph
    into two page-locked buffer sets used in turn, as
    :class:`CacheDataset`'s: a yielded graph is valid until the
    next-but-one step.

    With ``bag_of_words=vocab`` (a :class:`socialctx.Vocabulary` counted on
    this cache) each item also has ``bow``: every node's bag of words
    (:meth:`socialctx.Vocabulary.bag_of_words`, BiGCN's input) as a float32
    ``torch.sparse_csr_tensor`` of ``[N, len(vocab) + 2]`` (column 0,
    padding, empty; column 1 counts unknown tokens, empty with
    ``bow_unknown=False``, BiGCN's top-k words only; root rows empty: the
    cache holds no source tokens); ``bow.to_dense()`` is BiGCN's
    ``x``, ``torch.sparse.mm(bow, w)`` its first layer without densifying.
    """

    def __init__(
        self,
        cache: str | os.PathLike[str] | Cache,
        positions: npt.NDArray[np.integer[Any]] | Sequence[int] | range,
        batch_size: int,
        *,
        pyg: bool | None = None,
        bag_of_words: Vocabulary | None = None,
        bow_unknown: bool = True,
        **kwargs: Any,
    ) -> None:
        self.bag_of_words = bag_of_words
        self.bow_unknown = bow_unknown
        self._batch_type = None if pyg is False else _pyg_batch()
        if pyg and self._batch_type is None:
            from .._extras import missing

            raise missing("GraphDataset(pyg=True)", "torch_geometric", "pyg")
        super().__init__(cache, positions, batch_size, **kwargs)

    def _plan_params(self) -> dict[str, Any]:
        params = super()._plan_params()
        params["graph"] = True
        return params

    def _run(
        self,
        loader: Loader,
        plan: list[npt.NDArray[np.int64]],
        epoch: int,
        start: int,
        gaps: tuple[int, ...],
        skip: int,
        worker: int,
        workers: int,
    ) -> Iterator[Any]:
        in_process, todo = self._todo(plan, epoch, start, gaps, skip, worker, workers)
        pin = in_process and self.pin_memory
        return self._counted(self._iter_graphs(loader, plan, todo, epoch, pin), epoch, todo)

    def _iter_graphs(
        self,
        loader: Loader,
        plan: list[npt.NDArray[np.int64]],
        todo: list[int],
        epoch: int,
        pin: bool,
    ) -> Iterator[Any]:
        twins: list[dict[str, torch.Tensor]] | None = None
        if pin:
            twins = [{}, {}]
            pinned = _can_pin(type(self).__name__)
        positions, labels_of, _ = self._sel(epoch)
        graph = GraphBatch()
        for turn, k in enumerate(todo):
            picked = plan[k]
            labels = None if labels_of is None else labels_of[picked]
            loader.fill_graph(positions[picked], graph, labels)
            item = self._graph_item(
                graph, None if twins is None else _into(twins[turn % 2], pinned)
            )
            extra = {
                "epoch": epoch,
                "plan_index": k,
                "content_id": self.content_id,
                "store_ids": dict(self.store_ids),
            }
            if self._batch_type is None:
                item.update(extra)
                yield item
            else:
                yield self._batch_type(**item, **extra)

    def _graph_item(
        self,
        graph: GraphBatch,
        into: Callable[[str, npt.NDArray[Any], torch.dtype | None], torch.Tensor] | None,
    ) -> dict[str, Any]:
        # The getters return fresh arrays: from_numpy shares them, no copy
        # more; pinned, one copy each into the turn's buffers.
        def own(key: str, a: npt.NDArray[Any]) -> torch.Tensor:
            return torch.from_numpy(a) if into is None else into(key, a, None)

        item: dict[str, Any] = {
            "x": own("x", graph.x),
            "edge_index": own("edge_index", graph.edge_index),
            "batch": own("batch", graph.batch),
            "ptr": own("ptr", graph.ptr),
            "parent": own("parent", graph.parent),
            "y": own("y", graph.labels.astype(np.int64)),
            "source_ids": own("source_ids", graph.source_ids.view(np.int64)),
            "positions": own("positions", graph.positions),
            # Present (empty) without stores, as CacheDataset's items.
            "embedding_index": {},
        }
        # Every output of the Loader by its name, per node: an array, or
        # per store a dict of arrays by store name.
        for name, value in graph.outputs.items():
            if isinstance(value, dict):
                item[name] = {k: own(f"{name}:{k}", v) for k, v in value.items()}
            else:
                item[name] = own(name, value)
        if self.dense:
            item.setdefault("embeddings", {})
        if self.bag_of_words is not None:
            vocab = _used(self.bag_of_words)
            indptr, indices, counts = vocab.bag_of_words(
                graph, self._open_loader(), unknown=self.bow_unknown
            )
            with warnings.catch_warnings():
                # torch calls its sparse CSR support beta, once per process.
                warnings.filterwarnings("ignore", "Sparse CSR tensor support", UserWarning)
                item["bow"] = torch.sparse_csr_tensor(
                    torch.from_numpy(indptr),
                    torch.from_numpy(indices),
                    torch.from_numpy(counts),
                    size=(graph.num_nodes, len(vocab) + 2),
                    # Valid by construction (ascending indices, monotone indptr).
                    check_invariants=False,
                )
        return item
