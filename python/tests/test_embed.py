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
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import xxhash

import socialctx
from conftest import CORPORA, REPO, TOKEN_ORACLES, jsonl

FIELDS = ["description", "reply"]

TOKENS = TOKEN_ORACLES


def toy(tokens: list[str]) -> np.ndarray:
    """A deterministic 'model': a row from the tokens' lengths and code points."""
    joined = "\x1f".join(tokens)
    return np.array(
        [
            len(tokens),
            len(joined),
            sum(map(ord, joined)) % 9973,
            ord(tokens[0][0]) % 997 if tokens[0] else -1,
        ],
        dtype=np.float32,
    )


class Model:
    """Counts calls and checks the contract: no empty input, growing lengths."""

    def __init__(self) -> None:
        self.calls = 0
        self.sizes: list[int] = []
        self.last_len = 0

    def __call__(self, batch: list[list[str]]) -> np.ndarray:
        self.calls += 1
        self.sizes.append(len(batch))
        assert batch, "fn called with an empty batch"
        for tokens in batch:
            assert tokens, "fn called with an empty token list"
            assert len(tokens) >= self.last_len, "batches not sorted by length"
            self.last_len = len(tokens)
        return np.stack([toy(t) for t in batch])


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
    assert names == [".e.lock", "e"]


# Embeds with a model that kills its process after some calls. Arguments:
# cache, calls before the kill, this directory, field, store name, batch
# size, model id ("" for none).
CHILD = textwrap.dedent(
    """
    import os, signal, sys
    import numpy as np, socialctx
    sys.path.insert(0, sys.argv[3])
    from test_embed import toy
    cache = socialctx.open(sys.argv[1])
    calls = 0
    def fn(batch):
        global calls
        calls += 1
        if calls > int(sys.argv[2]):
            os.kill(os.getpid(), signal.SIGKILL)
        return np.stack([toy(t) for t in batch])
    socialctx.embed(cache, fn, field=sys.argv[4], name=sys.argv[5],
                    batch_size=int(sys.argv[6]), model_id=sys.argv[7] or None)
    """
)


def _killed_embed(
    cache: socialctx.Cache, calls: int, field: str, name: str, batch_size: int, model_id: str = ""
) -> subprocess.CompletedProcess[str]:
    """Runs CHILD: an embed killed (SIGKILL) after ``calls`` model calls."""
    here = str(Path(__file__).parent)
    args = [cache.path, str(calls), here, field, name, str(batch_size), model_id]
    return subprocess.run(
        [sys.executable, "-c", CHILD, *args], capture_output=True, text=True, timeout=120
    )


def test_embed_resumes_after_a_kill(golden):
    field = FIELDS[-1]
    unique = golden.unique_texts(field)
    total = math.ceil(len(unique) / 32)
    assert total > 8
    child = _killed_embed(golden, 5, field, "k", 32)
    assert child.returncode == -signal.SIGKILL, child.stderr
    with pytest.raises(socialctx.EmbeddingError):
        socialctx.open_store(golden, "k")  # nothing published
    model = Model()
    result = socialctx.embed(golden, model, field=field, name="k", batch_size=32)
    assert result.resumed == 5 and model.calls == result.calls == total - 5
    store = socialctx.open_store(golden, "k", validate="all")
    want = np.stack([toy(t) for t in unique.batch(0, len(unique))])
    assert np.array_equal(np.asarray(store.vectors), want)
    assert not any("partial" in n for n in os.listdir(Path(golden.derived_dir) / "embeddings"))
    # A different plan does not reuse the partial work of another.
    _killed_embed(golden, 3, field, "k", 32)
    model = Model()
    result = socialctx.embed(golden, model, field=field, name="k", batch_size=64)
    assert result.resumed == 0 and model.calls == math.ceil(len(unique) / 64)


# --- The red team's store defects (issue 25, items 6 to 11) ----------------


def _fix_meta(store: Path) -> None:
    """Makes meta.json's sizes and checksums agree with the files again, so
    that only the deeper checks can catch a damage."""
    meta = json.loads((store / "meta.json").read_text())
    for entry, fname in [
        *((meta["files"][f], f) for f in ("index.npy", "keys.npy")),
        *((s, s["file"]) for s in meta["segments"]),
    ]:
        data = (store / fname).read_bytes()
        entry.update(bytes=len(data), xxh3=f"{xxhash.xxh3_64_intdigest(data):016x}")
    (store / "meta.json").write_text(json.dumps(meta))


