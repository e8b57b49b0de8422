"""A nightly embed reads only the segments changed since they were last
verified (the record ``.NAME.verified`` beside the store, issue 47), and
damage is still caught: by ``verify=True``, by ``verify_store`` and by every
reader. The Rust tests (``tests/it/store_verified.rs``) cover the record's
rules (racy-clean, a kill before it, mangled records); these the Python
surface."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import socialctx
from embed_helpers import Model, _a_changed_night


def _night(cache: socialctx.Cache, **kw: object) -> socialctx.EmbedSummary:
    return socialctx.embed(
        cache, Model(), field="reply", name="r", batch_size=16, model_id="toy-1", **kw
    )


def _corrupt_keeping_mtime(path: Path) -> None:
    st = path.stat()
    data = bytearray(path.read_bytes())
    data[-1] ^= 1
    path.write_bytes(bytes(data))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def test_a_nightly_reads_only_what_changed_and_verify_reads_all(tmp_path):
    _, cache = _a_changed_night(tmp_path, 2)
    store = Path(cache.derived_dir) / "embeddings/r"
    assert (store.parent / ".r.verified").is_file()
    # The previous store's one segment was verified when it was written.
    first = _night(cache)
    assert (first.segments_read, first.reused > 0) == (0, True)
    again = _night(cache)
    assert again.segments_read == 0
    assert _night(cache, verify=True).segments_read == len(list(store.glob("seg-*.npy")))
    assert socialctx.verify_store(cache, "r")["name"] == "r"


def test_damage_is_caught_by_the_nightly_readers_and_verify_store(tmp_path):
    _, cache = _a_changed_night(tmp_path, 2)
    _night(cache)
    store = Path(cache.derived_dir) / "embeddings/r"
    seg = store / "seg-00000.npy"
    _corrupt_keeping_mtime(seg)
    # Every reader refuses it, and verify_store names the file.
    with pytest.raises(socialctx.EmbeddingError, match="seg-00000.npy.*checksum mismatch"):
        socialctx.open_store(cache, "r")
    with pytest.raises(socialctx.EmbeddingError, match="seg-00000.npy.*checksum mismatch"):
        socialctx.verify_store(cache, "r")
    assert not (store.parent / ".r.verified").exists(), "the record is dropped"
    # The nightly reads it (its ctime moved), names it and recomputes.
    with pytest.warns(UserWarning, match="checksum mismatch"):
        night = _night(cache)
    assert night.not_reused and "seg-00000.npy" in night.not_reused
    assert night.new == night.unique
    socialctx.open_store(cache, "r")


def test_a_mangled_record_costs_a_full_verification_only(tmp_path):
    _, cache = _a_changed_night(tmp_path, 2)
    record = Path(cache.derived_dir) / "embeddings/.r.verified"
    for mangled in (b"", b"\xff\x00", b'{"format": "socialctx-embeddings-verified"}', b"[1e999]"):
        record.write_bytes(mangled)
        night = _night(cache)
        assert night.segments_read >= 1 and night.not_reused is None, mangled
        socialctx.open_store(cache, "r")


def test_verify_store_of_a_missing_store_names_it(tmp_path):
    _, cache = _a_changed_night(tmp_path, 0)
    with pytest.raises(socialctx.EmbeddingError, match="nope"):
        socialctx.verify_store(cache, "nope")
    with pytest.raises(ValueError, match="store name"):
        socialctx.verify_store(cache, "../r")


def test_the_command_says_what_it_read_and_verify_reads_all(tmp_path):
    _, cache = _a_changed_night(tmp_path, 2)
    (tmp_path / "toymodel.py").write_text(
        "import numpy as np\nfrom embed_helpers import toy\n"
        "def embed(batch):\n    return np.stack([toy(t) for t in batch])\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), str(tmp_path)])}

    def cli(*extra: str) -> str:
        args = ["embed", cache.path, "--model", "toymodel:embed", "--name", "r"]
        r = subprocess.run(
            [sys.executable, "-m", "socialctx", *args, "--model-id", "toy-1", "-q", *extra],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env=env,
            timeout=120,
        )
        assert r.returncode == 0, r.stderr
        return r.stdout

    assert "verified   0 segments of the previous store read (the others" in cli()
    assert "verified   2 segments of the previous store read (all: --verify)" in cli("--verify")
