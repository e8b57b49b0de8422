"""CacheDataset: one epoch of a Loader's batches as an IterableDataset,
sharded, resumable and bound to one cache generation."""

from __future__ import annotations

import multiprocessing
import multiprocessing.context
import os
import random
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from torch.utils.data import IterableDataset, get_worker_info

from .. import Cache, CacheError, FeatureStats, Loader, open
from ..embed import store_dir
from ._common import (
    _bound_cache,
    _count,
    _digest,
    _labels,
    _positions,
    _rebuilt,
    _store_ids,
    _world,
)

# Slots of a dataset's shared array, which reaches persistent DataLoader
# workers (they keep their copy of the dataset across iterations).
_EPOCH = 0  # the epoch set last
_TICKET = 1  # the pending resume point: its ticket (0: none), epoch, batches done
_R_EPOCH = 2
_R_DONE = 3
_CLAIMED = 4  # the ticket the last iteration to start used up, and that iteration's key
_CLAIMED_BY = 5
_WORKERS_RAN = 6  # 1 while the last iteration to start ran in DataLoader workers
# Per DataLoader worker id (the first 64): the ticket it took and its pid.
# DataLoaders made with generators seeded alike give their iterations the
# same key; a new worker process of an id that already took the ticket is
# of a later iteration.
_TAKEN = 7
_TAKEN_WORKERS = 64
_SLOTS = _TAKEN + 2 * _TAKEN_WORKERS
_KEY_MASK = (1 << 62) - 1