@pytest.mark.parametrize(("value", "dtype"), [(70000.0, "float16"), (1e39, "float32")])
def test_values_that_overflow_the_cast_are_refused(golden, value, dtype):
    with pytest.raises(ValueError, match="not finite as " + dtype):
        socialctx.embed(
            golden, lambda b: np.full((len(b), 3), value), field="reply", name="o", dtype=dtype
        )
    with pytest.raises(socialctx.EmbeddingError):
        socialctx.open_store(golden, "o")


class Interrupt(Exception):
    pass


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
    _interrupted(golden, None, 1.0, stop_after=2)
    wide = lambda batch: np.stack([np.concatenate([toy(t), [7.0]]) for t in batch])  # noqa: E731
    with pytest.warns(UserWarning, match="dimension 5") as warned:
        result = socialctx.embed(golden, wide, field="reply", name="m", batch_size=16)
    assert warned[0].filename == __file__
    assert result.dim == 5
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


# --- Nightly: rows keyed by content, reused after a rebuild (issue 26) -----


def _store_bytes(cache: socialctx.Cache, name: str) -> dict[str, bytes]:
    d = Path(cache.derived_dir) / "embeddings" / name
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


def test_a_nightly_embed_calls_the_model_only_for_new_inputs(tmp_path):
    corpus = tmp_path / "corpus"
    shutil.copytree(REPO / "data-samples/corpus", corpus)
    out = tmp_path / "cache"
    socialctx.build(corpus, out, progress=False)
    model = Model()
    first = socialctx.embed(
        socialctx.open(out), model, field="reply", name="r", batch_size=16, model_id="toy-1"
    )
    assert first.reused == 0 and first.new == first.unique
    # A night's change: one reply rewritten, one new reply.
    replies = sorted(corpus.rglob("reactions/*.json"))
    tweet = json.loads(replies[0].read_text())
    tweet["text"] = tweet["full_text"] = "an entirely new reply about the nightly rebuild"
    replies[0].write_text(json.dumps(tweet))
    extra = json.loads(replies[1].read_text())
    extra["id"] = extra["id"] + 1
    extra["id_str"] = str(extra["id"])
    extra["text"] = extra["full_text"] = "one more brand new reply for the night"
    (replies[1].parent / f"{extra['id_str']}.json").write_text(json.dumps(extra))
    socialctx.build(corpus, out, progress=False, incremental=True)
    cache = socialctx.open(out)
    with pytest.raises(socialctx.EmbeddingError, match="rebuilt"):
        socialctx.open_store(cache, "r")
    calls: list[list[list[str]]] = []

    def counted(batch):
        calls.append(batch)
        return np.stack([toy(t) for t in batch])

    night = socialctx.embed(
        cache, counted, field="reply", name="r", batch_size=16, model_id="toy-1"
    )
    assert night.new == 2 and sum(len(b) for b in calls) == 2, night
    assert night.reused == night.unique - 2
    assert night.dropped == first.unique - night.reused
    # The new rows are one new segment; the old one is linked, not copied.
    store = socialctx.open_store(cache, "r")
    assert [len(s) for s in store.segments][1:] == [2]
    _assert_rows_of(cache, tmp_path)
    # Compacted: byte for byte what a from-scratch embed writes.
    compacted = socialctx.embed(
        cache, Model(), field="reply", name="r", batch_size=16, model_id="toy-1", compact=True
    )
    assert compacted.compacted and compacted.calls == 0
    assert _store_bytes(cache, "r") == _scratch_bytes(tmp_path, cache)
    # Exactly one generation, nothing else left behind.
    names = sorted(p.name for p in (Path(cache.derived_dir) / "embeddings").iterdir())
    assert names == [".r.lock", "r"]
    # Another model reuses nothing.
    other = socialctx.embed(
        cache, Model(), field="reply", name="r", batch_size=16, model_id="toy-2"
    )
    assert other.reused == 0 and other.new == other.unique


