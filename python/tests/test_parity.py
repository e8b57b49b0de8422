"""Features through Python equal the oracle's and the Rust dump's, bit for bit."""

from __future__ import annotations

import json
import subprocess

import numpy as np
import pytest

import socialctx
from conftest import CORPORA, REPO, binary, jsonl


def bits(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float32).view(np.uint32)


@pytest.mark.parametrize("name", sorted(CORPORA))
@pytest.mark.parametrize("validate", ["lazy", "all"])
def test_features_equal_the_oracle(built, name, validate):
    _, replies, everything = CORPORA[name]
    cache = socialctx.open(built[name], validate=validate)
    for path, retweets in [(replies, False), (everything, True)]:
        if path is None:
            continue
        expected = jsonl(REPO / path)
        assert len(expected) == len(cache)
        for line in expected:
            t = cache.get(int(line["source_id"]))
            assert t is not None, line["source_id"]
            assert t.label == line["label"]
            keep = np.ones(len(t), dtype=bool) if retweets else t.kinds == 1
            want = [r["features"] for r in line["reactions"]]
            got = t.features[keep]
            assert got.shape == (len(want), 28)
            if want:
                assert np.array_equal(bits(got), bits(want)), (name, line["source_id"])
            assert [str(i) for i in t.reaction_ids[keep]] == [r["id"] for r in line["reactions"]]
            assert t.created_at[keep].tolist() == [r["created_at"] for r in line["reactions"]]


@pytest.mark.parametrize("name", sorted(CORPORA))
def test_features_equal_the_rust_dump(built, name):
    out = subprocess.run(
        [binary("dump"), built[name], "--retweets"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    cache = socialctx.open(built[name])
    lines = [json.loads(line) for line in out.splitlines()]
    assert [int(line["source_id"]) for line in lines] == cache.source_ids.tolist()
    for t, line in zip(cache, lines):
        want = [r["features"] for r in line["reactions"]]
        assert t.features.shape == (len(want), 28)
        if want:
            assert np.array_equal(bits(t.features), bits(want))
        assert t.kinds.tolist() == [1 if r["kind"] == "reply" else 0 for r in line["reactions"]]


def test_python_build_writes_the_same_bytes_as_precache(tmp_path):
    corpus = REPO / "data-samples/corpus"
    socialctx.build(corpus, tmp_path / "py", workers=2, progress=False)
    subprocess.run(
        [binary("precache"), corpus, tmp_path / "rs", "--threads", "2", "--quiet"],
        check=True,
        capture_output=True,
    )
    names = sorted(p.name for p in (tmp_path / "rs").iterdir())
    assert names == sorted(p.name for p in (tmp_path / "py").iterdir())
    assert "manifest.json" in names
    for n in names:
        assert (tmp_path / "py" / n).read_bytes() == (tmp_path / "rs" / n).read_bytes(), n


def test_cache_metadata(built):
    cache = socialctx.open(built["sample"])
    assert cache.feature_names == socialctx.FEATURE_NAMES
    assert len(cache.feature_names) == socialctx.NUM_FEATURES == 28
    assert cache.reaction_columns[0] == "depth" and "veracity" in cache.thread_columns
    m = cache.manifest
    assert m["threads"] == len(cache) and m["format_version"] == socialctx.FORMAT_VERSION
    report = cache.report
    assert len(report) == m["skipped"] > 0
    assert isinstance(report[0], socialctx.BadInput) and report[0].path and report[0].reason
    bad = {
        json.loads(line)["bad"]
        for line in (REPO / "data-samples/bad.jsonl").read_text().splitlines()
    }
    assert {r.path for r in report} == bad
    ids = cache.source_ids
    assert ids.dtype == np.uint64 and np.all(np.diff(ids.astype(np.float64)) > 0)
    labels = cache.labels
    assert labels.dtype == np.int8
    assert labels.tolist() == [t.label_code for t in cache]
    assert set(labels.tolist()) <= {-1, 0, 1}


def test_indexing_and_lookup(built):
    cache = socialctx.open(built["golden"])
    n = len(cache)
    assert cache[-1].source_id == cache[n - 1].source_id
    assert cache[-n].source_id == cache[0].source_id
    for i in (n, -n - 1):
        with pytest.raises(IndexError):
            cache[i]
    t = cache[3]
    assert cache.position(t.source_id) == 3 == t.position
    assert cache.get(t.source_id).source_id == t.source_id
    assert cache.get(12345) is None and cache.position(12345) is None
    assert [x.source_id for x in cache] == cache.source_ids.tolist()
    assert len(t.texts) == len(t.descriptions) == len(t)
    assert isinstance(t.source_text, str) and isinstance(t.event, str)
