"""Texts for embedding from Python: token parity with the text oracle, unique
inputs, the embedding store (calls, rows, zeros, staleness, resume after a
kill, atomic replacement) and Loader(embeddings=...)."""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
from pathlib import Path

import numpy as np
import pytest

import socialctx
from conftest import CORPORA, REPO, TOKEN_ORACLES, jsonl
from embed_helpers import (
    Interrupt,
    Model,
    _fix_meta,
    _killed_embed,
    toy,
)

FIELDS = ["description", "reply"]

TOKENS = TOKEN_ORACLES


@pytest.fixture()
def golden(built, tmp_path) -> socialctx.Cache:
    """A private copy of the golden cache (stores are written beside it)."""
    out = tmp_path / "cache"
    shutil.copytree(built["golden"], out)
    return socialctx.open(out)


def _oracle_view(cache: socialctx.Cache, replies_only: bool) -> list[dict[str, object]]:
    """The cache's texts in the text oracle's shape."""
    out = []
    for thread in cache:
        kept = [
            {"id": str(i), "reply_tokens": r, "description_tokens": d}
            for i, r, d, kind in zip(
                thread.reaction_ids, thread.reply_tokens, thread.description_tokens, thread.kinds
            )
            # The oracle leaves out a reply whose `text` is not a string.
            if not (kind == 1 and r is None) and not (replies_only and kind == 0)
        ]
        out.append({"source_id": str(thread.source_id), "reactions": kept})
    return out


@pytest.mark.parametrize("name", sorted(TOKENS))
def test_thread_tokens_match_the_text_oracle(built, name, tmp_path):
    expected = jsonl(REPO / TOKENS[name])
    replies = [
        {**t, "reactions": [r for r in t["reactions"] if r["reply_tokens"] is not None]}
        for t in expected
    ]
    # The default build also takes retweets from retweets.json (an extension
    # the oracle does not read): compare its replies, and everything on a
    # build without the extended features.
    assert _oracle_view(socialctx.open(built[name]), replies_only=True) == replies
    plain = tmp_path / "plain"
    socialctx.build(REPO / CORPORA[name][0], plain, workers=2, extended=False, progress=False)
    assert _oracle_view(socialctx.open(plain), replies_only=False) == expected


def test_unique_texts_dedupe_and_index(golden):
    for field in FIELDS:
        u = golden.unique_texts(field)
        inputs = u.batch(0, len(u))
        assert len({tuple(t) for t in inputs}) == len(u)
        assert list(u.token_counts) == [len(t) for t in inputs]
        direct = []
        for thread in golden:
            lists = thread.reply_tokens if field == "reply" else thread.description_tokens
            direct += [t if t else None for t in lists]
        assert len(u.index) == len(direct) == int(u.offsets[-1])
        for i, want in zip(u.index, direct):
            assert (i == u.NONE) == (want is None)
            if want is not None:
                assert inputs[i] == want
        used = u.index[u.index != u.NONE]
        assert (np.bincount(used, minlength=len(u)) == u.counts).all()
    part = golden.unique_texts("description", positions=[0, 1, 2])
    assert 0 < len(part) < len(golden.unique_texts("description"))
    with pytest.raises(ValueError, match="reply"):
        golden.unique_texts("nope")


@pytest.mark.parametrize("field", FIELDS)
def test_embed_calls_once_per_batch_of_unique_inputs(golden, field):
    model = Model()
    result = socialctx.embed(golden, model, field=field, name="toy", batch_size=64)
    unique = golden.unique_texts(field)
    assert result.unique == len(unique) > 100
    assert result.calls == model.calls == math.ceil(len(unique) / 64)
    assert max(model.sizes) == 64 and result.dim == 4
    store = socialctx.open_store(golden, "toy", validate="all")
    inputs = unique.batch(0, len(unique))
    want = np.stack([toy(t) for t in inputs])
    assert np.array_equal(np.asarray(store.vectors), want)
    assert np.array_equal(np.asarray(store.index), unique.index)
    leftovers = [
        p.name for p in (Path(golden.derived_dir) / "embeddings").iterdir() if "partial" in p.name
    ]
    assert leftovers == []


