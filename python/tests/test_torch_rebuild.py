"""Issue 43's remainder: across a nightly rebuild, a state refuses another
corpus or another selection (by source id), torchdata's StatefulDataLoader
with workers resumes exactly (the loader's whole state given to the
dataset), out-of-order states of every rank resume exactly, and a
checkpoint taken after an epoch ended never trains that epoch twice. The
defects among them failed first (see the commit)."""

from __future__ import annotations

import io
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

if os.environ.get("SOCIALCTX_REQUIRE_TORCH"):
    import torch
else:
    torch = pytest.importorskip("torch")

from test_torch_nightly import Nightly, ids, stateful  # noqa: E402
from torch.utils.data import DataLoader  # noqa: E402

import socialctx  # noqa: E402
from conftest import REPO  # noqa: E402
from socialctx.torch import CacheDataset  # noqa: E402


@pytest.fixture()
def nightly(tmp_path) -> Nightly:
    return Nightly(tmp_path)


def _stop_after(source, k: int, save) -> tuple[list, object]:
    """Trains ``k`` items of ``source``, taking ``save()`` after each."""
    got, state = [], None
    for item in source:
        got.append(item)
        state = save(item)
        if len(got) == k:
            break
    return got, state


def _roundtrip(state):
    """A checkpoint as torch saves it and loads it without pickle."""
    buf = io.BytesIO()
    torch.save({"data": state}, buf)
    buf.seek(0)
    return torch.load(buf, weights_only=True)["data"]


# --- another corpus, another selection ------------------------------------------


def _build(src: list[Path], cache: Path, root: Path) -> None:
    corpus = root / "c"
    shutil.rmtree(corpus, ignore_errors=True)
    for s in src:
        shutil.copytree(s, corpus / s.name)
    socialctx.build(corpus, cache, workers=1, progress=False)


def test_another_corpus_is_refused_and_a_grown_one_resumes(tmp_path):
    """The bug: a state of one corpus loaded into a dataset of a cache
    rebuilt from another corpus (the same path) resumed silently: every
    thread "new", the epoch restarted on other data."""
    parts = sorted(p for p in (REPO / "data-samples/corpus").iterdir() if p.is_dir())
    cache = tmp_path / "cache"
    _build(parts[1:2], cache, tmp_path)
    old = socialctx.open(cache)
    ds = CacheDataset(old, range(len(old)), 2, seed=0)
    _, state = _stop_after(ds, 2, lambda item: ds.state_dict())
    _build(parts[2:3], cache, tmp_path)  # another corpus at the same path
    new = socialctx.open(cache)
    assert not set(new.source_ids.tolist()) & set(old.source_ids.tolist())
    fresh = CacheDataset(new, range(len(new)), 2, seed=0, resume_across_rebuild=True)
    with pytest.raises(ValueError, match="another corpus"):
        fresh.load_state_dict(state)
    # A superset of the corpus is growth (the documented limit).
    _build(parts[1:3], cache, tmp_path)
    grown = socialctx.open(cache)
    fresh = CacheDataset(grown, range(len(grown)), 2, seed=0, resume_across_rebuild=True)
    fresh.load_state_dict(state)
    assert fresh.resumed["added"] == len(new)


def test_another_selection_is_refused_across_a_rebuild(nightly):
    """The bug: a state of a fold (threads 0..19) loaded into a dataset of
    every thread after a rebuild trained the other threads as the fold's
    rest. The state now holds the threads not selected too."""
    cache = nightly.open()
    fold = np.arange(20)
    ds = CacheDataset(cache, fold, 3, seed=1)
    _, state = _stop_after(ds, 2, lambda item: ds.state_dict())
    nightly.rebuild(delete=[int(cache.source_ids[30])])
    new = nightly.open()
    make = lambda sel: CacheDataset(new, sel, 3, seed=1, resume_across_rebuild=True)  # noqa: E731
    with pytest.raises(ValueError, match="another selection.*not in the state's"):
        make(range(len(new))).load_state_dict(state)
    same = socialctx.select(new, cache.source_ids[fold])
    with pytest.raises(ValueError, match="another selection.*still in the cache"):
        make(same.positions[1:]).load_state_dict(state)
    # The same threads by source id, plus the new thread (growth): resumes.
    grown = np.append(same.positions, np.flatnonzero(new.source_ids == nightly.new_id))
    ok = make(grown)
    ok.load_state_dict(_roundtrip(state))
    assert ok.resumed["added"] == 1


