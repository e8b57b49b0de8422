"""PyTorch adapter: batches of a socialctx cache as an ``IterableDataset``,
embedding rows gathered on the device.

Importing this module needs torch; the rest of socialctx does not::

    import torch
    from torch.utils.data import DataLoader
    from socialctx.torch import CacheDataset, EmbeddingTable

    ds = CacheDataset("target/socialctx-cache", split.positions, 32, labels=split.labels,
                      seed=0, bucket=True, pad="longest", embeddings=["elmo-reply"])
    table = EmbeddingTable(cache, "elmo-reply", device="cuda")   # rows moved once
    for epoch in range(10):
        ds.set_epoch(epoch)
        for step in DataLoader(ds, batch_size=None, num_workers=2, pin_memory=True):
            x = step["features"].cuda(non_blocking=True)           # [B, T, 28]
            e = table(step["embedding_index"]["elmo-reply"])       # [B, T, dim] on the GPU

Batching happens here, not in the DataLoader (hence ``batch_size=None``).

- **Batches never change once yielded.** Each yielded tensor is a fresh
  tensor (in a worker, in shared memory, so that handing it to the main
  process copies nothing more); keep them as long as you like. The one
  opt-in exception is ``pin_memory=True`` in-process (see
  :class:`CacheDataset`).
- **Sharding.** The epoch's batch plan (:meth:`socialctx.Loader.plan`) is
  the same in every process; DDP rank ``r`` of ``w`` takes batches
  ``r, r + w, ...`` and its DataLoader workers take every k-th of those, so
  ranks and workers are disjoint and together cover the epoch once.
  Remainder policy: the batch count is rounded up to a multiple of the
  world size and threads are spread evenly over the batches (no batch
  exceeds ``batch_size``), so every rank gets the same number of batches
  and no thread is repeated or dropped; ``drop_last=True`` instead keeps
  only full batches, as many for every rank.
- **Resumption.** ``state_dict()`` records the epoch and how many batches
  this rank has consumed; ``load_state_dict`` makes the next iteration
  start at the first unseen batch, exactly as the uninterrupted run would
  have continued.
- **torch conventions.** ``labels`` are int64, ``mask`` is bool (True for
  a real row; ``key_padding_mask`` wants its negation: ``~mask``).
"""

from __future__ import annotations

import importlib
import multiprocessing
import os
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from torch.utils.data import IterableDataset, get_worker_info

from . import Cache, FeatureStats, GraphBatch, Loader, Vocabulary, open, open_store

__all__ = ["CacheDataset", "EmbeddingTable", "GraphDataset"]

_TORCH_DTYPES = {
    np.dtype(np.float32): torch.float32,
    np.dtype(np.float16): torch.float16,
}


class EmbeddingTable(torch.nn.Module):  # type: ignore[misc]
    """The rows of an embedding store on a device, gathered by index.

    ``EmbeddingTable(cache, name, device="cuda")`` reads the store's rows
    (a memory map on the host) and moves them to ``device`` once, with one
    zero row appended; calling it on an index tensor (a batch's
    ``embedding_index[name]``, int32 or int64 ``[B, T]``, -1 for none)
    returns ``[B, T, dim]`` rows on that device, zeros where the index is
    -1: bit for bit the rows a ``dense=True`` Loader copies on the host.
    ``dtype`` converts the rows once (default: the store's own dtype).
    """

    def __init__(
        self,
        cache: Cache | str | os.PathLike[str],
        name: str,
        *,
        device: str | torch.device = "cpu",
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        if not isinstance(cache, Cache):
            cache = open(os.fspath(cache))
        store = open_store(cache, name)
        # Global rows: the segments in order, each copied from its memory
        # map once into its slice of the table.
        rows, dim = int(store.meta["rows"]), int(store.meta["dim"])
        src_dtype = _TORCH_DTYPES[np.dtype(store.meta["dtype"])]
        table = torch.zeros((rows + 1, max(dim, 1)), dtype=dtype or src_dtype, device=device)
        for first, segment in zip(store.starts.tolist(), store.segments):
            with warnings.catch_warnings():
                # The map is read-only; torch only reads it here.
                warnings.simplefilter("ignore", UserWarning)
                host = torch.from_numpy(np.asarray(segment))
            table[first : first + len(segment)].copy_(host)
        self.name = name
        self.dim = dim
        self.register_buffer("rows", table, persistent=False)

    @property
    def num_rows(self) -> int:
        """Rows of the store, all segments (the zero row not counted)."""
        return int(self.rows.shape[0]) - 1

    def forward(self, index: torch.Tensor) -> torch.Tensor:
        """``[..., dim]`` rows for an index tensor (-1: the zero row)."""
        idx = index.to(device=self.rows.device, dtype=torch.int64, non_blocking=True)
        idx = torch.where(idx < 0, self.num_rows, idx)
        return torch.nn.functional.embedding(idx, self.rows)

    def extra_repr(self) -> str:
        return f"{self.name!r}, rows={self.num_rows}, dim={self.dim}, dtype={self.rows.dtype}"


def _world(rank: int | None, world_size: int | None) -> tuple[int, int]:
    dist = torch.distributed
    if world_size is None:
        world_size = dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1
    if rank is None:
        rank = dist.get_rank() if dist.is_available() and dist.is_initialized() else 0
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} of world_size {world_size} is not a valid rank")
    return rank, world_size


