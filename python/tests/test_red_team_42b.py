"""Issue 42, red team, third pass (2026-12-06): what the second pass had
not tried. Each test failed first (see the commit)."""

from __future__ import annotations

import os
import pickle

import numpy as np
import pytest

if os.environ.get("SOCIALCTX_REQUIRE_TORCH"):
    import torch  # noqa: F401
else:
    torch = pytest.importorskip("torch")

from test_torch_nightly import Nightly  # noqa: E402

import socialctx  # noqa: E402
from socialctx.torch import CacheDataset, GraphDataset  # noqa: E402


@pytest.fixture()
def nightly(tmp_path) -> Nightly:
    return Nightly(tmp_path)


def test_a_selections_positions_are_refused_by_the_next_generation(nightly: Nightly) -> None:
    """The bug: ``Selection.positions`` and ``.labels`` were bare arrays (a
    Fold's parts are tagged with their generation): given with the cache
    of the next generation, they were taken, and named other threads with
    other threads' labels, silently."""
    old = nightly.open()
    ids = old.source_ids[:20].astype(np.int64)
    sel = socialctx.select(old, ids, labels=ids % 2)
    nightly.rebuild(delete=[int(old.source_ids[0])])
    new = nightly.open()
    for cls in (CacheDataset, GraphDataset):
        with pytest.raises(socialctx.CacheError, match=r"\.on\(cache\)"):
            cls(new, sel.positions, 4, labels=sel.labels)
        with pytest.raises(socialctx.CacheError, match="labels"):
            cls(new, np.asarray(sel.positions), 4, labels=sel.labels)
        with pytest.raises(socialctx.CacheError, match="positions"):
            cls(new, pickle.loads(pickle.dumps(sel)).positions[:5], 4)
    for part in (sel.positions, sel.labels, sel.veracity):
        assert part.content_id == old.content_id
    # The selection's parts on their own generation, with a path: taken.
    moved = sel.on(new)
    ds = CacheDataset(str(nightly.cache), moved.positions, 4, labels=moved.labels)
    got = {s: lab for it in ds for s, lab in zip(it["source_ids"].tolist(), it["labels"].tolist())}
    assert got == {s: s % 2 for s in ids.tolist() if s != int(old.source_ids[0])}


def test_a_splits_positions_are_refused_by_the_next_generation(nightly: Nightly, tmp_path) -> None:
    """The bug: ``read_split(csv, cache)``'s positions and labels were bare
    arrays; given with the cache rebuilt since (README: ``CacheDataset(cache,
    split.positions, 32, labels=split.labels)``), they named other threads
    with the split's labels, silently."""
    old = nightly.open()
    fold = next(f for f in socialctx.folds(old) if len(f.train) and len(f.test))
    train_csv, _ = fold.write_csv(tmp_path / "split")
    split = socialctx.read_split(train_csv, old)
    assert split.content_id == old.content_id
    assert split.positions.content_id == split.labels.content_id == old.content_id
    copy = pickle.loads(pickle.dumps(split))
    assert copy.positions.tolist() == split.positions.tolist() and len(copy) == len(split)
    nightly.rebuild(delete=[int(old.source_ids[0])])
    new = nightly.open()
    for cls in (CacheDataset, GraphDataset):
        with pytest.raises(socialctx.CacheError, match=r"read_split"):
            cls(new, split.positions, 4, labels=split.labels)
        with pytest.raises(socialctx.CacheError, match="labels"):
            cls(new, np.asarray(split.positions), 4, labels=copy.labels)
    # Read again on the rebuilt cache: the same threads, taken (with a path too).
    again = socialctx.read_split(train_csv, new)
    ds = CacheDataset(str(nightly.cache), again.positions, 4, labels=again.labels)
    got = {s: lab for it in ds for s, lab in zip(it["source_ids"].tolist(), it["labels"].tolist())}
    want = dict(zip(split.ids.tolist(), split.labels.tolist()))
    want.pop(int(old.source_ids[0]), None)
    assert got == want