def _a_changed_night(
    tmp_path: Path, edits: int, batch_size: int = 16
) -> tuple[Path, socialctx.Cache]:
    """data-samples built and embedded as store "r" (model "toy-1"), then
    ``edits`` replies rewritten and the cache rebuilt incrementally: (the
    corpus, the rebuilt cache)."""
    corpus = tmp_path / "corpus"
    shutil.copytree(REPO / "data-samples/corpus", corpus)
    out = tmp_path / "cache"
    socialctx.build(corpus, out, progress=False)
    socialctx.embed(
        socialctx.open(out),
        Model(),
        field="reply",
        name="r",
        batch_size=batch_size,
        model_id="toy-1",
    )
    for n, reply in enumerate(sorted(corpus.rglob("reactions/*.json"))[:edits]):
        tweet = json.loads(reply.read_text())
        tweet["text"] = tweet["full_text"] = f"rewritten reply number {n} for the night"
        reply.write_text(json.dumps(tweet))
    socialctx.build(corpus, out, progress=False, incremental=True)
    return corpus, socialctx.open(out)


def _scratch_bytes(
    tmp_path: Path, cache: socialctx.Cache, batch_size: int = 16
) -> dict[str, bytes]:
    """Store "r" as a from-scratch embed of a copy of ``cache`` writes it."""
    fresh = tmp_path / "fresh"
    shutil.rmtree(fresh, ignore_errors=True)
    shutil.copytree(cache.path, fresh, ignore=shutil.ignore_patterns("derived"))
    scratch = socialctx.open(fresh)
    socialctx.embed(
        scratch, Model(), field="reply", name="r", batch_size=batch_size, model_id="toy-1"
    )
    return _store_bytes(scratch, "r")


def _assert_rows_of(cache: socialctx.Cache, tmp_path: Path, batch_size: int = 16) -> None:
    """Every reaction reads, from store "r", the row a from-scratch embed gives it."""
    _scratch_bytes(tmp_path, cache, batch_size)
    scratch = socialctx.open_store(socialctx.open(tmp_path / "fresh"), "r")
    store = socialctx.open_store(cache, "r")
    every = np.arange(len(store.index))
    assert np.array_equal(store.rows(every), scratch.rows(every))


def test_reused_rows_are_linked_never_copied(tmp_path):
    """A nightly embed writes only the new inputs' rows: the previous
    segments are the same files (links), and the rows every reaction reads
    are a from-scratch embed's."""
    _, cache = _a_changed_night(tmp_path, edits=1)
    seg = Path(cache.derived_dir) / "embeddings/r/seg-00000.npy"
    inode = seg.stat().st_ino
    model = Model()
    night = socialctx.embed(cache, model, field="reply", name="r", batch_size=16, model_id="toy-1")
    assert night.new == 1 and model.calls == 1 and night.reused == night.unique - 1, night
    assert not night.compacted and seg.stat().st_ino == inode
    assert (Path(cache.derived_dir) / "embeddings/r/seg-00001.npy").stat().st_size < 256
    _assert_rows_of(cache, tmp_path)


@pytest.mark.parametrize("calls_before", [0, 1])
def test_ctrl_c_during_a_nightly_embed_leaves_no_helper_running(tmp_path, calls_before):
    """Ctrl-C in the model (while the helper thread copies the reused rows,
    or after the first batch) propagates as KeyboardInterrupt once the
    helper has stopped; the store's lock is free and the next embed ends
    with a from-scratch embed's bytes."""
    _, cache = _a_changed_night(tmp_path, edits=2, batch_size=1)
    threads_before = threading.active_count()
    calls = 0

    def interrupted(batch):
        nonlocal calls
        calls += 1
        if calls > calls_before:
            raise KeyboardInterrupt
        return np.stack([toy(t) for t in batch])

    with pytest.raises(KeyboardInterrupt):
        socialctx.embed(cache, interrupted, field="reply", name="r", batch_size=1, model_id="toy-1")
    assert threading.active_count() == threads_before
    assert not any(t.name.startswith("socialctx-embed") for t in threading.enumerate())
    model = Model()
    night = socialctx.embed(cache, model, field="reply", name="r", batch_size=1, model_id="toy-1")
    assert night.new == 2 and night.resumed == calls_before and model.calls == 2 - calls_before
    _assert_rows_of(cache, tmp_path, batch_size=1)


