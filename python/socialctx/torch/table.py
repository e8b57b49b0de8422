"""EmbeddingTable: a store's rows on the device, gathered by a batch's
``embedding_index``."""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from .. import Cache, CacheError, open_store
from ._common import (
    _bound_cache,
    _store_id,
)

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
    Called on a :class:`CacheDataset` item it takes the item's
    ``embedding_index[name]`` and first checks that the item was read from
    the cache generation and the version of the store the table was made
    on (``CacheError`` otherwise: a compaction or a re-embed renumbers or
    replaces the rows on the same cache generation).
    An index below -1 or past the rows raises ``IndexError`` (on the CPU
    with this message; on a GPU as the device's assertion).
    ``dtype`` converts the rows once (default: the store's own dtype).
    ``content_id``: the generation the table must be made on (refused,
    naming both, when the cache at the path is another). ``model_id``: the
    model the store must have been made by (an :class:`EmbeddingError`
    naming both otherwise), as ``Loader(embeddings={name: model_id})``
    requires it: a raw index tensor carries no store version, so a table
    made after a re-embed with another model would gather that model's
    rows for it.
    """

    def __init__(
        self,
        cache: Cache | str | os.PathLike[str],
        name: str,
        *,
        device: str | torch.device = "cpu",
        dtype: torch.dtype | None = None,
        content_id: str | None = None,
        model_id: str | None = None,
    ) -> None:
        super().__init__()
        cache = _bound_cache(cache, "EmbeddingTable", content_id=content_id)
        store = open_store(cache, name, model_id=model_id)
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
        self.path = cache.path
        self.content_id = cache.content_id
        self.store_path = str(store.path)
        # The rows' numbering: items of a dataset that read another store
        # (compacted or re-embedded since) are refused.
        self.store_id = _store_id(store.meta)
        self.register_buffer("rows", table, persistent=False)

    @property
    def num_rows(self) -> int:
        """Rows of the store, all segments (the zero row not counted)."""
        return int(self.rows.shape[0]) - 1

    def forward(self, index: torch.Tensor | Mapping[str, Any] | Any) -> torch.Tensor:
        """``[..., dim]`` rows for an index tensor (-1: the zero row), or
        for a dataset item (its ``embedding_index[name]``, generation checked)."""
        if not isinstance(index, torch.Tensor):
            index = self._index_of(index)
        if index.dtype.is_floating_point or index.dtype.is_complex or index.dtype == torch.bool:
            raise TypeError(f"embedding indices must be integers, not {index.dtype}")
        n = self.num_rows
        idx = index.to(device=self.rows.device, dtype=torch.int64, non_blocking=True)
        if idx.device.type == "cpu" and idx.numel():
            # Checked where it costs no device synchronisation.
            lo, hi = int(idx.min()), int(idx.max())
            if lo < -1 or hi >= n:
                bad = lo if lo < -1 else hi
                raise IndexError(
                    f"embedding index {bad} out of range for store {self.name!r} of {n} rows "
                    "(-1 means none)"
                )
        # -1 is the zero row; anything else out of range stays out of range,
        # so that embedding() refuses it rather than returning the zero row.
        idx = torch.where(idx == -1, n, torch.where(idx >= n, n + 1, idx))
        return torch.nn.functional.embedding(idx, self.rows)

    def _index_of(self, item: Any) -> torch.Tensor:
        try:
            made_on = item["content_id"]
            index = item["embedding_index"][self.name]
            store_id = item["store_ids"][self.name]
        except (KeyError, TypeError) as e:
            raise TypeError(
                f"EmbeddingTable({self.name!r}) takes an index tensor or a CacheDataset item "
                f"with embedding_index[{self.name!r}] (missing: {e})"
            ) from None
        if made_on != self.content_id:
            raise CacheError(
                f"{self.path}: this EmbeddingTable was made on content id {self.content_id}, "
                f"the item was read from content id {made_on} (the cache was rebuilt in "
                "between): make the table and the dataset on the same cache"
            )
        if store_id != self.store_id:
            raise CacheError(
                f"{self.store_path}: this EmbeddingTable was made on another version of the "
                "store than the item was read from (it was compacted or re-embedded in "
                "between): make the table and the dataset on the same store"
            )
        if not isinstance(index, torch.Tensor):
            raise TypeError(f"embedding_index[{self.name!r}] is not a tensor")
        return index

    def extra_repr(self) -> str:
        return f"{self.name!r}, rows={self.num_rows}, dim={self.dim}, dtype={self.rows.dtype}"