def test_joined_parts_keep_their_generation(nightly: Nightly) -> None:
    """The bug: ``np.concatenate([fold.train, fold.dev])`` (train on both
    once the model is chosen) was a bare array: given with the cache of
    the next generation it was taken, and named other threads, silently.
    Joined parts keep their tag; parts of two generations never join."""
    old = nightly.open()
    fold = next(f for f in socialctx.folds(old, dev=0.2) if len(f.train) and len(f.dev))
    both = np.concatenate([fold.train, fold.dev])
    labels = np.concatenate([fold.train_labels, fold.dev_labels])
    assert both.content_id == labels.content_id == old.content_id
    assert np.union1d(fold.train, fold.test).content_id == old.content_id
    nightly.rebuild(delete=[int(old.source_ids[0])])
    new = nightly.open()
    with pytest.raises(socialctx.CacheError, match=r"fold\.on\(cache\)"):
        CacheDataset(new, both, 4, labels=labels)
    moved = fold.on(new)
    with pytest.raises(ValueError, match="two cache generations"):
        np.concatenate([fold.train, moved.dev])
    ds = CacheDataset(new, np.concatenate([moved.train, moved.dev]), 4)
    got = sorted(s for it in ds for s in it["source_ids"].tolist())
    gone = int(old.source_ids[0])
    assert got == sorted(s for s in old.source_ids[both].tolist() if s != gone)


def test_a_store_name_that_is_not_a_string_is_a_type_error(tmp_path) -> None:
    """The bug: ``CacheDataset(..., embeddings={5: "A"})`` raised
    AttributeError ('int' object has no attribute 'startswith') from the
    store-version check, where a Loader raises TypeError naming the argument."""
    socialctx.build(socialctx.sample_corpus(), tmp_path / "c", progress=False)
    cache = socialctx.open(tmp_path / "c")
    for emb in ({5: "A"}, [5], ["r", b"r"]):
        with pytest.raises(TypeError, match="embeddings"):
            socialctx.Loader(cache, embeddings=emb)
        with pytest.raises(TypeError, match="embeddings"):
            CacheDataset(cache, range(4), 2, embeddings=emb)


def test_a_fold_or_selection_is_not_relabelled_with_another_generation(nightly: Nightly) -> None:
    """The bug: ``dataclasses.replace(fold, cache=new)`` (or a Fold made of
    an old fold's parts with the new cache, or a Selection given another
    content_id) re-tagged the old positions as the new generation's: a
    dataset took them with the new cache, and they named other threads."""
    import dataclasses

    old = nightly.open()
    fold = next(f for f in socialctx.folds(old) if len(f.train) and len(f.test))
    sel = fold.selection("train")
    nightly.rebuild(delete=[int(old.source_ids[0])])
    new = nightly.open()
    with pytest.raises(ValueError, match=r"fold\.on\(cache\)"):
        dataclasses.replace(fold, cache=new)
    with pytest.raises(ValueError, match=r"fold\.on\(cache\)"):
        socialctx.Fold(fold.event, fold.train, fold.test, cache=new)
    with pytest.raises(ValueError, match=r"selection\.on\(cache\)"):
        dataclasses.replace(sel, content_id=new.content_id)
    # The same generation: still fine (with_dev replaces the parts).
    assert dataclasses.replace(fold, cache=old).train.content_id == old.content_id
    assert len(fold.with_dev(0.2).dev)


def test_select_refuses_ids_and_labels_it_would_change(tmp_path) -> None:
    """The bug: ``select`` cast its inputs silently: float ids were
    truncated (a tweet id does not survive float64: another id, or another
    thread), labels wrapped into int8 (300 became 44) or were truncated
    (0.7 became 0), and a path raised AttributeError."""
    socialctx.build(socialctx.sample_corpus(), tmp_path / "c", progress=False)
    cache = socialctx.open(tmp_path / "c")
    ids = cache.source_ids[:3].astype(np.int64)
    with pytest.raises(TypeError, match="source ids must be integers"):
        socialctx.select(cache, ids.astype(np.float64) + 0.5)
    with pytest.raises(ValueError, match="int8"):
        socialctx.select(cache, ids, [300, 1, 0])
    with pytest.raises(TypeError, match="labels must be integers"):
        socialctx.select(cache, ids, [0.7, 1, 0])
    with pytest.raises(TypeError, match=r"socialctx\.open"):
        socialctx.select(str(tmp_path / "c"), ids)  # type: ignore[arg-type]
    # Integers of any width, strings of digits (id_str) and booleans as labels: taken.
    sel = socialctx.select(cache, [str(i) for i in ids.tolist()], np.array([1, 0, 1], np.uint8))
    assert sel.positions.tolist() == [0, 1, 2] and sel.labels.tolist() == [1, 0, 1]
    assert socialctx.select(cache, ids.astype(np.uint64), [True, False, True]).labels.tolist() == [
        1,
        0,
        1,
    ]