@pytest.mark.parametrize("kinds", ["replies", "both"])
def test_loader_rows_equal_a_direct_computation(golden, kinds):
    socialctx.embed(golden, Model(), field=FIELDS[-1], name="r", batch_size=100)
    socialctx.embed(golden, Model(), field="description", name="d", batch_size=100, dtype="float16")
    loader = socialctx.Loader(golden, kinds=kinds, max_cxt=50, embeddings=["r", "d"])
    assert loader.embeddings == ["r", "d"]
    zeros_seen = {"r": 0, "d": 0}
    for batch in loader.epoch(range(len(golden)), 16, seed=3):
        r, d = batch.embeddings["r"], batch.embeddings["d"]
        assert r.shape == (16, 50, 4) and r.dtype == np.float32
        assert d.shape == (16, 50, 4) and d.dtype == np.float16
        for b in range(batch.size):
            thread = golden.get(int(batch.source_ids[b]))
            picked = [i for i, k in enumerate(thread.kinds) if kinds == "both" or k == 1][:50]
            for t in range(50):
                if t < len(picked):
                    i = picked[t]
                    desc = thread.description_tokens[i]
                    reply = thread.reply_tokens[i]
                    want_r = toy(reply) if reply else np.zeros(4, np.float32)
                    want_d = (toy(desc) if desc else np.zeros(4, np.float32)).astype(np.float16)
                    zeros_seen["r"] += not reply
                    zeros_seen["d"] += not desc
                else:  # padding
                    want_r = np.zeros(4, np.float32)
                    want_d = np.zeros(4, np.float16)
                assert np.array_equal(r[b, t], want_r), (thread.source_id, t)
                assert np.array_equal(d[b, t], want_d), (thread.source_id, t)
        assert not r[batch.size :].any() and not d[batch.size :].any()
    # Retweets (kinds="both"), [] replies and missing descriptions give zeros.
    assert zeros_seen["r"] > 0 and zeros_seen["d"] > 0


def test_a_rebuilt_cache_makes_the_store_stale(tmp_path):
    corpus = tmp_path / "corpus"
    shutil.copytree(REPO / "data-samples/corpus", corpus)
    out = tmp_path / "cache"
    socialctx.build(corpus, out, progress=False)
    cache = socialctx.open(out)
    socialctx.embed(cache, Model(), field=FIELDS[-1], name="e")
    socialctx.Loader(cache, embeddings=["e"])
    victim = next(corpus.rglob("reactions/*.json"))
    tweet = json.loads(victim.read_text())
    tweet["text"] = "a completely different reply text about something else now"
    tweet["full_text"] = tweet["text"]
    victim.write_text(json.dumps(tweet))
    socialctx.build(corpus, out, progress=False)
    rebuilt = socialctx.open(out)
    with pytest.raises(socialctx.EmbeddingError, match="rebuilt"):
        socialctx.Loader(rebuilt, embeddings=["e"])
    with pytest.raises(socialctx.EmbeddingError, match="no embedding store .other."):
        socialctx.Loader(rebuilt, embeddings=["other"])


def test_bad_model_output_is_a_clear_error_and_publishes_nothing(golden):
    with pytest.raises(ValueError, match="shape"):
        socialctx.embed(golden, lambda b: np.zeros((len(b) + 1, 3)), field=FIELDS[-1], name="bad")
    with pytest.raises(ValueError, match="not finite"):
        socialctx.embed(
            golden, lambda b: np.full((len(b), 3), np.nan), field=FIELDS[-1], name="bad"
        )
    with pytest.raises(socialctx.EmbeddingError):
        socialctx.open_store(golden, "bad")


def test_validate_all_detects_a_damaged_store(golden):
    socialctx.embed(golden, Model(), field=FIELDS[-1], name="e")
    path = Path(golden.derived_dir) / "embeddings/e/seg-00000.npy"
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    # Every open verifies the checksums (lazy included), and so does a Loader.
    for open_it in (
        lambda: socialctx.open_store(golden, "e"),
        lambda: socialctx.open_store(golden, "e", validate="all"),
        lambda: socialctx.Loader(golden, embeddings=["e"]),
    ):
        with pytest.raises(socialctx.EmbeddingError, match="checksum"):
            open_it()


