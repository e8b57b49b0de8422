"""The sample corpus that ships with the package (``socialctx build --sample``,
``socialctx.sample_corpus()``): every file of the clone's data-samples/corpus,
byte for byte, in the installed package (in CI: the wheel), and the command's
usage around it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import socialctx
from conftest import REPO


def _files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def test_the_installed_sample_is_the_clones_sample_byte_for_byte() -> None:
    shipped = socialctx.sample_corpus()
    clone = REPO / "data-samples" / "corpus"
    ours, theirs = _files(shipped), _files(clone)
    assert len(theirs) > 500
    missing = sorted(set(theirs) - set(ours))
    assert not missing, f"not in the package: {missing[:5]} ({len(missing)})"
    assert sorted(set(ours) - set(theirs)) == []
    assert [k for k in theirs if ours[k] != theirs[k]] == []


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "socialctx", *args], cwd=cwd, capture_output=True, text=True
    )


def test_build_sample_builds_the_sample_into_cache(tmp_path: Path) -> None:
    r = _cli("build", "--sample", "c", "--quiet", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert f"corpus     {socialctx.sample_corpus()}" in r.stdout
    assert "threads    38" in r.stdout
    cache = socialctx.open(tmp_path / "c")
    assert len(cache) == 38


@pytest.mark.parametrize(
    "args,message",
    [
        (["build", "--sample"], "the following required arguments were not provided:\n  <CACHE>\n"),
        (["build", "--sample", "a", "b"], "--sample takes the place of CORPUS"),
        (["build", "only-one"], "the following required arguments were not provided:\n  <CACHE>\n"),
        (["build"], "the following required arguments were not provided:\n  <CORPUS>\n  <CACHE>\n"),
    ],
)
def test_build_usage_errors_around_sample(args: list[str], message: str, tmp_path: Path) -> None:
    r = _cli(*args, cwd=tmp_path)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert message in r.stderr
    assert "Usage: socialctx build [OPTIONS] (CORPUS | --sample) CACHE" in r.stderr
    assert list(tmp_path.iterdir()) == [], "a usage error wrote something"
