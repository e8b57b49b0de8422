"""What the embedding tests share: a deterministic toy model, a model that
checks the embed's contract, an embed killed in a child process, and the
nightly scenario (data-samples embedded, some replies rewritten, the cache
rebuilt) with a from-scratch store to compare against."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import xxhash

import socialctx
from conftest import REPO


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


# Embeds with a model that kills its process after some calls. Arguments:
# cache, calls before the kill, this directory, field, store name, batch
# size, model id ("" for none).
CHILD = textwrap.dedent(
    """
    import os, signal, sys
    import numpy as np, socialctx
    sys.path.insert(0, sys.argv[3])
    from embed_helpers import toy
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


def _store_bytes(cache: socialctx.Cache, name: str) -> dict[str, bytes]:
    d = Path(cache.derived_dir) / "embeddings" / name
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


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


class Interrupt(Exception):
    """Raised by a model to stop an embed midway, as a Ctrl-C would."""


def toy_model(batch: list[list[str]]) -> np.ndarray:
    return np.stack([toy(t) for t in batch])
