"""CacheDataset: one epoch of a Loader's batches as an IterableDataset,
sharded, resumable and bound to one cache generation."""

from __future__ import annotations

import multiprocessing
import multiprocessing.context
import os
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from torch.utils.data import IterableDataset, get_worker_info

from .. import Cache, CacheError, FeatureStats, Loader, open
from ..embed import store_dir
from ..folds import Selection
from . import _state
from ._common import (
    _bound_cache,
    _count,
    _deferrable,
    _digest,
    _labels,
    _positions,
    _rebuilt,
    _store_ids,
    _store_models,
    _used,
    _world,
)
from ._resume import (
    _EPOCH,
    _R_DONE,
    _R_EPOCH,
    _R_GAPS,
    _SLOTS,
    _TICKET,
    _WORKERS_RAN,
    Resumable,
)


class CacheDataset(Resumable, IterableDataset):  # type: ignore[misc]
    """One epoch of batches over ``positions`` of a cache, for a DataLoader
    with ``batch_size=None``.

    - ``cache``: an open :class:`socialctx.Cache` or its directory. The
      dataset is bound to that cache's content (see the module's notes).
    - ``positions``: integers from 0 to ``len(cache) - 1`` (no booleans,
      floats or negatives; ``TypeError`` / ``IndexError`` otherwise).
    - ``labels``: one per position (e.g. ``split.labels``), replacing the
      cache's label codes; integers from -128 to 127.
    - ``seed``: shuffle by ``seed + epoch`` (call :meth:`set_epoch` each
      epoch). ``None`` keeps the order.
    - ``bucket``, ``noise``: length-bucketed batches (see
      :meth:`socialctx.Loader.plan`); pair with ``pad="longest"``.
    - ``rank``, ``world_size``: DDP sharding; by default from
      ``torch.distributed`` when it is initialised, else a single rank.
    - ``drop_last``: keep only full batches, as many for every rank.
    - ``resume_across_rebuild``: a state of another generation resumes by
      source id (see :meth:`load_state_dict`). A state of values of
      another *definition* (another socialctx version built the cache
      since) is refused even then: the model trained so far saw values
      computed otherwise. ``resume_across_definition=True`` resumes it
      anyway, with a warning, and :attr:`resumed` names both digests.
      A state also records the model of each embedding store read
      (``state["plan"]["models"]``): one of another model (a store
      re-embedded since) is refused the same way.
    - ``embeddings``: store names; items carry ``embedding_index[name]``
      (int32 ``[B, T]``, -1 for none) for :class:`EmbeddingTable`, and with
      ``dense=True`` also ``embeddings[name]`` rows ``[B, T, dim]``; a dict
      ``{name: model_id}`` refuses a store of another model (see ``Loader``).
    - ``pin_memory``: in-process only (``num_workers=0``): the dataset
      fills two page-locked buffer sets in turn and yields views of them.
      **A yielded batch is then valid until the next-but-one step**: copy
      it to the device (``non_blocking=True``) in the step it arrives.
      Without a GPU it falls back to ordinary memory (with a warning).
    - other keyword arguments go to :class:`socialctx.Loader` (``kinds``,
      ``max_cxt``, ``window_s``, ``stats``, ``empty``, ``pad``,
      ``pad_multiple``, ``token_ids``, ``max_tokens`` and ``outputs``).

    Each item is a dict: ``features`` float32 ``[B, T, 28]``, ``mask`` bool
    ``[B, T]``, ``lengths`` int64 ``[B]``, ``source_ids`` int64 ``[B]``,
    ``labels`` int64 ``[B]`` (-1 is the cache's "unknown": pass a split's
    labels to train), ``positions`` int64 ``[B]``, ``embedding_index`` /
    ``embeddings`` dicts, ``token_ids`` int32 ``[B, T, max_tokens]`` with
    ``token_ids=``, every other output of the Loader by its name
    (``outputs=``), and its place: ``epoch``, ``plan_index`` (ints),
    ``content_id`` (the cache generation) and ``store_ids`` (each
    embedding store's version; workers refuse a store compacted or
    re-embedded after the dataset was made, as a rebuilt cache). ``B`` is at most ``batch_size``;
    ``T`` is ``max_cxt`` with ``pad="max"``, the batch's longest selection
    rounded up with ``pad="longest"``.
    """

    def __init__(
        self,
        cache: str | os.PathLike[str] | Cache,
        positions: npt.NDArray[np.integer[Any]] | Sequence[int] | range,
        batch_size: int,
        *,
        labels: npt.NDArray[np.integer[Any]] | Sequence[int] | None = None,
        seed: int | None = None,
        rank: int | None = None,
        world_size: int | None = None,
        bucket: bool = False,
        noise: float = 0.1,
        drop_last: bool = False,
        embeddings: Sequence[str] | Mapping[str, str | None] | None = None,
        dense: bool = False,
        pin_memory: bool = False,
        stats: FeatureStats | None = None,
        content_id: str | None = None,
        resume_across_rebuild: bool = False,
        resume_across_definition: bool = False,
        in_order: bool = True,
        **loader_kwargs: Any,
    ) -> None:
        super().__init__()
        batch_size = _count(batch_size, "batch_size", 1)
        seed = None if seed is None else _count(seed, "seed", 0)
        if isinstance(positions, Selection):
            # Resolved by source id on one generation: it names it.
            if content_id is not None and content_id != positions.content_id:
                raise ValueError(
                    f"content_id {content_id!r} is not the selection's {positions.content_id!r}"
                )
            content_id = positions.content_id
            if labels is None and positions.own_labels:
                labels = positions.labels
            positions = positions.positions
        # A Fold's parts and labels name their generation (folds.Positions):
        # with a path they name it as a Selection does; with the cache of
        # another generation (rebuilt since) they mean other threads.
        tags = {
            what: tag
            for what, given in (("positions", positions), ("labels", labels))
            if (tag := getattr(given, "content_id", None)) is not None
        }
        # Tags name the generation with a path as content_id does; the loop
        # below refuses another one with the fix (fold.on), which a
        # content_id taken from the tags would have hidden behind "rebuilt".
        opened = _bound_cache(cache, type(self).__name__, content_id=content_id, positions=not tags)
        for what, tag in tags.items():
            if tag != opened.content_id:
                raise CacheError(
                    f"{opened.path}: these {what} are of cache generation {tag} (a Fold's, a "
                    f"Selection's or a Split's, taken before a rebuild), the cache is now "
                    f"{opened.content_id}: they would name other threads; fold.on(cache) or "
                    "selection.on(cache) gives the same threads on this generation (a split: "
                    "socialctx.read_split(csv, cache) again)"
                )
        self.path = opened.path
        self.content_id = opened.content_id
        self.positions = _positions(positions, len(opened))
        self.labels = _labels(labels, len(self.positions))
        # Source ids of the selection: what a state carries across a rebuild.
        self._ids = opened.source_ids[self.positions].astype(np.int64)
        self.resume_across_rebuild = bool(resume_across_rebuild)
        self.resume_across_definition = bool(resume_across_definition)
        # The definition digest of the cache's values ("" for a cache built
        # before it was recorded): a state records it.
        self.definition = str(opened.manifest.get("definition") or "")
        self.in_order = bool(in_order)
        #: After a resume across a rebuild: what happened to the epoch's
        #: threads (see load_state_dict), else None.
        self.resumed: dict[str, Any] | None = None
        # The rest of an epoch resumed across a rebuild: (epoch, positions,
        # labels, ids trained before); iterations of that epoch plan over it.
        self._rest: tuple[Any, ...] | None = None
        # Plan indices handed over by state_dict(after=item), this epoch.
        self._consumed: _state.Consumed | None = None
        # Fingerprints of the states a StatefulDataLoader's state given to
        # load_state_dict held: the loader (or its workers) loading them
        # again changes nothing.
        self._absorbed: frozenset[tuple[Any, ...]] = frozenset()
        self.batch_size = batch_size
        self.seed = seed
        self.rank, self.world_size = _world(rank, world_size)
        self.bucket = bucket
        self.noise = noise
        self.drop_last = drop_last
        self.embeddings = list(embeddings or [])
        # {name: model_id} also requires each store's model: the Loader checks it.
        self.models = dict(embeddings) if isinstance(embeddings, Mapping) else None
        self.dense = dense
        self.pin_memory = pin_memory
        self.stats = stats
        self.loader_kwargs = loader_kwargs
        self._epoch = 0
        # The resume point loaded last, for the next iteration only:
        # (ticket, epoch, batches done) or None. The ticket tells the
        # iteration that uses it up from later ones (see _begin).
        self._resume: tuple[int, int, int] | None = None
        # Plan indices below the resume point not consumed (out-of-order
        # delivery): trained first by the resuming iteration.
        self._gaps: tuple[int, ...] = ()
        # (epoch, batches done) as this process's own iterations count them.
        self._position: tuple[int, int, tuple[int, ...]] = (0, 0, ())
        # (pid, iterations started in that process): a worker's first
        # iteration reads the dataset as copied at iter(dataloader), later
        # ones (persistent workers) the shared array.
        self._iters = (os.getpid(), 0)
        # In a DataLoader worker: [epoch, start, worker, workers, yielded]
        # of its running iteration, and a resume point loaded there (by
        # StatefulDataLoader) as (epoch, start, yielded).
        self._progress: list[int] | None = None
        self._local_resume: tuple[int, int, int, tuple[int, ...]] | None = None
        self._progress_gaps: tuple[int, ...] = ()
        self._iter_start: tuple[int, tuple[int, ...]] = (0, ())
        self._iter_base: tuple[int, int, tuple[int, ...]] | None = None
        self._digest = _digest(self.positions, self.labels)
        self._shared = self._new_shared()
        self._loader: Loader | None = None
        # The stores' versions this dataset reads (a compaction or re-embed
        # renumbers rows on the same cache generation).
        self.store_ids: dict[str, str] = {}
        self.store_models: dict[str, str | None] = {}
        # Fail now, in the main process, rather than in every worker.
        self._loader = self._make_checked_loader(opened, first=True)
        self._count = len(self._plan(self._loader, 0))

    # --- processes -----------------------------------------------------

    def _new_shared(self) -> Any:
        shared = multiprocessing.RawArray("q", _SLOTS)
        shared[_EPOCH] = self._epoch
        if self._resume is not None:
            shared[_TICKET], shared[_R_EPOCH], shared[_R_DONE] = self._resume
            shared[_R_GAPS] = len(self._gaps) + (self._rest is not None)
        return shared

    def _make_loader(self, cache: Cache) -> Loader:
        # A vocabulary that could not be remade in this worker raises here.
        kwargs = {k: _used(v) for k, v in self.loader_kwargs.items()}
        return Loader(
            cache,
            stats=self.stats,
            embeddings=self.models or self.embeddings,
            dense=self.dense,
            **kwargs,
        )

    def _make_checked_loader(self, cache: Cache, *, first: bool = False) -> Loader:
        """A Loader of the stores' versions this dataset was made on (read
        before and after opening it, so that a store swapped meanwhile is
        noticed): the first time, those versions are recorded."""
        before = _store_ids(cache, self.embeddings)
        loader = self._make_loader(cache)
        after = _store_ids(cache, self.embeddings)
        want = after if first else self.store_ids
        for name in self.embeddings:
            if not before[name] == after[name] == want[name]:
                raise CacheError(
                    f"{store_dir(cache, name)}: the embedding store was rewritten (compacted "
                    "or re-embedded) after this dataset was made"
                    + ("" if first else "; make a new dataset and EmbeddingTable")
                )
        if first:
            self.store_ids = after
            # The embedding models the rows are of: a state records them.
            self.store_models = _store_models(cache, self.embeddings)
        return loader

    def _open_loader(self) -> Loader:
        if self._loader is None:
            cache = open(self.path)
            if cache.content_id != self.content_id:
                raise _rebuilt(self.path, self.content_id, cache.content_id, "dataset")
            self._loader = self._make_checked_loader(cache)
        return self._loader

    def __getstate__(self) -> dict[str, Any]:
        self._pending()  # a resume point already used up is not copied
        state = self.__dict__.copy()
        state["_loader"] = None  # each process opens its own, checked to be the same content
        # A Vocabulary (token_ids=, bag_of_words=) that cannot be remade in a
        # worker (its cache rebuilt) fails at its first use, in the
        # iteration, not while the worker unpickles the dataset.
        state["loader_kwargs"] = {k: _deferrable(v) for k, v in self.loader_kwargs.items()}
        if "bag_of_words" in state:
            state["bag_of_words"] = _deferrable(state["bag_of_words"])
        state.pop("_plan_memo", None)
        if multiprocessing.context.get_spawning_popen() is None:
            # pickle.dumps / copy.deepcopy: an independent dataset (the shared
            # array goes only to the DataLoader's spawned workers), which
            # still knows that workers ran ahead of the loop.
            state["_shared"] = None
            state["_workers_ran"] = int(self._shared[_WORKERS_RAN])
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        workers_ran = state.pop("_workers_ran", 0)
        self.__dict__.update(state)
        if self._shared is None:
            self._shared = self._new_shared()
            self._shared[_WORKERS_RAN] = workers_ran

    # --- iteration --------------------------------------------------------

    def __iter__(self) -> Iterator[dict[str, Any]]:
        # Not a generator function: the epoch and start are fixed here, at
        # iter(), not at the first next().
        # The cache first: an iteration refused for a rebuilt cache leaves a
        # loaded resume point for the next one.
        loader = self._open_loader()
        epoch, start, gaps, skip, worker, workers = self._begin()
        plan = self._plan(loader, epoch)
        return self._run(loader, plan, epoch, start, gaps, skip, worker, workers)

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
        if not todo:
            return iter(())
        # Sized for the largest batch to come, not batch_size.
        size = max(len(plan[k]) for k in todo)
        if in_process and self.pin_memory:
            return self._counted(self._iter_pinned(loader, plan, todo, size, epoch), epoch, todo)
        return self._counted(self._iter_fresh(loader, plan, todo, size, epoch), epoch, todo)

    def _todo(
        self,
        plan: list[npt.NDArray[np.int64]],
        epoch: int,
        start: int,
        gaps: tuple[int, ...],
        skip: int,
        worker: int,
        workers: int,
    ) -> tuple[bool, list[int]]:
        """Records where this iteration starts (this process's position, or
        the worker's progress) and returns (in process, the plan indices it
        yields: the gaps below ``start`` first, then the rest; every
        ``workers``-th for a worker, less the ``skip`` it already yielded)."""
        in_process = get_worker_info() is None
        if in_process:
            self._position = (epoch, start, gaps)
            # Where state_dict(after=item) counts from: _position moves on
            # as items are yielded, before the loop hands them over.
            self._iter_base = (epoch, start, gaps)
        else:
            self._progress = [epoch, start, worker, workers, skip]
            self._progress_gaps = gaps
        self._iter_start = (start, gaps)
        return in_process, _state.todo(len(plan), start, gaps)[worker::workers][skip:]

    def _counted(self, items: Iterator[Any], epoch: int, todo: list[int]) -> Iterator[Any]:
        """Records each item as consumed when it is handed out."""
        progress = self._progress if get_worker_info() is not None else None
        start, gaps = self._iter_start
        for n, (_k, item) in enumerate(zip(todo, items)):
            if progress is None:
                self._position = (epoch, *_state.resume_after(start, gaps, n + 1))
            else:
                progress[4] += 1
            yield item

    def _iter_fresh(
        self,
        loader: Loader,
        plan: list[npt.NDArray[np.int64]],
        todo: list[int],
        size: int,
        epoch: int,
    ) -> Iterator[dict[str, Any]]:
        shared = get_worker_info() is not None
        positions = self._sel(epoch)[0]
        batch = loader.new_batch(size)
        for k in todo:
            picked = plan[k]
            self._fill(loader, batch, picked, epoch)
            item = self._fresh(batch, positions[picked], shared=shared)
            item.update(epoch=epoch, plan_index=k, content_id=self.content_id)
            item["store_ids"] = dict(self.store_ids)
            yield item

    def _fill(self, loader: Loader, batch: Any, picked: npt.NDArray[np.int64], epoch: int) -> None:
        positions, labels, _ = self._sel(epoch)
        loader.fill(positions[picked], batch, None if labels is None else labels[picked])

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
            # Present (empty) without stores, as before outputs had names.
            "embedding_index": {},
        }
        # Every output of the Loader, by its name: an array, or per store a
        # dict of arrays by store name.
        for name, value in batch.outputs.items():
            if isinstance(value, dict):
                item[name] = {k: own(f"{name}:{k}", v[:n], None) for k, v in value.items()}
            else:
                item[name] = own(name, value[:n], None)
        if self.dense:
            item.setdefault("embeddings", {})
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
        self,
        loader: Loader,
        plan: list[npt.NDArray[np.int64]],
        todo: list[int],
        size: int,
        epoch: int,
    ) -> Iterator[dict[str, Any]]:
        pin = _can_pin(type(self).__name__)
        positions = self._sel(epoch)[0]
        batch = loader.new_batch(size)
        twins: list[dict[str, torch.Tensor]] = [{}, {}]
        for turn, k in enumerate(todo):
            self._fill(loader, batch, plan[k], epoch)
            item = self._item(batch, positions[plan[k]], _into(twins[turn % 2], pin))
            item.update(epoch=epoch, plan_index=k, content_id=self.content_id)
            item["store_ids"] = dict(self.store_ids)
            yield item


def _can_pin(who: str) -> bool:
    pin = torch.cuda.is_available()
    if not pin:
        warnings.warn(
            f"{who}(pin_memory=True): no CUDA device, using ordinary memory", stacklevel=4
        )
    return bool(pin)


def _into(
    twin: dict[str, torch.Tensor], pin: bool
) -> Callable[[str, npt.NDArray[Any], torch.dtype | None], torch.Tensor]:
    """Copies an array into ``twin``'s (page-locked) buffer for its key,
    grown to twice the largest size seen (to settle fast)."""

    def into(key: str, a: npt.NDArray[Any], dtype: torch.dtype | None) -> torch.Tensor:
        src = torch.from_numpy(np.ascontiguousarray(a))
        want = dtype or src.dtype
        buf = twin.get(key)
        if buf is None or buf.numel() < src.numel() or buf.dtype != want:
            buf = torch.empty(max(src.numel(), 1) * 2, dtype=want, pin_memory=pin)
            twin[key] = buf
        out = buf[: src.numel()].view(src.shape)
        out.copy_(src)
        return out

    return into
