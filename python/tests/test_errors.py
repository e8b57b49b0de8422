"""Every error type, with the file and the reason in its message."""

from __future__ import annotations

import json
import shutil

import pytest

import socialctx
from conftest import REPO


def copy(built, tmp_path, name="golden"):
    dst = tmp_path / "cache"
    shutil.copytree(built[name], dst)
    return dst


def test_hierarchy():
    assert issubclass(socialctx.CacheError, socialctx.Error)
    assert issubclass(socialctx.BuildError, socialctx.Error)
    assert issubclass(socialctx.BadInputError, socialctx.BuildError)
    assert issubclass(socialctx.Error, Exception)


def test_missing_cache(tmp_path):
    with pytest.raises(socialctx.CacheError, match="no cache at"):
        socialctx.open(tmp_path / "nothing")
    with pytest.raises(ValueError, match="validate"):
        socialctx.open(tmp_path, validate="some")


@pytest.mark.parametrize("validate", ["lazy", "all"])
def test_damaged_shard_names_the_file(built, tmp_path, validate):
    cache_dir = copy(built, tmp_path)
    shard = cache_dir / "shard-00000.rkyv"
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF
    shard.write_bytes(bytes(data))
    with pytest.raises(socialctx.CacheError, match=r"shard-00000\.rkyv.*checksum"):
        cache = socialctx.open(cache_dir, validate=validate)
        _ = cache[0].features  # lazy: checked on first use


def test_wrong_version(built, tmp_path):
    cache_dir = copy(built, tmp_path)
    m = cache_dir / "manifest.json"
    manifest = json.loads(m.read_text())
    manifest["format_version"] = 99
    m.write_text(json.dumps(manifest))
    with pytest.raises(socialctx.CacheError, match="version 99"):
        socialctx.open(cache_dir)


def test_build_errors(tmp_path):
    with pytest.raises(socialctx.BuildError, match="does not exist"):
        socialctx.build(tmp_path / "no-corpus", tmp_path / "c", progress=False)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(socialctx.BuildError, match="no thread directories"):
        socialctx.build(empty, tmp_path / "c", progress=False)
    with pytest.raises(ValueError):
        socialctx.build(empty, tmp_path / "c", workers=0, progress=False)


def test_strict_bad_input(tmp_path):
    with pytest.raises(socialctx.BadInputError) as e:
        socialctx.build(REPO / "data-samples/corpus", tmp_path / "c", strict=True, progress=False)
    assert e.value.path.startswith("generated/") and e.value.reason
    assert e.value.path in str(e.value)
    assert not (tmp_path / "c").exists()
