"""Loading what crosses a rebuild or a process: a torchdata
StatefulDataLoader's whole state (its workers' states, read together in
your process), and the rest of an epoch on another generation by source
id. Functions of a dataset (``Resumable``), kept apart from its epoch
rule."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from . import _state

if TYPE_CHECKING:
    from ._resume import Resumable


def load_loader_state(ds: Resumable, loader_state: Any, inner: list[Mapping[str, Any]]) -> None:
    """A StatefulDataLoader's state given to the dataset in your process.

    In-process (``num_workers=0``) its one dataset state is loaded here.
    With workers, on the state's own generation, the workers resume their
    own states and the dataset learns the epoch; across a rebuild (or in
    an epoch resumed across one), the workers' states together say which
    batches were delivered, worker 0's the threads by source id: the rest
    is computed here and the workers ignore their states. A loader whose
    iteration had ended starts a fresh one: the dataset goes on with the
    next epoch (else that epoch would be trained twice)."""
    finished = isinstance(loader_state, Mapping) and bool(loader_state.get("_iterator_finished"))
    try:
        epochs = {int(s["epoch"]) for s in inner}
        marks = frozenset(_state.fingerprint(s) for s in inner)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise ValueError(f"this loader state's dataset states are damaged ({e!r})") from None
    if len(epochs) != 1:
        raise ValueError(
            f"this loader state's worker states are of epochs {sorted(epochs)}: damaged or "
            "mismatched; pass the loader's whole state_dict(), as saved"
        )
    (epoch,) = epochs
    own = [s for s in inner if "worker" not in s]
    workers = [s for s in inner if "worker" in s]
    if own and workers or len(own) > 1:
        raise ValueError("this loader state mixes in-process and worker states: damaged")
    if own:
        if finished:
            _next_epoch(ds, own[0], epoch)
        else:
            ds.load_state_dict(own[0])
        ds._absorbed = marks
        return
    with_ids = [s for s in workers if "ids" in s]
    first = with_ids[0] if with_ids else workers[0]
    if len(with_ids) > 1 or any(s["plan"] != first["plan"] for s in workers):
        raise ValueError(
            "this loader state's worker states are damaged or mismatched (worker 0's "
            "carries the epoch's threads; all are of one plan): pass the loader's whole "
            "state_dict(), as saved"
        )
    by_ids = ds._check_plan(first, first["plan"])
    if by_ids and not with_ids:
        raise ValueError(
            "this loader state's worker states are of an epoch resumed across a rebuild "
            "but none carries its threads by source id (worker 0's): damaged"
        )
    try:
        world = int(first["plan"]["world_size"])
        bounds = first["ids"]["bounds"] if with_ids else None
        count = ds._count if bounds is None else (len(_state.int_ids(bounds)) - 1) // world
    except (KeyError, TypeError, ValueError, ZeroDivisionError) as e:
        raise ValueError(f"worker 0's state's threads are damaged ({e!r})") from None
    batches = _state.worker_batches(workers, count)
    if by_ids:
        steps = (
            loader_state.get("_steps_since_snapshot", 0) if isinstance(loader_state, Mapping) else 0
        )
        if steps:
            raise ValueError(
                f"this StatefulDataLoader state was taken {steps} steps after its last "
                "snapshot (snapshot_every_n_steps > 1): the loader replays those steps, "
                "which on another generation are other batches; resume across a rebuild "
                "from a state of snapshot_every_n_steps=1 (the default)"
            )
        ended = finished or 0 < count <= len(batches)
        resume_by_ids(ds, first, epoch, {None: batches}, ended=ended)
        ds._absorbed = marks  # the workers' states are in the rest: they ignore them
        return
    if finished:
        _next_epoch(ds, first, epoch)
        ds._absorbed = marks
        return
    # The workers resume their own states; your process learns the epoch.
    ds._learn_epoch(epoch, batches)


def _next_epoch(ds: Resumable, state: Mapping[str, Any], epoch: int) -> None:
    """A state whose epoch had ended: the next epoch, from its start (a
    state of another generation checked as across a rebuild)."""
    if ds._check_plan(state, state["plan"]):
        resume_by_ids(ds, state, epoch, {None: []}, ended=True, check_only=True)
    ds._check_chosen(epoch + 1)
    ds._rest = None
    ds._arm(epoch + 1, 0, ())


def resume_by_ids(
    ds: Resumable,
    state: Mapping[str, Any],
    epoch: int,
    batches: Mapping[int | None, list[int]],
    *,
    ended: bool,
    check_only: bool = False,
) -> None:
    """The rest of ``state``'s epoch on this generation: the selection's
    threads whose source ids the state's epoch has not trained (``batches``
    of each rank, see ``_state.trained_ids``). When the epoch had ended,
    the next epoch instead, whole (new threads are trained from it)."""
    try:
        ids = state["ids"]
        world = int(state["plan"]["world_size"])
        trained = _state.trained_ids(ids, world, batches)
        old = _state.int_ids(ids["selection"])
        unselected = _state.int_ids(ids["unselected"])
    except (KeyError, TypeError, IndexError, AttributeError, ValueError) as e:
        raise ValueError(
            f"this state's threads by source id (its 'ids' part) are damaged ({e!r}): "
            "it cannot resume on another generation"
        ) from None
    alive = ds._open_loader().cache.source_ids.astype(np.int64)
    _state.check_lineage(old, unselected, ds._ids, alive)
    if check_only:
        return
    ds._check_chosen(epoch + 1 if ended else epoch)
    keep = ~np.isin(ds._ids, trained)
    gone = ~np.isin(old, alive)
    positions = ds.positions[keep]
    ds.resumed = {
        "from_content_id": state["plan"]["content_id"],
        # The definition digests of the state's values and of this
        # cache's (None: a state saved before it was recorded); they
        # differ only with resume_across_definition=True.
        "from_definition": state["plan"].get("definition"),
        "definition": ds.definition,
        "epoch": epoch,
        "trained": int(np.isin(trained, ds._ids).sum()),
        # The state's threads no longer in the cache: trained before
        # (nothing lost) or not (dropped from the epoch).
        "deleted_trained": int((gone & np.isin(old, trained)).sum()),
        "dropped": int((gone & ~np.isin(old, trained)).sum()),
        # New in this selection: in the epoch's rest (never trained in
        # it), or from the next epoch when the state's had ended.
        "added": int((~np.isin(ds._ids, old)).sum()),
        "remaining": 0 if ended else int(len(positions)),
    }
    if ended:
        ds._rest = None
        ds._arm(epoch + 1, 0, ())
        return
    labels = None if ds.labels is None else ds.labels[keep]
    ds._rest = (epoch, positions, labels, ds._ids[keep], 0, trained)
    count = len(ds._plan(ds._open_loader(), epoch))
    ds._rest = (epoch, positions, labels, ds._ids[keep], count, trained)
    ds._arm(epoch, 0, ())
