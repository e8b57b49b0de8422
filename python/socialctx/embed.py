"""Embedding stores: run a text model once per distinct input, read its rows
like the features.

RPDNN embeds every reply and every author description with ELMo one at a
time, in every forward pass of every epoch. :func:`embed` instead calls your
model once per batch of *distinct, non-empty* inputs (a description repeats
on every reaction of its author), sorted by length so that padding is small,
and writes the result beside the cache::

    import numpy as np
    import socialctx

    cache = socialctx.open("target/socialctx-cache")

    def model(batch: list[list[str]]) -> np.ndarray:   # [len(batch), dim]
        return my_elmo(batch)

    socialctx.embed(cache, model, field="reply", name="elmo-reply")
    loader = socialctx.Loader(cache, embeddings=["elmo-reply"])
    for batch in loader.epoch(range(len(cache)), 32, seed=0):
        batch.embeddings["elmo-reply"]   # [B, T, dim]: zeros where due

A store is the directory ``<cache>/derived/embeddings/<name>/``: immutable
row segments ``seg-NNNNN.npy`` (each loads with ``np.load(mmap_mode="r")``;
global row ``r`` is row ``r`` of their concatenation), ``index.npy`` (each
reaction's global row, ``NONE`` for zeros), ``keys.npy`` (each row's content
key) and ``meta.json``. The crate writes it (``src/store/``: the lock,
staging, rows synced per batch, resumption, checksums, one atomic swap) and
verifies every store it opens; this module only calls the model.
"""

from __future__ import annotations

import json
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Literal

import numpy as np

from . import _socialctx

#: An index entry for a reaction with no row (the crate's ``NONE``).
NONE = _socialctx.UniqueTexts.NONE
_DTYPES = {"float32": np.float32, "float16": np.float16}

Field = Literal["reply", "description"]
EmbedFn = Callable[[list[list[str]]], Any]

EmbeddingError = _socialctx.EmbeddingError


@dataclass(frozen=True)
class EmbedSummary:
    """What :func:`embed` did."""

    calls: int
    """Model calls made by this invocation."""
    unique: int
    """Distinct inputs (the store's rows)."""
    dim: int
    """Row width."""
    reactions: int
    """Reactions of the cache (the index's length)."""
    resumed: int
    """Batches taken from an interrupted run."""
    new: int
    """Inputs embedded now."""
    reused: int
    """Rows reused from the previous store."""
    dropped: int
    """Rows of the previous store no reaction uses any more."""
    compacted: bool = False
    """Whether the store was written as one segment (compacted or from scratch)."""
    model_id: str | None = None
    """The model id the store was written under (recorded in ``meta.json``;
    None: the model's identity is unknown)."""
    restarted: str | None = None
    """Why an interrupted embed was started over instead of resumed (another
    model, no model id, rows of another width); None if none was discarded."""
    not_reused: str | None = None
    """Why the previous store's rows were not reused although a ``model_id``
    was given (made by another model or without an id, or unreadable)."""
    segments_read: int = 0
    """Segments of the previous store read and checked before its rows were
    reused: those whose stat changed since they were last verified (all of
    them with ``verify=True``); 0 without a previous store."""

    def __getitem__(self, key: str) -> int:
        """Deprecated: ``summary["unique"]`` (``embed`` returned a dict); read the attribute."""
        if key not in {f.name for f in fields(self)}:
            raise KeyError(key)
        warnings.warn(
            f"EmbedSummary[{key!r}] is deprecated: read the attribute EmbedSummary.{key} "
            "instead (results are typed classes, no longer dicts)",
            DeprecationWarning,
            stacklevel=2,
        )
        return int(getattr(self, key))


def store_dir(cache: _socialctx.Cache, name: str) -> Path:
    """The directory of store ``name`` of ``cache`` (which may not exist)."""
    if not name or name.startswith(".") or "/" in name or "\0" in name:
        raise ValueError(f"store name {name!r} must be a non-empty file name not starting with '.'")
    return Path(cache.derived_dir) / "embeddings" / name


def callable_model_id(fn: Any) -> str | None:
    """The model id ``fn`` states: its ``model_id`` attribute, or that of
    the object a bound method belongs to, if a string."""
    for holder in (fn, getattr(fn, "__self__", None)):
        given = getattr(holder, "model_id", None)
        if isinstance(given, str):
            return given
    return None


