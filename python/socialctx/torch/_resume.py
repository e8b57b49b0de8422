"""A dataset's epochs and resumption: the epoch rule, states, resume
points (within a generation by plan index, across a rebuild by source
id), for CacheDataset and GraphDataset."""

from __future__ import annotations

import os
import random
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from torch.utils.data import get_worker_info

from .. import CacheError, Loader
from . import _across, _state
from ._common import _count

# Slots of a dataset's shared array, which reaches persistent DataLoader
# workers (they keep their copy of the dataset across iterations).
_EPOCH = 0  # the epoch set last
_TICKET = 1  # the pending resume point: its ticket (0: none), epoch, batches done
_R_EPOCH = 2
_R_DONE = 3
_CLAIMED = 4  # the ticket the last iteration to start used up, and that iteration's key
_CLAIMED_BY = 5
_WORKERS_RAN = 6  # 1 while the last iteration to start ran in DataLoader workers
_CHOSEN = 7  # 1 + the epoch set_epoch chose (0: none): a loaded state must agree
_R_GAPS = 8  # gaps of the pending resume point (out-of-order delivery), or a rest plan
# Per DataLoader worker id (the first 64): the ticket it took and its pid.
# DataLoaders made with generators seeded alike give their iterations the
# same key; a new worker process of an id that already took the ticket is
# of a later iteration.
_TAKEN = 9
_TAKEN_WORKERS = 64
_SLOTS = _TAKEN + 2 * _TAKEN_WORKERS
_KEY_MASK = (1 << 62) - 1

_STATEFUL_FIX = (
    "call ds.load_state_dict(state) before the epoch loop (with torchdata's "
    "StatefulDataLoader: ds.load_state_dict(loader_state) after "
    "loader.load_state_dict(loader_state)), so that ds.epoch is the state's epoch and "
    "the loop's set_epoch(epoch) agrees with it"
)


_LOADER_FIX = (
    "call ds.load_state_dict(loader_state) in your process, after "
    "loader.load_state_dict(loader_state) and before iterating"
)