# --- StatefulDataLoader with workers across a rebuild -----------------------------


@pytest.mark.parametrize(("workers", "method"), [(2, "fork"), (2, "spawn"), (0, None)])
def test_a_stateful_loader_resumes_across_a_rebuild(nightly, workers, method):
    """The gap: a StatefulDataLoader's worker states held plan indices
    only, so a checkpoint of a loader with workers could not continue its
    epoch after the nightly rebuild. Worker 0's state now holds the threads
    by source id; the loader's whole state goes to the dataset."""
    StatefulDataLoader = stateful()
    cache = nightly.open()
    kw: dict = {"num_workers": workers}
    ds = CacheDataset(cache, range(len(cache)), 3, seed=4)
    ds.set_epoch(1)
    dl = StatefulDataLoader(ds, batch_size=None, **kw)  # the default start method
    trained, state = _stop_after(dl, 5, lambda item: dl.state_dict())
    state = _roundtrip(state)  # the ids are tensors: no pickle needed
    deleted = [ids(trained)[0], next(i for i in cache.source_ids.tolist() if i not in ids(trained))]
    nightly.rebuild(delete=deleted)
    new = nightly.open()
    ds = CacheDataset(new, range(len(new)), 3, seed=4, resume_across_rebuild=True)
    if workers:
        # Workers started once (spawned ones import torch: seconds each).
        kw.update(multiprocessing_context=method, persistent_workers=True)
    dl = StatefulDataLoader(ds, batch_size=None, **kw)
    dl.load_state_dict(state)
    ds.load_state_dict(state)
    assert ds.epoch == 1 and ds.resumed["dropped"] == 1 and ds.resumed["added"] == 1
    epochs: dict[int, list[int]] = {}
    for epoch in range(ds.epoch, 3):
        ds.set_epoch(epoch)
        for item in dl:
            assert int(item["epoch"]) == epoch
            epochs.setdefault(epoch, []).extend(item["source_ids"].tolist())
    survived = [i for i in ids(trained) if i not in deleted]
    assert sorted(survived + epochs[1]) == sorted(new.source_ids.tolist())
    assert sorted(epochs[2]) == sorted(new.source_ids.tolist())


def _loader_state_with_workers(nightly, **kw):
    StatefulDataLoader = stateful()
    cache = nightly.open()
    ds = CacheDataset(cache, range(len(cache)), 3, seed=4)
    dl = StatefulDataLoader(ds, batch_size=None, num_workers=2, **kw)
    _, state = _stop_after(dl, 5, lambda item: dl.state_dict())
    nightly.rebuild(delete=[int(cache.source_ids[0])])
    new = nightly.open()
    return state, lambda: CacheDataset(new, range(len(new)), 3, seed=4, resume_across_rebuild=True)


def _worker_states(state) -> list[dict]:
    snaps = state["_snapshot"]["_worker_snapshots"]
    return [snaps[k]["dataset_state"] for k in sorted(snaps)]


def test_a_stateful_loaders_states_that_cannot_resume_exactly_are_refused(nightly):
    StatefulDataLoader = stateful()
    state, make = _loader_state_with_workers(nightly)
    w0, w1 = _worker_states(state)
    assert "ids" in w0 and "ids" not in w1  # only worker 0 carries the threads
    # One worker's state, not the loader's.
    for one in (w0, w1):
        with pytest.raises(ValueError, match="loader's whole state"):
            make().load_state_dict(one)
    # Damaged or mismatched worker states.
    import copy

    for damage in ("drop", "yielded", "num_workers", "epoch"):
        bad = copy.deepcopy(state)
        snaps = bad["_snapshot"]["_worker_snapshots"]
        if damage == "drop":
            del snaps["worker_1"]
        elif damage == "yielded":
            snaps["worker_1"]["dataset_state"]["worker"]["yielded"] = 10_000
        elif damage == "num_workers":
            snaps["worker_1"]["dataset_state"]["worker"]["num_workers"] = 3
        else:
            snaps["worker_1"]["dataset_state"]["epoch"] = 5
        with pytest.raises(ValueError, match="worker"):
            make().load_state_dict(bad)
    # The dataset not told: the workers refuse with the fix.
    ds = make()
    dl = StatefulDataLoader(ds, batch_size=None, num_workers=2)
    dl.load_state_dict(state)
    with pytest.raises(ValueError, match=r"ds.load_state_dict\(loader_state\)"):
        list(dl)


