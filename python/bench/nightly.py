"""The nightly job, measured: an incremental rebuild after ~1% of threads
changed, then an embed that reuses the previous store's rows, against a
from-scratch embed of the same cache, in one run.

    python python/bench/nightly.py [CORPUS_DIR] [--changed 0.01] [--call-us 100]
                                   [--batch 256] [--repeat 5]

CORPUS_DIR defaults to the PHEME-sized corpus of ``benches/measure.sh``
(``/tmp/socialctx-bench/pheme``); it is hard-linked into a temporary
directory and never modified (edited files are replaced, not written in
place). The toy model costs ``--call-us`` per call (busy-waited) and is
deterministic, so the two stores must be byte-identical.

Both embeds start from the same page-cache state, measured twice: "warm"
(every file of the cache and of the previous store read first) and "cold"
(their pages dropped with ``posix_fadvise(DONTNEED)``: what a nightly job
meets after a build, whose shards are written with ``O_DIRECT``). Each is
repeated ``--repeat`` times (the nightly embed from the same previous
store each time); medians are reported. Prints a Markdown table and a
JSON line.

It also times the least the nightly embed could spend on its rows file:
copying the previous one inside the kernel and syncing it (the new inputs
shift the rows, so the file is rewritten; it must be durable before it is
published), in the same states and run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

import socialctx

DIM = 64


def make_model(call_s: float):  # type: ignore[no-untyped-def]
    def toy(batch: list[list[str]]) -> np.ndarray:
        until = time.perf_counter() + call_s
        while time.perf_counter() < until:
            pass
        out = np.empty((len(batch), DIM), dtype=np.float32)
        for i, tokens in enumerate(batch):
            out[i] = (len(tokens) + sum(map(len, tokens))) % 97
        return out

    return toy


def files(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


def settle(dirs: list[Path], state: str) -> None:
    """Puts every file under ``dirs`` into the page-cache ``state``:
    "warm" (read in full) or "cold" (dropped; written back first)."""
    os.sync()
    for d in dirs:
        for p in d.rglob("*"):
            if not p.is_file():
                continue
            with open(p, "rb") as f:
                if state == "cold":
                    os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
                else:
                    while f.read(1 << 20):
                        pass


def durable_copy_s(src: Path, dst: Path) -> float:
    """Seconds to copy ``src`` into a new file inside the kernel and sync
    it: the least a nightly embed can spend on its rows file, which it must
    rewrite (new inputs shift the rows) and make durable before publishing."""
    size = src.stat().st_size
    t0 = time.perf_counter()
    s_fd = os.open(src, os.O_RDONLY)
    d_fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        done = 0
        while done < size:
            done += os.copy_file_range(s_fd, d_fd, size - done, done, done)
        os.fsync(d_fd)
    finally:
        os.close(s_fd)
        os.close(d_fd)
    elapsed = time.perf_counter() - t0
    dst.unlink()
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("corpus", nargs="?", default="/tmp/socialctx-bench/pheme")
    ap.add_argument("--changed", type=float, default=0.01, help="share of threads edited")
    ap.add_argument("--call-us", type=float, default=100.0)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    model = make_model(args.call_us * 1e-6)
    with tempfile.TemporaryDirectory(prefix="socialctx-nightly-") as tmp:
        work = Path(tmp)
        corpus = work / "corpus"
        subprocess.run(["cp", "-al", args.corpus, corpus], check=True)
        cache_dir = work / "cache"
        socialctx.build(corpus, cache_dir, progress=False)
        cache = socialctx.open(cache_dir)
        kw = dict(field="reply", name="r", batch_size=args.batch, model_id="toy", progress=False)
        socialctx.embed(cache, model, **kw)

        # The night's change: one reply rewritten in ~1% of the threads.
        threads = sorted({p.parent.parent for p in corpus.rglob("reactions/*.json")})
        step = max(1, round(1 / args.changed))
        edited = 0
        for n, t in enumerate(threads[::step]):
            reply = sorted((t / "reactions").glob("*.json"))[0]
            tweet = json.loads(reply.read_text())
            tweet["text"] = f"nightly edit {n}: {tweet.get('text', '')}"
            tweet["full_text"] = tweet["text"]
            tmp_file = reply.with_suffix(".tmp")
            tmp_file.write_text(json.dumps(tweet))
            os.replace(tmp_file, reply)  # a new inode: the hard-linked original stays
            edited += 1

        t0 = time.perf_counter()
        socialctx.build(corpus, cache_dir, progress=False, incremental=True)
        build_s = time.perf_counter() - t0
        store = cache_dir / "derived/embeddings/r"
        previous = work / "previous-store"
        shutil.copytree(store, previous)
        scratch_dir = work / "scratch"
        shutil.copytree(cache_dir, scratch_dir, ignore=shutil.ignore_patterns("derived"))
        times: dict[str, dict[str, list[float]]] = {}
        for state in ("warm", "cold"):
            times[state] = {"nightly": [], "scratch": [], "floor": []}
            for _ in range(args.repeat):
                settle([previous], state)
                times[state]["floor"].append(
                    durable_copy_s(previous / "vectors.npy", work / "rows-copy")
                )
                shutil.rmtree(store)
                shutil.copytree(previous, store)
                settle([cache_dir], state)
                cache = socialctx.open(cache_dir)
                t0 = time.perf_counter()
                night = socialctx.embed(cache, model, **kw)
                times[state]["nightly"].append(time.perf_counter() - t0)

                shutil.rmtree(scratch_dir / "derived", ignore_errors=True)
                settle([scratch_dir], state)
                scratch = socialctx.open(scratch_dir)
                t0 = time.perf_counter()
                full = socialctx.embed(scratch, model, **kw)
                times[state]["scratch"].append(time.perf_counter() - t0)
        same = files(store) == files(Path(scratch.derived_dir) / "embeddings/r")
    figures: dict[str, object] = {
        "threads": len(threads),
        "threads_edited": edited,
        "incremental_build_s": build_s,
        "unique_inputs": night.unique,
        "new_inputs": night.new,
        "new_share": night.new / night.unique,
        "model_calls_nightly": night.calls,
        "model_calls_scratch": full.calls,
        "batch_size": args.batch,
    }
    for state, runs in times.items():
        nightly_s, scratch_s = (
            statistics.median(runs["nightly"]),
            statistics.median(runs["scratch"]),
        )
        figures[f"embed_nightly_s_{state}"] = nightly_s
        figures[f"embed_scratch_s_{state}"] = scratch_s
        figures[f"nightly_over_scratch_{state}"] = nightly_s / scratch_s
        # The durable rewrite of the rows file alone, against the same scratch embed.
        floor_s = statistics.median(runs["floor"])
        figures[f"rows_copy_and_sync_s_{state}"] = floor_s
        figures[f"rows_copy_and_sync_over_scratch_{state}"] = floor_s / scratch_s
    figures["repeats"] = args.repeat
    figures["byte_identical"] = same
    print("| figure | value |\n|---|---|")
    for k, v in figures.items():
        print(f"| {k} | {v:.4g} |" if isinstance(v, float) else f"| {k} | {v} |")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
