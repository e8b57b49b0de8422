"""A training state across a *definition* change (issue 42, red team D4):
a state records the definition digest of the values it trained on; a
cache rebuilt by another socialctx version (other values) is refused even
with ``resume_across_rebuild=True`` unless ``resume_across_definition=True``
asks, and then resumes with a warning and ``ds.resumed`` naming both
digests. The upgrade is simulated in a child process
(``SOCIALCTX_TEST_DEFINITION``, as test_definition.py)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

if os.environ.get("SOCIALCTX_REQUIRE_TORCH"):
    import torch
else:
    torch = pytest.importorskip("torch")

import socialctx  # noqa: E402
from socialctx.torch import CacheDataset  # noqa: E402

HOOK = "SOCIALCTX_TEST_DEFINITION"


def _build(cache: Path, version: int) -> None:
    env = {k: v for k, v in os.environ.items() if k != HOOK}
    if version:
        env[HOOK] = str(version)
    code = (
        "import sys, socialctx\n"
        "socialctx.build(socialctx.sample_corpus(), sys.argv[1], progress=False)\n"
    )
    subprocess.run([sys.executable, "-c", code, str(cache)], env=env, check=True)


def _roundtrip(state):
    buf = io.BytesIO()
    torch.save({"data": state}, buf)
    buf.seek(0)
    return torch.load(buf, weights_only=True)["data"]


@pytest.fixture()
def upgraded(tmp_path: Path):
    """A state after 2 of an epoch's batches, and the cache rebuilt since
    by another version of the library (same corpus, other values)."""
    cache = tmp_path / "cache"
    _build(cache, 0)
    old = socialctx.open(cache)
    ds = CacheDataset(old, range(len(old)), 4, seed=0)
    it = iter(ds)
    next(it)
    next(it)
    state = _roundtrip(ds.state_dict())
    _build(cache, 1)
    new = socialctx.open(cache)
    assert new.manifest["definition"] != socialctx.DEFINITION
    return state, new, len(old)


def test_a_state_records_its_definition(upgraded) -> None:
    state, _, _ = upgraded
    assert state["plan"]["definition"] == socialctx.DEFINITION


def test_a_state_of_another_definition_is_refused_across_a_rebuild(upgraded) -> None:
    state, new, _ = upgraded
    ds = CacheDataset(new, range(len(new)), 4, seed=0, resume_across_rebuild=True)
    with pytest.raises(ValueError, match="another definition") as e:
        ds.load_state_dict(state)
    msg = str(e.value)
    assert socialctx.DEFINITION in msg and new.manifest["definition"] in msg, msg
    assert "resume_across_definition=True" in msg and "start afresh" in msg, msg


def test_an_explicit_resume_across_a_definition_warns_and_says_so(upgraded) -> None:
    state, new, n = upgraded
    ds = CacheDataset(
        new,
        range(len(new)),
        4,
        seed=0,
        resume_across_rebuild=True,
        resume_across_definition=True,
    )
    with pytest.warns(UserWarning, match="another definition"):
        ds.load_state_dict(state)
    assert ds.resumed is not None
    assert ds.resumed["from_definition"] == socialctx.DEFINITION
    assert ds.resumed["definition"] == new.manifest["definition"]
    rest = sum(len(item["source_ids"]) for item in ds)
    assert ds.resumed["trained"] + rest == n


def test_a_state_without_a_definition_resumes_on_its_own_generation(tmp_path) -> None:
    cache = tmp_path / "cache"
    _build(cache, 0)
    c = socialctx.open(cache)
    ds = CacheDataset(c, range(len(c)), 4, seed=0)
    it = iter(ds)
    next(it)
    state = ds.state_dict()
    del state["plan"]["definition"]  # saved by a version before it was recorded
    again = CacheDataset(c, range(len(c)), 4, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again.load_state_dict(state)
    assert len(again) == len(ds) - 1
    state["plan"]["definition"] = 12
    with pytest.raises(ValueError, match="damaged"):
        CacheDataset(c, range(len(c)), 4, seed=0).load_state_dict(state)


def test_a_dataset_refuses_statistics_of_another_definition(tmp_path) -> None:
    cache = tmp_path / "cache"
    _build(cache, 0)
    stats = socialctx.FeatureStats.compute(socialctx.open(cache))
    _build(cache, 1)
    with pytest.raises(socialctx.Error, match="another version of socialctx"):
        CacheDataset(socialctx.open(cache), range(4), 2, stats=stats)


def test_a_state_without_a_definition_warns_across_a_rebuild(upgraded) -> None:
    """Red team of issue 42: a state saved before definitions were recorded,
    resumed across a rebuild, cannot be checked against the new values: it
    resumes (resume_across_rebuild asks) but never silently."""
    state, new, n = upgraded
    del state["plan"]["definition"]
    ds = CacheDataset(new, range(n), 4, seed=0, resume_across_rebuild=True)
    with pytest.warns(UserWarning, match="does not record the definition") as w:
        ds.load_state_dict(state)
    assert new.manifest["definition"] in str(w[0].message)
    rest = sum(len(item["source_ids"]) for item in ds)
    assert ds.resumed["trained"] + rest == n
