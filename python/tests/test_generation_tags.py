"""Positions and rows that name their generation or model (issue 42,
item 4 and item 3), found by the red team of 2026-12-06: a Fold's parts
and labels given with the cache of the next generation were accepted (24
of 24 positions named other threads, 14 labels wrong), and an
EmbeddingTable could not require the model a Loader required (it gathered
the re-embedded model's rows for the first model's index)."""

from __future__ import annotations

import os
import pickle

import numpy as np
import pytest

if os.environ.get("SOCIALCTX_REQUIRE_TORCH"):
    import torch
else:
    torch = pytest.importorskip("torch")

from test_torch_nightly import Nightly  # noqa: E402

import socialctx  # noqa: E402
from socialctx.torch import CacheDataset, EmbeddingTable, GraphDataset  # noqa: E402


@pytest.fixture()
def nightly(tmp_path) -> Nightly:
    return Nightly(tmp_path)


def _fold(cache: socialctx.Cache) -> socialctx.Fold:
    return next(f for f in socialctx.folds(cache) if len(f.train) and len(f.test))


def test_a_folds_parts_are_refused_by_the_next_generation(nightly: Nightly) -> None:
    old = nightly.open()
    fold = _fold(old)
    nightly.rebuild(delete=[int(old.source_ids[0])])
    new = nightly.open()
    # The same positions name other threads now.
    assert (old.source_ids[fold.train] != new.source_ids[fold.train]).any()
    for cls in (CacheDataset, GraphDataset):
        with pytest.raises(socialctx.CacheError, match=r"fold\.on\(cache\)"):
            cls(new, fold.train, 4, labels=fold.train_labels)
        with pytest.raises(socialctx.CacheError, match="labels"):
            cls(new, np.asarray(fold.train), 4, labels=fold.train_labels)
        # Slices, and a pickled copy (a worker, a checkpoint), keep the tag.
        with pytest.raises(socialctx.CacheError, match="positions"):
            cls(new, pickle.loads(pickle.dumps(fold.test[:5])), 4)
        # By path: the tag names the generation, which is gone; the
        # message names the fix (it said "rebuilt" before the red team's
        # second pass), pickled or not.
        for train in (fold.train, pickle.loads(pickle.dumps(fold.train))):
            with pytest.raises(socialctx.CacheError, match=r"fold\.on\(cache\)"):
                cls(str(nightly.cache), train, 4)
    # fold.on(cache): the same threads on this generation, accepted.
    moved = fold.on(new)
    ds = CacheDataset(new, moved.train, 4, labels=moved.train_labels)
    got = sorted(s for it in ds for s in it["source_ids"].tolist())
    gone = int(old.source_ids[0])
    assert got == sorted(s for s in old.source_ids[fold.train].tolist() if s != gone)


def test_a_folds_parts_with_its_own_generation_and_path_are_accepted(nightly: Nightly) -> None:
    cache = nightly.open()
    fold = _fold(cache)
    # A path with the fold's positions: the tag names the generation.
    ds = CacheDataset(nightly.cache, fold.train, 4, labels=fold.train_labels)
    assert sorted(s for it in ds for s in it["source_ids"].tolist()) == sorted(
        cache.source_ids[fold.train].tolist()
    )
    assert fold.train.content_id == cache.content_id
    assert fold.train_labels.content_id == cache.content_id


def test_an_embedding_table_requires_the_model_a_loader_requires(nightly: Nightly) -> None:
    cache = nightly.open()

    def model(salt: float):
        return lambda b: np.stack([np.array([salt, len(x)], np.float32) for x in b])

    socialctx.embed(cache, model(1.0), name="r", model_id="A", progress=False)
    EmbeddingTable(cache, "r", model_id="A")
    socialctx.embed(cache, model(2.0), name="r", model_id="B", progress=False)
    with pytest.raises(socialctx.EmbeddingError, match="A"):
        EmbeddingTable(cache, "r", model_id="A")
    table = EmbeddingTable(cache, "r", model_id="B")
    assert set(table.rows[:-1, 0].tolist()) == {2.0}