class Resumable:
    """CacheDataset's epochs, states and resume points (a mixin: the
    dataset provides the fields set in its constructor)."""

    # Provided by CacheDataset.__init__.
    positions: npt.NDArray[np.int64]
    labels: npt.NDArray[np.int8] | None
    content_id: str
    definition: str
    batch_size: int
    seed: int | None
    rank: int
    world_size: int
    bucket: bool
    noise: float
    drop_last: bool
    loader_kwargs: dict[str, Any]
    resume_across_rebuild: bool
    resume_across_definition: bool
    in_order: bool
    resumed: dict[str, Any] | None
    _ids: npt.NDArray[np.int64]
    _epoch: int
    _resume: tuple[int, int, int] | None
    _gaps: tuple[int, ...]
    _position: tuple[int, int, tuple[int, ...]]
    _progress: list[int] | None
    _progress_gaps: tuple[int, ...]
    _iter_base: tuple[int, int, tuple[int, ...]] | None
    _local_resume: tuple[int, int, int, tuple[int, ...]] | None
    _rest: tuple[Any, ...] | None
    _consumed: _state.Consumed | None
    _absorbed: frozenset[tuple[Any, ...]]
    _digest: str
    _shared: Any
    _count: int
    _iters: tuple[int, int]

    def _open_loader(self) -> Loader:
        raise NotImplementedError

    # --- the epoch's selection -------------------------------------------

    def _sel(self, epoch: int) -> tuple[npt.NDArray[np.int64], Any, npt.NDArray[np.int64]]:
        """(positions, labels, source ids) an epoch plans over: the rest of
        an epoch resumed across a rebuild, else the whole selection."""
        rest = self._rest
        if rest is not None and rest[0] == epoch:
            return rest[1], rest[2], rest[3]
        return self.positions, self.labels, self._ids

    def _plan(
        self, loader: Loader, epoch: int, rank: int | None = -1
    ) -> list[npt.NDArray[np.int64]]:
        """The epoch's batches (indices into ``_sel(epoch)``), of this rank
        or (``rank=None``) of every rank in global order (-1: this rank's)."""
        positions = self._sel(epoch)[0]
        if not len(positions):
            return []
        seed = None if self.seed is None else self.seed + epoch
        return loader.plan(
            positions,
            self.batch_size,
            seed=seed,
            bucket=self.bucket,
            noise=self.noise,
            world_size=self.world_size,
            rank=self.rank if rank == -1 else rank,
            drop_last=self.drop_last,
        )

    # --- the epoch rule ----------------------------------------------------

    @property
    def epoch(self) -> int:
        """The epoch the next iteration reads (see :meth:`set_epoch`)."""
        return self._epoch

    def set_epoch(self, epoch: int) -> None:
        """Selects epoch ``epoch``'s shuffle (with a seed) for the iterations
        that start after this call, here and in persistent DataLoader workers
        (as ``DistributedSampler.set_epoch``). With a loaded state not yet
        resumed, ``epoch`` must be the state's (``ValueError`` otherwise:
        training another epoch would train the state's epoch twice)."""
        epoch = _count(epoch, "epoch", 0)
        pending = self._pending()
        if pending is not None and pending[1] != epoch:
            raise ValueError(
                f"a state of epoch {pending[1]} was loaded and not yet resumed: "
                f"set_epoch({pending[1]}) resumes it (the guide's loop, "
                f"`for epoch in range(ds.epoch, N)`, does); set_epoch({epoch}) would leave "
                f"it behind. To start epoch {epoch} afresh, make a new dataset"
            )
        self._epoch = epoch
        self._shared[_EPOCH] = epoch
        self._shared[_CHOSEN] = epoch + 1
        if self._rest is not None and self._rest[0] != epoch:
            self._rest = None  # the resumed epoch is over
        self._consumed = None  # the next iteration hands over its own items
        self._position = (epoch, 0, ()) if pending is None else (epoch, pending[2], self._gaps)
        self._shared[_WORKERS_RAN] = 0

    def _set_resume(self, resume: tuple[int, int, int] | None, gaps: tuple[int, ...] = ()) -> None:
        self._resume = resume
        self._gaps = gaps if resume is not None else ()
        shared = self._shared
        shared[_TICKET], shared[_R_EPOCH], shared[_R_DONE] = resume or (0, 0, 0)
        shared[_R_GAPS] = len(self._gaps) + (self._rest is not None)

    def _pending(self) -> tuple[int, int, int] | None:
        """The loaded resume point if no iteration has used it up yet."""
        if self._resume is not None and self._shared[_CLAIMED] == self._resume[0]:
            self._set_resume(None)
        return self._resume

    def _plan_params(self) -> dict[str, Any]:
        kw = self.loader_kwargs
        return {
            "content_id": self.content_id,
            # The definition digest of the values: a state of another (an
            # upgrade rebuilt the cache) is refused without an explicit
            # resume_across_definition=True (see _state.check_definition).
            "definition": self.definition,
            # The embedding models of the rows the batches carry: a state of
            # other models (a store re-embedded since) is refused as one of
            # another definition is (see _state.check_models).
            "models": dict(sorted(getattr(self, "store_models", {}).items())),
            "positions": self._digest,
            "batch_size": self.batch_size,
            "seed": self.seed,
            "bucket": self.bucket,
            "noise": self.noise if self.bucket else None,
            # Bucketed plans sort by padded width first (issue 47): a state
            # saved under the noisy-length order is another epoch's.
            "bucket_order": "width" if self.bucket else None,
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
        count = self._count
        if self._rest is not None and self._rest[0] == self._epoch:
            count = self._rest[4]
        pending = self._pending()
        if pending is not None and pending[1] == self._epoch:
            return len(_state.todo(count, pending[2], self._gaps))
        return count

    # --- states --------------------------------------------------------------

    def state_dict(self, after: Mapping[str, Any] | Any = None) -> dict[str, Any]:
        """Where this rank is: the epoch and the batches of it consumed, with
        the plan's parameters (which :meth:`load_state_dict` checks) and,
        in your process, the epoch's threads by source id (what a resume
        across a rebuild needs).

        ``after``: the item your loop last trained on; the state is then
        the one after it. Needed with a plain DataLoader's workers, which
        run ahead of the loop. With ``DataLoader(in_order=False)`` make the
        dataset with ``in_order=False`` and pass every item you train on
        (each call records it): the state then holds the batches not yet
        delivered below the last one (``missing``); an item arriving after
        a later one without it raises. Without it, in-process iterations
        count by themselves; in a DataLoader worker (torchdata's
        ``StatefulDataLoader`` calls it there) the state is that worker's."""
        state: dict[str, Any] = {"plan": self._plan_params(), "rank": self.rank}
        if after is not None:
            epoch, index = self._check_item(after)
            consumed = self._consumed
            if consumed is None or consumed.epoch != epoch:
                # The start of the iteration the item is of: in your process,
                # where it began (not how far it has yielded); with workers,
                # the resume point your process set.
                base = self._position
                began = self.__dict__.get("_iter_base")
                if began is not None and not self._shared[_WORKERS_RAN]:
                    base = began
                if base[0] != epoch:
                    base = (epoch, 0, ())
                consumed = self._consumed = _state.Consumed(
                    epoch, base[1], base[2], every=not self.in_order
                )
            if not consumed.add(index):
                # Another iteration of this epoch, from its start.
                consumed = self._consumed = _state.Consumed(epoch, 0, every=not self.in_order)
                consumed.add(index)
            if consumed.out_of_order and not consumed.every:
                raise ValueError(
                    f"batch {index} of epoch {epoch} came after a later one: the DataLoader "
                    "delivers out of order (in_order=False), so a high-water mark would skip "
                    "batches not yet delivered; make the dataset with in_order=False and pass "
                    "every item you train on to state_dict(after=item)"
                )
            done, gaps = consumed.state()
            state.update(epoch=epoch, batches_done=done)
            if gaps:
                state["missing"] = gaps
            state["ids"] = self._ids_state(epoch)
            return self._mark_across(state, epoch)
        if self._progress is not None and get_worker_info() is not None:
            epoch, start, worker, workers, yielded = self._progress
            state.update(
                epoch=epoch,
                batches_done=start,
                worker={"id": worker, "num_workers": workers, "yielded": yielded},
            )
            if self._progress_gaps:
                state["missing"] = list(self._progress_gaps)
            if worker == 0:
                # One worker carries the epoch's threads (sent once: the
                # loader's snapshots are deltas), for a resume across a rebuild.
                ids = self._ids_state(epoch)
                if ids:
                    state["ids"] = ids
            return self._mark_across(state, epoch)
        if self._shared[_WORKERS_RAN]:
            raise ValueError(
                "this dataset was last iterated by DataLoader workers, which run ahead of your "
                "loop: pass the item you last trained on, ds.state_dict(after=item), or use "
                "torchdata's StatefulDataLoader and its state_dict()"
            )
        epoch, done, pos_gaps = self._position
        state.update(epoch=epoch, batches_done=done)
        if pos_gaps:
            state["missing"] = list(pos_gaps)
        ids = self._ids_state(epoch)
        if ids:
            state["ids"] = ids
        return self._mark_across(state, epoch)

    def _mark_across(self, state: dict[str, Any], epoch: int) -> dict[str, Any]:
        """Marks a state of an epoch resumed across a rebuild: its plan
        indices are of the epoch's rest, which only the threads by source id
        (worker 0's, in a StatefulDataLoader's state) can rebuild."""
        if self._rest is not None and self._rest[0] == epoch:
            state["across"] = True
        return state

    def _check_item(self, after: Any) -> tuple[int, int]:
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
        return epoch, index

    def _memo(self, epoch: int) -> tuple[list[Any], dict[str, Any]]:
        """The epoch's plan of this rank and the ids part of its states
        (kept for the last epoch asked: one check a step costs one
        comparison, one state no copy of the ids)."""
        memo = self.__dict__.get("_plan_memo")
        if memo is None or memo[0] != epoch or memo[1] is not self._rest:
            loader = self._open_loader()
            everyone = self._plan(loader, epoch, rank=None)
            mine = everyone[self.rank :: self.world_size]
            ids = _state.epoch_ids(self._sel(epoch)[2], everyone)
            rest = self._rest if self._rest is not None and self._rest[0] == epoch else None
            ids["before"] = rest[5] if rest is not None else np.zeros(0, dtype=np.int64)
            ids["selection"] = self._ids
            # The generation's other threads: a state refuses another
            # selection on the next generation (see _state.check_lineage).
            every = loader.cache.source_ids.astype(np.int64)
            ids["unselected"] = every[~np.isin(every, self._ids)]
            # Tensors: a checkpoint loads with torch.load(weights_only=True).
            memo = (epoch, self._rest, mine, _state.as_tensors(ids))
            self.__dict__["_plan_memo"] = memo
        return memo[2], memo[3]

    def _ids_state(self, epoch: int) -> dict[str, Any]:
        try:
            return dict(self._memo(epoch)[1])
        except CacheError:
            # An unpickled dataset whose generation is gone: its state
            # resumes on that generation only (by plan index).
            return {}

    def _yielded_here(self, item: Any, epoch: int, index: int) -> bool:
        """Whether ``item`` holds the threads of batch ``index`` of epoch
        ``epoch`` of this plan."""
        plan = self._memo(epoch)[0]
        if not 0 <= index < len(plan):
            return False
        got = item["positions"]
        got = got.cpu().numpy() if isinstance(got, torch.Tensor) else np.asarray(got)
        return bool(np.array_equal(got, self._sel(epoch)[0][plan[index]]))

    def load_state_dict(self, state: Mapping[str, Any] | Sequence[Mapping[str, Any]]) -> None:
        """Makes the next iteration start at the first batch of
        ``state["epoch"]`` not yet consumed (and sets that epoch). Refuses,
        naming the field, a state of another plan (cache content,
        positions and labels, batch size, seed, bucketing, noise,
        drop_last, world size, padding, selection, empty threads).

        A state of another generation (the cache rebuilt since) is resumed
        by source id when the dataset was made with
        ``resume_across_rebuild=True`` (refused otherwise): the rest of its
        epoch is this dataset's threads not yet trained in it, planned
        with the epoch's seed; threads new in this selection join that
        rest (when the state's epoch had ended, the next epoch);
        :attr:`resumed` says how many were trained, deleted (dropped) and
        added. Another corpus, or another selection (a thread the state
        had left out now in, one it had in and the cache still has now
        out), is refused: see ``_state.check_lineage``.

        Also takes a torchdata ``StatefulDataLoader``'s whole state (give
        it to the loader and to the dataset, before iterating: the
        dataset learns its epoch, and across a rebuild its workers' rest),
        and, under ranks with out-of-order states, the list of every
        rank's states (``torch.distributed.all_gather_object``)."""
        if isinstance(state, (list, tuple)):
            self._load_rank_states(state)
            return
        if not isinstance(state, Mapping) or "plan" not in state:
            inner = _state.dataset_states(state)
            if inner:
                self._load_loader_state(state, inner)
                return
        self._load_one(state)  # type: ignore[arg-type]

    def _load_one(self, state: Mapping[str, Any]) -> None:
        """One dataset state (made by state_dict())."""
        try:
            plan, epoch, done = state["plan"], int(state["epoch"]), int(state["batches_done"])
            gaps = tuple(sorted(int(k) for k in state.get("missing", ())))
            mark = _state.fingerprint(state)
        except (KeyError, TypeError, ValueError, AttributeError):
            raise ValueError(
                f"not a state of a {type(self).__name__} (made by state_dict()): "
                f"{sorted(state) if isinstance(state, Mapping) else type(state).__name__}"
            ) from None
        if mark in self._absorbed:
            # Loaded already, as part of a StatefulDataLoader's state that
            # this dataset was given (the loader hands it over again).
            return
        worker = state.get("worker")
        info = get_worker_info()
        if info is not None and worker is not None:
            self._load_in_worker(state, plan, epoch, done, gaps, info)
            return
        if worker is not None:
            raise ValueError(
                "this is one DataLoader worker's state (StatefulDataLoader's): pass the "
                "loader's whole state (loader.state_dict()) to ds.load_state_dict, as to "
                "StatefulDataLoader.load_state_dict"
            )
        by_ids = self._check_plan(state, plan)
        rank = state.get("rank")
        if gaps and self.world_size > 1 and rank != self.rank:
            raise ValueError(
                f"this is rank {rank}'s state, with batches delivered out of order (missing "
                f"{list(gaps)[:4]}...): rank {self.rank} cannot resume it; load every rank's "
                "states (a list, as torch.distributed.all_gather_object gives) or this "
                "rank's own"
            )
        if not by_ids:
            self._check_chosen(epoch)
            self._check_done(epoch, done, gaps, self._count)
            self._rest = None
            self._arm(epoch, done, gaps)
            return
        if gaps and self.world_size > 1:
            raise ValueError(
                "this state has batches delivered out of order (DataLoader(in_order=False)) "
                "under several ranks: the other ranks' gaps are not in it; load every rank's "
                "states (a list, as torch.distributed.all_gather_object gives) to resume on "
                "another generation"
            )
        batches = _state.rank_batches(state)
        self._resume_by_ids(state, epoch, {None: batches}, ended=self._ended(state, batches))

    def _load_loader_state(self, state: Any, inner: list[Mapping[str, Any]]) -> None:
        _across.load_loader_state(self, state, inner)

    def _resume_by_ids(
        self,
        state: Mapping[str, Any],
        epoch: int,
        batches: Mapping[int | None, list[int]],
        *,
        ended: bool,
    ) -> None:
        _across.resume_by_ids(self, state, epoch, batches, ended=ended)

    def _learn_epoch(self, epoch: int, batches: list[int]) -> None:
        """A StatefulDataLoader's state whose workers resume their own
        states: ``ds.epoch`` becomes its epoch in your process (the loop's
        set_epoch agrees), and the batches its workers delivered (``batches``)
        a resume point, which iterations without those states use (the
        dataset alone, or another loader), so none trains them again."""
        self._check_chosen(epoch)
        done = max(batches) + 1 if batches else 0
        seen = set(batches)
        self._rest = None
        self._arm(epoch, done, tuple(j for j in range(done) if j not in seen))

    def _arm(self, epoch: int, done: int, gaps: tuple[int, ...]) -> None:
        """Sets the epoch and the next iteration's resume point."""
        self._epoch = epoch
        self._shared[_EPOCH] = epoch
        self._shared[_CHOSEN] = epoch + 1
        self._consumed = None
        self._set_resume((random.getrandbits(62) + 1, epoch, done), gaps)
        self._position = (epoch, done, gaps)
        self._shared[_WORKERS_RAN] = 0

    @staticmethod
    def _ended(state: Mapping[str, Any], batches: list[int]) -> bool:
        """Whether ``batches`` are every batch of the state's epoch."""
        try:
            world = int(state["plan"]["world_size"])
            count = (len(_state.int_ids(state["ids"]["bounds"])) - 1) // world
        except (KeyError, TypeError, ValueError, ZeroDivisionError):
            return False
        return count > 0 and len(set(batches)) >= count

    def _load_in_worker(
        self,
        state: Mapping[str, Any],
        plan: Mapping[str, Any],
        epoch: int,
        done: int,
        gaps: tuple[int, ...],
        info: Any,
    ) -> None:
        """A worker's state restored in that DataLoader worker by
        StatefulDataLoader: this process's next iteration resumes it, with
        its own count."""
        if (isinstance(plan, Mapping) and plan.get("content_id") != self.content_id) or state.get(
            "across"
        ):
            raise ValueError(
                "this StatefulDataLoader state is of another cache generation (or of an "
                "epoch resumed across a rebuild): its workers cannot resume it alone; "
                + _LOADER_FIX
            )
        self._check_plan(state, plan)
        self._check_done(epoch, done, gaps, self._count)
        worker = state["worker"]
        if (worker["id"], worker["num_workers"]) != (info.id, info.num_workers):
            raise ValueError(
                f"state of worker {worker['id']} of {worker['num_workers']} loaded "
                f"into worker {info.id} of {info.num_workers}"
            )
        self._local_resume = (epoch, done, int(worker["yielded"]), gaps)

    def _load_rank_states(self, states: Sequence[Any]) -> None:
        """Every rank's states (out-of-order ones need them all): this
        rank's resumes on its generation; across a rebuild, the union of
        what every rank trained is the epoch's trained part."""
        ranks = [s.get("rank") if isinstance(s, Mapping) else None for s in states]
        if sorted(ranks, key=str) != list(range(self.world_size)):
            raise ValueError(
                f"a list of states must be every rank's states, one each (ranks 0 to "
                f"{self.world_size - 1}); these are of ranks {ranks}"
            )
        mine = states[ranks.index(self.rank)]
        try:
            alike = all(s["plan"] == mine["plan"] and s["epoch"] == mine["epoch"] for s in states)
        except (KeyError, TypeError):
            alike = False
        if not alike:
            raise ValueError(
                "every rank's states must be of one plan and one epoch (saved at one step)"
            )
        if not self._check_plan(mine, mine["plan"]):
            self.load_state_dict(mine)
            return
        try:
            batches: dict[int | None, list[int]] = {
                int(s["rank"]): _state.rank_batches(s) for s in states
            }
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"every rank's states: damaged ({e!r})") from None
        ended = all(self._ended(s, batches[int(s["rank"])]) for s in states)
        self._resume_by_ids(mine, int(mine["epoch"]), batches, ended=ended)

    def _check_plan(self, state: Mapping[str, Any], plan: Mapping[str, Any]) -> bool:
        """Refuses a state of another plan, naming the field; returns
        whether it resumes by source id (another generation, allowed, or a
        state of an epoch resumed so)."""
        if not isinstance(plan, Mapping) or not isinstance(state.get("ids", {}), Mapping):
            raise ValueError(
                f"not a state of a {type(self).__name__} (made by state_dict()): its 'plan' "
                "or 'ids' part is not a mapping"
            )
        mine = self._plan_params()
        rebuilt = self.resume_across_rebuild and plan.get("content_id") != mine.get("content_id")
        _state.check_definition(plan, self.definition, self.resume_across_definition, rebuilt)
        # Checked above; a state saved before it was recorded has none.
        # A state saved before the models were recorded has none: not checked.
        if plan.get("models") is not None:
            _state.check_models(plan["models"], mine["models"], self.resume_across_definition)
        differs = [
            f
            for f in mine
            if f not in ("definition", "models") and (f not in plan or plan[f] != mine[f])
        ]
        by_ids = bool(state.get("across")) or (
            "ids" in state and len(state["ids"].get("before", ())) > 0
        )
        for field in differs:
            if field == "content_id" and self.resume_across_rebuild and "ids" in state:
                continue
            # Another selection (or labels) is only expected of another
            # generation: on the state's own, it is another plan.
            if field == "positions" and "content_id" in differs and "ids" in state:
                continue
            hint = ""
            if field == "content_id" and self.resume_across_rebuild:
                hint = (
                    " (the state has not its epoch's threads by source id: "
                    "taken when its generation was gone, or one DataLoader worker's of "
                    "several; it resumes on its own generation only; pass a "
                    "StatefulDataLoader's whole state, or checkpoint with "
                    "ds.state_dict(after=item), to resume across a rebuild)"
                )
            elif field == "content_id":
                hint = (
                    " (the cache was rebuilt since the state was saved: to continue its "
                    "epoch on this generation by source id, make the dataset with "
                    f"{_state.ACROSS})"
                )
            raise ValueError(
                f"this state is of another plan: {field} {plan.get(field)!r} there, "
                f"{mine[field]!r} here{hint}"
            )
        return by_ids or "content_id" in differs

    @staticmethod
    def _check_done(epoch: int, done: int, gaps: tuple[int, ...], count: int) -> None:
        if epoch < 0 or not 0 <= done <= count or any(not 0 <= k < done for k in gaps):
            raise ValueError(f"batches_done {done} of epoch {epoch} is not in this plan")

    def _check_chosen(self, epoch: int) -> None:
        chosen = int(self._shared[_CHOSEN]) - 1
        if chosen >= 0 and chosen != epoch:
            raise ValueError(
                f"set_epoch({chosen}) was called, then a state of epoch {epoch} was loaded: "
                f"which epoch to train is ambiguous; {_STATEFUL_FIX}"
            )

    # --- where an iteration starts --------------------------------------------

    def _begin(self) -> tuple[int, int, tuple[int, ...], int, int, int]:
        """Fixes the epoch and the start of an iteration when it begins:
        (epoch, first batch, gaps, items of this worker already done,
        worker, workers)."""
        info = get_worker_info()
        pid = os.getpid()
        n = self._iters[1] if self._iters[0] == pid else 0
        self._iters = (pid, n + 1)
        shared = self._shared
        gaps = self._gaps
        if info is None:
            worker, workers = 0, 1
            key = random.getrandbits(62) + 1
            epoch, resume = self._epoch, self._resume
            shared[_WORKERS_RAN] = 0
            shared[_CHOSEN] = 0  # set_epoch's choice is used up by this iteration
            # A StatefulDataLoader hands a loaded state over before iter(): later
            # loads of it are the user's own.
            self._absorbed = frozenset()
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
                if resume is not None and int(shared[_R_GAPS]):
                    raise ValueError(
                        "this resume point (out-of-order gaps or a resume across a rebuild) "
                        "was loaded after the persistent workers started: iterate a new "
                        "DataLoader for it"
                    )
            shared[_WORKERS_RAN] = 1
        if self._local_resume is not None:
            r_epoch, start, yielded, r_gaps = self._local_resume
            self._local_resume = None
            chosen = int(shared[_CHOSEN]) - 1
            if chosen >= 0 and chosen != r_epoch and r_epoch != epoch:
                raise ValueError(
                    f"the StatefulDataLoader state restored in this worker is of epoch "
                    f"{r_epoch}, but ds.set_epoch({chosen}) was called; {_STATEFUL_FIX}"
                )
            if resume is not None and int(shared[_CLAIMED]) != resume[0]:
                # The resume point your process armed from the same loader
                # state: used up by these workers' own states.
                shared[_CLAIMED_BY] = key
                shared[_CLAIMED] = resume[0]
            return r_epoch, start, r_gaps, yielded, worker, workers
        start, gaps_out = 0, tuple[int, ...]()
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
                start, gaps_out = done, gaps
            if info is None:
                self._set_resume(None)
        return epoch, start, gaps_out, 0, worker, workers
