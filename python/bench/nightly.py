"""The nightly job, measured: an incremental rebuild after ~1% of threads
changed, then an embed that reuses the previous store's rows, at two row
widths, in one run.

    python python/bench/nightly.py [CORPUS_DIR] [--changed 0.01] [--call-us 100]
                                   [--batch 256] [--repeat 5] [--dims 64,1024]
                                   [--baseline-python PY]

CORPUS_DIR defaults to the PHEME-sized corpus of ``benches/measure.sh``
(``/tmp/socialctx-bench/pheme``); it is hard-linked into a temporary
directory and never modified (edited files are replaced, not written in
place). The toy model costs ``--call-us`` per call (busy-waited) and is
deterministic.

Figures, medians of ``--repeat`` runs with warm page caches:

- per width: the nightly embed (from the same previous store each time,
  as the previous night's embed left it: published with its verified
  record, then carried into the rebuilt cache), the model's own time
  inside it (the calls for the new inputs), and the from-scratch embed of
  the same cache; the targets are nightly(1024) <= 1.5 x nightly(64) and
  nightly <= 2 x model + 50 ms at each width; the segments of the
  previous store it read (0: none changed since verified); in the same
  run, alternating, the nightly with ``verify=True``, which reads every
  segment as every nightly did before the verified record (the baseline);
  also
  what any nightly embed pays first, store or not: opening the rebuilt
  cache and collecting its distinct inputs;
- from scratch against the baseline: the same embed run by
  ``--baseline-python`` (an interpreter with the previous socialctx
  installed, e.g. main's), in the same run;
- a Loader epoch (index mode and dense mode) over the two-segment store
  the nightly embed left, against the same store compacted; the target is
  <= 1.1x;
- that the compacted store is byte-identical to a from-scratch embed.

Prints a Markdown table and a JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

import socialctx


class Toy:
    """A deterministic model of ``dim`` columns costing ``call_s`` per call;
    ``spent`` adds up the seconds spent inside it."""

    def __init__(self, dim: int, call_s: float) -> None:
        self.dim, self.call_s, self.spent = dim, call_s, 0.0

    def __call__(self, batch: list[list[str]]) -> np.ndarray:
        t0 = time.perf_counter()
        while time.perf_counter() < t0 + self.call_s:
            pass
        out = np.empty((len(batch), self.dim), dtype=np.float32)
        for i, tokens in enumerate(batch):
            out[i] = (len(tokens) + sum(map(len, tokens))) % 97
        self.spent += time.perf_counter() - t0
        return out


def files(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


def warm(dirs: list[Path]) -> None:
    for d in dirs:
        for p in d.rglob("*"):
            if p.is_file():
                with open(p, "rb") as f:
                    while f.read(1 << 20):
                        pass


# The from-scratch embed as a separate process: the same code path for this
# socialctx and for the baseline interpreter's (whose embed has the same
# signature). Prints the seconds the embed took.
SCRATCH = """
import sys, time
import numpy as np, socialctx
sys.path.insert(0, sys.argv[5])
from nightly import Toy
cache = socialctx.open(sys.argv[1])
model = Toy(int(sys.argv[2]), float(sys.argv[3]))
t0 = time.perf_counter()
socialctx.embed(cache, model, field="reply", name=sys.argv[6], batch_size=int(sys.argv[4]),
                model_id="toy", progress=False)