def test_re_embedding_replaces_the_store_atomically(golden):
    socialctx.embed(golden, Model(), field=FIELDS[-1], name="e", batch_size=50)
    first = np.asarray(socialctx.open_store(golden, "e").vectors).copy()
    double = lambda b: np.stack([toy(t) * 2 for t in b])  # noqa: E731
    socialctx.embed(golden, double, field=FIELDS[-1], name="e", batch_size=50)
    second = np.asarray(socialctx.open_store(golden, "e", validate="all").vectors)
    assert np.array_equal(second, first * 2)
    names = sorted(p.name for p in (Path(golden.derived_dir) / "embeddings").iterdir())
    assert names == [".e.lock", ".e.verified", "e"]


def test_embed_resumes_after_a_kill(golden):
    field = FIELDS[-1]
    unique = golden.unique_texts(field)
    total = math.ceil(len(unique) / 32)
    assert total > 8
    child = _killed_embed(golden, 5, field, "k", 32, model_id="toy")
    assert child.returncode == -signal.SIGKILL, child.stderr
    with pytest.raises(socialctx.EmbeddingError):
        socialctx.open_store(golden, "k")  # nothing published
    model = Model()
    result = socialctx.embed(golden, model, field=field, name="k", batch_size=32, model_id="toy")
    assert result.resumed == 5 and model.calls == result.calls == total - 5
    store = socialctx.open_store(golden, "k", validate="all")
    want = np.stack([toy(t) for t in unique.batch(0, len(unique))])
    assert np.array_equal(np.asarray(store.vectors), want)
    assert not any("partial" in n for n in os.listdir(Path(golden.derived_dir) / "embeddings"))
    # A different plan does not reuse the partial work of another.
    _killed_embed(golden, 3, field, "k2", 32, model_id="toy")
    model = Model()
    result = socialctx.embed(golden, model, field=field, name="k2", batch_size=64, model_id="toy")
    assert result.resumed == 0 and model.calls == math.ceil(len(unique) / 64)


# --- The red team's store defects (issue 25, items 6 to 11) ----------------


@pytest.mark.parametrize(("value", "dtype"), [(70000.0, "float16"), (1e39, "float32")])
def test_values_that_overflow_the_cast_are_refused(golden, value, dtype):
    with pytest.raises(ValueError, match="not finite as " + dtype):
        socialctx.embed(
            golden, lambda b: np.full((len(b), 3), value), field="reply", name="o", dtype=dtype
        )
    with pytest.raises(socialctx.EmbeddingError):
        socialctx.open_store(golden, "o")


def _interrupted(golden, model_id, scale, stop_after):
    calls = 0

    def fn(batch):
        nonlocal calls
        calls += 1
        if calls > stop_after:
            raise Interrupt
        return np.stack([toy(t) * scale for t in batch])

    with pytest.raises(Interrupt):
        socialctx.embed(golden, fn, field="reply", name="m", batch_size=16, model_id=model_id)


def test_resuming_with_another_model_starts_over_instead_of_mixing(golden):
    _interrupted(golden, "model-a", 1.0, stop_after=3)
    b = lambda batch: np.stack([toy(t) * 2 for t in batch])  # noqa: E731
    with pytest.warns(UserWarning, match="model-a") as warned:
        result = socialctx.embed(
            golden, b, field="reply", name="m", batch_size=16, model_id="model-b"
        )
    assert warned[0].filename == __file__  # points at the caller's line
    assert result.resumed == 0
    store = socialctx.open_store(golden, "m")
    assert store.meta["model_id"] == "model-b"
    unique = golden.unique_texts("reply")
    want = np.stack([toy(unique[i]) * 2 for i in range(len(unique))])
    assert np.array_equal(np.asarray(store.vectors), want)


def test_resuming_with_rows_of_another_dimension_starts_over(golden):
    _interrupted(golden, "a", 1.0, stop_after=2)
    wide = lambda batch: np.stack([np.concatenate([toy(t), [7.0]]) for t in batch])  # noqa: E731
    with pytest.warns(UserWarning, match="dimension 5") as warned:
        result = socialctx.embed(golden, wide, field="reply", name="m", batch_size=16, model_id="a")
    assert warned[0].filename == __file__
    assert result.dim == 5 and result.resumed == 0 and "dimension 5" in (result.restarted or "")
    assert socialctx.open_store(golden, "m").vectors.shape[1] == 5


