"""Training across the nightly rebuild (issue 43) and positions tied to a
generation (issue 42, item 4): one test per defect (each failed on
4b23908), then resumption by source id across a rebuild with 0 and 2
workers, fork and spawn, plain and stateful loaders, 1 and 2 ranks."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest

if os.environ.get("SOCIALCTX_REQUIRE_TORCH"):
    import torch
else:
    torch = pytest.importorskip("torch")

from torch.utils.data import DataLoader, get_worker_info  # noqa: E402

import socialctx  # noqa: E402
from conftest import REPO  # noqa: E402
from socialctx.torch import CacheDataset, EmbeddingTable, GraphDataset  # noqa: E402


def stateful():
    if not os.environ.get("SOCIALCTX_REQUIRE_TORCH"):
        pytest.importorskip("torchdata")  # CI installs it (.ci/run)
    from torchdata.stateful_dataloader import StatefulDataLoader

    return StatefulDataLoader


class Nightly:
    """A private corpus whose cache is rebuilt as a nightly job does: a
    thread deleted, a thread added (one held aside from the start)."""

    def __init__(self, root: Path) -> None:
        self.corpus = root / "corpus"
        shutil.copytree(REPO / "data-samples/corpus", self.corpus)
        self.cache = root / "cache"
        self.aside = root / "aside"
        self.aside.mkdir()
        socialctx.build(self.corpus, self.cache, workers=1, progress=False)
        # Held aside: the thread the first rebuild adds.
        self.new_id = int(self.open().source_ids[3])
        self._move(self.new_id, self.aside)
        socialctx.build(self.corpus, self.cache, workers=1, progress=False)

    def _dir(self, source_id: int, root: Path) -> Path:
        (d,) = [p for p in root.rglob(str(source_id)) if p.is_dir() and p.name == str(source_id)]
        return d

    def _move(self, source_id: int, to: Path) -> None:
        d = self._dir(source_id, self.corpus)
        target = to / d.relative_to(self.corpus)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(d, target)

    def open(self) -> socialctx.Cache:
        return socialctx.open(self.cache)

    def rebuild(self, delete: list[int]) -> None:
        """Deletes ``delete`` and adds the thread held aside."""
        for source_id in delete:
            shutil.rmtree(self._dir(source_id, self.corpus))
        d = self._dir(self.new_id, self.aside)
        target = self.corpus / d.relative_to(self.aside)
        shutil.move(d, target)
        socialctx.build(self.corpus, self.cache, workers=1, progress=False, incremental=True)


@pytest.fixture()
def nightly(tmp_path) -> Nightly:
    return Nightly(tmp_path)


def ids(items) -> list[int]:
    return [i for s in items for i in s["source_ids"].tolist()]


# --- issue 42, item 4: positions given with a path ------------------------------


def test_positions_with_a_path_are_refused_or_tied_to_a_named_generation(nightly):
    """The bug: ``CacheDataset(path, positions, labels=...)`` bound the
    positions to whatever the path held; after a thread was deleted and
    the cache rebuilt, 17 of 34 threads carried another thread's label."""
    old = nightly.open()
    positions = np.arange(34)
    labels = (old.source_ids[positions] % 2).astype(np.int8)  # a label per thread
    want = dict(zip(old.source_ids[positions].tolist(), labels.tolist()))
    nightly.rebuild(delete=[int(old.source_ids[0])])
    for cls in (CacheDataset, GraphDataset):
        with pytest.raises(ValueError, match="content_id="):
            cls(nightly.cache, positions, 4, labels=labels)
        # Named: the generation they were taken from, which is gone.
        with pytest.raises(socialctx.CacheError, match="rebuilt"):
            cls(nightly.cache, positions, 4, labels=labels, content_id=old.content_id)
    # Held by source id: the same threads, with their own labels, by path too.
    sel = socialctx.select(nightly.open(), old.source_ids[positions], labels)
    assert len(sel.missing) == 1 and len(sel) == 33
    ds = CacheDataset(nightly.cache, sel, 4)
    got = {s: lab for it in ds for s, lab in zip(it["source_ids"].tolist(), it["labels"].tolist())}
    assert got == {s: lab for s, lab in want.items() if s != int(old.source_ids[0])}
    # The current generation named: accepted.
    new = nightly.open()
    CacheDataset(nightly.cache, range(3), 1, content_id=new.content_id)
    socialctx.embed(new, lambda b: np.ones((len(b), 2), np.float32), field="reply", name="r")
    EmbeddingTable(nightly.cache, "r", content_id=new.content_id)
    with pytest.raises(socialctx.CacheError, match="rebuilt"):
        EmbeddingTable(nightly.cache, "r", content_id=old.content_id)