class CacheDataset(IterableDataset):  # type: ignore[misc]
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
    - ``embeddings``: store names; items carry ``embedding_index[name]``
      (int32 ``[B, T]``, -1 for none) for :class:`EmbeddingTable`, and with
      ``dense=True`` also ``embeddings[name]`` rows ``[B, T, dim]``.
    - ``pin_memory``: in-process only (``num_workers=0``): the dataset
      fills two page-locked buffer sets in turn and yields views of them.
      **A yielded batch is then valid until the next-but-one step**: copy
      it to the device (``non_blocking=True``) in the step it arrives.
      Without a GPU it falls back to ordinary memory (with a warning).
    - other keyword arguments go to :class:`socialctx.Loader` (``kinds``,
      ``max_cxt``, ``window_s``, ``stats``, ``empty``, ``pad``,
      ``pad_multiple``, ``token_ids`` and ``max_tokens``).

    Each item is a dict: ``features`` float32 ``[B, T, 28]``, ``mask`` bool
    ``[B, T]``, ``lengths`` int64 ``[B]``, ``source_ids`` int64 ``[B]``,
    ``labels`` int64 ``[B]`` (-1 is the cache's "unknown": pass a split's
    labels to train), ``positions`` int64 ``[B]``, ``embedding_index`` /
    ``embeddings`` dicts, ``token_ids`` int32 ``[B, T, max_tokens]`` with
    ``token_ids=``, and its place: ``epoch``, ``plan_index`` (ints),
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
        embeddings: Sequence[str] | None = None,
        dense: bool = False,
        pin_memory: bool = False,
        stats: FeatureStats | None = None,
        **loader_kwargs: Any,
    ) -> None:
        super().__init__()
        batch_size = _count(batch_size, "batch_size", 1)
        seed = None if seed is None else _count(seed, "seed", 0)
        opened = _bound_cache(cache, type(self).__name__)
        self.path = opened.path
        self.content_id = opened.content_id
        self.positions = _positions(positions, len(opened))
        self.labels = _labels(labels, len(self.positions))
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
        self._epoch = 0
        # The resume point loaded last, for the next iteration only:
        # (ticket, epoch, batches done) or None. The ticket tells the
        # iteration that uses it up from later ones (see _begin).
        self._resume: tuple[int, int, int] | None = None
        # (epoch, batches done) as this process's own iterations count them.
        self._position = (0, 0)
        # (pid, iterations started in that process): a worker's first
        # iteration reads the dataset as copied at iter(dataloader), later
        # ones (persistent workers) the shared array.
        self._iters = (os.getpid(), 0)
        # In a DataLoader worker: [epoch, start, worker, workers, yielded]
        # of its running iteration, and a resume point loaded there (by
        # StatefulDataLoader) as (epoch, start, yielded).
        self._progress: list[int] | None = None
        self._local_resume: tuple[int, int, int] | None = None
        self._digest = _digest(self.positions, self.labels)
        self._shared = self._new_shared()
        self._loader: Loader | None = None
        # The stores' versions this dataset reads (a compaction or re-embed
        # renumbers rows on the same cache generation).
        self.store_ids: dict[str, str] = {}
        # Fail now, in the main process, rather than in every worker.
        self._loader = self._make_checked_loader(opened, first=True)
        self._count = len(self._plan(self._loader, 0))

    # --- processes -----------------------------------------------------

    def _new_shared(self) -> Any:
        shared = multiprocessing.RawArray("q", _SLOTS)
        shared[_EPOCH] = self._epoch
        if self._resume is not None:
            shared[_TICKET], shared[_R_EPOCH], shared[_R_DONE] = self._resume
        return shared

    def _make_loader(self, cache: Cache) -> Loader:
        return Loader(
            cache,
            stats=self.stats,
            embeddings=self.embeddings,
            dense=self.dense,
            **self.loader_kwargs,
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

    # --- epochs and resumption ----------------------------------------

    @property
    def epoch(self) -> int:
        """The epoch the next iteration reads (see :meth:`set_epoch`)."""
        return self._epoch

    def set_epoch(self, epoch: int) -> None:
        """Selects epoch ``epoch``'s shuffle (with a seed) for the iterations
        that start after this call, here and in persistent DataLoader workers
        (as ``DistributedSampler.set_epoch``). A resume point loaded for
        another epoch is dropped; one for this epoch is kept."""
        epoch = _count(epoch, "epoch", 0)
        self._epoch = epoch
        self._shared[_EPOCH] = epoch
        pending = self._pending()
        if pending is not None and pending[1] != epoch:
            self._set_resume(None)
            pending = None
        self._position = (epoch, 0 if pending is None else pending[2])
        self._shared[_WORKERS_RAN] = 0

    def _set_resume(self, resume: tuple[int, int, int] | None) -> None:
        self._resume = resume
        self._shared[_TICKET], self._shared[_R_EPOCH], self._shared[_R_DONE] = resume or (0, 0, 0)

    def _pending(self) -> tuple[int, int, int] | None:
        """The loaded resume point if no iteration has used it up yet."""
        if self._resume is not None and self._shared[_CLAIMED] == self._resume[0]:
            self._set_resume(None)
        return self._resume

    def _plan_params(self) -> dict[str, Any]:
        kw = self.loader_kwargs
        return {
            "content_id": self.content_id,
            "positions": self._digest,
            "batch_size": self.batch_size,
            "seed": self.seed,
            "bucket": self.bucket,
            "noise": self.noise if self.bucket else None,
            "drop_last": self.drop_last,
            "world_size": self.world_size,
            "pad": kw.get("pad", "max"),
            "pad_multiple": kw.get("pad_multiple", 8),
            "kinds": kw.get("kinds", "replies"),
            "max_cxt": kw.get("max_cxt", 200),
            "window_s": kw.get("window_s"),
            # An empty thread's length (1 or 0) orders a bucketed plan.
            "empty": kw.get("empty", "row"),
        }

    def __len__(self) -> int:
        """Batches the next iteration of this rank yields (the whole epoch,
        less the batches of a loaded resume point)."""
        pending = self._pending()
        if pending is not None and pending[1] == self._epoch:
            return max(self._count - pending[2], 0)
        return self._count

    def state_dict(self, after: Mapping[str, Any] | Any = None) -> dict[str, Any]:
        """Where this rank is: the epoch and the batches of it consumed, with
        the plan's parameters (which :meth:`load_state_dict` checks).

        ``after``: the item your loop last trained on; the state is then
        the one after it. Needed with a plain DataLoader's workers, which
        run ahead of the loop. Without it, in-process iterations count by
        themselves; in a DataLoader worker (torchdata's
        ``StatefulDataLoader`` calls it there) the state is that worker's."""
        state: dict[str, Any] = {"plan": self._plan_params()}
        if after is not None:
            try:
                epoch, index, made_on = after["epoch"], after["plan_index"], after["content_id"]
            except (KeyError, TypeError):
                raise TypeError(
                    "state_dict(after=...) takes an item this dataset yielded (with epoch, "
                    "plan_index and content_id)"
                ) from None
            if made_on != self.content_id:
                raise ValueError(
                    f"this item was read from content id {made_on}, not this dataset's "
                    f"{self.content_id}"
                )
            epoch, index = int(epoch), int(index)
            if not self._yielded_here(after, epoch, index):
                raise ValueError(
                    f"this item is not batch {index} of epoch {epoch} of this dataset's plan "
                    "(an item of another dataset?): pass the item of this dataset your loop "
                    "last trained on"
                )
            state.update(epoch=epoch, batches_done=index + 1)
            return state
        if self._progress is not None and get_worker_info() is not None:
            epoch, start, worker, workers, yielded = self._progress
            state.update(
                epoch=epoch,
                batches_done=start,
                worker={"id": worker, "num_workers": workers, "yielded": yielded},
            )
            return state
        if self._shared[_WORKERS_RAN]:
            raise ValueError(
                "this dataset was last iterated by DataLoader workers, which run ahead of your "
                "loop: pass the item you last trained on, ds.state_dict(after=item), or use "
                "torchdata's StatefulDataLoader and its state_dict()"
            )
        epoch, done = self._position
        state.update(epoch=epoch, batches_done=done)
        return state

    def _yielded_here(self, item: Any, epoch: int, index: int) -> bool:
        """Whether ``item`` holds the threads of batch ``index`` of epoch
        ``epoch`` of this plan (the last epoch's plan is kept: one check a
        step costs one comparison)."""
        memo = self.__dict__.get("_plan_memo")
        if memo is None or memo[0] != epoch:
            memo = (epoch, self._plan(self._open_loader(), epoch))
            self.__dict__["_plan_memo"] = memo
        plan = memo[1]
        if not 0 <= index < len(plan):
            return False
        got = item["positions"]
        got = got.cpu().numpy() if isinstance(got, torch.Tensor) else np.asarray(got)
        return bool(np.array_equal(got, self.positions[plan[index]]))

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Makes the next iteration start at the first batch of
        ``state["epoch"]`` not yet consumed (and sets that epoch). Refuses,
        naming the field, a state of another plan (cache content,
        positions and labels, batch size, seed, bucketing, noise,
        drop_last, world size, padding, selection, empty threads)."""
        try:
            plan, epoch, done = state["plan"], int(state["epoch"]), int(state["batches_done"])
        except (KeyError, TypeError, ValueError):
            raise ValueError(
                f"not a state of a {type(self).__name__} (made by state_dict()): "
                f"{sorted(state) if isinstance(state, Mapping) else type(state).__name__}"
            ) from None
        mine = self._plan_params()
        for field in mine:
            if field not in plan or plan[field] != mine[field]:
                raise ValueError(
                    f"this state is of another plan: {field} {plan.get(field)!r} there, "
                    f"{mine[field]!r} here"
                )
        if epoch < 0 or not 0 <= done <= self._count:
            raise ValueError(f"batches_done {done} of epoch {epoch} is not in this plan")
        worker = state.get("worker")
        info = get_worker_info()
        if info is not None:
            # A DataLoader worker restored by StatefulDataLoader: this
            # process's next iteration resumes, with its own count.
            yielded = 0
            if worker is not None:
                if (worker["id"], worker["num_workers"]) != (info.id, info.num_workers):
                    raise ValueError(
                        f"state of worker {worker['id']} of {worker['num_workers']} loaded "
                        f"into worker {info.id} of {info.num_workers}"
                    )
                yielded = int(worker["yielded"])
            self._local_resume = (epoch, done, yielded)
            return
        if worker is not None:
            raise ValueError(
                "this is one DataLoader worker's state (StatefulDataLoader's): load the "
                "loader's state with StatefulDataLoader.load_state_dict"
            )
        self._epoch = epoch
        self._shared[_EPOCH] = epoch
        self._set_resume((random.getrandbits(62) + 1, epoch, done))
        self._position = (epoch, done)
        self._shared[_WORKERS_RAN] = 0

    def _begin(self) -> tuple[int, int, int, int]:
        """Fixes the epoch and the start of an iteration when it begins:
        (epoch, first batch, worker, workers)."""
        info = get_worker_info()
        pid = os.getpid()
        n = self._iters[1] if self._iters[0] == pid else 0
        self._iters = (pid, n + 1)
        shared = self._shared
        if info is None:
            worker, workers = 0, 1
            key = random.getrandbits(62) + 1
            epoch, resume = self._epoch, self._resume
            shared[_WORKERS_RAN] = 0
        else:
            worker, workers = info.id, info.num_workers
            # Every worker of one iteration has the same key: the
            # DataLoader's base seed for it, and how many this process ran.
            key = (hash((info.seed - info.id, n)) & _KEY_MASK) + 1
            if n == 0:
                # Copied at iter(dataloader) (fork or pickle).
                epoch, resume = self._epoch, self._resume
            else:
                # Persistent workers: iter(dataloader) waits until each
                # worker has called iter(dataset), so this too is the state
                # at iter(dataloader).
                epoch = int(shared[_EPOCH])
                ticket = int(shared[_TICKET])
                resume = (ticket, int(shared[_R_EPOCH]), int(shared[_R_DONE])) if ticket else None
            shared[_WORKERS_RAN] = 1
        start = 0
        if self._local_resume is not None:
            epoch, start, yielded = self._local_resume
            self._local_resume = None
            return epoch, start + yielded * workers, worker, workers
        if resume is not None:
            ticket, r_epoch, done = resume
            if int(shared[_CLAIMED]) != ticket:
                shared[_CLAIMED_BY] = key
                shared[_CLAIMED] = ticket
                mine = True
            else:
                mine = int(shared[_CLAIMED_BY]) == key
            if mine and info is not None and n == 0 and worker < _TAKEN_WORKERS:
                slot = _TAKEN + 2 * worker
                if int(shared[slot]) == ticket and int(shared[slot + 1]) != pid:
                    mine = False
                else:
                    shared[slot], shared[slot + 1] = ticket, pid
            if mine and r_epoch == epoch:
                start = done
            if info is None:
                self._set_resume(None)
        return epoch, start, worker, workers

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

    # --- iteration --------------------------------------------------------

    def __iter__(self) -> Iterator[dict[str, Any]]:
        # Not a generator function: the epoch and start are fixed here, at
        # iter(), not at the first next().
        # The cache first: an iteration refused for a rebuilt cache leaves a
        # loaded resume point for the next one.
        loader = self._open_loader()
        epoch, start, worker, workers = self._begin()
        plan = self._plan(loader, epoch)
        return self._run(loader, plan, epoch, start, worker, workers)

    def _run(
        self,
        loader: Loader,
        plan: list[npt.NDArray[np.int64]],
        epoch: int,
        start: int,
        worker: int,
        workers: int,
    ) -> Iterator[Any]:
        in_process, todo = self._todo(plan, epoch, start, worker, workers)
        if not todo:
            return iter(())
        # Sized for the largest batch to come, not batch_size.
        size = max(len(plan[k]) for k in todo)
        if in_process and self.pin_memory:
            return self._counted(self._iter_pinned(loader, plan, todo, size, epoch), epoch, todo)
        return self._counted(self._iter_fresh(loader, plan, todo, size, epoch), epoch, todo)

    def _todo(
        self, plan: list[npt.NDArray[np.int64]], epoch: int, start: int, worker: int, workers: int
    ) -> tuple[bool, range]:
        """Records where this iteration starts (this process's position, or
        the worker's progress) and returns (in process, the plan indices it
        yields)."""
        in_process = get_worker_info() is None
        if in_process:
            self._position = (epoch, start)
        else:
            self._progress = [epoch, start, worker, workers, 0]
        return in_process, range(start + worker, len(plan), workers)

    def _counted(self, items: Iterator[Any], epoch: int, todo: range) -> Iterator[Any]:
        """Records each item as consumed when it is handed out."""
        progress = self._progress if get_worker_info() is not None else None
        for k, item in zip(todo, items):
            if progress is None:
                self._position = (epoch, k + 1)
            else:
                progress[4] += 1
            yield item

    def _iter_fresh(
        self, loader: Loader, plan: list[npt.NDArray[np.int64]], todo: range, size: int, epoch: int
    ) -> Iterator[dict[str, Any]]:
        shared = get_worker_info() is not None
        batch = loader.new_batch(size)
        for k in todo:
            picked = plan[k]
            self._fill(loader, batch, picked)
            item = self._fresh(batch, self.positions[picked], shared=shared)
            item.update(epoch=epoch, plan_index=k, content_id=self.content_id)
            item["store_ids"] = dict(self.store_ids)
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
        token_ids = batch.token_ids
        if token_ids is not None:
            item["token_ids"] = own("token_ids", token_ids[:n], None)
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
        todo: range,
        size: int,
        epoch: int,
    ) -> Iterator[dict[str, Any]]:
        pin = _can_pin(type(self).__name__)
        batch = loader.new_batch(size)
        twins: list[dict[str, torch.Tensor]] = [{}, {}]
        for turn, k in enumerate(todo):
            self._fill(loader, batch, plan[k])
            item = self._item(batch, self.positions[plan[k]], _into(twins[turn % 2], pin))
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
