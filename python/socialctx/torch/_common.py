"""What the datasets and the embedding table share: the cache generation
a dataset is bound to, store versions, and argument checks."""

from __future__ import annotations

import hashlib
import json
import operator
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from .. import Cache, CacheError, Vocabulary, open
from ..embed import store_dir
from ..folds import _label_codes


class _Deferred:
    """A value that failed to be remade from its pickle (a Vocabulary whose
    cache was rebuilt, in a spawned worker): the error is raised at the
    value's first use, inside an iteration, where the DataLoader hands it
    to the main process, instead of while the worker starts, where it only
    says that the worker "exited unexpectedly"."""

    def __init__(self, remake: Any, args: tuple[Any, ...]) -> None:
        self.remake, self.args = remake, args

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return _remake_or_defer, (self.remake, self.args)

    def value(self) -> Any:
        return self.remake(*self.args)


def _remake_or_defer(remake: Any, args: tuple[Any, ...]) -> Any:
    """Unpickles a deferrable value: remade now, or a _Deferred if that fails."""
    try:
        return remake(*args)
    except Exception:
        return _Deferred(remake, args)


class _Deferrable:
    """Pickles ``value`` (by its ``__reduce__``) so that a failure to remake
    it is deferred to its first use (see :class:`_Deferred`)."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        remake, args = self.value.__reduce__()[:2]
        return _remake_or_defer, (remake, args)


def _deferrable(value: Any) -> Any:
    """``value`` for a pickle: a Vocabulary as a :class:`_Deferrable`."""
    return _Deferrable(value) if isinstance(value, Vocabulary) else value


def _used(value: Any) -> Any:
    """``value`` for use: a :class:`_Deferred` remade (raising its error)."""
    return value.value() if isinstance(value, _Deferred) else value


def _rebuilt(path: str, made_on: str, now: str, what: str) -> CacheError:
    return CacheError(
        f"{path}: the cache was rebuilt after this {what} was made (content id {made_on}, "
        f"now {now}); make a new {what}, with positions and labels from the rebuilt "
        "cache (socialctx.select(cache, source_ids) finds the same threads by source id)"
    )


def _bound_cache(
    cache: Cache | str | os.PathLike[str],
    what: str,
    *,
    content_id: str | None = None,
    positions: bool = False,
) -> Cache:
    """The open cache a dataset or table reads: ``cache`` itself, checked
    to be the generation now at its path (positions and labels taken from
    an older Cache object would mean other threads), or the one at a path.

    Positions (and labels) mean threads of one generation: with a path,
    they are refused unless ``content_id`` names the generation they were
    taken from, which must be the one at the path (never bound silently to
    whatever the path holds now)."""
    if not isinstance(cache, Cache):
        opened = open(os.fspath(cache))
        if content_id is None and positions:
            raise ValueError(
                f"{what}({opened.path!r}, positions): positions mean threads of one cache "
                "generation, and a path does not say which; pass the Cache the positions "
                "were taken from (socialctx.open(path)), a socialctx.Selection, or "
                f"content_id={opened.content_id!r} naming the generation they belong to"
            )
    else:
        opened = cache
        now = open(cache.path).content_id
        if now != cache.content_id:
            raise CacheError(
                f"{cache.path}: the cache was rebuilt after this Cache object was opened "
                f"(content id {cache.content_id}, now {now}); reopen it (socialctx.open) and "
                f"take positions and labels from the rebuilt cache before making a {what}"
            )
    if content_id is not None and content_id != opened.content_id:
        raise _rebuilt(opened.path, content_id, opened.content_id, what)
    return opened


def _store_id(meta: Mapping[str, Any]) -> str:
    """What fixes a store's rows by global index: its index and segments
    (checksums), dtype and width. Compaction or a re-embed (another model)
    on the same cache generation changes it; a nightly embed with nothing
    new does not."""
    h = hashlib.blake2b(digest_size=8)
    files = meta.get("files", {})
    parts = [
        meta.get("dtype"),
        meta.get("dim"),
        files.get("index.npy", {}).get("xxh3"),
        [(s.get("rows"), s.get("xxh3")) for s in meta.get("segments", [])],
    ]
    h.update(repr(parts).encode())
    return h.hexdigest()


def _store_ids(cache: Cache, names: Sequence[str]) -> dict[str, str]:
    """Each named store's id, from its meta.json (absent: "", the Loader
    then reports the missing store)."""
    ids = {}
    for name in names:
        if not isinstance(name, str):
            # Not a store name: the Loader refuses it with a TypeError.
            ids[name] = ""
            continue
        try:
            meta = json.loads((store_dir(cache, name) / "meta.json").read_bytes())
        except (OSError, ValueError):
            meta = {}
        ids[name] = _store_id(meta if isinstance(meta, dict) else {})
    return ids


def _store_models(cache: Cache, names: Sequence[str]) -> dict[str, str | None]:
    """Each named store's model id from its meta.json (None: not recorded,
    or no store; the Loader reports a missing one)."""
    models: dict[str, str | None] = {}
    for name in names:
        if not isinstance(name, str):
            continue
        try:
            meta = json.loads((store_dir(cache, name) / "meta.json").read_bytes())
        except (OSError, ValueError):
            meta = {}
        model = meta.get("model_id") if isinstance(meta, dict) else None
        models[name] = model if isinstance(model, str) else None
    return models


def _world(rank: int | None, world_size: int | None) -> tuple[int, int]:
    dist = torch.distributed
    if world_size is None:
        world_size = dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1
    if rank is None:
        rank = dist.get_rank() if dist.is_available() and dist.is_initialized() else 0
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} of world_size {world_size} is not a valid rank")
    return rank, world_size


def _positions(positions: Any, threads: int) -> npt.NDArray[np.int64]:
    """Positions checked as the Loader checks them: integers (no booleans,
    no floats), none negative (-1 is not the last thread), all below the
    cache's length."""
    a = np.asarray(positions)
    if a.ndim == 0 and a.dtype == object:
        raise TypeError(
            f"positions must be a sequence or array of integers, not {type(positions).__name__} "
            "(np.fromiter(it, np.int64) makes an array of an iterator)"
        )
    if a.size == 0:
        return np.zeros(0, dtype=np.int64)
    if a.ndim != 1:
        raise ValueError(f"positions must be one-dimensional, not of shape {a.shape}")
    if a.dtype.kind not in "iu":
        hint = " (a boolean mask? use np.flatnonzero(mask))" if a.dtype.kind == "b" else ""
        raise TypeError(f"positions must be integers, not {a.dtype}{hint}")
    bad = np.flatnonzero((a < 0) | (a >= threads))
    if len(bad):
        raise IndexError(
            f"thread position {a[bad[0]]} (at index {bad[0]}) out of range for a cache of "
            f"{threads} threads (positions are 0 to {threads - 1}; negative ones do not "
            "count from the end)"
        )
    return a.astype(np.int64)


def _labels(labels: Any, count: int) -> npt.NDArray[np.int8] | None:
    """Labels checked to be integers that int8 holds exactly, one per position."""
    if labels is None:
        return None
    a = np.asarray(labels)
    if a.ndim != 1:
        raise ValueError(f"labels must be one-dimensional, not of shape {a.shape}")
    codes = _label_codes(a)  # the cast select() makes, refused where it would change them
    if len(codes) != count:
        raise ValueError(f"{len(codes)} labels for {count} positions")
    return codes


def _count(value: Any, what: str, least: int) -> int:
    """An integer argument (NumPy's too; never a bool or a float) of at least ``least``."""
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{what} must be an integer, not {value!r}")
    try:
        n = operator.index(value)
    except TypeError:
        raise TypeError(f"{what} must be an integer, not {value!r}") from None
    if n < least:
        raise ValueError(f"{what} must be at least {least}, not {n}")
    return n


def _digest(*arrays: npt.NDArray[Any] | None) -> str:
    h = hashlib.blake2b(digest_size=8)
    for a in arrays:
        h.update(b"-" if a is None else np.ascontiguousarray(a).tobytes())
    return h.hexdigest()
