"""Views are zero-copy, read-only, and keep the memory map alive."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import socialctx


def test_features_are_read_only_views_of_one_memory(built):
    cache = socialctx.open(built["golden"])
    t = next(t for t in cache if len(t) > 2)
    a, b = t.features, cache[t.position].features
    assert np.shares_memory(a, b)
    assert a.ctypes.data == b.ctypes.data
    assert not a.flags.writeable and a.flags.c_contiguous
    assert a.dtype == np.float32 and a.shape == (len(t), 28)
    assert isinstance(a.base, socialctx.Cache)
    with pytest.raises(ValueError):
        a[0, 0] = 1.0
    # Threads of one shard are consecutive in one mapping.
    nxt = cache[t.position + 1].features
    if len(nxt) and a.ctypes.data + a.nbytes == nxt.ctypes.data:
        assert True
    depth = t.column("depth")
    assert depth.dtype == np.float32 and depth.shape == (len(t),)
    assert not depth.flags.writeable and np.shares_memory(depth, t.column("depth"))


def test_views_outlive_the_cache_object(built):
    cache = socialctx.open(built["golden"])
    t = next(t for t in cache if len(t) > 0)
    view, copy = t.features, t.features.copy()
    column = t.column("persistence")
    column_copy = column.copy()
    del cache, t
    gc.collect()
    assert np.array_equal(view, copy)
    assert np.array_equal(column, column_copy, equal_nan=True)


def test_thread_values_and_columns(built):
    cache = socialctx.open(built["pheme-veracity"])
    values = [t.value("veracity") for t in cache]
    assert any(v is not None for v in values)
    assert all(v in (None, 0.0, 1.0, 2.0) for v in values)
    with pytest.raises(KeyError):
        cache[0].value("nope")
    with pytest.raises(KeyError):
        cache[0].column("nope")


def test_an_open_cache_keeps_its_generation_through_a_rebuild(tmp_path):
    from conftest import REPO

    out = tmp_path / "c"
    socialctx.build(REPO / "tests/fixtures/golden/corpus", out, progress=False)
    old = socialctx.open(out)  # lazy: nothing but the manifest read yet
    shards = old.manifest["shards"]
    socialctx.build(REPO / "data-samples/corpus", out, progress=False)
    new = socialctx.open(out)
    assert len(new) != len(old) and new.manifest["shards"] != shards
    # Every thread of the old generation, none of them touched before.
    for t in old:
        assert t.features.shape == (len(t), 28)
    assert old.source_ids.tolist() != new.source_ids.tolist()