def embed(
    cache: _socialctx.Cache,
    fn: EmbedFn,
    *,
    field: Field = "reply",
    name: str,
    batch_size: int = 256,
    dtype: Literal["float32", "float16"] = "float32",
    model_id: str | None = None,
    progress: Callable[[int, int], None] | bool | None = None,
    compact: bool = False,
    reuse: bool = True,
    verify: bool = False,
) -> EmbedSummary:
    """Embeds every distinct non-empty input of ``field`` with ``fn`` into
    the store ``name`` of ``cache``.

    ``fn(batch)`` gets a list of at most ``batch_size`` token lists (never an
    empty one; consecutive batches grow in length) and returns an array-like
    ``[len(batch), dim]`` of finite numbers, the same ``dim`` every call.
    ``field`` is ``"reply"`` (RPDNN's reply tokens) or ``"description"``
    (the author's description split on ``' '``).

    ``model_id`` names the model (e.g. a hash of its weights) and is stored
    in ``meta.json``; without one, ``fn.model_id`` is taken if ``fn`` (or
    the object of a bound method) has that attribute as a string, else the
    model's identity is unknown (and recorded as null). An empty id is a
    ValueError. With a ``model_id``, re-embedding a rebuilt cache
    reuses the rows of every input the store already has under the same
    ``model_id`` (matched by content: xxh3-128 of their tokens), calls
    ``fn`` only for the new ones and writes their rows as one new segment;
    the previous segments are linked, never copied. Rows no reaction uses
    any more are dropped by compaction, which runs when they exceed a
    quarter of the rows, past 32 segments, or with ``compact=True``; a
    compacted store is byte for byte what a from-scratch embed writes.

    ``progress``: a callable ``progress(done, total)`` called after each
    model call; ``None`` draws a progress bar when standard error is a
    terminal (``False``: never).

    Resumable: after an interruption (Ctrl-C, a crash, a kill), calling it
    again with the same arguments and the same ``model_id`` computes only
    the batches not yet written. Rows of two models are never mixed: an
    interrupted embed of another ``model_id``, of rows of another width, or
    without a ``model_id`` (the model cannot be known to be the same) is
    started over, with a warning and the reason in
    :attr:`EmbedSummary.restarted`; a previous store made by another model
    (or without an id) is not reused (:attr:`EmbedSummary.not_reused`).
    ``reuse=False`` never reuses a previous store's rows.

    The previous store's segments are verified before they are linked into
    the new store, but only those changed since they were last verified:
    after publishing, the embed records each segment's checksum and stat
    (size, mtime, ctime, inode) in ``.<name>.verified`` beside the store,
    and the next one reads again only the segments whose stat moved (a
    write, a ``touch``, a replacement), as git's index does; so a nightly
    costs the night's change, not the store's size
    (:attr:`EmbedSummary.segments_read`). ``verify=True`` reads every
    segment (an explicit check, e.g. after a disk fault: a segment damaged
    without a change to its stat is refused by every reader, and by
    :func:`socialctx.verify_store`). A full disk is an
    :class:`EmbeddingError` naming the file, and every value is checked
    finite after the cast to ``dtype``.
    """
    if dtype not in _DTYPES:
        raise ValueError(f'dtype must be "float32" or "float16", not {dtype!r}')
    if field not in ("reply", "description"):
        raise ValueError(f'field must be "reply" or "description", not {field!r}')
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    store_dir(cache, name)
    if model_id == "":
        raise ValueError("model_id must not be empty (None: the model is unknown)")
    if model_id is None:
        model_id = callable_model_id(fn)
    if progress is None and sys.stderr.isatty():
        progress = _ProgressBar(name)
    elif progress is None or progress is False or progress is True:
        progress = _ProgressBar(name) if progress is True else None
    opts = dict(field=field, half=dtype == "float16", batch_size=batch_size, model_id=model_id)
    try:
        return _embed(
            cache,
            fn,
            name,
            dtype,
            progress,
            dict(opts, compact=compact, reuse=reuse, verify=verify),
        )
    finally:
        if isinstance(progress, _ProgressBar):
            progress.close()


def _embed(
    cache: _socialctx.Cache,
    fn: EmbedFn,
    name: str,
    dtype: str,
    progress: Callable[[int, int], None] | None,
    opts: dict[str, Any],
    restarted: str | None = None,
) -> EmbedSummary:
    w = _socialctx.StoreWriter(cache, name, **opts)
    try:
        not_reused = w.not_reused
        restarted = restarted or w.restarted
        for note in (
            not_reused and f"not reusing {store_dir(cache, name)}: {not_reused}",
            w.restarted,
        ):
            if note:
                warnings.warn(note, stacklevel=3)
        calls = 0
        for b in range(w.done, w.batches):
            inputs = w.inputs(b)
            rows = np.asarray(fn(inputs))
            calls += 1
            if rows.ndim != 2 or rows.shape[0] != len(inputs) or rows.shape[1] < 1:
                n = len(inputs)
                raise ValueError(
                    f"fn returned shape {rows.shape} for {n} inputs; expected [{n}, dim]"
                )
            if w.dim not in (None, rows.shape[1]) and calls == 1 and (w.resumed or w.reused):
                # The model changed since the interrupted run or the store
                # it would reuse: its rows cannot be mixed; start over.
                why = (
                    f"{store_dir(cache, name)}: fn returns rows of dimension {rows.shape[1]}, "
                    f"the store being completed has {w.dim}; starting over from scratch"
                )
                warnings.warn(why, stacklevel=3)
                w.close()
                again = dict(opts, reuse=False, resume=False)
                return _embed(cache, fn, name, dtype, progress, again, restarted or why)
            with np.errstate(over="ignore", invalid="ignore"):
                cast = np.ascontiguousarray(rows, dtype=_DTYPES[dtype])
            # The writer checks the width and that every value is finite
            # (ValueError otherwise).
            w.write(b, cast.view(np.uint16) if dtype == "float16" else cast)
            if progress is not None:
                progress(b + 1, w.batches)
        counts = (w.unique, w.reactions, w.resumed, w.new_inputs, w.reused, w.dropped)
        segments_read = w.segments_read
        compacted = w.compacting
        meta = json.loads(w.finish())
    finally:
        w.close()
    unique, reactions, resumed, new, reused, dropped = counts
    return EmbedSummary(
        calls,
        unique,
        int(meta["dim"]),
        reactions,
        resumed,
        new,
        reused,
        dropped,
        compacted,
        meta["model_id"],
        restarted,
        not_reused or None,
        segments_read,
    )


class _ProgressBar:
    """A one-line progress bar on standard error."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.started = time.monotonic()
        self.drawn = False

    def __call__(self, done: int, total: int) -> None:
        width = 30
        filled = width * done // max(total, 1)
        secs = time.monotonic() - self.started
        sys.stderr.write(
            f"\rembed {self.name}: [{'#' * filled}{'.' * (width - filled)}] "
            f"{done}/{total} calls, {secs:.1f} s"
        )
        sys.stderr.flush()
        self.drawn = True

    def close(self) -> None:
        if self.drawn:
            sys.stderr.write("\n")
