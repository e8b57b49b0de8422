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

import fcntl
import json
import os
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from . import _socialctx

STORE_FORMAT = "socialctx-embeddings"
STORE_VERSION = 1
NONE = 0xFFFFFFFF
_DTYPES = {"float32": np.float32, "float16": np.float16}

Field = Literal["reply", "description"]
EmbedFn = Callable[[list[list[str]]], Any]


class EmbeddingError(_socialctx.Error):
    """An embedding store is missing, damaged, or was computed for another
    content of the cache (rebuilt since); the message says which and why."""


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
    each batch.

    Resumable: after an interruption (Ctrl-C, a crash, a kill), calling it
    again with the same arguments computes only the batches not yet written.
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
        return _embed_locked(cache, fn, field, name, batch_size, dtype, progress)
    finally:
        lock.close()


def _embed_locked(
    cache: _socialctx.Cache,
    fn: EmbedFn,
    field: Field,
    name: str,
    batch_size: int,
    dtype: str,
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
    vectors: np.memmap[Any, Any] | None = None
    if dim is not None:
        vectors = np.lib.format.open_memmap(partial / "vectors.npy", mode="r+")
    calls = 0
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
            vectors = np.lib.format.open_memmap(
                partial / "vectors.npy", mode="w+", dtype=_DTYPES[dtype], shape=(total, dim)
            )
        elif rows.shape[1] != dim:
            raise ValueError(f"fn returned rows of dimension {rows.shape[1]} after {dim}")
        if not np.isfinite(rows).all():
            raise ValueError(f"fn returned non-finite values for inputs {start}..{stop}")
        assert vectors is not None
        vectors[start:stop] = rows.astype(_DTYPES[dtype], copy=False)
        vectors.flush()
        state.update(done=b + 1, dim=dim)
        _write_json(partial / "progress.json", state)
        if progress is not None:
            progress(b + 1, n_batches)
    if dim is None:
        # No input at all: a store of zero rows (every reaction reads zeros).
        dim = 0
        np.save(partial / "vectors.npy", np.zeros((0, 0), dtype=_DTYPES[dtype]))
    del vectors
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


def _resume_state(partial: Path, plan: dict[str, Any]) -> dict[str, Any] | None:
    """The progress of an interrupted embed with the same plan, else None."""
    try:
        state = json.loads((partial / "progress.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
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
    cache: _socialctx.Cache, name: str, *, validate: Literal["lazy", "all"] = "lazy"
) -> Embeddings:
    """Opens store ``name`` of ``cache``. ``"lazy"`` checks the metadata,
    shapes and sizes and that the store belongs to this cache's content;
    ``"all"`` also verifies both files' checksums and every index entry."""
    path = store_dir(cache, name)
    meta_path = path / "meta.json"
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        have = (
            sorted(p.name for p in _store_root(cache).glob("[!.]*"))
            if _store_root(cache).is_dir()
            else []
        )
        raise EmbeddingError(
            f"{path}: no embedding store {name!r} (stores of this cache: {have}); make it with socialctx.embed"
        ) from None
    except (OSError, ValueError) as e:
        raise EmbeddingError(f"{meta_path}: unreadable store metadata: {e}") from None
    if meta.get("format") != STORE_FORMAT or meta.get("version") != STORE_VERSION:
        raise EmbeddingError(
            f"{meta_path}: not a socialctx embedding store of version {STORE_VERSION} "
            f"(format {meta.get('format')!r}, version {meta.get('version')!r})"
        )
    if meta.get("cache_content_id") != cache.content_id:
        raise EmbeddingError(
            f"{path}: store {name!r} was computed for cache content {meta.get('cache_content_id')}, "
            f"but the cache now has content {cache.content_id} (rebuilt since?); "
            f"run socialctx.embed(..., name={name!r}) again"
        )
    files = meta.get("files", {})
    for fname in ("vectors.npy", "index.npy"):
        p = path / fname
        try:
            size = p.stat().st_size
        except OSError as e:
            raise EmbeddingError(f"{p}: {e.strerror}") from None
        want = files.get(fname, {})
        if size != want.get("bytes"):
            raise EmbeddingError(
                f"{p}: {size} bytes, the metadata says {want.get('bytes')} (damaged store)"
            )
        if validate == "all" and _socialctx._xxh3_file(p) != want.get("xxh3"):
            raise EmbeddingError(f"{p}: checksum mismatch (damaged store)")
    try:
        vectors = np.load(path / "vectors.npy", mmap_mode="r")
        index = np.load(path / "index.npy", mmap_mode="r")
    except (OSError, ValueError) as e:
        raise EmbeddingError(f"{path}: unreadable store arrays: {e}") from None
    unique, dim = int(meta["unique"]), int(meta["dim"])
    want_dtype = _DTYPES.get(meta.get("dtype", ""), None)
    if (
        vectors.dtype != want_dtype
        or vectors.ndim != 2
        or (unique and vectors.shape != (unique, dim))
    ):
        raise EmbeddingError(
            f"{path}/vectors.npy: {vectors.dtype} {vectors.shape}, expected {meta['dtype']} ({unique}, {dim})"
        )
    if index.dtype != np.uint32 or index.shape != (int(meta["reactions"]),):
        raise EmbeddingError(
            f"{path}/index.npy: {index.dtype} {index.shape}, expected uint32 ({meta['reactions']},)"
        )
    if validate == "all":
        bad = (index != NONE) & (index >= unique)
        if bad.any():
            raise EmbeddingError(
                f"{path}/index.npy: entry {int(np.argmax(bad))} points past the {unique} rows"
            )
    return Embeddings(path, meta, vectors, index)


def _open_for_loader(cache: _socialctx.Cache, name: str) -> tuple[Any, Any, int, bool]:
    """What Loader(embeddings=[...]) reads: (vectors, index, dim, half)."""
    store = open_store(cache, name)
    if store.meta["dim"] == 0:
        raise EmbeddingError(f"{store.path}: store {name!r} has no rows (no input to embed)")
    unique = int(store.meta["unique"])
    index = np.ascontiguousarray(store.index)
    if ((index != NONE) & (index >= unique)).any():
        raise EmbeddingError(f"{store.path}/index.npy: an entry points past the {unique} rows")
    vectors = store.vectors
    half = vectors.dtype == np.float16
    if half:
        vectors = vectors.view(np.uint16)
    return vectors, index, store.dim, half
