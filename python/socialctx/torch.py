"""PyTorch adapter: batches of a socialctx cache as an ``IterableDataset``.

Importing this module needs torch; the rest of socialctx does not::

    from torch.utils.data import DataLoader
    from socialctx.torch import CacheDataset

    ds = CacheDataset("target/socialctx-cache", split.positions, 128,
                      labels=split.labels, seed=0, stats=stats)
    for step in DataLoader(ds, batch_size=None, num_workers=2, pin_memory=True):
        step["features"], step["mask"], step["lengths"], step["labels"]

Batching happens here, not in the DataLoader (hence ``batch_size=None``).
Each worker opens the cache itself (microseconds) and takes every k-th
batch, so the workers' batches are disjoint and together cover the epoch
once. Tensors are made with ``torch.from_numpy`` over the worker's reused
batch buffers: no copy in the worker (a DataLoader with workers then moves
them to the main process; in-process, clone a tensor to keep it past the
step).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from torch.utils.data import IterableDataset, get_worker_info

from . import Cache, FeatureStats, Loader, open, shuffled

__all__ = ["CacheDataset"]


class CacheDataset(IterableDataset):  # type: ignore[misc]
    """One epoch of ``batch_size`` batches over ``positions`` of a cache.

    ``cache`` is a cache directory or an open :class:`socialctx.Cache` (its
    path is used: each worker opens its own). ``labels`` (one per position,
    e.g. ``split.labels``) replace the cache's label codes. With ``seed``,
    positions are shuffled by ``seed + epoch``; call :meth:`set_epoch` each
    epoch for a new order. Other keyword arguments go to
    :class:`socialctx.Loader` (``kinds``, ``max_cxt``, ``window_s``,
    ``stats``, ``empty``).

    Each item is a dict of tensors: ``features`` float32 [B, T, 28],
    ``mask`` uint8 [B, T], ``lengths`` int64 [B], ``source_ids`` int64 [B],
    ``labels`` int8 [B]; the last batch of an epoch may be smaller.
    """

    def __init__(
        self,
        cache: str | os.PathLike[str] | Cache,
        positions: npt.NDArray[np.int64] | Sequence[int] | range,
        batch_size: int,
        *,
        labels: npt.NDArray[np.int8] | Sequence[int] | None = None,
        seed: int | None = None,
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
        self.epoch = 0
        self.stats = stats
        self.loader_kwargs = loader_kwargs

    def set_epoch(self, epoch: int) -> None:
        """Selects the shuffle of epoch ``epoch`` (with a seed)."""
        self.epoch = epoch

    def __len__(self) -> int:
        return -(-len(self.positions) // self.batch_size)

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        info = get_worker_info()
        worker, workers = (0, 1) if info is None else (info.id, info.num_workers)
        order = np.arange(len(self.positions))
        if self.seed is not None:
            order = shuffled(len(self.positions), self.seed + self.epoch)
        cache = open(self.path)
        loader = Loader(cache, stats=self.stats, **self.loader_kwargs)
        batch = loader.new_batch(self.batch_size)
        for step in range(worker, len(self), workers):
            picked = order[step * self.batch_size : (step + 1) * self.batch_size]
            labels = None if self.labels is None else self.labels[picked]
            loader.fill(self.positions[picked], batch, labels)
            n = batch.size
            yield {
                "features": torch.from_numpy(batch.features[:n]),
                "mask": torch.from_numpy(batch.mask[:n]),
                "lengths": torch.from_numpy(batch.lengths[:n].astype(np.int64)),
                "source_ids": torch.from_numpy(batch.source_ids[:n].view(np.int64)),
                "labels": torch.from_numpy(batch.labels[:n]),
            }
