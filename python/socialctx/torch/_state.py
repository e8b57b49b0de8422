"""The parts of a dataset's state that outlive a cache generation: the
epoch's threads by source id (what was trained, what is left after a
rebuild), the consumed set under out-of-order delivery, and reading a
StatefulDataLoader's state."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

#: The option a state of another generation needs (named by the refusal).
ACROSS = "resume_across_rebuild=True"

#: The plan's fields that a generation may change; every other must match.
GENERATION_FIELDS = ("content_id", "positions")


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


def trained_ids(state: Mapping[str, Any]) -> npt.NDArray[np.int64]:
    """The source ids every rank trained in the state's epoch: each rank's
    first ``batches_done`` batches (ranks step together under DDP), the
    gaps left out, and those trained before a resume across a rebuild."""
    ids = state["ids"]
    world = int(state["plan"]["world_size"])
    done = int(state["batches_done"])
    missing = set(int(k) for k in state.get("missing", ()))
    if missing and world > 1:
        raise ValueError(
            "this state has batches delivered out of order (DataLoader(in_order=False)) "
            "under several ranks: the other ranks' gaps are not in it, so it cannot be "
            "resumed on another generation; resume it on its own generation"
        )
    order, bounds = np.asarray(ids["order"]), np.asarray(ids["bounds"])
    parts = [np.asarray(ids["before"], dtype=np.int64)]
    for j in range(done):
        if j in missing:
            continue
        for r in range(world):
            g = r + j * world
            if g + 1 < len(bounds):
                parts.append(order[bounds[g] : bounds[g + 1]])
    return np.unique(np.concatenate(parts).astype(np.int64))


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
