"""The nightly embed (issues 26 and 36): rows keyed by content and reused
after a rebuild, new rows in a segment of their own, compaction, resume,
and every reader over a segmented store; the store's state machine."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import warnings
from pathlib import Path

import numpy as np
import pytest

import socialctx
from conftest import REPO
from embed_helpers import (
    Interrupt,
    Model,
    _a_changed_night,
    _assert_rows_of,
    _killed_embed,
    _scratch_bytes,
    _store_bytes,
    toy,
)

# --- Nightly: rows keyed by content, reused after a rebuild (issue 26) -----


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
    assert names == [".r.lock", ".r.verified", "r"]
    # Another model reuses nothing.
    other = socialctx.embed(
        cache, Model(), field="reply", name="r", batch_size=16, model_id="toy-2"
    )
    assert other.reused == 0 and other.new == other.unique


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
    """A damaged segment is never laundered: the nightly embed verifies the
    store it would link, as every reader does, reuses none of a store that
    fails (a warning at the caller's line naming the file and the reason)
    and embeds everything, to the bytes of a from-scratch embed. (It linked
    the segment unread, reported success, and every reader then refused
    the store.)"""
    _, cache = _a_changed_night(tmp_path, edits=1)
    vectors = Path(cache.derived_dir) / "embeddings/r/seg-00000.npy"
    raw = bytearray(vectors.read_bytes())
    raw[-1] ^= 0x40
    vectors.write_bytes(bytes(raw))
    with pytest.warns(UserWarning, match="not reusing .*seg-00000.npy: checksum") as warned:
        night = socialctx.embed(
            cache, Model(), field="reply", name="r", batch_size=16, model_id="toy-1"
        )
    assert warned[0].filename == __file__
    assert night.reused == 0 and night.new == night.unique
    assert _store_bytes(cache, "r") == _scratch_bytes(tmp_path, cache)
    socialctx.open_store(cache, "r")


def test_a_damaged_segment_is_reported_by_info_and_repaired_by_the_nightly_command(tmp_path):
    """Red team: a bit flipped in a segment of a current store; ``socialctx
    info`` said the store was current (it read meta.json only) and the
    nightly ``socialctx embed`` exited 0 having linked the damaged segment
    into the new store. Now info names the file and the reason, and the
    nightly command says it is not reusing the store and why, and embeds
    every row again."""
    corpus = tmp_path / "corpus"
    shutil.copytree(REPO / "data-samples/corpus", corpus)
    (tmp_path / "toymodel.py").write_text(
        "import numpy as np\n"
        "def embed(batch):\n"
        "    return np.stack([np.array([len(t), sum(map(len, t)) % 97], np.float32) for t in batch])\n"
    )
    cache = tmp_path / "cache"
    cli = Path(sys.executable).parent / "socialctx"

    def run(*args: object) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [cli, *map(str, args)], capture_output=True, text=True, cwd=tmp_path, timeout=120
        )

    embed = ("embed", cache, "--model", "toymodel:embed", "--name", "r", "--model-id", "toy-1")
    assert run("build", corpus, cache, "-q").returncode == 0
    assert run(*embed).returncode == 0
    seg = cache / "derived/embeddings/r/seg-00000.npy"
    raw = bytearray(seg.read_bytes())
    raw[-1] ^= 0x01
    seg.write_bytes(bytes(raw))
    info = run("info", cache)
    assert info.returncode == 0, info.stderr
    line = next(x for x in info.stdout.splitlines() if "embeddings/r" in x)
    assert f"{seg}: checksum mismatch (damaged store)" in line and "current" not in line, line
    as_json = json.loads(run("info", cache, "--json").stdout)["embeddings"][0]
    assert "checksum mismatch" in as_json["error"], as_json
    night = run(*embed)
    assert night.returncode == 0, night.stderr
    assert f"not reusing {seg.parent}: {seg}: checksum mismatch" in night.stderr, night.stderr
    assert "reused     0 " in night.stdout, night.stdout
    after = run("info", cache).stdout
    line = next(x for x in after.splitlines() if "embeddings/r" in x)
    assert line.endswith("current") and "damaged" not in line, after


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
    """Random sequences of nightly embeds of another content, compactions,
    embeds interrupted after a few calls and model changes (to another
    model id, or between two models without one: rows of the same width),
    against a reference (every reaction reads its input's row of the model
    that published the store): every published store reads as the
    reference, so an interrupted embed of one model is never completed
    with another's rows; an embed after another model's interruption
    resumes nothing and says why; dead rows stay within a quarter of the
    rows (else it compacts), and a compacted store equals a from-scratch
    embed byte for byte."""
    from hypothesis import HealthCheck, settings
    from hypothesis import strategies as st
    from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

    # (model id, scale of the toy rows): two named models, two anonymous.
    models = [("m", 1.0), ("n", 2.0), (None, 3.0), (None, 4.0)]

    def rows_of(k: int):
        return lambda batch: np.stack([toy(t) * models[k][1] for t in batch])

    scratch: dict[tuple[int, int], dict[str, bytes]] = {}

    def scratch_bytes(v: int, k: int) -> dict[str, bytes]:
        if (v, k) not in scratch:
            fresh = tmp_path / f"scratch-{v}-{k}"
            shutil.copytree(night_variants[v], fresh, ignore=shutil.ignore_patterns("derived"))
            c = socialctx.open(fresh)
            socialctx.embed(
                c, rows_of(k), field="reply", name="r", batch_size=4, model_id=models[k][0]
            )
            scratch[(v, k)] = _store_bytes(c, "r")
        return scratch[(v, k)]

    class Store(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            # mkdtemp, not id(self): a collected machine's id is reused by
            # the next one, whose copy then found the old directory (CI run
            # of 2026-12-05: FileExistsError).
            self.dir = Path(tempfile.mkdtemp(prefix="work-", dir=tmp_path)) / "c"
            shutil.copytree(night_variants[0], self.dir)
            self.variant = 0
            self.model = 0
            self.published: int | None = None  # the model of the published store
            self.partial: int | None = None  # the model of an interrupted embed

        def cache(self) -> socialctx.Cache:
            return socialctx.open(self.dir)

        @rule(v=st.integers(0, 3))
        def rebuild(self, v: int) -> None:
            for p in night_variants[v].iterdir():
                if p.is_file():
                    shutil.copy(p, self.dir / p.name)
            self.variant = v

        @initialize(k=st.integers(0, len(models) - 1))
        def first_model(self, k: int) -> None:
            self.model = k

        @rule(k=st.integers(0, len(models) - 1))
        def model_changed(self, k: int) -> None:
            self.model = k

        @rule(compact=st.booleans())
        def embed(self, compact: bool) -> None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                s = socialctx.embed(
                    self.cache(),
                    rows_of(self.model),
                    field="reply",
                    name="r",
                    batch_size=4,
                    model_id=models[self.model][0],
                    compact=compact,
                )
            same = models[self.model][0]
            if self.partial is not None and (same is None or models[self.partial][0] != same):
                assert s.resumed == 0 and s.restarted, s
            self.published, self.partial = self.model, None
            if s.compacted:
                assert _store_bytes(self.cache(), "r") == scratch_bytes(self.variant, self.model)

        @rule(calls=st.integers(0, 2))
        def interrupted(self, calls: int) -> None:
            n = 0

            def fn(batch: list[list[str]]) -> np.ndarray:
                nonlocal n
                n += 1
                if n > calls:
                    raise Interrupt
                return rows_of(self.model)(batch)

            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    socialctx.embed(
                        self.cache(),
                        fn,
                        field="reply",
                        name="r",
                        batch_size=4,
                        model_id=models[self.model][0],
                    )
                self.published, self.partial = self.model, None
            except Interrupt:
                self.partial = self.model

        @invariant()
        def reads_as_the_reference(self) -> None:
            if self.published is None:
                return
            try:
                store = socialctx.open_store(self.cache(), "r")
            except socialctx.EmbeddingError as e:
                assert "rebuilt since" in str(e)  # stale until the next embed
                return
            assert store.meta["model_id"] == models[self.published][0]
            unique = self.cache().unique_texts("reply")
            want = np.zeros((len(store.index), store.dim), np.float32)
            has = np.asarray(unique.index) != socialctx.UniqueTexts.NONE
            rows = rows_of(self.published)([unique[i] for i in range(len(unique))])
            want[has] = rows[np.asarray(unique.index)[has]]
            assert np.array_equal(store.rows(np.arange(len(store.index))), want)
            m = store.meta
            assert 4 * (m["rows"] - m["unique"]) <= m["rows"] and len(store.segments) <= 32

    Store.TestCase.settings = settings(
        max_examples=20,
        stateful_step_count=8,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    Store.TestCase().runTest()
