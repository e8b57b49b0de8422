"""Publishing a store while others read or build: an open never mixes two
stores, an embed never replaces what it must not (a build's staging, a
user's files, a read-only store)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import socialctx
from conftest import REPO
from embed_helpers import (
    Model,
    _a_changed_night,
    _fix_meta,
    _store_bytes,
    toy,
)


def test_open_store_never_mixes_a_store_swapped_in_after_its_check(tmp_path, monkeypatch):
    """Red team: ``open_store`` had the crate verify the store, then
    ``np.load``-ed its files again by path; a nightly rebuild + embed
    publishing in between gave the old metadata (one segment) with the new
    store's index, and 40 reactions silently read zeros or rows of other
    inputs. The files read must be the ones verified (or an error)."""
    corpus, cache = _a_changed_night(tmp_path, edits=0)
    old = socialctx.open(tmp_path / "cache")
    real = socialctx._socialctx._open_store
    swapped = []

    def nightly_in_between(c, name, **kw):
        out = real(c, name, **kw)
        if not swapped:
            swapped.append(1)
            for n, reply in enumerate(sorted(corpus.rglob("reactions/*.json"))[:3]):
                tweet = json.loads(reply.read_text())
                tweet["text"] = tweet["full_text"] = f"a reply of the next night {n}"
                reply.write_text(json.dumps(tweet))
            socialctx.build(corpus, tmp_path / "cache", progress=False, incremental=True)
            socialctx.embed(
                socialctx.open(tmp_path / "cache"),
                Model(),
                field="reply",
                name="r",
                batch_size=16,
                model_id="toy-1",
            )
        return out

    monkeypatch.setattr(socialctx._socialctx, "_open_store", nightly_in_between)
    try:
        store = socialctx.open_store(old, "r")
    except socialctx.EmbeddingError:
        return  # refusing is fine: the store is not the old content's any more
    want = np.stack(
        [toy(t) if t else np.zeros(4, np.float32) for th in old for t in th.reply_tokens]
    )
    assert len(store.index) == len(want)
    assert np.array_equal(store.rows(np.arange(len(want))), want)


def test_an_embed_refuses_while_a_build_holds_derived_in_its_staging(tmp_path):
    """Red team: a build killed between moving the old cache's derived/ into
    its staging directory and the swap leaves the stores there until the
    next build puts them back. The nightly embed that followed found no
    store, embedded every input again into a fresh derived/, and that store
    then kept every later build from putting derived/ back ("already has
    entries of those names"). The embed must refuse, naming the directory,
    and embed nothing; after the next build it reuses every row."""
    corpus, cache = _a_changed_night(tmp_path, edits=0)
    out = tmp_path / "cache"
    before = _store_bytes(cache, "r")
    staging = tmp_path / ".cache.tmp-4194000"  # a dead build's (as publish.rs names them)
    staging.mkdir()
    (out / "derived").rename(staging / "derived")
    model = Model()
    with pytest.raises(
        socialctx.EmbeddingError, match=r"\.cache\.tmp-4194000.*run the build again"
    ):
        socialctx.embed(cache, model, field="reply", name="r", batch_size=16, model_id="toy-1")
    assert model.calls == 0 and not (out / "derived").exists()
    socialctx.build(corpus, out, progress=False, incremental=True)
    assert not staging.exists() and _store_bytes(cache, "r") == before
    again = socialctx.embed(
        socialctx.open(out), Model(), field="reply", name="r", batch_size=16, model_id="toy-1"
    )
    assert again.calls == 0 and again.reused == again.unique


def test_a_nightly_embed_refuses_to_replace_a_store_holding_a_users_files(tmp_path):
    """Red team: a file the user put in derived/embeddings/<name>/ (notes,
    plots) was deleted with the old store by the next embed's swap, with
    exit 0. The embed must refuse, naming the file, before calling the
    model, and leave the store as it was."""
    _, cache = _a_changed_night(tmp_path, edits=2)
    d = Path(cache.derived_dir) / "embeddings/r"
    (d / "notes.txt").write_text("which model made this")
    before = _store_bytes(cache, "r")
    model = Model()
    with pytest.raises(socialctx.EmbeddingError, match=r"notes\.txt.*move them out"):
        socialctx.embed(cache, model, field="reply", name="r", batch_size=16, model_id="toy-1")
    assert model.calls == 0 and _store_bytes(cache, "r") == before
    (d / "notes.txt").unlink()
    night = socialctx.embed(
        cache, Model(), field="reply", name="r", batch_size=16, model_id="toy-1"
    )
    assert night.new == 2


def test_a_read_only_store_is_refused_before_anything_is_published(tmp_path):
    """Red team: with the store's directory read-only the exchange worked,
    removing the old store failed: exit 1 with the new store published, and
    every later embed failed on the read-only staging directory. Run without
    the power to override permissions (root has it: it is dropped)."""
    _, cache = _a_changed_night(tmp_path, edits=2)
    d = Path(cache.derived_dir) / "embeddings/r"
    before = _store_bytes(cache, "r")
    code = textwrap.dedent(f"""
        import numpy as np, socialctx
        socialctx.embed(socialctx.open({cache.path!r}), lambda b: np.ones((len(b), 4), np.float32),
                        field="reply", name="r", batch_size=16, model_id="toy-1")
    """)
    cmd = [sys.executable, "-c", code]
    if os.geteuid() == 0:
        if not shutil.which("setpriv"):
            pytest.skip("running as root without setpriv to drop CAP_DAC_OVERRIDE")
        cmd = ["setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner", *cmd]
    d.chmod(0o555)
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        assert r.returncode == 1 and "not writable" in r.stderr, r.stderr
        assert _store_bytes(cache, "r") == before
        assert not (d.parent / ".r.partial").exists()
    finally:
        d.chmod(0o755)
    night = socialctx.embed(
        cache, Model(), field="reply", name="r", batch_size=16, model_id="toy-1"
    )
    assert night.new == 2


_PUBLISHER = """
import ctypes, os, shutil, sys, time
libc = ctypes.CDLL(None, use_errno=True)
target, sources, end = sys.argv[1], sys.argv[2:4], time.time() + float(sys.argv[4])
new = os.path.join(os.path.dirname(target), ".r.new")
k = 0
while time.time() < end:
    # As an embed publishes: a new directory exchanged with the store
    # (renameat2 RENAME_EXCHANGE), the old one removed.
    shutil.copytree(sources[k % 2], new)
    if libc.renameat2(-100, new.encode(), -100, target.encode(), 2) != 0:
        sys.exit(f"renameat2: {os.strerror(ctypes.get_errno())}")
    shutil.rmtree(new)
    if k == 0:
        print("publishing", flush=True)
    k += 1
"""


def test_opening_a_store_while_embeds_publish_reads_one_store_or_says_so(tmp_path):
    """Red team: readers opened the store's files by path one by one, so an
    embed publishing meanwhile gave the old metadata with the new segments:
    "checksum mismatch (damaged store)" for a store that is fine (1 open in
    3,400 under nightly embeds; most opens under back-to-back swaps). Every
    open must read one whole store, or say that it was being replaced."""
    _, cache = _a_changed_night(tmp_path, edits=0)
    d = Path(cache.derived_dir) / "embeddings"
    socialctx.embed(cache, lambda b: np.stack([toy(t) * 2 + 1 for t in b]), name="alt")
    alt = d / "alt"
    meta = json.loads((alt / "meta.json").read_text())
    meta["name"] = "r"
    (alt / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    _fix_meta(alt)
    rows = [
        np.stack(
            [toy(t) if t else np.zeros(4, np.float32) for th in cache for t in th.reply_tokens]
        )
    ]
    rows.append(np.where(rows[0].any(1, keepdims=True), rows[0] * 2 + 1, 0))
    sources = [tmp_path / "one", tmp_path / "two"]
    shutil.copytree(d / "r", sources[0])
    alt.rename(sources[1])
    swapper = subprocess.Popen(
        [sys.executable, "-c", _PUBLISHER, str(d / "r"), *map(str, sources), "30"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert swapper.stdout is not None and swapper.stdout.readline() == "publishing\n"
        seen = {"whole": 0, "replaced": 0}
        end = time.monotonic() + 3
        while time.monotonic() < end:
            try:
                ld = socialctx.Loader(cache, embeddings=["r"], dense=True)
                store = socialctx.open_store(cache, "r")
            except socialctx.EmbeddingError as e:
                assert "replaced three times while being opened" in str(e), e
                seen["replaced"] += 1
                continue
            got = store.rows(np.arange(len(rows[0])))
            assert any(np.array_equal(got, r) for r in rows)
            batch = next(iter(ld.epoch([1], 1)))
            n = len(cache[1])
            first = len(cache[0])
            assert any(
                np.array_equal(batch.embeddings["r"][0, :n], r[first : first + n]) for r in rows
            )
            seen["whole"] += 1
        assert seen["whole"] > 0, seen
    finally:
        swapper.kill()
        swapper.wait()


def test_an_embed_overlapping_a_builds_publish_fails_and_publishes_nothing(tmp_path):
    """Red team D5: a build that published the cache while an embed ran
    (it carries derived/, the embed's staging inside, into the new cache)
    let the embed publish a store of the old content and exit 0: stale on
    arrival (every reader refused it). The embed must fail, naming what
    happened and the fix, and publish nothing; run again, it succeeds."""
    corpus = tmp_path / "corpus"
    shutil.copytree(REPO / "data-samples/corpus", corpus)
    out = tmp_path / "cache"
    socialctx.build(corpus, out, progress=False)
    cache = socialctx.open(out)
    rebuilt: list[str] = []

    def fn(batch):
        if not rebuilt:  # the nightly build publishes meanwhile
            thread = next(p for p in sorted(corpus.rglob("*")) if p.is_dir() and p.name.isdigit())
            shutil.rmtree(thread)
            socialctx.build(corpus, out, progress=False)
            rebuilt.append(socialctx.open(out).content_id)
        return np.stack([toy(t) for t in batch])

    with pytest.raises(socialctx.EmbeddingError) as e:
        socialctx.embed(cache, fn, field="reply", name="r", batch_size=1 << 20, model_id="toy-1")
    msg = str(e.value)
    assert "a build published this cache while the embed ran" in msg, msg
    assert cache.content_id in msg and rebuilt[0] in msg and "run the embed again" in msg, msg
    new = socialctx.open(out)
    assert not (Path(new.derived_dir) / "embeddings" / "r").exists()
    with pytest.warns(UserWarning, match=r"the cache's content \(rebuilt since\) changed"):
        again = socialctx.embed(
            new, Model(), field="reply", name="r", batch_size=1 << 20, model_id="toy-1"
        )
    assert again.unique > 0
    assert socialctx.open_store(new, "r").meta["cache_content_id"] == new.content_id


def test_an_embed_of_a_cache_opened_before_a_rebuild_is_refused_at_once(tmp_path):
    """Red team D5 (the same, earlier): a Cache object opened before a
    rebuild holds the old content's texts; embedding it computed every row
    for a store stale on arrival. Refused before any model call."""
    corpus = tmp_path / "corpus"
    shutil.copytree(REPO / "data-samples/corpus", corpus)
    out = tmp_path / "cache"
    socialctx.build(corpus, out, progress=False)
    stale = socialctx.open(out)
    shutil.rmtree(next(p for p in sorted(corpus.rglob("*")) if p.is_dir() and p.name.isdigit()))
    socialctx.build(corpus, out, progress=False)
    model = Model()
    with pytest.raises(socialctx.EmbeddingError, match="rebuilt since it was opened") as e:
        socialctx.embed(stale, model, field="reply", name="r", model_id="toy-1")
    assert model.calls == 0 and stale.content_id in str(e.value)
    assert "open the cache again" in str(e.value)