def test_a_same_model_resume_reuses_the_written_batches(golden):
    _interrupted(golden, "a", 1.0, stop_after=2)
    result = socialctx.embed(golden, Model(), field="reply", name="m", batch_size=16, model_id="a")
    assert result.resumed == 2


def test_nan_bytes_in_a_store_are_detected_even_with_matching_checksums(golden):
    socialctx.embed(golden, Model(), field="reply", name="e")
    store = Path(golden.derived_dir) / "embeddings/e"
    data = bytearray((store / "seg-00000.npy").read_bytes())
    data[-4:] = np.array([np.nan], dtype=np.float32).tobytes()
    (store / "seg-00000.npy").write_bytes(bytes(data))
    _fix_meta(store)
    for open_it in (
        lambda: socialctx.open_store(golden, "e"),
        lambda: socialctx.Loader(golden, embeddings=["e"]),
    ):
        with pytest.raises(socialctx.EmbeddingError, match="non-finite"):
            open_it()


def test_a_fortran_ordered_store_is_refused(golden):
    socialctx.embed(golden, Model(), field="reply", name="e")
    store = Path(golden.derived_dir) / "embeddings/e"
    rows = np.load(store / "seg-00000.npy")
    np.save(store / "seg-00000.npy", np.asfortranarray(rows))
    _fix_meta(store)
    with pytest.raises(socialctx.EmbeddingError, match="Fortran"):
        socialctx.Loader(golden, embeddings=["e"])


@pytest.mark.parametrize(
    ("damage", "fix"),
    [
        (lambda s: (s / "meta.json").write_text("{"), False),
        (lambda s: (s / "meta.json").write_text("[]"), False),
        (lambda s: (s / "meta.json").write_text('{"format": "socialctx-embeddings"}'), False),
        (lambda s: (s / "seg-00000.npy").write_bytes(b"\x93NUMPY\x01\x00\xff\x00{'descr'"), True),
        (lambda s: (s / "seg-00000.npy").write_bytes(b"PK\x03\x04"), True),
        (lambda s: (s / "index.npy").unlink(), False),
    ],
    ids=["truncated-meta", "meta-list", "meta-keys", "cut-header", "not-npy", "no-index"],
)
def test_malformed_stores_are_embedding_errors(golden, damage, fix):
    socialctx.embed(golden, Model(), field="reply", name="e")
    store = Path(golden.derived_dir) / "embeddings/e"
    damage(store)
    if fix:
        _fix_meta(store)
    with pytest.raises(socialctx.EmbeddingError, match=str(store)):
        socialctx.open_store(golden, "e")
    with pytest.raises(socialctx.EmbeddingError):
        socialctx.Loader(golden, embeddings=["e"])


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root (CI runs as root)")
def test_embed_on_a_full_disk_is_an_error_and_leaves_no_half_file(built, tmp_path):
    mnt = tmp_path / "small"
    mnt.mkdir()
    size = sum(p.stat().st_size for p in built["golden"].rglob("*") if p.is_file())
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size + 256 * 1024}", "tmpfs", mnt], check=True
    )
    try:
        shutil.copytree(built["golden"], mnt / "cache")
        cache = socialctx.open(mnt / "cache")
        wide = lambda batch: np.ones((len(batch), 8192), dtype=np.float32)  # noqa: E731
        with pytest.raises(socialctx.EmbeddingError, match="No space left on device"):
            socialctx.embed(cache, wide, field="reply", name="big")
        partial = Path(cache.derived_dir) / "embeddings/.big.partial"
        assert not list(partial.glob("seg-*.npy")), "no half segment left"
        assert not (Path(cache.derived_dir) / "embeddings/big").exists()
        del cache  # its maps keep the file system busy
    finally:
        # Lazy: a map still held elsewhere must not fail the test run.
        subprocess.run(["umount", "-l", mnt], check=True)