# --- issue 43, defect 3: batch_size=1 under ranks --------------------------------


@pytest.mark.parametrize("cls", [CacheDataset, GraphDataset])
def test_no_rank_gets_an_empty_batch(nightly, cls):
    """The bug: with batch_size=1 and 5 threads on 2 ranks, one rank got
    an empty batch every epoch (a NaN mean loss, spread by all-reduce)."""
    cache = nightly.open()
    for n, world in ((5, 2), (7, 3), (1, 2)):
        per_rank = []
        for rank in range(world):
            kw = {"pyg": False} if cls is GraphDataset else {}
            ds = cls(cache, range(n), 1, seed=0, rank=rank, world_size=world, **kw)
            items = list(ds)
            assert all(len(s["source_ids"]) for s in items)
            per_rank.append(ids(items))
        assert len({len(r) for r in per_rank}) == 1  # equal batches per rank
        seen = [i for r in per_rank for i in r]
        # Every thread once, the first ones again as padding.
        assert sorted(set(seen)) == sorted(cache.source_ids[:n].tolist())
        assert len(seen) == -(-n // world) * world


# --- issue 43, defect 1: set_epoch after a StatefulDataLoader state ---------------


@pytest.mark.parametrize("workers", [0, 2])
def test_the_guide_loop_resumes_a_stateful_loader_in_its_epoch(nightly, workers):
    """The bug: after ``dl.load_state_dict(...)`` with workers, ``ds.epoch``
    stayed 0; the guide's loop trained the rest of epoch 1 as "epoch 0"
    and then all of epoch 1 again. Now the loop's epoch is the items'."""
    StatefulDataLoader = stateful()
    cache = nightly.open()
    ds = CacheDataset(cache, range(36), 3, seed=5)
    dl = StatefulDataLoader(ds, batch_size=None, num_workers=workers)
    trained: list[tuple[int, list[int]]] = []
    state = None
    for epoch in range(ds.epoch, 3):
        ds.set_epoch(epoch)
        for n, item in enumerate(dl):
            trained.append((epoch, item["source_ids"].tolist()))
            assert int(item["epoch"]) == epoch
            if epoch == 1 and n == 4:
                state = dl.state_dict()
                break
        if state is not None:
            break
    # Restart: a new process's dataset and loader.
    ds = CacheDataset(cache, range(36), 3, seed=5)
    dl = StatefulDataLoader(ds, batch_size=None, num_workers=workers)
    dl.load_state_dict(state)
    ds.load_state_dict(state)  # the loader's state: ds.epoch becomes its epoch
    assert ds.epoch == 1
    for epoch in range(ds.epoch, 3):
        ds.set_epoch(epoch)
        for item in dl:
            assert int(item["epoch"]) == epoch
            trained.append((epoch, item["source_ids"].tolist()))
    for epoch in range(3):
        got = sorted(i for e, b in trained if e == epoch for i in b)
        assert got == sorted(cache.source_ids[:36].tolist()), epoch


@pytest.mark.parametrize("workers", [0, 2])
def test_set_epoch_disagreeing_with_a_stateful_loader_state_raises_with_the_fix(nightly, workers):
    StatefulDataLoader = stateful()
    cache = nightly.open()
    ds = CacheDataset(cache, range(36), 3, seed=5)
    ds.set_epoch(1)
    dl = StatefulDataLoader(ds, batch_size=None, num_workers=workers)
    for n, _item in enumerate(dl):
        if n == 2:
            break
    state = dl.state_dict()
    ds = CacheDataset(cache, range(36), 3, seed=5)
    dl = StatefulDataLoader(ds, batch_size=None, num_workers=workers)
    dl.load_state_dict(state)
    ds.set_epoch(0)  # the loop's start without ds.load_state_dict(state)
    with pytest.raises(ValueError, match=r"ds.load_state_dict\(loader_state\)"):
        list(dl)


def test_the_epoch_rule_in_either_order(nightly):
    """A loaded state and set_epoch must name the same epoch, whichever
    comes first; disagreeing, the second raises with the fix."""
    cache = nightly.open()
    ds = CacheDataset(cache, range(20), 3, seed=1)
    ds.set_epoch(2)
    it = iter(ds)
    next(it)
    state = ds.state_dict()
    # load, then set_epoch
    again = CacheDataset(cache, range(20), 3, seed=1)
    again.load_state_dict(state)
    with pytest.raises(ValueError, match=r"set_epoch\(2\) resumes it"):
        again.set_epoch(0)
    again.set_epoch(2)
    assert len(list(again)) == len(ds) - 1
    # set_epoch, then load
    other = CacheDataset(cache, range(20), 3, seed=1)
    other.set_epoch(0)
    with pytest.raises(ValueError, match="ambiguous"):
        other.load_state_dict(state)
    other.set_epoch(2)
    other.load_state_dict(state)
    assert len(list(other)) == len(ds) - 1


# --- issue 43, defect 2: DataLoader(in_order=False) -------------------------------


def _slow_first_worker(_wid: int) -> None:
    """worker_init_fn: worker 0's batches take longer, so worker 1's later
    batches are delivered before them (out of order)."""
    import time

    info = get_worker_info()
    if info.id != 0:
        return
    ds = info.dataset
    fill = ds._fill

    def slow(*a, **kw):
        time.sleep(0.15)
        return fill(*a, **kw)

    ds._fill = slow


def test_resume_is_exact_under_out_of_order_delivery(nightly):
    """The bug: ``state_dict(after=item)`` said "plan index k done", so
    batches below k that a slower worker had not delivered were skipped on
    resume (12 of 12 trials on PHEME lost threads). Now the state records
    the batches missing below k."""
    cache = nightly.open()
    make = lambda **kw: CacheDataset(cache, range(36), 2, seed=3, **kw)  # noqa: E731
    # Undeclared: refused as soon as an item comes after a later one.
    ds = make()
    dl = DataLoader(
        ds, batch_size=None, num_workers=2, in_order=False, worker_init_fn=_slow_first_worker
    )
    with pytest.raises(ValueError, match="in_order=False"):
        for item in dl:
            ds.state_dict(after=item)
    ds = make(in_order=False)
    dl = DataLoader(
        ds, batch_size=None, num_workers=2, in_order=False, worker_init_fn=_slow_first_worker
    )
    trained, order = [], []
    for n, item in enumerate(dl):
        trained.append(item)
        order.append(int(item["plan_index"]))
        state = ds.state_dict(after=item)
        if n == 7:
            break
    assert order != list(range(len(order))), "delivered in order: the test proves nothing"
    assert state["missing"], state
    again = make(in_order=False)
    again.load_state_dict(state)
    rest = list(DataLoader(again, batch_size=None, num_workers=2, in_order=False))
    assert sorted(ids(trained + rest)) == sorted(cache.source_ids[:36].tolist())


# --- resumption across a rebuild, by source id ---------------------------------


def _train_then_rebuild(nightly, stop: int, **kw):
    cache = nightly.open()
    ds = CacheDataset(cache, range(len(cache)), 4, seed=7, **kw)
    ds.set_epoch(1)
    trained = []
    for n, item in enumerate(ds):
        trained.append(item)
        if n + 1 == stop:
            break
    state = ds.state_dict()
    done = set(ids(trained))
    # Delete one thread trained already and one not yet trained.
    untrained = [int(i) for i in cache.source_ids if int(i) not in done]
    deleted = [ids(trained)[0], untrained[0]]
    nightly.rebuild(delete=deleted)
    return state, trained, deleted


def test_a_state_of_another_generation_is_refused_naming_the_option(nightly):
    state, _, _ = _train_then_rebuild(nightly, 3)
    new = nightly.open()
    ds = CacheDataset(new, range(len(new)), 4, seed=7)
    with pytest.raises(ValueError, match="resume_across_rebuild=True"):
        ds.load_state_dict(state)


@pytest.mark.parametrize(("workers", "method"), [(0, None), (2, "fork"), (2, "spawn")])
def test_a_checkpoint_resumes_across_the_nightly_rebuild(nightly, workers, method):
    state, trained, deleted = _train_then_rebuild(nightly, 3)
    new = nightly.open()
    ds = CacheDataset(new, range(len(new)), 4, seed=7, resume_across_rebuild=True)
    ds.load_state_dict(state)
    assert ds.epoch == 1
    assert ds.resumed["dropped"] == 1 and ds.resumed["deleted_trained"] == 1
    assert ds.resumed["added"] == 1  # joins this epoch's rest
    kw = {} if workers == 0 else {"multiprocessing_context": method}
    rest = []
    for epoch in range(ds.epoch, 3):
        ds.set_epoch(epoch)
        items = list(DataLoader(ds, batch_size=None, num_workers=workers, **kw))
        if epoch == 1:
            rest = items
        else:
            assert sorted(ids(items)) == sorted(new.source_ids.tolist())
    # The epoch: every surviving thread once, the new one included.
    survived = [i for i in ids(trained) if i not in deleted]
    assert sorted(survived + ids(rest)) == sorted(new.source_ids.tolist())
    assert nightly.new_id in ids(rest)


def test_a_stateful_loaders_worker_state_alone_is_refused_across_a_rebuild(nightly):
    """One worker's state cannot say what the others delivered: refused,
    naming what resumes (the loader's whole state: test_torch_rebuild.py)."""
    StatefulDataLoader = stateful()
    cache = nightly.open()
    ds = CacheDataset(cache, range(len(cache)), 3, seed=1)
    dl = StatefulDataLoader(ds, batch_size=None, num_workers=2)
    for n, _ in enumerate(dl):
        if n == 3:
            break
    state = dl.state_dict()
    nightly.rebuild(delete=[int(cache.source_ids[0])])
    new = nightly.open()
    fresh = CacheDataset(new, range(len(new)), 3, seed=1, resume_across_rebuild=True)
    worker_1 = state["_snapshot"]["_worker_snapshots"]["worker_1"]["dataset_state"]
    with pytest.raises(ValueError, match="loader's whole state"):
        fresh.load_state_dict(worker_1)
    fresh.load_state_dict(state)
    assert fresh.resumed["dropped"] + fresh.resumed["deleted_trained"] == 1


@pytest.mark.parametrize("workers", [0, 2])
def test_resume_across_a_rebuild_under_two_ranks(nightly, workers):
    """Ranks step together: rank 0's state says what every rank trained."""
    cache = nightly.open()
    make = lambda c, r, **kw: CacheDataset(c, range(len(c)), 1, seed=2, rank=r, world_size=2, **kw)  # noqa: E731
    trained = []
    states = []
    for rank in range(2):
        ds = make(cache, rank)
        for n, item in enumerate(ds):
            trained.append(item)
            if n == 5:
                break
        states.append(ds.state_dict())
    nightly.rebuild(delete=[int(cache.source_ids[-1])])
    new = nightly.open()
    rest = []
    for rank in range(2):
        ds = make(new, rank, resume_across_rebuild=True)
        ds.load_state_dict(states[0])  # one checkpoint, loaded by every rank
        rest.append(list(DataLoader(ds, batch_size=None, num_workers=workers)))
    assert len(rest[0]) == len(rest[1])
    assert all(len(s["source_ids"]) == 1 for r in rest for s in r)
    got = [i for i in ids(trained) if i in set(new.source_ids.tolist())] + ids(rest[0] + rest[1])
    # Every surviving thread at least once, padding repeats at most one.
    assert set(got) == set(new.source_ids.tolist())
    assert len(got) - len(set(got)) <= 1


def test_a_state_taken_after_a_resume_across_a_rebuild_resumes_again(nightly):
    """A crash during the resumed epoch: its state (by id) loads on the
    same generation without the option, and the epoch stays exact."""
    state, trained, deleted = _train_then_rebuild(nightly, 2)
    new = nightly.open()
    ds = CacheDataset(new, range(len(new)), 4, seed=7, resume_across_rebuild=True)
    ds.load_state_dict(state)
    more = []
    for n, item in enumerate(ds):
        more.append(item)
        if n == 2:
            break
    second = ds.state_dict()
    again = CacheDataset(new, range(len(new)), 4, seed=7)
    again.load_state_dict(second)
    rest = list(again)
    survived = [i for i in ids(trained) if i not in deleted]
    assert sorted(survived + ids(more) + ids(rest)) == sorted(new.source_ids.tolist())


# --- folds held by source id ----------------------------------------------------


def test_folds_have_labels_veracity_a_dev_split_and_a_short_repr(nightly):
    cache = nightly.open()
    folds = socialctx.folds(cache, dev=0.2, seed=1)
    again = socialctx.folds(cache, dev=0.2, seed=1)
    assert [f.dev.tolist() for f in folds] == [f.dev.tolist() for f in again]  # seeded
    other = socialctx.folds(cache, dev=0.2, seed=2)
    assert [f.dev.tolist() for f in folds] != [f.dev.tolist() for f in other]
    for f in folds:
        assert len(repr(f)) < 200 and f.event in repr(f)
        assert not set(f.dev.tolist()) & set(f.train.tolist())
        assert f.train_labels.tolist() == cache.labels[f.train].tolist()
        for part, positions, veracity in (
            ("train", f.train, f.train_veracity),
            ("test", f.test, f.test_veracity),
        ):
            assert len(veracity) == len(positions), part
            for p, v in zip(positions.tolist(), veracity.tolist()):
                t = cache[p]
                want = t.value("veracity") if t.label_code == 1 else None
                assert v == (-1 if want is None else int(want))
        if len(f.dev):
            # Stratified: each label of train+dev is in dev.
            both = np.concatenate([f.train, f.dev])
            assert set(cache.labels[f.dev].tolist()) == set(cache.labels[both].tolist())


def test_a_fold_on_the_rebuilt_cache_is_the_same_threads(nightly):
    cache = nightly.open()
    fold = socialctx.folds(cache)[0]
    gone = int(cache.source_ids[fold.test[0]])
    nightly.rebuild(delete=[gone])
    new = nightly.open()
    moved = fold.on(new)
    assert moved.missing.tolist() == [gone]
    old_test = set(cache.source_ids[fold.test].tolist()) - {gone}
    assert set(new.source_ids[moved.test].tolist()) == old_test  # the new thread not added
    assert nightly.new_id not in set(new.source_ids[moved.test].tolist())
    sel = fold.selection("test")
    with pytest.raises(socialctx.CacheError, match="rebuilt"):
        CacheDataset(nightly.cache, sel, 4)  # positions of the old generation
    ds = CacheDataset(nightly.cache, moved.selection("test"), 4)
    assert set(ids(list(ds))) == old_test


# --- red team (rt43): states that must not load ------------------------------------


def _resumed_state(nightly):
    """A state taken during an epoch resumed across a rebuild (its ids part
    has threads trained before the rebuild) and the generation it is of."""
    state, _, _ = _train_then_rebuild(nightly, 2)
    new = nightly.open()
    ds = CacheDataset(new, range(len(new)), 4, seed=7, resume_across_rebuild=True)
    ds.load_state_dict(state)
    it = iter(ds)
    next(it)
    return ds.state_dict(), new


def test_a_resumed_epochs_state_is_refused_by_another_selection(nightly):
    """The bug: a state of an epoch resumed across a rebuild loaded into a
    dataset of another selection (another fold, other labels) on the same
    generation, without the option, and silently trained that selection's
    rest as if it were the state's."""
    state, new = _resumed_state(nightly)
    with pytest.raises(ValueError, match="positions"):
        CacheDataset(new, range(10), 4, seed=7).load_state_dict(state)
    labels = np.zeros(len(new), dtype=np.int8)
    with pytest.raises(ValueError, match="positions"):
        CacheDataset(new, range(len(new)), 4, seed=7, labels=labels).load_state_dict(state)
    # The same selection still resumes (by source id).
    CacheDataset(new, range(len(new)), 4, seed=7).load_state_dict(state)


@pytest.mark.parametrize("part", ["ids", "plan"])
@pytest.mark.parametrize("bad", [None, [1, 2], "x"])
def test_a_forged_state_is_a_value_error(nightly, part, bad):
    """The bug: a state whose 'ids' or 'plan' part is not a mapping raised
    AttributeError / TypeError from inside the dataset."""
    state, new = _resumed_state(nightly)
    forged = dict(state)
    forged[part] = bad
    with pytest.raises(ValueError, match="not a state|damaged"):
        CacheDataset(new, range(len(new)), 4, seed=7).load_state_dict(forged)