def test_a_state_records_the_embedding_models_and_refuses_others(tmp_path) -> None:
    """The bug: a state saved while training on store "r" of model A,
    loaded into a dataset after "r" was re-embedded with model B, resumed
    silently: the epoch's rest fed the model B's rows (the state recorded
    the definition of the values, not the models of the rows)."""
    import warnings

    socialctx.build(socialctx.sample_corpus(), tmp_path / "c", progress=False)
    cache = socialctx.open(tmp_path / "c")

    def model(v: float):
        return lambda b: np.full((len(b), 2), v, np.float32)

    socialctx.embed(cache, model(1.0), name="r", model_id="A", progress=False)
    ds = CacheDataset(cache, range(len(cache)), 4, seed=0, embeddings=["r"])
    it = iter(ds)
    next(it)
    state = ds.state_dict()
    assert state["plan"]["models"] == {"r": "A"}
    # The same model: resumed.
    CacheDataset(cache, range(len(cache)), 4, seed=0, embeddings=["r"]).load_state_dict(state)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        socialctx.embed(cache, model(2.0), name="r", model_id="B", progress=False)
    for emb in (["r"], {"r": "B"}):
        fresh = CacheDataset(cache, range(len(cache)), 4, seed=0, embeddings=emb)
        with pytest.raises(ValueError, match="model 'A' there, 'B' here"):
            fresh.load_state_dict(state)
    fresh = CacheDataset(
        cache, range(len(cache)), 4, seed=0, embeddings=["r"], resume_across_definition=True
    )
    with pytest.warns(UserWarning, match="other models"):
        fresh.load_state_dict(state)
    # A state saved before the models were recorded: resumed as before.
    old = {**state, "plan": {k: v for k, v in state["plan"].items() if k != "models"}}
    CacheDataset(cache, range(len(cache)), 4, seed=0, embeddings=["r"]).load_state_dict(old)


def test_the_bindings_readers_refuse_another_generations_positions(nightly: Nightly) -> None:
    """The bug: the Rust classes took a Fold's tagged positions with the
    cache of the next generation (the torch datasets refused them):
    ``Loader.epoch/plan/fill/lengths``, ``FeatureStats.compute`` and
    ``Cache.to_arrow`` read other threads, silently."""
    old = nightly.open()
    fold = next(f for f in socialctx.folds(old) if len(f.train) >= 4)
    nightly.rebuild(delete=[int(old.source_ids[0])])
    new = nightly.open()
    loader = socialctx.Loader(new)
    train, labels = fold.train, fold.train_labels
    calls = {
        "epoch": lambda p: next(iter(loader.epoch(p, 4, seed=0))),
        "plan": lambda p: loader.plan(p, 4, seed=0),
        "lengths": lambda p: loader.lengths(p),
        "fill": lambda p: loader.fill(p[:4], loader.new_batch(4)),
        "stats": lambda p: socialctx.FeatureStats.compute(new, p),
        "to_arrow": lambda p: new.to_arrow(level="threads", positions=p),
    }
    for call in calls.values():
        with pytest.raises(socialctx.CacheError, match=r"fold\.on\(cache\)"):
            call(train)
        call(fold.on(new).train)  # the same threads on this generation: taken
        call(np.asarray(train))  # untagged: the caller's word, as before
    with pytest.raises(socialctx.CacheError, match="labels"):
        loader.fill(np.asarray(train[:4]), loader.new_batch(4), labels[:4])