def test_a_damaged_previous_store_is_not_reused(tmp_path):
    """A damaged segment is never laundered: linked, it stays refused by
    every reader; compaction, which copies rows, reuses none of a store
    that fails verification (a warning at the caller's line) and embeds
    everything, to the bytes of a from-scratch embed."""
    _, cache = _a_changed_night(tmp_path, edits=1)
    vectors = Path(cache.derived_dir) / "embeddings/r/seg-00000.npy"
    raw = bytearray(vectors.read_bytes())
    raw[-1] ^= 0x40
    vectors.write_bytes(bytes(raw))
    # A nightly embed links the segment without reading it (its cost is the
    # night's change); the new store's readers verify it and refuse it.
    socialctx.embed(cache, Model(), field="reply", name="r", batch_size=16, model_id="toy-1")
    with pytest.raises(socialctx.EmbeddingError, match="seg-00000.npy: checksum"):
        socialctx.open_store(cache, "r")
    # Compaction copies rows, so it verifies them first and reuses none.
    with pytest.warns(UserWarning, match="not reusing") as warned:
        night = socialctx.embed(
            cache, Model(), field="reply", name="r", batch_size=16, model_id="toy-1", compact=True
        )
    assert warned[0].filename == __file__
    assert night.reused == 0 and night.new == night.unique
    assert _store_bytes(cache, "r") == _scratch_bytes(tmp_path, cache)


@pytest.mark.parametrize("batches_before_kill", [0, 1])
def test_a_killed_nightly_embed_resumes_to_the_same_bytes(tmp_path, batches_before_kill):
    """A nightly embed links the previous segments, then embeds the new
    ones; it is killed before its first batch or after it. Either way the
    next embed resumes and every reaction reads a from-scratch embed's row."""
    _, cache = _a_changed_night(tmp_path, edits=3, batch_size=1)
    child = _killed_embed(cache, batches_before_kill, "reply", "r", 1, "toy-1")
    assert child.returncode == -signal.SIGKILL, child.stderr
    cache = socialctx.open(cache.path)
    model = Model()
    night = socialctx.embed(cache, model, field="reply", name="r", batch_size=1, model_id="toy-1")
    assert night.new == 3 and night.resumed == batches_before_kill, night
    assert model.calls == 3 - batches_before_kill
    _assert_rows_of(cache, tmp_path, batch_size=1)


def test_every_reader_reads_a_two_segment_store_as_its_rows(tmp_path):
    """Loader (index and dense), EmbeddingTable and open_store read a
    nightly store of two segments by global row, each as a from-scratch
    embed's rows; after compaction, the same."""
    torch = pytest.importorskip("torch")
    from socialctx.torch import EmbeddingTable

    _, cache = _a_changed_night(tmp_path, edits=4)
    socialctx.embed(cache, Model(), field="reply", name="r", batch_size=16, model_id="toy-1")
    _assert_rows_of(cache, tmp_path)
    for compact in (False, True):
        if compact:
            socialctx.embed(
                cache,
                Model(),
                field="reply",
                name="r",
                batch_size=16,
                model_id="toy-1",
                compact=True,
            )
        store = socialctx.open_store(cache, "r")
        assert len(store.segments) == (1 if compact else 2)
        table = EmbeddingTable(cache, "r")
        assert table.num_rows == store.meta["rows"] == sum(len(s) for s in store.segments)
        loader = socialctx.Loader(cache, embeddings=["r"], dense=True, kinds="both")
        seen = 0
        for batch in loader.epoch(range(len(cache)), 8, seed=1):
            index = np.asarray(batch.embedding_index["r"])
            dense = np.asarray(batch.embeddings["r"])
            got = table(torch.from_numpy(index.astype(np.int64))).numpy()
            assert np.array_equal(got, dense)
            # The global rows name the rows open_store reads.
            has = index >= 0
            flat = np.concatenate(store.segments) if len(store.segments) > 1 else store.segments[0]
            assert np.array_equal(dense[has], np.asarray(flat)[index[has]])
            seen += int(has.sum())
        assert seen > 0


# --- The store's state space: nights, compactions and interruptions --------


