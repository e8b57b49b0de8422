"""The definition digest from Python (issue 42): ``info`` (dict and text),
``to_arrow``'s schema metadata and a Parquet file written from it,
``describe``, and an incremental build after a simulated upgrade
(``SOCIALCTX_TEST_DEFINITION`` in a child process: another version of the
library without a second build)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import socialctx
from socialctx._info import info, info_text

HOOK = "SOCIALCTX_TEST_DEFINITION"


def _build_as(version: int, cache: Path, incremental: bool) -> dict[str, object]:
    """Builds the sample corpus into ``cache`` in a child process that is
    library version ``version`` (0: this one); its summary's fields."""
    code = (
        "import json, sys, socialctx\n"
        "s = socialctx.build(socialctx.sample_corpus(), sys.argv[1], progress=False,"
        " incremental=sys.argv[2] == '1')\n"
        "print(json.dumps({'incremental': s.incremental, 'reused': s.reused,"
        " 'definition': socialctx.DEFINITION}))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != HOOK}
    if version:
        env[HOOK] = str(version)
    out = subprocess.run(
        [sys.executable, "-c", code, str(cache), "1" if incremental else "0"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, object] = json.loads(out.stdout)
    return result


def test_info_names_the_definition(tmp_path: Path) -> None:
    cache_dir = tmp_path / "cache"
    socialctx.build(socialctx.sample_corpus(), cache_dir, progress=False)
    assert len(socialctx.DEFINITION) == 16
    d = info(cache_dir)
    assert d["definition"] == socialctx.DEFINITION and d["definition_current"]
    assert f"definition {socialctx.DEFINITION} (this library's)" in info_text(d)


def test_arrow_parquet_and_describe_name_the_definition(tmp_path: Path) -> None:
    # The describe extra; the test command's own venv has only the test
    # extra, where this skips with the module's name like test_arrow.py.
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    cache_dir = tmp_path / "cache"
    socialctx.build(socialctx.sample_corpus(), cache_dir, progress=False)
    cache = socialctx.open(cache_dir)
    table = pa.table(cache.to_arrow(level="threads"))
    meta = table.schema.metadata or {}
    assert meta[b"socialctx.definition"] == socialctx.DEFINITION.encode()
    pq.write_table(table, tmp_path / "t.parquet")
    kept = pq.read_schema(tmp_path / "t.parquet").metadata or {}
    assert kept[b"socialctx.definition"] == socialctx.DEFINITION.encode()

    from socialctx.describe import describe

    desc = describe(cache)
    assert json.loads(desc.json())["definition"] == socialctx.DEFINITION
    assert f"definition {socialctx.DEFINITION}" in desc.text()


def test_an_incremental_build_after_an_upgrade_builds_in_full_and_says_why(
    tmp_path: Path,
) -> None:
    cache_dir = tmp_path / "cache"
    old = _build_as(0, cache_dir, incremental=True)
    assert old["definition"] == socialctx.DEFINITION
    new = _build_as(1, cache_dir, incremental=True)
    assert new["definition"] != old["definition"]
    note = str(new["incremental"])
    assert note.startswith("full build: definition changed"), note
    assert str(old["definition"]) in note and str(new["definition"]) in note
    assert new["reused"] == 0
    # info from this (older) library: the cache is of another definition.
    d = info(cache_dir)
    assert d["definition"] == new["definition"] and not d["definition_current"]
    assert f"this library computes {socialctx.DEFINITION}" in info_text(d)
    # The new version reuses its own cache.
    again = _build_as(1, cache_dir, incremental=True)
    assert "nothing changed" in str(again["incremental"]), again
