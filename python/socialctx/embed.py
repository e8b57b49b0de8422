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
- ``meta.json``: field, dtype, dim, counts, the cache's content id, and the
  size and xxh3-64 of both files.

It is written under ``.<name>.partial/`` and published with one atomic
rename (an exchange when replacing a store), so readers see the old store or
the new one, never a mixture. An interrupted :func:`embed` resumes from the
last finished batch. A store belongs to one cache content: after a rebuild
that changes the cache, opening it raises :class:`EmbeddingError`.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from . import _socialctx

STORE_FORMAT = "socialctx-embeddings"
STORE_VERSION = 1
#: An index entry for a reaction with no row (the crate's ``NO_ROW``).
NONE = _socialctx.UniqueTexts.NONE
_DTYPES = {"float32": np.float32, "float16": np.float16}

Field = Literal["reply", "description"]
EmbedFn = Callable[[list[list[str]]], Any]


EmbeddingError = _socialctx.EmbeddingError


def _store_root(cache: _socialctx.Cache) -> Path:
    return Path(cache.derived_dir) / "embeddings"


def _check_name(name: str) -> None:
    if not name or name.startswith(".") or "/" in name or "\0" in name:
        raise ValueError(f"store name {name!r} must be a non-empty file name not starting with '.'")


def store_dir(cache: _socialctx.Cache, name: str) -> Path:
    """The directory of store ``name`` of ``cache`` (which may not exist)."""
    _check_name(name)
    return _store_root(cache) / name


def _write_json(path: Path, value: dict[str, Any]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(value, f, indent=1, sort_keys=True)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
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
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, int]:
    """Embeds every distinct non-empty input of ``field`` with ``fn`` into
    the store ``name`` of ``cache``.

    ``fn(batch)`` gets a list of at most ``batch_size`` token lists (never an
    empty one; consecutive batches grow in length) and returns an array-like
    ``[len(batch), dim]`` of finite numbers, the same ``dim`` every call. It
    is called ``ceil(unique / batch_size)`` times. ``field`` is ``"reply"``
    (RPDNN's reply tokens) or ``"description"`` (the author's description
    split on ``' '``). ``progress(done, total)``, when given, is called after
    each batch. ``model_id`` names the model (e.g. a hash of its weights):
    it is stored in ``meta.json``, and an interrupted embed resumes only
    with the same ``model_id`` (and the same rows' dimension), never mixing
    two models' rows.

    Resumable: after an interruption (Ctrl-C, a crash, a kill), calling it
    again with the same arguments computes only the batches not yet written.
    Rows are written with plain writes into a file allocated in full first,
    so a full disk is an :class:`EmbeddingError` naming the file, never a
    crash, and every value is checked finite after the cast to ``dtype``.
    Returns ``{"calls", "unique", "dim", "reactions", "resumed"}`` (``calls``
    made by this invocation; ``resumed`` batches reused from before).
    """
    if dtype not in _DTYPES:
        raise ValueError(f'dtype must be "float32" or "float16", not {dtype!r}')
    if field not in ("reply", "description"):
        raise ValueError(f'field must be "reply" or "description", not {field!r}')
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    _check_name(name)
    root = _store_root(cache)
    root.mkdir(parents=True, exist_ok=True)
    lock = open(root / f".{name}.lock", "w")
    try:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise EmbeddingError(f"{root / name}: another embed of this store is running") from None
        try:
            return _embed_locked(cache, fn, field, name, batch_size, dtype, model_id, progress)
        except OSError as e:
            raise EmbeddingError(
                f"{e.filename or root / name}: {e.strerror or e} while writing store {name!r}"
            ) from e
    finally:
        lock.close()


def _embed_locked(
    cache: _socialctx.Cache,
    fn: EmbedFn,
    field: Field,
    name: str,
    batch_size: int,
    dtype: str,
    model_id: str | None,
    progress: Callable[[int, int], None] | None,
) -> dict[str, int]:
    root = _store_root(cache)
    final = root / name
    partial = root / f".{name}.partial"
    unique = cache.unique_texts(field)
    total = len(unique)
    n_batches = -(-total // batch_size)
    plan = {
        "cache_content_id": cache.content_id,
        "field": field,
        "dtype": dtype,
        "batch_size": batch_size,
        "unique": total,
        "reactions": len(unique.index),
        "model_id": model_id,
    }
    state = _resume_state(partial, plan)
    if state is None:
        if partial.exists():
            shutil.rmtree(partial)
        partial.mkdir()
        index = unique.index
        np.save(partial / "index.npy", index)
        state = dict(plan, done=0, dim=None)
        _write_json(partial / "progress.json", state)
    done = int(state["done"])
    resumed = done
    dim = state["dim"]
    item = np.dtype(_DTYPES[dtype]).itemsize
    vectors_path = partial / "vectors.npy"
    data_at = 0
    fd = -1
    if dim is not None:
        fd = os.open(vectors_path, os.O_RDWR)
        data_at = _npy_data_offset(vectors_path, dtype, (total, dim))
    calls = 0
    try:
        for b in range(done, n_batches):
            start, stop = b * batch_size, min(total, (b + 1) * batch_size)
            inputs = unique.batch(start, stop)
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
            elif rows.shape[1] != dim and calls == 1 and resumed:
                # The model changed since the interrupted run: its rows cannot
                # be mixed with the ones written; start over.
                warnings.warn(
                    f"{partial}: fn returns rows of dimension {rows.shape[1]}, the interrupted "
                    f"embed wrote {dim}; starting over",
                    stacklevel=3,
                )
                os.close(fd)
                fd = -1
                shutil.rmtree(partial)
                return _embed_locked(cache, fn, field, name, batch_size, dtype, model_id, progress)
            elif rows.shape[1] != dim:
                raise ValueError(f"fn returned rows of dimension {rows.shape[1]} after {dim}")
            with np.errstate(over="ignore", invalid="ignore"):
                cast = np.ascontiguousarray(rows, dtype=_DTYPES[dtype])
            if not np.isfinite(cast).all():
                raise ValueError(
                    f"fn returned values that are not finite as {dtype} for inputs {start}..{stop}"
                )
            _pwrite_all(fd, cast.tobytes(), data_at + start * dim * item, vectors_path)
            os.fsync(fd)
            state.update(done=b + 1, dim=dim)
            _write_json(partial / "progress.json", state)
            if progress is not None:
                progress(b + 1, n_batches)
    finally:
        if fd >= 0:
            os.close(fd)
    if dim is None:
        # No input at all: a store of zero rows (every reaction reads zeros).
        dim = 0
        np.save(vectors_path, np.zeros((0, 0), dtype=_DTYPES[dtype]))
    files = {}
    for fname in ("vectors.npy", "index.npy"):
        path = partial / fname
        with open(path, "rb+") as f:
            os.fsync(f.fileno())
        files[fname] = {"bytes": path.stat().st_size, "xxh3": _socialctx._xxh3_file(path)}
    meta = dict(plan, format=STORE_FORMAT, version=STORE_VERSION, name=name, dim=dim, files=files)
    meta["calls"] = n_batches
    _write_json(partial / "meta.json", meta)
    (partial / "progress.json").unlink()
    _fsync_dir(partial)
    if _socialctx._publish_dir(str(partial), str(final)):
        shutil.rmtree(partial)  # the old store, exchanged out
    _fsync_dir(final.parent)
    return {
        "calls": calls,
        "unique": total,
        "dim": dim,
        "reactions": plan["reactions"],
        "resumed": resumed,
    }


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
    index = partial / "index.npy"
    if not index.exists():
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
