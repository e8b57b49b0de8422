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

A store is the directory ``<cache>/derived/embeddings/<name>/``:

- ``vectors.npy``: ``[unique, dim]`` rows (float32 or float16), one per
  distinct input, in :class:`~socialctx.UniqueTexts` order;
- ``index.npy``: ``uint32 [reactions]``, each reaction's row in cache order
  (threads by position, reactions by time), ``0xFFFFFFFF`` for a zero row
  (a retweet, a reply RPDNN tokenises to ``[]``, no description);
- ``keys.npy``: ``uint64 [unique, 2]``, each row's input as a content key
  (xxh3-128 of its tokens), what a later embed of a rebuilt cache reuses
  rows by;
- ``meta.json``: field, dtype, dim, counts, the cache's content id, and the
  size and xxh3-64 of both files.

It is written under ``.<name>.partial/`` and published with one atomic
rename (an exchange when replacing a store), so readers see the old store or
the new one, never a mixture. An interrupted :func:`embed` resumes from the
last finished batch. A store belongs to one cache content: after a rebuild
that changes the cache, opening it raises :class:`EmbeddingError` until
``embed`` is run again, which (given a ``model_id``) calls the model only
for the inputs that are new. The format is the crate's
(``src/format/embeddings.rs``), which also verifies every store it opens.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from . import _socialctx

STORE_FORMAT = "socialctx-embeddings"
STORE_VERSION = 2
#: An index entry for a reaction with no row (the crate's ``NO_ROW``).
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
    """Rows of the previous store no longer needed."""

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


def _store_root(cache: _socialctx.Cache) -> Path:
    return Path(cache.derived_dir) / "embeddings"


def _check_name(name: str) -> None:
    if not name or name.startswith(".") or "/" in name or "\0" in name:
        raise ValueError(f"store name {name!r} must be a non-empty file name not starting with '.'")


def store_dir(cache: _socialctx.Cache, name: str) -> Path:
    """The directory of store ``name`` of ``cache`` (which may not exist)."""
    _check_name(name)
    return _store_root(cache) / name


def _write_json(path: Path, value: dict[str, Any], *, durable: bool = True) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(value, f, indent=1, sort_keys=True)
        f.write("\n")
        f.flush()
        if durable:
            os.fsync(f.fileno())
    os.replace(tmp, path)