def test_a_loader_state_between_snapshots_is_refused_across_a_rebuild(nightly):
    """snapshot_every_n_steps > 1: the loader replays the batches since its
    snapshot, which are other batches on the new generation."""
    state, make = _loader_state_with_workers(nightly, snapshot_every_n_steps=3)
    assert state["_steps_since_snapshot"] > 0
    with pytest.raises(ValueError, match="snapshot_every_n_steps"):
        make().load_state_dict(state)


# --- out-of-order states of every rank ---------------------------------------------


def _ranks_out_of_order(cache, delivered: list[list[int]], **kw):
    """Two ranks in_order=False; each trains the batches of its plan in the
    order ``delivered[rank]`` (the others were in flight at the crash)."""
    states, trained = [], []
    for rank, order in enumerate(delivered):
        ds = CacheDataset(cache, range(36), 3, seed=6, rank=rank, world_size=2, in_order=False)
        items = [item for _, item in zip(range(max(order) + 1), ds)]
        for k in order:
            trained.append(items[k])
            state = ds.state_dict(after=items[k])
        states.append(state)
    return states, trained


def test_every_ranks_out_of_order_states_resume_exactly(nightly):
    """States record their rank; the list of every rank's states (what
    all_gather_object gives) resumes each rank on its own gaps, and across
    a rebuild the epoch by source id."""
    cache = nightly.open()
    states, trained = _ranks_out_of_order(cache, [[1, 0, 3, 5], [0, 2, 1, 4]])
    assert [s["rank"] for s in states] == [0, 1]
    assert states[0]["missing"] == [2, 4] and states[1]["missing"] == [3]
    # The same generation: each rank's own gaps, then its rest.
    rest = []
    for rank in range(2):
        ds = CacheDataset(cache, range(36), 3, seed=6, rank=rank, world_size=2, in_order=False)
        ds.load_state_dict(_roundtrip(states))
        rest += list(ds)
    assert sorted(ids(trained + rest)) == sorted(cache.source_ids[:36].tolist())
    # Across a rebuild: the union of what every rank trained.
    gone = int(cache.source_ids[35])
    nightly.rebuild(delete=[gone])
    new = nightly.open()
    sel = socialctx.select(new, cache.source_ids[:36])
    rest = []
    for rank in range(2):
        ds = CacheDataset(
            new, sel, 3, seed=6, rank=rank, world_size=2, in_order=False, resume_across_rebuild=True
        )
        ds.load_state_dict(states)
        rest.append(list(DataLoader(ds, batch_size=None)))
    assert len(rest[0]) == len(rest[1])
    got = ids(trained) + ids(rest[0] + rest[1])
    assert sorted(set(got) - {gone}) == sorted(new.source_ids[sel.positions].tolist())
    assert len(got) == len(set(got))  # 27 threads left on 2 ranks: no padding here
    # One rank's out-of-order state alone cannot say what the others trained.
    ds = CacheDataset(
        new, sel, 3, seed=6, rank=0, world_size=2, in_order=False, resume_across_rebuild=True
    )
    with pytest.raises(ValueError, match="every rank's states"):
        ds.load_state_dict(states[0])


def test_a_rank_refuses_another_ranks_out_of_order_state(nightly):
    """The bug: rank 1 loaded rank 0's state (its gaps, 2 and 4) and
    silently trained rank 0's gaps' indices of its own plan, skipping its
    own gap (3)."""
    cache = nightly.open()
    states, _ = _ranks_out_of_order(cache, [[1, 0, 3, 5], [0, 2, 1, 4]])
    ds = CacheDataset(cache, range(36), 3, seed=6, rank=1, world_size=2, in_order=False)
    with pytest.raises(ValueError, match="rank 0.*rank 1"):
        ds.load_state_dict(states[0])
    ds.load_state_dict(states[1])  # its own: fine
    bad = [states[0], states[0]]
    with pytest.raises(ValueError, match="every rank's states"):
        ds.load_state_dict(bad)


# --- a checkpoint taken after an epoch ended ---------------------------------------


