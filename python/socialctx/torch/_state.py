"""The parts of a dataset's state that outlive a cache generation: the
epoch's threads by source id (what was trained, what is left after a
rebuild), the consumed set under out-of-order delivery, and reading a
StatefulDataLoader's state."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

#: The option a state of another generation needs (named by the refusal).
ACROSS = "resume_across_rebuild=True"

#: The plan's fields that a generation may change; every other must match.
GENERATION_FIELDS = ("content_id", "positions")

#: The option a state of another definition needs (named by the refusal).
ACROSS_DEFINITION = "resume_across_definition=True"


def check_definition(plan: Mapping[str, Any], ours: str, allowed: bool, rebuilt: bool) -> None:
    """A state of values of another definition (an upgrade of socialctx
    rebuilt the cache since it was saved): refused unless ``allowed``
    (``resume_across_definition=True``), then resumed with a warning; the
    model trained so far saw values computed otherwise, so it is never
    silent. A state saved before definitions were recorded, or a cache
    built before, cannot be checked: resumed (its content id still
    decides whether it is of this generation), with a warning when the
    cache was ``rebuilt`` since (its values may be another definition's)."""
    theirs = plan.get("definition")
    if theirs is None or not ours or theirs == "":
        if rebuilt:
            which = "this state" if theirs is None or theirs == "" else "this cache"
            warnings.warn(
                f"{which} does not record the definition of its values (made before "
                f"socialctx recorded it), so the state cannot be checked against this "
                f"cache's ({ours or 'unknown'}): if socialctx was upgraded since the state "
                "was saved, the epoch's rest trains on values computed otherwise",
                stacklevel=4,
            )
        return
    if theirs == ours:
        return
    if not isinstance(theirs, str):
        raise ValueError(
            f"this state's definition is {theirs!r}, not a digest: damaged "
            "(pass the state_dict() as saved)"
        )
    what = (
        f"this state is of values of another definition: {theirs} there, {ours} here "
        "(another socialctx version computed this cache's values since the state was "
        "saved), so the epoch's rest would train on values computed otherwise than "
        "those the model has seen"
    )
    if not allowed:
        raise ValueError(
            f"{what}; start afresh (a new dataset, without load_state_dict), or make the "
            f"dataset with {ACROSS_DEFINITION} (and {ACROSS}) to continue anyway"
        )
    warnings.warn(f"{what}: resumed as {ACROSS_DEFINITION} asks", stacklevel=4)


def check_models(theirs: Any, ours: Mapping[str, str | None], allowed: bool) -> None:
    """A state of a dataset whose embedding rows were another model's (a
    store re-embedded with another model since it was saved): refused
    unless ``allowed`` (``resume_across_definition=True``: what made the
    inputs changed), then resumed with a warning."""
    if not isinstance(theirs, Mapping):
        raise ValueError(
            f"this state's models are {theirs!r}, not a mapping: damaged "
            "(pass the state_dict() as saved)"
        )
    # Stores both read (another choice of stores is the caller's).
    differ = sorted(k for k in set(theirs) & set(ours) if theirs[k] != ours[k])
    if not differ:
        return
    said = "; ".join(f"{k}: model {theirs[k]!r} there, {ours[k]!r} here" for k in differ)
    what = (
        f"this state was trained on embedding rows of other models ({said}: the store was "
        "re-embedded since the state was saved), so the epoch's rest would feed the model "
        "rows of a model it has not seen"
    )
    if not allowed:
        raise ValueError(
            f"{what}; start afresh (a new dataset, without load_state_dict), embed the "
            f"stores again with the state's models, or make the dataset with "
            f"{ACROSS_DEFINITION} to continue anyway"
        )
    warnings.warn(f"{what}: resumed as {ACROSS_DEFINITION} asks", stacklevel=4)


class Consumed:
    """The plan indices of one epoch that the loop said it trained
    (``state_dict(after=item)``): a high-water mark, and the indices
    below it never handed over when items came out of order
    (``DataLoader(in_order=False)``: a worker's later batch before
    another's earlier one)."""

    def __init__(
        self, epoch: int, start: int, missing: tuple[int, ...] = (), every: bool = False
    ) -> None:
        self.epoch = epoch
        self.top = start  # every index below it consumed, but `gaps`
        self.loaded = set(missing)  # gaps of the resume point this epoch started from
        # Indices skipped over: delivered but not handed to state_dict (a
        # loop that checkpoints now and then, in order) or not delivered
        # yet (out of order); told apart by an index arriving below `top`.
        self.skipped: set[int] = set()
        self.out_of_order = False
        self.last = -1  # the index handed over last (handed again: the same state)
        # Every item is handed over (in_order=False): skipped = not delivered.
        self.every = every

    def add(self, index: int) -> bool:
        """Records ``index``; False when it cannot be of this iteration (an
        index handed over before, not the last: a new iteration began)."""
        if index >= self.top:
            self.skipped.update(range(self.top, index))
            self.top = index + 1
        elif index in self.skipped:
            self.out_of_order = True  # a batch skipped over arrived after a later one
        elif index not in self.loaded and index != self.last:
            return False
        self.last = index
        self.skipped.discard(index)
        self.loaded.discard(index)
        return True

    def state(self) -> tuple[int, list[int]]:
        gaps = self.loaded | (self.skipped if self.every else set())
        return self.top, sorted(gaps)


def todo(count: int, start: int, missing: tuple[int, ...]) -> list[int]:
    """An iteration's plan indices: the gaps first, then the rest."""
    return [k for k in missing if k < start] + list(range(start, count))


def resume_after(start: int, missing: tuple[int, ...], yielded: int) -> tuple[int, tuple[int, ...]]:
    """The resume point after ``yielded`` items of ``todo(., start, missing)``."""
    gaps = tuple(k for k in missing if k < start)
    if yielded < len(gaps):
        return start, gaps[yielded:]
    return start + yielded - len(gaps), ()


def epoch_ids(
    ids: npt.NDArray[np.int64], plan: list[npt.NDArray[np.int64]]
) -> dict[str, npt.NDArray[np.int64]]:
    """Every rank's plan of an epoch as source ids, flattened with batch
    bounds (global batch order: rank r has batches r, r + w, ...)."""
    sizes = np.array([len(b) for b in plan], dtype=np.int64)
    bounds = np.zeros(len(plan) + 1, dtype=np.int64)
    np.cumsum(sizes, out=bounds[1:])
    flat = np.concatenate(plan) if plan else np.zeros(0, dtype=np.int64)
    return {"order": ids[flat], "bounds": bounds}


def int_ids(x: Any) -> npt.NDArray[np.int64]:
    """Source ids or plan indices of a state as an int64 array: states hold
    them as torch tensors (``torch.load(weights_only=True)`` reads them),
    older ones as arrays or lists."""
    if isinstance(x, torch.Tensor):
        x = x.detach().cpu().numpy()
    a = np.asarray(x)
    if a.size == 0:
        return np.zeros(0, dtype=np.int64)  # [] reads as float64
    if a.dtype.kind not in "iu":
        raise ValueError(f"ids of dtype {a.dtype}, not integers")
    return a.astype(np.int64).reshape(-1)


def as_tensors(ids: Mapping[str, npt.NDArray[np.int64]]) -> dict[str, torch.Tensor]:
    return {k: torch.from_numpy(np.ascontiguousarray(v, dtype=np.int64)) for k, v in ids.items()}


def rank_batches(state: Mapping[str, Any]) -> list[int]:
    """The batches of its rank's plan (rank-local indices) that ``state``
    says were trained: the first ``batches_done`` less the gaps."""
    done = int(state["batches_done"])
    missing = set(int(k) for k in state.get("missing", ()))
    return [j for j in range(done) if j not in missing]


def trained_ids(
    ids: Mapping[str, Any], world: int, batches: Mapping[int | None, list[int]]
) -> npt.NDArray[np.int64]:
    """The source ids trained in an epoch: those trained before a resume
    across a rebuild, and ``batches[r]`` (rank-local batch indices) of each
    rank ``r``; ``batches[None]``: of every rank (ranks step together
    under DDP, so one rank's in-order state says what all trained)."""
    order, bounds = int_ids(ids["order"]), int_ids(ids["bounds"])
    parts = [int_ids(ids["before"])]
    for rank in range(world):
        for j in batches.get(rank, batches.get(None, [])):
            g = rank + j * world
            if g + 1 < len(bounds):
                parts.append(order[bounds[g] : bounds[g + 1]])
    return np.unique(np.concatenate(parts).astype(np.int64))


def check_lineage(
    old_selected: npt.NDArray[np.int64],
    old_unselected: npt.NDArray[np.int64],
    selected: npt.NDArray[np.int64],
    alive: npt.NDArray[np.int64],
) -> None:
    """The one rule for a state resumed on another generation: the new
    generation is the state's grown or thinned (threads deleted, threads
    added), and the selection is the same threads. Refuses another corpus
    (none of the state's threads left: a superset still counts as growth)
    and another selection (a thread the state had left out now in, or one
    it had in and the cache still has now out)."""
    fix = (
        "hold the selection by source id (fold.on(cache), socialctx.select(cache, ids)) "
        "so that it is the same threads every night, or start the epoch afresh "
        "(a new dataset, without load_state_dict)"
    )
    lineage = np.concatenate([old_selected, old_unselected])
    if len(lineage) and not np.isin(lineage, alive).any():
        raise ValueError(
            f"this state is of another corpus: none of its generation's {len(lineage)} "
            f"threads is in this cache ({len(alive)} threads); resume it on a rebuild of "
            "its own corpus, or start afresh"
        )
    came_in = selected[np.isin(selected, old_unselected)]
    if len(came_in):
        raise ValueError(
            f"this state is of another selection: {len(came_in)} threads not in the state's "
            f"selection are in this one (source id {int(came_in[0])}, ...); {fix}"
        )
    left_out = old_selected[np.isin(old_selected, alive) & ~np.isin(old_selected, selected)]
    if len(left_out):
        raise ValueError(
            f"this state is of another selection: {len(left_out)} threads of the state's "
            f"selection are still in the cache but not in this selection (source id "
            f"{int(left_out[0])}, ...); {fix}"
        )


def fingerprint(state: Mapping[str, Any]) -> tuple[Any, ...]:
    """What tells a dataset state from another of the same plan (a state
    loaded twice, by the dataset and by a StatefulDataLoader, is one)."""
    worker = state.get("worker")
    return (
        state["plan"].get("content_id") if isinstance(state["plan"], Mapping) else None,
        int(state["epoch"]),
        int(state["batches_done"]),
        tuple(int(k) for k in state.get("missing", ())),
        None if not isinstance(worker, Mapping) else tuple(sorted(worker.items())),
        state.get("rank"),
    )


def worker_batches(states: list[Mapping[str, Any]], count: int) -> list[int]:
    """The rank-local batches trained by the end of a StatefulDataLoader's
    state: those before its iteration's resume point and those its workers
    delivered (each yields every ``num_workers``-th of the iteration's plan
    indices), from every worker's state; refuses states that are not one
    loader's."""
    try:
        first = states[0]
        workers = int(first["worker"]["num_workers"])
        start = int(first["batches_done"])
        gaps = tuple(sorted(int(k) for k in first.get("missing", ())))
        seen: dict[int, int] = {}
        for s in states:
            w = s["worker"]
            same = (int(s["batches_done"]), tuple(sorted(int(k) for k in s.get("missing", ()))))
            if int(w["num_workers"]) != workers or same != (start, gaps):
                raise ValueError("of different iterations")
            seen[int(w["id"])] = int(w["yielded"])
    except (KeyError, TypeError, ValueError, IndexError) as e:
        raise ValueError(
            f"the StatefulDataLoader's worker states are damaged or mismatched ({e}): "
            "pass the loader's whole state_dict(), as saved"
        ) from None
    if sorted(seen) != list(range(workers)):
        raise ValueError(
            f"the StatefulDataLoader's worker states are of workers {sorted(seen)}, not of "
            f"all {workers}: pass the loader's whole state_dict(), as saved"
        )
    plan = todo(count, start, gaps)
    # Trained before the iteration the workers ran began (its resume point).
    out = [j for j in range(start) if j not in gaps]
    for w, yielded in sorted(seen.items()):
        share = plan[w::workers]
        if not 0 <= yielded <= len(share):
            raise ValueError(
                f"the StatefulDataLoader's worker {w} state says {yielded} batches of its "
                f"{len(share)} were yielded: damaged or of another plan"
            )
        out += share[:yielded]
    return sorted(out)


def dataset_states(state: Any) -> list[Mapping[str, Any]]:
    """The dataset states inside ``state``: itself when it is one, else
    those a torchdata StatefulDataLoader's state holds (one per worker,
    or the in-process one)."""
    found: list[Mapping[str, Any]] = []

    def walk(x: Any, depth: int) -> None:
        if depth > 6 or not isinstance(x, Mapping):
            return
        if "plan" in x and "epoch" in x and "batches_done" in x:
            found.append(x)
            return
        for v in x.values():
            walk(v, depth + 1)

    walk(state, 0)
    return found
