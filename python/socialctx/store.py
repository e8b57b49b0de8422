"""Reading an embedding store from Python: :func:`open_store` (verified in
full by the crate's reader) and :class:`Embeddings`, its segments as NumPy
memory maps. Written by :func:`socialctx.embed`; the format is the crate's
(``src/store/format.rs``)."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from . import _socialctx
from .embed import _DTYPES, NONE, EmbeddingError, store_dir

__all__ = ["Embeddings", "open_store", "verify_store"]


class Embeddings:
    """An opened embedding store: ``segments`` (memory maps, ``[rows, dim]``
    each, in global row order), ``index`` ``uint32 [reactions]`` (each
    reaction's global row) and ``meta``. Made by :func:`open_store`."""

    def __init__(
        self,
        path: Path,
        meta: dict[str, Any],
        segments: list[npt.NDArray[Any]],
        index: npt.NDArray[np.uint32],
    ):
        self.path = path
        self.meta = meta
        self.segments = segments
        self.index = index
        self.starts = np.cumsum([0] + [len(s) for s in segments])

    @property
    def dim(self) -> int:
        return int(self.meta["dim"])

    @property
    def vectors(self) -> npt.NDArray[Any]:
        """All rows ``[rows, dim]``: the memory map of a store of one
        segment, else a copy joining them."""
        if len(self.segments) == 1:
            return self.segments[0]
        return np.concatenate(self.segments or [np.zeros((0, 0), _DTYPES[self.meta["dtype"]])])

    def __repr__(self) -> str:
        m = self.meta
        return (
            f"socialctx.Embeddings({m['name']!r}, field={m['field']!r}, unique={m['unique']}, "
            f"dim={m['dim']}, segments={len(self.segments)})"
        )

    def rows(self, reactions: Sequence[int] | npt.NDArray[np.integer[Any]]) -> npt.NDArray[Any]:
        """The rows of these reactions (cache-order indices), zeros where due."""
        idx = self.index[np.asarray(reactions, dtype=np.int64)].astype(np.int64)
        out = np.zeros((len(idx), self.dim), dtype=_DTYPES[self.meta["dtype"]])
        has = idx != NONE
        seg = np.searchsorted(self.starts, idx, side="right") - 1
        for k, rows in enumerate(self.segments):
            at = has & (seg == k)
            out[at] = rows[idx[at] - self.starts[k]]
        return out


def open_store(
    cache: _socialctx.Cache,
    name: str,
    *,
    validate: Literal["lazy", "all"] = "all",
    model_id: str | None = None,
) -> Embeddings:
    """Opens store ``name`` of ``cache``, verified in full by the crate's
    reader (metadata, that it belongs to this content of the cache, every
    file's size and checksum, the arrays' headers, every index entry,
    finite rows): any fault is an :class:`EmbeddingError` naming the file.
    With ``model_id``, a store made by another model (or without a model
    id) is an :class:`EmbeddingError` naming both ids.
    ``validate`` is accepted for compatibility; every open verifies all."""
    if validate not in ("lazy", "all"):
        raise ValueError(f'validate must be "lazy" or "all", not {validate!r}')
    path = store_dir(cache, name)
    # A nightly embed publishes by swapping in a new directory: the files
    # NumPy maps must be those of the directory the crate verified, not
    # whatever store the path names a moment later (old metadata with a
    # new index read rows of other inputs, or zeros). The directory held
    # open cannot be reused while we hold it, and a swapped-out store
    # never comes back, so the path still naming it after the check means
    # the check saw it; its files are then read through the held handle.
    for _attempt in range(3):
        try:
            held = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        except FileNotFoundError:
            held = -1  # the crate's open says what is missing
        try:
            try:
                meta_json, segments = _socialctx._open_store(cache, name, model_id=model_id)
            except EmbeddingError:
                # Replaced while being checked, the error may be the swap's:
                # try again, and after three such opens say it was being
                # replaced (the last one raised "checksum mismatch (damaged
                # store)" for a store that is fine).
                if held < 0 or _names(path, held):
                    raise
                continue
            if held < 0 or not _names(path, held):
                continue
            meta = json.loads(meta_json)
            pinned = Path(f"/proc/self/fd/{held}")
            try:
                rows = [np.load(pinned / Path(p).name, mmap_mode="r") for p, _ in segments]
                index = np.load(pinned / "index.npy", mmap_mode="r")
            except FileNotFoundError:
                continue  # replaced and removed since: open the new one
            except (OSError, ValueError) as e:
                raise EmbeddingError(f"{path}: unreadable store arrays: {e}") from None
            return Embeddings(path, meta, rows, index)
        finally:
            if held >= 0:
                os.close(held)
    raise EmbeddingError(
        f"{path}: the store was replaced three times while being opened "
        "(an embed is publishing it); open it again"
    )


def verify_store(cache: _socialctx.Cache, name: str) -> dict[str, Any]:
    """Verifies store ``name`` of ``cache`` in full, whatever cache content
    it was computed for: metadata, every file's size and checksum, the
    arrays' headers, every index entry, finite rows, as every open does.
    Returns its metadata (``meta.json``); any fault is an
    :class:`EmbeddingError` naming the file.

    A nightly :func:`socialctx.embed` reads only the segments whose stat
    changed since they were last verified; a segment damaged without such
    a change (by the disk itself) is refused by every reader and found
    here, which also drops the store's verified record, so that the next
    embed verifies every segment and recomputes the damaged rows (as
    ``embed(..., verify=True)`` does at once)."""
    store_dir(cache, name)
    return dict(json.loads(_socialctx._verify_store(cache, name)))


def _names(path: Path, held: int) -> bool:
    """Whether ``path`` still names the directory open as ``held``."""
    try:
        now, then = os.stat(path), os.fstat(held)
    except OSError:
        return False
    return (now.st_dev, now.st_ino) == (then.st_dev, then.st_ino)