@pytest.mark.parametrize(
    ("workers", "persistent", "rebuild"),
    [(0, False, False), (2, False, False), (2, True, False), (0, False, True), (2, False, True)],
)
def test_a_checkpoint_after_an_epoch_ended_does_not_train_it_twice(
    nightly, workers, persistent, rebuild
):
    """The bug: a StatefulDataLoader state taken after epoch 0 ended; the
    restarted loop set epoch 0 (ds.epoch), the loader found its iterator
    finished and started a fresh one: epoch 0 trained twice."""
    StatefulDataLoader = stateful()
    cache = nightly.open()
    kw = {"num_workers": workers, "persistent_workers": persistent}
    ds = CacheDataset(cache, range(24), 4, seed=2, resume_across_rebuild=True)
    dl = StatefulDataLoader(ds, batch_size=None, **kw)
    epochs: dict[int, list[int]] = {}
    for item in dl:
        epochs.setdefault(0, []).extend(item["source_ids"].tolist())
    state = dl.state_dict()  # after the epoch's end
    fold = cache.source_ids[:24]
    if rebuild:
        nightly.rebuild(delete=[int(cache.source_ids[30])])  # a thread not selected
        cache = nightly.open()
    sel = socialctx.select(cache, fold)  # the same threads by source id
    ds = CacheDataset(cache, sel, 4, seed=2, resume_across_rebuild=True)
    dl = StatefulDataLoader(ds, batch_size=None, **kw)
    dl.load_state_dict(state)
    ds.load_state_dict(state)
    assert ds.epoch == 1
    for epoch in range(ds.epoch, 3):
        ds.set_epoch(epoch)
        for item in dl:
            assert int(item["epoch"]) == epoch
            epochs.setdefault(epoch, []).extend(item["source_ids"].tolist())
    assert sorted(epochs) == [0, 1, 2]
    for epoch, got in epochs.items():
        assert sorted(got) == sorted(fold.tolist()), epoch


def test_an_in_process_state_after_an_epoch_ended_goes_on_with_the_next(nightly):
    cache = nightly.open()
    ds = CacheDataset(cache, range(24), 4, seed=2, resume_across_rebuild=True)
    first = ids(list(ds))
    state = ds.state_dict()
    nightly.rebuild(delete=[int(cache.source_ids[0])])
    new = nightly.open()
    grown = socialctx.select(new, [*cache.source_ids[:24].tolist(), nightly.new_id])
    again = CacheDataset(new, grown, 4, seed=2, resume_across_rebuild=True)
    again.load_state_dict(state)
    # The epoch had ended: the new thread is trained from the next epoch on.
    assert again.epoch == 1 and again.resumed["remaining"] == 0
    again.set_epoch(1)
    assert sorted(ids(list(again))) == sorted(new.source_ids[grown.positions].tolist())
    assert len(first) == 24


def test_an_out_of_order_dataset_resumed_in_process_counts_from_its_resume_point(nightly):
    """The bug (found by the nightly machine): a dataset made with
    in_order=False, resumed and iterated in-process, took the first item's
    state_dict(after=item) for a new iteration from the epoch's start: the
    batches trained before the checkpoint came back as gaps, trained twice."""
    cache = nightly.open()
    ds = CacheDataset(cache, range(36), 3, seed=8, in_order=False)
    first = [item for _, item in zip(range(2), ds)]
    for item in first:  # in_order=False: every item is handed over
        state = ds.state_dict(after=item)
    again = CacheDataset(cache, range(36), 3, seed=8, in_order=False)
    again.load_state_dict(state)
    rest = []
    for item in DataLoader(again, batch_size=None, in_order=False):
        rest.append(item)
        state = again.state_dict(after=item)
        if len(rest) == 3:
            break
    assert (state["batches_done"], state.get("missing", [])) == (5, [])
    last = CacheDataset(cache, range(36), 3, seed=8, in_order=False)
    last.load_state_dict(state)
    done = ids(first + rest + list(last))
    assert sorted(done) == sorted(cache.source_ids[:36].tolist())


def test_a_state_with_plain_lists_for_ids_resumes(nightly):
    """A checkpoint written as JSON (ids as lists, an empty one too)."""
    cache = nightly.open()
    ds = CacheDataset(cache, range(len(cache)), 4, seed=3)
    _, state = _stop_after(ds, 2, lambda item: ds.state_dict())
    state = dict(state, ids={k: v.tolist() for k, v in state["ids"].items()})
    assert state["ids"]["before"] == []
    nightly.rebuild(delete=[int(cache.source_ids[1])])
    new = nightly.open()
    again = CacheDataset(new, range(len(new)), 4, seed=3, resume_across_rebuild=True)
    again.load_state_dict(state)
    assert again.resumed["trained"] + again.resumed["remaining"] == len(new)
