"""``socialctx.build(..., incremental=True, changed=LIST)``: the command's
``--changed`` from Python (issue 47, item 2). A truthful list gives the
full build's bytes without a walk; a list that names nothing of the corpus
is walked and said; a bad list raises naming it; ``changed`` without
``incremental`` is refused."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import socialctx


def _files(cache: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in cache.iterdir() if p.is_file()}


@pytest.fixture()
def night(tmp_path: Path) -> tuple[Path, Path, Path]:
    corpus = tmp_path / "corpus"
    shutil.copytree(socialctx.sample_corpus(), corpus)
    cache = tmp_path / "cache"
    socialctx.build(corpus, cache, progress=False, incremental=True)
    reply = sorted(corpus.glob("**/reactions/*.json"))[0]
    reply.write_text(reply.read_text().replace('"text": "', '"text": "edited ', 1))
    return corpus, cache, reply


def test_a_truthful_list_is_the_full_build(night, tmp_path) -> None:
    corpus, cache, reply = night
    listed = tmp_path / "changed.txt"
    listed.write_text(str(reply.relative_to(corpus)) + "\n")
    s = socialctx.build(corpus, cache, progress=False, incremental=True, changed=listed)
    assert "change list" in s.incremental and "1 re-read" in s.incremental, s.incremental
    full = tmp_path / "full"
    socialctx.build(corpus, full, progress=False)
    assert _files(cache) == _files(full)


def test_a_list_naming_nothing_is_walked_and_said(night, tmp_path) -> None:
    corpus, cache, reply = night
    listed = tmp_path / "changed.txt"
    listed.write_text(f"corpus/{reply.relative_to(corpus)}\n")  # the crawler's folder
    s = socialctx.build(corpus, cache, progress=False, incremental=True, changed=listed)
    assert "not used" in s.incremental and "1 re-read" in s.incremental, s.incremental


def test_bad_lists_and_options_are_refused(night, tmp_path) -> None:
    corpus, cache, _ = night
    outside = tmp_path / "outside.txt"
    outside.write_text("/etc/passwd\n")
    with pytest.raises(socialctx.BuildError, match="outside.txt"):
        socialctx.build(corpus, cache, progress=False, incremental=True, changed=outside)
    with pytest.raises(socialctx.BuildError, match="missing.txt"):
        socialctx.build(
            corpus, cache, progress=False, incremental=True, changed=tmp_path / "missing.txt"
        )
    with pytest.raises(ValueError, match="incremental=True"):
        socialctx.build(corpus, cache, progress=False, changed=outside)