def _fsync(path: Path) -> None:
    """Syncs a file or a directory (O_RDONLY works for both on Linux)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


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
) -> EmbedSummary:
    """Embeds every distinct non-empty input of ``field`` with ``fn`` into
    the store ``name`` of ``cache``.

    ``fn(batch)`` gets a list of at most ``batch_size`` token lists (never an
    empty one; consecutive batches grow in length) and returns an array-like
    ``[len(batch), dim]`` of finite numbers, the same ``dim`` every call.
    ``field`` is ``"reply"`` (RPDNN's reply tokens) or ``"description"``
    (the author's description split on ``' '``).

    ``model_id`` names the model (e.g. a hash of its weights) and is stored
    in ``meta.json``. With a ``model_id``, re-embedding a rebuilt cache
    reuses the rows of every input the store already has under the same
    ``model_id`` (inputs are matched by content: xxh3-128 of their tokens)
    and calls ``fn`` only for the new ones; for a deterministic model the
    result is byte for byte what a from-scratch embed writes. Without one,
    or with another one, nothing is reused. The previous generation of the
    store is the source of the reused rows until the new one is published
    in its place: one generation remains.

    ``progress``: a callable ``progress(done, total)`` called after each
    model call; ``None`` draws a progress bar when standard error is a
    terminal (``False``: never).

    Resumable: after an interruption (Ctrl-C, a crash, a kill), calling it
    again with the same arguments computes only the batches not yet
    written; an interrupted embed of another ``model_id`` or row width is
    started over (with a warning), never mixed. Rows are written with plain
    writes into a file allocated in full first, so a full disk is an
    :class:`EmbeddingError` naming the file, never a crash, and every value
    is checked finite after the cast to ``dtype``.

    Returns an :class:`EmbedSummary`: model calls made by this invocation,
    distinct inputs, row width, reactions, batches reused from an
    interrupted run, inputs embedded now, rows reused from the previous
    store, and rows of the previous store no longer needed.
    """
    if dtype not in _DTYPES:
        raise ValueError(f'dtype must be "float32" or "float16", not {dtype!r}')
    if field not in ("reply", "description"):
        raise ValueError(f'field must be "reply" or "description", not {field!r}')
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    _check_name(name)
    if progress is None and sys.stderr.isatty():
        progress = _ProgressBar(name)
    elif progress is None or progress is False or progress is True:
        progress = _ProgressBar(name) if progress is True else None
    root = _store_root(cache)
    root.mkdir(parents=True, exist_ok=True)
    lock = open(root / f".{name}.lock", "w")
    try:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise EmbeddingError(f"{root / name}: another embed of this store is running") from None
        try:
            # One helper thread for work that releases the GIL, so that it
            # runs while this thread does the rest: verifying the previous
            # store while the inputs are collected, then copying and syncing
            # its reused rows while the model embeds the new inputs. Leaving
            # the block waits for it.
            with ThreadPoolExecutor(1, thread_name_prefix="socialctx-embed") as helper:
                return _embed_locked(
                    helper, cache, fn, field, name, batch_size, dtype, model_id, progress
                )
        except OSError as e:
            raise EmbeddingError(
                f"{e.filename or root / name}: {e.strerror or e} while writing store {name!r}"
            ) from e
    finally:
        # Unlocked before closing: a process forked meanwhile (a DataLoader
        # worker) shares this open file and would otherwise keep it locked.
        fcntl.flock(lock, fcntl.LOCK_UN)
        lock.close()
        if isinstance(progress, _ProgressBar):
            progress.close()


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


class _Source:
    """The previous generation of a store, whose rows can be reused."""

    def __init__(self, meta: dict[str, Any], vectors: npt.NDArray[Any], keys: npt.NDArray[Any]):
        self.meta = meta
        self.vectors = vectors
        self.keys = keys


def _verified_meta(
    cache: _socialctx.Cache, final: Path, model_id: str | None
) -> dict[str, Any] | EmbeddingError | None:
    """The metadata of the published store at ``final``, verified in full
    (in Rust, without the GIL: this runs while the inputs are collected),
    or why it failed; None where nothing could be reused anyway."""
    if model_id is None or not (final / "meta.json").exists():
        return None
    try:
        meta: dict[str, Any] = json.loads(_socialctx._verify_store(cache, final.name, False))
    except EmbeddingError as e:
        return e
    return meta


def _reusable(
    final: Path,
    meta: dict[str, Any] | EmbeddingError | None,
    field: str,
    dtype: str,
    model_id: str | None,
) -> _Source | None:
    """The published store at ``final`` (verified: ``meta``) if its rows
    may be reused: same field, dtype and model_id."""
    if meta is None:
        return None
    if isinstance(meta, EmbeddingError):
        warnings.warn(f"not reusing {final}: {meta}", stacklevel=4)
        return None
    if (
        meta.get("model_id") != model_id
        or meta.get("field") != field
        or meta.get("dtype") != dtype
        or int(meta.get("dim", 0)) == 0
    ):
        return None
    vectors = np.load(final / "vectors.npy", mmap_mode="r")
    keys = np.load(final / "keys.npy", mmap_mode="r")
    return _Source(meta, vectors, keys)


def _match(unique: _socialctx.UniqueTexts, source: _Source | None) -> npt.NDArray[np.int64]:
    """Per input, the source's row with the same content key, or -1 (a
    hash lookup in Rust)."""
    if source is None:
        return np.full(len(unique), -1, dtype=np.int64)
    return unique.positions_in(np.ascontiguousarray(source.keys))


def _runs(idx: npt.NDArray[np.int64]) -> list[tuple[int, int]]:
    """(start, stop) of each run of consecutive values, in order, as
    offsets into ``idx``."""
    if not len(idx):
        return []
    cuts = np.flatnonzero(np.diff(idx) != 1) + 1
    bounds = [0, *cuts.tolist(), len(idx)]
    return list(zip(bounds[:-1], bounds[1:]))


def _embed_locked(
    helper: ThreadPoolExecutor,
    cache: _socialctx.Cache,
    fn: EmbedFn,
    field: Field,
    name: str,
    batch_size: int,
    dtype: str,
    model_id: str | None,
    progress: Callable[[int, int], None] | None,
) -> EmbedSummary:
    root = _store_root(cache)
    final = root / name
    partial = root / f".{name}.partial"
    verified = helper.submit(_verified_meta, cache, final, model_id)
    unique = cache.unique_texts(field)
    total = len(unique)
    keys = np.ascontiguousarray(unique.keys)
    source = _reusable(final, verified.result(), field, dtype, model_id)
    reuse_from = _match(unique, source)
    todo = np.flatnonzero(reuse_from < 0)
    n_batches = -(-len(todo) // batch_size)
    store_meta = {
        "cache_content_id": cache.content_id,
        "field": field,
        "dtype": dtype,
        "batch_size": batch_size,
        "unique": total,
        "reactions": len(unique.index),
        "model_id": model_id,
    }
    plan = dict(
        store_meta,
        source=None if source is None else source.meta["cache_content_id"],
        todo=len(todo),
    )
    item = np.dtype(_DTYPES[dtype]).itemsize
    vectors_path = partial / "vectors.npy"
    state = _resume_state(partial, plan)
    # Syncs (and the copy of the reused rows) running on the helper thread,
    # all done before the first progress.json.
    pending: list[Future[None]] = []
    if state is None:
        if partial.exists():
            shutil.rmtree(partial)
        partial.mkdir()
        # progress.json only ever claims what is on disk: index and keys
        # are synced before the first one is written, and each batch's rows
        # (with the rows copied from the source, which no progress.json
        # claims until then) before the one that counts them. So it needs
        # no sync of its own: one lost in a crash means redoing work, never
        # trusting rows that are not there.
        state = dict(plan, done=0, dim=None)
        if source is not None:
            dim = int(source.meta["dim"])
            os.close(_create_vectors(vectors_path, dtype, (total, dim))[0])
            pending.append(
                helper.submit(_copy_reused, vectors_path, dtype, total, source, reuse_from)
            )
            state["dim"] = dim
        for fname, arr in (("index.npy", unique.index), ("keys.npy", keys)):
            np.save(partial / fname, arr)
            pending.append(helper.submit(_fsync, partial / fname))
    done = int(state["done"])
    resumed = done
    dim = state["dim"]
    data_at = 0
    fd = -1
    if dim is not None:
        fd = os.open(vectors_path, os.O_RDWR)
        data_at = _npy_data_offset(vectors_path, dtype, (total, dim))
    calls = 0
    try:
        for b in range(done, n_batches):
            picked = todo[b * batch_size : (b + 1) * batch_size]
            start, stop = int(picked[0]), int(picked[-1]) + 1
            if stop - start == len(picked):
                inputs = unique.batch(start, stop)
            else:
                inputs = [unique[int(i)] for i in picked]
            rows = np.asarray(fn(inputs))
            calls += 1
            if rows.ndim != 2 or rows.shape[0] != len(inputs):
                raise ValueError(
                    f"fn returned shape {rows.shape} for {len(inputs)} inputs; expected [{len(inputs)}, dim]"
                )
            if dim is None:
                dim = int(rows.shape[1])
                if dim < 1:
                    raise ValueError("fn returned rows of dimension 0")
                fd, data_at = _create_vectors(vectors_path, dtype, (total, dim))
            elif rows.shape[1] != dim and calls == 1 and (resumed or source is not None):
                # The model changed since the interrupted run (or since the
                # store it would reuse): its rows cannot be mixed; start over.
                warnings.warn(
                    f"{partial}: fn returns rows of dimension {rows.shape[1]}, the store "
                    f"being completed has {dim}; starting over from scratch",
                    stacklevel=3,
                )
                os.close(fd)
                fd = -1
                _settle(pending)
                shutil.rmtree(partial)
                if source is not None:
                    # Reuse is what mismatched: embed everything anew.
                    return _embed_locked(
                        helper, cache, fn, field, name, batch_size, dtype, None, progress
                    )
                return _embed_locked(
                    helper, cache, fn, field, name, batch_size, dtype, model_id, progress
                )
            elif rows.shape[1] != dim:
                raise ValueError(f"fn returned rows of dimension {rows.shape[1]} after {dim}")
            with np.errstate(over="ignore", invalid="ignore"):
                cast = np.ascontiguousarray(rows, dtype=_DTYPES[dtype])
            if not np.isfinite(cast).all():
                raise ValueError(
                    f"fn returned values that are not finite as {dtype} for inputs {start}..{stop}"
                )
            for a, z in _runs(picked):
                at = data_at + int(picked[a]) * dim * item
                _pwrite_all(fd, cast[a:z].tobytes(), at, vectors_path)
            os.fsync(fd)
            _wait(pending)  # the reused rows, index and keys are synced too
            state.update(done=b + 1, dim=dim)
            _write_json(partial / "progress.json", state, durable=False)
            if progress is not None:
                progress(b + 1, n_batches)
    finally:
        if fd >= 0:
            os.close(fd)
        _settle(pending)
    _wait(pending)  # where nothing was new
    if dim is None:
        # No input at all: a store of zero rows (every reaction reads zeros).
        dim = 0
        np.save(vectors_path, np.zeros((0, 0), dtype=_DTYPES[dtype]))
        _fsync(vectors_path)
    files = {}
    for fname in ("vectors.npy", "index.npy", "keys.npy"):
        path = partial / fname
        files[fname] = {"bytes": path.stat().st_size, "xxh3": _socialctx._xxh3_file(path)}
    # What describes the store only (not how this run made it), so that a
    # store whose rows were reused equals one embedded from scratch.
    meta = dict(
        store_meta, format=STORE_FORMAT, version=STORE_VERSION, name=name, dim=dim, files=files
    )
    meta["calls"] = -(-total // batch_size)
    _write_json(partial / "meta.json", meta)
    (partial / "progress.json").unlink(missing_ok=True)
    _fsync(partial)
    if _socialctx._publish_dir(str(partial), str(final)):
        shutil.rmtree(partial)  # the old store, exchanged out
    _fsync(final.parent)
    reused = int((reuse_from >= 0).sum())
    return EmbedSummary(
        calls=calls,
        unique=total,
        dim=dim,
        reactions=len(unique.index),
        resumed=resumed,
        new=len(todo),
        reused=reused,
        dropped=0 if source is None else int(source.meta["unique"]) - reused,
    )


def _copy_reused(
    path: Path,
    dtype: str,
    total: int,
    source: _Source,
    reuse_from: npt.NDArray[np.int64],
) -> None:
    """Writes the reused rows into the rows file at ``path`` (created in
    full; the model's rows are written meanwhile, to the other rows) and
    syncs it, in bounded memory. Runs on the helper thread: it never
    writes a row that is not reused.

    A rebuilt cache mostly keeps its inputs' order, so the reused rows come
    in long runs of consecutive source rows: each run is copied inside the
    kernel (``copy_file_range``), without paging the rows through Python.
    Scattered rows, or a file system that cannot, go through NumPy."""
    dim = int(source.meta["dim"])
    data_at = len(_npy_header(dtype, (total, dim)))
    row = np.dtype(_DTYPES[dtype]).itemsize * dim
    fd = os.open(path, os.O_WRONLY)
    try:
        have = reuse_from >= 0
        cont = np.zeros(total, dtype=bool)
        cont[1:] = have[1:] & have[:-1] & (reuse_from[1:] == reuse_from[:-1] + 1)
        starts = np.flatnonzero(have & ~cont)
        fast = len(starts) * 64 <= total
        if not (fast and _copy_runs(fd, data_at, source, reuse_from, have, cont, starts, row)):
            # Runs of reused destination rows, gathered in chunks.
            chunk = max(1, (8 << 20) // max(row, 1))
            edges = np.flatnonzero(np.diff(np.concatenate(([False], have, [False]))))
            for a, z in zip(edges[0::2].tolist(), edges[1::2].tolist()):
                for at in range(a, z, chunk):
                    stop = min(z, at + chunk)
                    rows = np.ascontiguousarray(source.vectors[reuse_from[at:stop]])
                    _pwrite_all(fd, rows.tobytes(), data_at + at * row, path)
        os.fsync(fd)
    finally:
        os.close(fd)


def _wait(jobs: list[Future[None]]) -> None:
    """Waits for the helper's jobs, raising the first one's error; empties
    the list."""
    try:
        for job in jobs:
            job.result()
    finally:
        jobs.clear()


def _settle(jobs: list[Future[None]]) -> None:
    """Waits for helper jobs whose outcome no longer matters (an error is
    being raised, or their output is being discarded)."""
    for job in jobs:
        job.exception()


def _copy_runs(
    fd: int,
    data_at: int,
    source: _Source,
    reuse_from: npt.NDArray[np.int64],
    have: npt.NDArray[np.bool_],
    cont: npt.NDArray[np.bool_],
    starts: npt.NDArray[np.int64],
    row: int,
) -> bool:
    """Copies each run of reused rows with ``copy_file_range``; False (and
    nothing to undo: the caller rewrites every reused row) where the kernel or the
    file system cannot."""
    copy = getattr(os, "copy_file_range", None)
    src_path = getattr(source.vectors, "filename", None)
    src_at = getattr(source.vectors, "offset", None)
    if copy is None or src_path is None or src_at is None:
        return False
    # A run from a start goes on while the next row continues it.
    breaks = np.flatnonzero(~cont)
    at = np.searchsorted(breaks, starts, side="right")
    ends = np.where(at < len(breaks), breaks[np.minimum(at, len(breaks) - 1)], len(have))
    src_fd = os.open(src_path, os.O_RDONLY)
    try:
        for a, z in zip(starts.tolist(), ends.tolist()):
            length = (z - a) * row
            off_src = src_at + int(reuse_from[a]) * row
            off_dst = data_at + a * row
            while length:
                try:
                    done = copy(src_fd, fd, length, off_src, off_dst)
                except OSError:
                    return False
                if done == 0:
                    return False
                length, off_src, off_dst = length - done, off_src + done, off_dst + done
    finally:
        os.close(src_fd)
    return True


def _npy_header(dtype: str, shape: tuple[int, int]) -> bytes:
    """NumPy's format-1.0 header for a C-ordered array (what np.save writes)."""
    import io

    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buf, {"descr": np.dtype(_DTYPES[dtype]).str, "fortran_order": False, "shape": shape}
    )
    return buf.getvalue()


def _create_vectors(path: Path, dtype: str, shape: tuple[int, int]) -> tuple[int, int]:
    """Creates the rows file with its header and all its blocks allocated
    (ENOSPC now, not as a fault on a sparse map later); returns (fd, data offset)."""
    header = _npy_header(dtype, shape)
    size = len(header) + shape[0] * shape[1] * np.dtype(_DTYPES[dtype]).itemsize
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        _pwrite_all(fd, header, 0, path)
        try:
            os.posix_fallocate(fd, 0, size)
        except OSError as e:
            if e.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
                raise OSError(e.errno, e.strerror, str(path)) from None
            os.ftruncate(fd, size)
    except BaseException:
        os.close(fd)
        # Nothing of this file is worth resuming from; leave no half file.
        path.unlink(missing_ok=True)
        raise
    return fd, len(header)


def _npy_data_offset(path: Path, dtype: str, shape: tuple[int, int]) -> int:
    header = _npy_header(dtype, shape)
    with open(path, "rb") as f:
        if f.read(len(header)) != header:
            raise EmbeddingError(f"{path}: the partial store's header does not match; delete it")
    return len(header)


def _pwrite_all(fd: int, data: bytes, offset: int, path: Path) -> None:
    view = memoryview(data)
    while view:
        try:
            n = os.pwrite(fd, view, offset)
        except OSError as e:
            raise OSError(e.errno, e.strerror, str(path)) from None
        view, offset = view[n:], offset + n


def _resume_state(partial: Path, plan: dict[str, Any]) -> dict[str, Any] | None:
    """The progress of an interrupted embed with the same plan, else None
    (the partial store is then restarted; a different model says so)."""
    try:
        state = json.loads((partial / "progress.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(state, dict):
        return None
    if state.get("model_id") != plan["model_id"]:
        warnings.warn(
            f"{partial}: the interrupted embed was of model {state.get('model_id')!r}, "
            f"not {plan['model_id']!r}; starting over",
            stacklevel=4,
        )
        return None
    if any(state.get(k) != v for k, v in plan.items()):
        return None
    if not (partial / "index.npy").exists() or not (partial / "keys.npy").exists():
        return None
    if state.get("dim") is not None and not (partial / "vectors.npy").exists():
        return None
    return dict(state)


class Embeddings:
    """An opened embedding store: ``vectors`` ``[unique, dim]``, ``index``
    ``uint32 [reactions]`` (memory maps) and ``meta``. Made by :func:`open_store`."""

    def __init__(
        self,
        path: Path,
        meta: dict[str, Any],
        vectors: npt.NDArray[Any],
        index: npt.NDArray[np.uint32],
    ):
        self.path = path
        self.meta = meta
        self.vectors = vectors
        self.index = index

    @property
    def dim(self) -> int:
        return int(self.meta["dim"])

    def __repr__(self) -> str:
        m = self.meta
        return f"socialctx.Embeddings({m['name']!r}, field={m['field']!r}, unique={m['unique']}, dim={m['dim']})"

    def rows(self, reactions: Sequence[int] | npt.NDArray[np.integer[Any]]) -> npt.NDArray[Any]:
        """The rows of these reactions (cache-order indices), zeros where due."""
        idx = self.index[np.asarray(reactions, dtype=np.int64)]
        out = np.zeros((len(idx), self.dim), dtype=self.vectors.dtype)
        has = idx != NONE
        out[has] = self.vectors[idx[has]]
        return out


def open_store(
    cache: _socialctx.Cache, name: str, *, validate: Literal["lazy", "all"] = "all"
) -> Embeddings:
    """Opens store ``name`` of ``cache``, verified in full by the crate's
    reader (metadata, that it belongs to this content of the cache, both
    files' sizes and checksums, the arrays' headers, every index entry,
    finite rows): any fault is an :class:`EmbeddingError` naming the file.
    ``validate`` is accepted for compatibility; every open verifies all."""
    if validate not in ("lazy", "all"):
        raise ValueError(f'validate must be "lazy" or "all", not {validate!r}')
    path = store_dir(cache, name)
    meta = json.loads(_socialctx._verify_store(cache, name))
    try:
        vectors = np.load(path / "vectors.npy", mmap_mode="r")
        index = np.load(path / "index.npy", mmap_mode="r")
    except (OSError, ValueError) as e:
        raise EmbeddingError(f"{path}: unreadable store arrays: {e}") from None
    return Embeddings(path, meta, vectors, index)