@pytest.fixture(scope="module")
def night_variants(tmp_path_factory) -> list[Path]:
    """data-samples built as four contents (each a different few replies
    rewritten), to switch the working cache between: a rebuild, in a copy."""
    root = tmp_path_factory.mktemp("nights")
    out = []
    for v in range(4):
        corpus = root / f"corpus-{v}"
        shutil.copytree(REPO / "data-samples/corpus", corpus)
        for n, reply in enumerate(sorted(corpus.rglob("reactions/*.json"))[v * 3 : v * 3 + 3]):
            tweet = json.loads(reply.read_text())
            tweet["text"] = tweet["full_text"] = f"variant {v} reply {n} rewritten"
            reply.write_text(json.dumps(tweet))
        out.append(root / f"cache-{v}")
        socialctx.build(corpus, out[-1], progress=False)
    return out


def test_the_store_state_machine(night_variants, tmp_path):
    """Random sequences of nightly embeds of another content, compactions
    and embeds interrupted after a few calls, against a reference (every
    reaction reads its input's toy row): every published store reads as the
    reference, keeps the dead rows within a quarter of its rows (else it
    compacts), and a compacted one equals a from-scratch embed byte for byte."""
    from hypothesis import HealthCheck, settings
    from hypothesis import strategies as st
    from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

    scratch: dict[int, dict[str, bytes]] = {}

    def scratch_bytes(v: int) -> dict[str, bytes]:
        if v not in scratch:
            fresh = tmp_path / f"scratch-{v}"
            shutil.copytree(night_variants[v], fresh, ignore=shutil.ignore_patterns("derived"))
            c = socialctx.open(fresh)
            socialctx.embed(c, Model(), field="reply", name="r", batch_size=4, model_id="m")
            scratch[v] = _store_bytes(c, "r")
        return scratch[v]

    class Store(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.dir = tmp_path / f"work-{id(self)}"
            shutil.copytree(night_variants[0], self.dir)
            self.variant = 0
            self.published = False

        def cache(self) -> socialctx.Cache:
            return socialctx.open(self.dir)

        @rule(v=st.integers(0, 3))
        def rebuild(self, v: int) -> None:
            for p in night_variants[v].iterdir():
                if p.is_file():
                    shutil.copy(p, self.dir / p.name)
            self.variant = v

        @rule(compact=st.booleans())
        def embed(self, compact: bool) -> None:
            s = socialctx.embed(
                self.cache(),
                toy_model,
                field="reply",
                name="r",
                batch_size=4,
                model_id="m",
                compact=compact,
            )
            self.published = True
            if s.compacted:
                assert _store_bytes(self.cache(), "r") == scratch_bytes(self.variant)

        @rule(calls=st.integers(0, 2))
        def interrupted(self, calls: int) -> None:
            n = 0

            def fn(batch: list[list[str]]) -> np.ndarray:
                nonlocal n
                n += 1
                if n > calls:
                    raise Interrupt
                return toy_model(batch)

            try:
                socialctx.embed(
                    self.cache(), fn, field="reply", name="r", batch_size=4, model_id="m"
                )
                self.published = True
            except Interrupt:
                pass

        @invariant()
        def reads_as_the_reference(self) -> None:
            if not self.published:
                return
            try:
                store = socialctx.open_store(self.cache(), "r")
            except socialctx.EmbeddingError as e:
                assert "rebuilt since" in str(e)  # stale until the next embed
                return
            unique = self.cache().unique_texts("reply")
            want = np.zeros((len(store.index), store.dim), np.float32)
            has = np.asarray(unique.index) != socialctx.UniqueTexts.NONE
            rows = np.stack([toy(unique[i]) for i in range(len(unique))])
            want[has] = rows[np.asarray(unique.index)[has]]
            assert np.array_equal(store.rows(np.arange(len(store.index))), want)
            m = store.meta
            assert 4 * (m["rows"] - m["unique"]) <= m["rows"] and len(store.segments) <= 32

    Store.TestCase.settings = settings(
        max_examples=12,
        stateful_step_count=8,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    Store.TestCase().runTest()


def toy_model(batch: list[list[str]]) -> np.ndarray:
    return np.stack([toy(t) for t in batch])


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

    def nightly_in_between(c, name):
        out = real(c, name)
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