class CacheDataset(IterableDataset):  # type: ignore[misc]
    """One epoch of batches over ``positions`` of a cache, for a DataLoader
    with ``batch_size=None``.

    - ``cache``: a cache directory or an open :class:`socialctx.Cache` (its
      path is used: each worker opens its own).
    - ``labels``: one per position (e.g. ``split.labels``), replacing the
      cache's label codes.
    - ``seed``: shuffle by ``seed + epoch`` (call :meth:`set_epoch` each
      epoch; it reaches persistent workers too). ``None`` keeps the order.
    - ``bucket``, ``noise``: length-bucketed batches (see
      :meth:`socialctx.Loader.plan`); pair with ``pad="longest"``.
    - ``rank``, ``world_size``: DDP sharding; by default from
      ``torch.distributed`` when it is initialised, else a single rank.
    - ``drop_last``: keep only full batches, as many for every rank.
    - ``embeddings``: store names; items carry ``embedding_index[name]``
      (int32 ``[B, T]``, -1 for none) for :class:`EmbeddingTable`, and with
      ``dense=True`` also ``embeddings[name]`` rows ``[B, T, dim]``.
    - ``pin_memory``: in-process only (``num_workers=0``): the dataset
      fills two page-locked buffer sets in turn and yields views of them,
      so the host-to-device copy can be asynchronous and nothing is copied
      twice. **A yielded batch is then valid until the next-but-one step**:
      copy it to the device (``non_blocking=True``) in the step it arrives.
      Without a GPU it falls back to ordinary memory (with a warning).
    - other keyword arguments go to :class:`socialctx.Loader` (``kinds``,
      ``max_cxt``, ``window_s``, ``stats``, ``empty``, ``pad``,
      ``pad_multiple``).

    Each item is a dict: ``features`` float32 ``[B, T, 28]``, ``mask`` bool
    ``[B, T]``, ``lengths`` int64 ``[B]``, ``source_ids`` int64 ``[B]``,
    ``labels`` int64 ``[B]`` (-1 is the cache's "unknown": pass a split's
    labels to train), ``positions`` int64 ``[B]`` and ``embedding_index`` /
    ``embeddings`` dicts. ``B`` is at most ``batch_size``; ``T`` is
    ``max_cxt`` with ``pad="max"``, the batch's longest selection rounded up
    with ``pad="longest"``.
    """

    def __init__(
        self,
        cache: str | os.PathLike[str] | Cache,
        positions: npt.NDArray[np.int64] | Sequence[int] | range,
        batch_size: int,
        *,
        labels: npt.NDArray[np.integer[Any]] | Sequence[int] | None = None,
        seed: int | None = None,
        rank: int | None = None,
        world_size: int | None = None,
        bucket: bool = False,
        noise: float = 0.1,
        drop_last: bool = False,
        embeddings: Sequence[str] | None = None,
        dense: bool = False,
        pin_memory: bool = False,
        stats: FeatureStats | None = None,
        **loader_kwargs: Any,
    ) -> None:
        super().__init__()
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self.path = str(cache.path if isinstance(cache, Cache) else os.fspath(cache))
        self.positions = np.asarray(positions, dtype=np.int64)
        self.labels = None if labels is None else np.asarray(labels, dtype=np.int8)
        if self.labels is not None and len(self.labels) != len(self.positions):
            raise ValueError(f"{len(self.labels)} labels for {len(self.positions)} positions")
        self.batch_size = batch_size
        self.seed = seed
        self.rank, self.world_size = _world(rank, world_size)
        self.bucket = bucket
        self.noise = noise
        self.drop_last = drop_last
        self.embeddings = list(embeddings or [])
        self.dense = dense
        self.pin_memory = pin_memory
        self.stats = stats
        self.loader_kwargs = loader_kwargs
        # Shared with the DataLoader's workers (persistent ones included):
        # [epoch, resume epoch, batches of that epoch already consumed].
        self._shared = multiprocessing.RawArray("q", [0, -1, 0])
        self._consumed = 0
        self._loader: Loader | None = None
        # Fail now, in the main process, rather than in every worker.
        self._open_loader()
        self._count = len(self._plan(self._open_loader(), 0))

    def _open_loader(self) -> Loader:
        if self._loader is None:
            self._loader = Loader(
                open(self.path),
                stats=self.stats,
                embeddings=self.embeddings,
                dense=self.dense,
                **self.loader_kwargs,
            )
        return self._loader

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_loader"] = None  # each process opens its own (microseconds)
        return state

    @property
    def epoch(self) -> int:
        return int(self._shared[0])

    def set_epoch(self, epoch: int) -> None:
        """Selects epoch ``epoch``'s shuffle (with a seed), in this process
        and in persistent DataLoader workers."""
        self._shared[0] = epoch
        self._consumed = 0

    def _plan(self, loader: Loader, epoch: int) -> list[npt.NDArray[np.int64]]:
        seed = None if self.seed is None else self.seed + epoch
        return loader.plan(
            self.positions,
            self.batch_size,
            seed=seed,
            bucket=self.bucket,
            noise=self.noise,
            world_size=self.world_size,
            rank=self.rank,
            drop_last=self.drop_last,
        )

    def __len__(self) -> int:
        """Batches this rank feeds per epoch."""
        return self._count

    def state_dict(self, batches_done: int | None = None) -> dict[str, int | None]:
        """Where this rank is: the epoch and the batches consumed in it.

        In-process (``num_workers=0``) the dataset counts the batches it
        yielded; with DataLoader workers (which run ahead of the training
        loop) pass ``batches_done``, the steps your loop finished this
        epoch."""
        done = self._consumed if batches_done is None else int(batches_done)
        return {
            "epoch": self.epoch,
            "batches_done": done,
            "seed": self.seed,
            "rank": self.rank,
            "world_size": self.world_size,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resumes at the first batch of ``state["epoch"]`` not yet consumed."""
        if state.get("seed") != self.seed or state.get("world_size") != self.world_size:
            raise ValueError(
                f"state of seed {state.get('seed')} / world_size {state.get('world_size')} "
                f"does not fit this dataset (seed {self.seed}, world_size {self.world_size})"
            )
        epoch, done = int(state["epoch"]), int(state["batches_done"])
        self._shared[0] = epoch
        self._shared[1] = epoch
        self._shared[2] = done
        self._consumed = done

    def __iter__(self) -> Iterator[dict[str, Any]]:
        info = get_worker_info()
        worker, workers = (0, 1) if info is None else (info.id, info.num_workers)
        epoch = self.epoch
        start = int(self._shared[2]) if int(self._shared[1]) == epoch else 0
        loader = self._open_loader()
        plan = self._plan(loader, epoch)
        in_process = info is None
        if in_process:
            self._consumed = start
        if in_process and self.pin_memory:
            yield from self._iter_pinned(loader, plan, start)
            return
        batch = loader.new_batch(self.batch_size)
        for k in range(start + worker, len(plan), workers):
            picked = plan[k]
            self._fill(loader, batch, picked)
            item = self._fresh(batch, self.positions[picked], shared=not in_process)
            if in_process:
                self._consumed = k + 1
            yield item

    def _fill(self, loader: Loader, batch: Any, picked: npt.NDArray[np.int64]) -> None:
        labels = None if self.labels is None else self.labels[picked]
        loader.fill(self.positions[picked], batch, labels)

    def _item(
        self,
        batch: Any,
        positions: npt.NDArray[np.int64],
        own: Callable[[str, npt.NDArray[Any], torch.dtype | None], torch.Tensor],
    ) -> dict[str, Any]:
        """The item of a filled batch: each array's used part, converted to
        torch's conventions by ``own(key, array, dtype)``, which copies it
        into memory the consumer may keep (fresh or pinned)."""
        n = batch.size
        item: dict[str, Any] = {
            "features": own("features", batch.features[:n], None),
            "mask": own("mask", batch.mask[:n], torch.bool),
            "lengths": own("lengths", batch.lengths[:n].astype(np.int64), None),
            "source_ids": own("source_ids", batch.source_ids[:n].view(np.int64), None),
            "labels": own("labels", batch.labels[:n], torch.int64),
            "positions": own("positions", positions, None),
            "embedding_index": {
                k: own("i:" + k, v[:n], None) for k, v in batch.embedding_index.items()
            },
        }
        if self.dense:
            item["embeddings"] = {
                k: own("e:" + k, v[:n], None) for k, v in batch.embeddings.items()
            }
        return item

    def _fresh(
        self, batch: Any, positions: npt.NDArray[np.int64], *, shared: bool
    ) -> dict[str, Any]:
        """New tensors holding the batch's used part (one copy each; in a
        worker, straight into shared memory)."""

        def own(_key: str, a: npt.NDArray[Any], dtype: torch.dtype | None) -> torch.Tensor:
            t = torch.empty(a.shape, dtype=dtype or torch.from_numpy(a[:0]).dtype)
            if shared:
                t.share_memory_()
            t.copy_(torch.from_numpy(a))
            return t

        return self._item(batch, positions, own)

    def _iter_pinned(
        self, loader: Loader, plan: list[npt.NDArray[np.int64]], start: int
    ) -> Iterator[dict[str, Any]]:
        pin = torch.cuda.is_available()
        if not pin:
            warnings.warn(
                "CacheDataset(pin_memory=True): no CUDA device, using ordinary memory",
                stacklevel=3,
            )
        batch = loader.new_batch(self.batch_size)
        # Two page-locked buffer sets used in turn, each filled by one copy
        # from the Batch (whose buffers are NumPy's) and sized for the
        # largest batch seen (twice, to settle fast).
        twins: list[dict[str, torch.Tensor]] = [{}, {}]
        for k in range(start, len(plan)):
            twin = twins[k % 2]

            def into(
                key: str,
                a: npt.NDArray[Any],
                dtype: torch.dtype | None,
                twin: dict[str, torch.Tensor] = twin,
            ) -> torch.Tensor:
                src = torch.from_numpy(np.ascontiguousarray(a))
                want = dtype or src.dtype
                buf = twin.get(key)
                if buf is None or buf.numel() < src.numel() or buf.dtype != want:
                    buf = torch.empty(max(src.numel(), 1) * 2, dtype=want, pin_memory=pin)
                    twin[key] = buf
                out = buf[: src.numel()].view(src.shape)
                out.copy_(src)
                return out

            self._fill(loader, batch, plan[k])
            item = self._item(batch, self.positions[plan[k]], into)
            self._consumed = k + 1
            yield item


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
    sharding and resumption as :class:`CacheDataset` (``embeddings``,
    ``dense`` and ``pin_memory`` are not offered).

    Each item is a dict of fresh tensors: ``x`` float32 ``[N, 28]`` (each
    graph's root first, a zero row; then its selected reactions in time
    order), ``edge_index`` int64 ``[2, E]`` (the first ``E/2`` columns
    top-down, parent to child; the last ``E/2`` the same edges bottom-up),
    ``batch`` int64 ``[N]``, ``ptr`` int64 ``[B + 1]``, ``parent`` int64
    ``[N]`` (-1 for roots), ``y`` int64 ``[B]`` (the labels), ``source_ids``
    and ``positions`` int64 ``[B]``. When ``torch_geometric`` is importable
    (and ``pyg`` is not False) the item is a ``torch_geometric.data.Batch``
    with these attributes instead; ``pyg=True`` requires it.

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
        positions: npt.NDArray[np.int64] | Sequence[int] | range,
        batch_size: int,
        *,
        pyg: bool | None = None,
        bag_of_words: Vocabulary | None = None,
        bow_unknown: bool = True,
        **kwargs: Any,
    ) -> None:
        self.bag_of_words = bag_of_words
        self.bow_unknown = bow_unknown
        for opt in ("embeddings", "dense", "pin_memory"):
            if kwargs.get(opt):
                raise ValueError(f"GraphDataset does not take {opt}")
        self._batch_type = None if pyg is False else _pyg_batch()
        if pyg and self._batch_type is None:
            raise ImportError("GraphDataset(pyg=True) needs torch_geometric")
        super().__init__(cache, positions, batch_size, **kwargs)

    def __iter__(self) -> Iterator[Any]:
        info = get_worker_info()
        worker, workers = (0, 1) if info is None else (info.id, info.num_workers)
        epoch = self.epoch
        start = int(self._shared[2]) if int(self._shared[1]) == epoch else 0
        loader = self._open_loader()
        plan = self._plan(loader, epoch)
        in_process = info is None
        if in_process:
            self._consumed = start
        graph = GraphBatch()
        for k in range(start + worker, len(plan), workers):
            picked = plan[k]
            labels = None if self.labels is None else self.labels[picked]
            loader.fill_graph(self.positions[picked], graph, labels)
            item = self._graph_item(graph)
            if in_process:
                self._consumed = k + 1
            yield item

    def _graph_item(self, graph: GraphBatch) -> Any:
        # The getters return fresh arrays: from_numpy shares them, no copy more.
        item = {
            "x": torch.from_numpy(graph.x),
            "edge_index": torch.from_numpy(graph.edge_index),
            "batch": torch.from_numpy(graph.batch),
            "ptr": torch.from_numpy(graph.ptr),
            "parent": torch.from_numpy(graph.parent),
            "y": torch.from_numpy(graph.labels.astype(np.int64)),
            "source_ids": torch.from_numpy(graph.source_ids.view(np.int64)),
            "positions": torch.from_numpy(graph.positions),
        }
        if self.bag_of_words is not None:
            vocab = self.bag_of_words
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
        if self._batch_type is None:
            return item
        return self._batch_type(**item)
