"""What normalisation statistics were computed over (issue 42, red team
D3): ``stats --save`` and ``FeatureStats.compute`` record the definition
digest of the values and the cache generation; a Loader refuses
statistics of another definition (an upgrade changed the values: they
would standardise other numbers without a word), takes those of another
generation of the same definition (last night's statistics) and warns on
a file saved before they were recorded."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import socialctx
from socialctx import cli

HOOK = "SOCIALCTX_TEST_DEFINITION"


def _build(corpus: Path, cache: Path, version: int = 0) -> None:
    """Builds ``corpus`` into ``cache`` in a child process that is library
    version ``version`` (0: this one; else a simulated upgrade)."""
    env = {k: v for k, v in os.environ.items() if k != HOOK}
    if version:
        env[HOOK] = str(version)
    code = "import sys, socialctx\nsocialctx.build(sys.argv[1], sys.argv[2], progress=False)\n"
    subprocess.run([sys.executable, "-c", code, str(corpus), str(cache)], env=env, check=True)


@pytest.fixture()
def corpus(tmp_path: Path) -> Path:
    out = tmp_path / "corpus"
    shutil.copytree(socialctx.sample_corpus(), out)
    return out


def _saved(tmp_path: Path, cache: Path) -> Path:
    path = tmp_path / "stats.json"
    assert cli.main(["stats", str(cache), "--save", str(path)]) == 0
    return path


def _no_warnings(fn):  # type: ignore[no-untyped-def]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return fn()


def test_stats_save_records_the_definition_and_the_generation(tmp_path, corpus, capfd):
    cache_dir = tmp_path / "cache"
    _build(corpus, cache_dir)
    path = _saved(tmp_path, cache_dir)
    cache = socialctx.open(cache_dir)
    over = json.loads(path.read_text())["computed_over"]
    assert over == {
        "definition": socialctx.DEFINITION,
        "content_id": cache.content_id,
        "kinds": "replies",
        "window_s": None,
    }
    assert socialctx.DEFINITION in capfd.readouterr().err
    s = socialctx.FeatureStats.load(path)
    assert (s.definition, s.content_id, s.kinds) == (
        socialctx.DEFINITION,
        cache.content_id,
        "replies",
    )
    c = socialctx.FeatureStats.compute(cache, kinds="both", window_s=60.0)
    assert (c.definition, c.content_id, c.kinds, c.window_s) == (
        socialctx.DEFINITION,
        cache.content_id,
        "both",
        60.0,
    )
    again = pickle.loads(pickle.dumps(c))
    assert (again.definition, again.content_id, again.window_s) == (
        c.definition,
        c.content_id,
        60.0,
    )
    # Its own cache: no word.
    _no_warnings(lambda: socialctx.Loader(cache, stats=s))


def test_a_loader_refuses_statistics_of_another_definition(tmp_path, corpus):
    cache_dir = tmp_path / "cache"
    _build(corpus, cache_dir)
    stats = socialctx.FeatureStats.load(_saved(tmp_path, cache_dir))
    _build(corpus, cache_dir, version=1)  # the library upgraded: other values
    cache = socialctx.open(cache_dir)
    theirs = cache.manifest["definition"]
    assert theirs != socialctx.DEFINITION
    with pytest.raises(socialctx.Error) as e:
        socialctx.Loader(cache, stats=stats)
    msg = str(e.value)
    assert socialctx.DEFINITION in msg and theirs in msg, msg
    assert "recompute" in msg and str(cache_dir) in msg, msg
    # Statistics computed over the new values are fine.
    _no_warnings(lambda: socialctx.Loader(cache, stats=socialctx.FeatureStats.compute(cache)))


def test_statistics_of_another_generation_of_the_same_definition_are_taken(tmp_path, corpus):
    cache_dir = tmp_path / "cache"
    _build(corpus, cache_dir)
    stats = socialctx.FeatureStats.load(_saved(tmp_path, cache_dir))
    # The nightly: a thread deleted, the cache rebuilt.
    thread = next(p for p in corpus.rglob("*") if p.is_dir() and p.name.isdigit())
    shutil.rmtree(thread)
    _build(corpus, cache_dir)
    cache = socialctx.open(cache_dir)
    assert cache.content_id != stats.content_id
    loader = _no_warnings(lambda: socialctx.Loader(cache, stats=stats))
    batch = loader.new_batch(2)
    loader.fill([0, 1], batch)


def test_old_statistics_files_are_taken_with_a_warning(tmp_path, corpus):
    cache_dir = tmp_path / "cache"
    _build(corpus, cache_dir)
    path = _saved(tmp_path, cache_dir)
    old = json.loads(path.read_text())
    del old["computed_over"]
    path.write_text(json.dumps(old))
    stats = socialctx.FeatureStats.load(path)
    assert stats.definition is None and stats.content_id is None
    cache = socialctx.open(cache_dir)
    with pytest.warns(UserWarning, match="saved before socialctx recorded") as w:
        socialctx.Loader(cache, stats=stats)
    assert "stats" in str(w[0].message) and "--save" in str(w[0].message)


@pytest.mark.parametrize(
    "over",
    [
        {"definition": 7, "content_id": "x", "kinds": "replies", "window_s": None},
        {"definition": "abc"},
        "not an object",
    ],
)
def test_hand_edited_provenance_is_refused_naming_the_file(tmp_path, corpus, over):
    cache_dir = tmp_path / "cache"
    _build(corpus, cache_dir)
    path = _saved(tmp_path, cache_dir)
    d = json.loads(path.read_text())
    d["computed_over"] = over
    path.write_text(json.dumps(d))
    with pytest.raises(socialctx.Error, match="stats.json"):
        socialctx.FeatureStats.load(path)


def test_a_hand_edited_definition_is_refused_by_the_loader(tmp_path, corpus):
    cache_dir = tmp_path / "cache"
    _build(corpus, cache_dir)
    path = _saved(tmp_path, cache_dir)
    d = json.loads(path.read_text())
    d["computed_over"]["definition"] = "0123456789abcdef"
    path.write_text(json.dumps(d))
    with pytest.raises(socialctx.Error, match="0123456789abcdef"):
        socialctx.Loader(socialctx.open(cache_dir), stats=socialctx.FeatureStats.load(path))