print(time.perf_counter() - t0)
"""


def scratch_s(py: str, cache: Path, dim: int, call_s: float, batch: int) -> float:
    """Seconds of a from-scratch embed of store ``r{dim}`` by ``py``."""
    shutil.rmtree(cache / "derived", ignore_errors=True)
    warm([cache])
    here = str(Path(__file__).parent)
    args = [py, "-c", SCRATCH, str(cache), str(dim), str(call_s), str(batch), here, f"r{dim}"]
    out = subprocess.run(args, check=True, capture_output=True, text=True)
    return float(out.stdout.strip().splitlines()[-1])


def previous_night(
    work: Path, old_dir: Path, stores: Path, name: str, toy: Toy, kw: dict[str, Any]
) -> None:
    """Puts the previous night's store ``name`` in place in the rebuilt
    cache's ``stores`` as that night's embed left it: published, with its
    verified record, by an embed of the previous cache (a copy would give
    its segments new inodes, which no record vouches for), then moved into
    the rebuilt cache as a build carries ``derived/`` (renames, which leave
    the segments' stat as it was)."""
    old_stores = old_dir / "derived/embeddings"
    shutil.rmtree(old_stores, ignore_errors=True)
    old_stores.mkdir(parents=True)
    shutil.copytree(work / f"previous-{name[1:]}", old_stores / name)
    socialctx.embed(socialctx.open(old_dir), toy, name=name, **kw)
    shutil.rmtree(stores / name, ignore_errors=True)
    record = f".{name}.verified"
    (stores / record).unlink(missing_ok=True)
    os.rename(old_stores / name, stores / name)
    if (old_stores / record).exists():  # a socialctx that records
        os.rename(old_stores / record, stores / record)


def epoch_s(cache: socialctx.Cache, name: str, dense: bool) -> float:
    loader = socialctx.Loader(cache, embeddings=[name], dense=dense)
    t0 = time.perf_counter()
    for _ in loader.epoch(range(len(cache)), 32, seed=0):
        pass
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("corpus", nargs="?", default="/tmp/socialctx-bench/pheme")
    ap.add_argument("--changed", type=float, default=0.01, help="share of threads edited")
    ap.add_argument("--call-us", type=float, default=100.0)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--dims", default="64,1024")
    ap.add_argument("--baseline-python", help="an interpreter with the previous socialctx")
    args = ap.parse_args()
    dims = [int(d) for d in args.dims.split(",")]
    call_s = args.call_us * 1e-6
    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="socialctx-nightly-") as tmp:
        work = Path(tmp)
        corpus = work / "corpus"
        subprocess.run(["cp", "-al", args.corpus, corpus], check=True)
        cache_dir = work / "cache"
        socialctx.build(corpus, cache_dir, progress=False)
        cache = socialctx.open(cache_dir)
        kw = dict(field="reply", batch_size=args.batch, model_id="toy", progress=False)
        for dim in dims:
            socialctx.embed(cache, Toy(dim, call_s), name=f"r{dim}", **kw)
        # The previous night's cache, kept to publish the previous store
        # afresh before each timed night (below).
        old_dir = work / "old-cache"
        shutil.copytree(cache_dir, old_dir, ignore=shutil.ignore_patterns("derived"))

        # The night's change: one reply rewritten in ~1% of the threads.
        threads = sorted({p.parent.parent for p in corpus.rglob("reactions/*.json")})
        step = max(1, round(1 / args.changed))
        for n, t in enumerate(threads[::step]):
            reply = sorted((t / "reactions").glob("*.json"))[0]
            tweet = json.loads(reply.read_text())
            tweet["text"] = tweet["full_text"] = f"nightly edit {n}: {tweet.get('text', '')}"
            tmp_file = reply.with_suffix(".tmp")
            tmp_file.write_text(json.dumps(tweet))
            os.replace(tmp_file, reply)  # a new inode: the hard-linked original stays
        figures["threads"] = len(threads)
        figures["threads_edited"] = len(threads[::step])
        t0 = time.perf_counter()
        socialctx.build(corpus, cache_dir, progress=False, incremental=True)
        figures["incremental_build_s"] = time.perf_counter() - t0

        stores = cache_dir / "derived/embeddings"
        scratch_dir = work / "scratch"
        shutil.copytree(cache_dir, scratch_dir, ignore=shutil.ignore_patterns("derived"))
        # The widths alternate within each repeat, so that a change in the
        # machine's load meets both.
        nightly: dict[int, list[float]] = {dim: [] for dim in dims}
        model: dict[int, list[float]] = {dim: [] for dim in dims}
        # What any nightly embed pays before touching a store: opening the
        # rebuilt cache (its shards checked on first use) and collecting
        # its distinct inputs.
        collect = []
        for _ in range(args.repeat):
            warm([cache_dir])
            t0 = time.perf_counter()
            socialctx.open(cache_dir).unique_texts("reply")
            collect.append(time.perf_counter() - t0)
        figures["open_and_collect_inputs_s"] = statistics.median(collect)
        for dim in dims:
            shutil.copytree(stores / f"r{dim}", work / f"previous-{dim}")
        full: dict[int, list[float]] = {dim: [] for dim in dims}
        read: dict[tuple[int, bool], int] = {}
        for _ in range(args.repeat):
            for dim in dims:
                for verify in (False, True):
                    previous_night(work, old_dir, stores, f"r{dim}", Toy(dim, call_s), kw)
                    cache = socialctx.open(cache_dir)
                    warm([cache_dir])
                    toy = Toy(dim, call_s)
                    t0 = time.perf_counter()
                    night = socialctx.embed(cache, toy, name=f"r{dim}", verify=verify, **kw)
                    (full if verify else nightly)[dim].append(time.perf_counter() - t0)
                    if not verify:
                        model[dim].append(toy.spent)
                    read[dim, verify] = night.segments_read
        figures["new_inputs"] = night.new
        figures["unique_inputs"] = night.unique
        for dim in dims:
            figures[f"nightly_s_{dim}"] = n_s = statistics.median(nightly[dim])
            figures[f"nightly_segments_read_{dim}"] = read[dim, False]
            figures[f"nightly_full_verify_s_{dim}"] = statistics.median(full[dim])
            figures[f"nightly_full_verify_segments_read_{dim}"] = read[dim, True]
            figures[f"model_s_{dim}"] = m_s = statistics.median(model[dim])
            figures[f"nightly_over_2model_plus_50ms_{dim}"] = n_s / (2 * m_s + 0.05)
        if len(dims) > 1:
            figures["nightly_widest_over_narrowest"] = statistics.median(
                w / n for w, n in zip(nightly[dims[-1]], nightly[dims[0]])
            )
            figures["nightly_full_verify_widest_over_narrowest"] = statistics.median(
                w / n for w, n in zip(full[dims[-1]], full[dims[0]])
            )
        for dim in dims:
            # This socialctx and the baseline alternate, so that a change in
            # the machine's load meets both.
            ours, base = [], []
            for _ in range(args.repeat):
                ours.append(scratch_s(sys.executable, scratch_dir, dim, call_s, args.batch))
                if args.baseline_python:
                    py = args.baseline_python
                    base.append(scratch_s(py, scratch_dir, dim, call_s, args.batch))
            figures[f"scratch_s_{dim}"] = statistics.median(ours)
            if base:
                figures[f"scratch_baseline_s_{dim}"] = statistics.median(base)
                figures[f"scratch_over_baseline_{dim}"] = statistics.median(
                    o / b for o, b in zip(ours, base)
                )
        # Loader epochs: the two-segment store against it compacted.
        dim = dims[0]
        shutil.copytree(stores / f"r{dim}", stores / "two")
        cache = socialctx.open(cache_dir)
        socialctx.embed(cache, Toy(dim, call_s), name=f"r{dim}", compact=True, **kw)
        figures["segments_before_compaction"] = len(socialctx.open_store(cache, "two").segments)
        scratch_s(sys.executable, scratch_dir, dim, call_s, args.batch)
        figures["compacted_byte_identical"] = files(stores / f"r{dim}") == files(
            scratch_dir / f"derived/embeddings/r{dim}"
        )
        warm([cache_dir])
        for dense in (False, True):
            mode = "dense" if dense else "index"
            two, one = [], []
            for _ in range(4 * args.repeat):  # an epoch is short: more rounds, alternating
                two.append(epoch_s(cache, "two", dense))
                one.append(epoch_s(cache, f"r{dim}", dense))
            figures[f"epoch_{mode}_two_segments_s"] = statistics.median(two)
            figures[f"epoch_{mode}_compacted_s"] = statistics.median(one)
            figures[f"epoch_{mode}_two_over_compacted"] = statistics.median(
                t / o for t, o in zip(two, one)
            )
    figures["repeats"] = args.repeat
    figures["call_us"] = args.call_us
    figures["batch_size"] = args.batch
    print("| figure | value |\n|---|---|")
    for k, v in figures.items():
        print(f"| {k} | {v:.4g} |" if isinstance(v, float) else f"| {k} | {v} |")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
