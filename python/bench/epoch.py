"""One epoch of normalised batches three ways, measured in one run.

    python python/bench/epoch.py [CACHE_DIR] [--rounds 5] [--batch 128] [--max-cxt 200]

CACHE_DIR defaults to the PHEME-sized cache that ``benches/measure.sh``
builds (``/tmp/socialctx-bench/cache-pheme``). Each figure is the median
of ``--rounds`` runs, all on this machine in this process (and its child):

1. the binding: ``socialctx.open`` (lazy) then ``Loader.epoch`` over every
   thread in order, replies only, normalised, batch x max_cxt x 28;
2. the Rust loader: ``target/release/examples/loadbench --normalize`` (the
   same selection, statistics and order; its epoch also starts at open);
3. a NumPy loader written the way a user would: one features array opened
   with ``np.load(mmap_mode="r")`` plus offsets and kinds, sliced, filtered,
   normalised and copied per thread into fresh batch arrays.

Also: open + first batch through the binding. Prints a Markdown table and a
JSON line.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import socialctx

REPO = Path(__file__).resolve().parents[2]


def binding_epoch(
    cache_dir: Path, stats_path: Path, batch: int, max_cxt: int
) -> tuple[float, float]:
    """(epoch seconds after open, open + first batch seconds)."""
    start = time.perf_counter()
    cache = socialctx.open(cache_dir)
    opened = time.perf_counter()
    stats = socialctx.FeatureStats.load(stats_path)
    loader = socialctx.Loader(cache, max_cxt=max_cxt, stats=stats)
    first = None
    for _ in loader.epoch(range(len(cache)), batch):
        if first is None:
            first = time.perf_counter() - start
    return time.perf_counter() - opened, first or 0.0


def rust_epoch(cache_dir: Path, batch: int, max_cxt: int) -> float:
    exe = REPO / "target/release/examples/loadbench"
    out = subprocess.run(
        [exe, cache_dir, "--normalize", "--batch", str(batch), "--max-cxt", str(max_cxt)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return float(json.loads(out)["epoch_ms"]) / 1e3


def export_numpy(cache_dir: Path, out: Path) -> None:
    """What a user would save once: every reaction's features, kinds, offsets."""
    cache = socialctx.open(cache_dir)
    feats, kinds, offsets = [], [], [0]
    for t in cache:
        feats.append(t.features)
        kinds.append(t.kinds)
        offsets.append(offsets[-1] + len(t))
    np.save(out / "features.npy", np.concatenate(feats))
    np.save(out / "kinds.npy", np.concatenate(kinds))
    np.save(out / "offsets.npy", np.asarray(offsets, dtype=np.int64))


def numpy_epoch(d: Path, stats_path: Path, batch: int, max_cxt: int) -> float:
    stats = socialctx.FeatureStats.load(stats_path)
    mean, scale = stats.mean, stats.std + 1e-6
    start = time.perf_counter()
    feats = np.load(d / "features.npy", mmap_mode="r")
    kinds = np.load(d / "kinds.npy", mmap_mode="r")
    offsets = np.load(d / "offsets.npy")
    n = len(offsets) - 1
    for lo in range(0, n, batch):
        chunk = range(lo, min(lo + batch, n))
        x = np.zeros((batch, max_cxt, 28), dtype=np.float32)
        mask = np.zeros((batch, max_cxt), dtype=np.uint8)
        lengths = np.zeros(batch, dtype=np.uint32)
        for b, p in enumerate(chunk):
            a, z = offsets[p], offsets[p + 1]
            rows = feats[a:z][kinds[a:z] == 1][:max_cxt]
            k = len(rows)
            if k:
                x[b, :k] = (rows - mean) / scale
            else:
                k = 1  # the reference's zero row
            mask[b, :k] = 1
            lengths[b] = k
    return time.perf_counter() - start


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("cache", nargs="?", type=Path, default=Path("/tmp/socialctx-bench/cache-pheme"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--max-cxt", type=int, default=200)
    args = ap.parse_args()
    if not (args.cache / "manifest.json").is_file():
        print(
            f"error: no cache at {args.cache} (run `bash benches/measure.sh` first)",
            file=sys.stderr,
        )
        return 1
    # Where loadbench --normalize keeps its statistics (derived/, by content id).
    stats_path = Path(socialctx.open(args.cache).derived_dir) / (
        f"stats-{socialctx.open(args.cache).content_id}.json"
    )
    if not stats_path.is_file():
        # Replies of every thread: what loadbench --normalize computes too.
        stats_path.parent.mkdir(exist_ok=True)
        socialctx.FeatureStats.compute(socialctx.open(args.cache)).save(stats_path)
    cache = socialctx.open(args.cache)
    with tempfile.TemporaryDirectory() as tmp:
        export_numpy(args.cache, Path(tmp))
        # One untimed round of each warms the page cache and the code.
        binding_epoch(args.cache, stats_path, args.batch, args.max_cxt)
        rust_epoch(args.cache, args.batch, args.max_cxt)
        numpy_epoch(Path(tmp), stats_path, args.batch, args.max_cxt)
        b, f, r, n = [], [], [], []
        for _ in range(args.rounds):
            e, first = binding_epoch(args.cache, stats_path, args.batch, args.max_cxt)
            b.append(e)
            f.append(first)
            r.append(rust_epoch(args.cache, args.batch, args.max_cxt))
            n.append(numpy_epoch(Path(tmp), stats_path, args.batch, args.max_cxt))
    med = {
        k: statistics.median(v) * 1e3
        for k, v in {"binding": b, "first": f, "rust": r, "numpy": n}.items()
    }
    print(
        f"Cache `{args.cache}`: {len(cache)} threads; batches of {args.batch} x {args.max_cxt} x 28, "
        f"replies, normalised; medians of {args.rounds}.\n"
    )
    print("| figure | value |\n|---|---|")
    print(f"| epoch, Python binding | {med['binding']:.2f} ms |")
    print(f"| epoch, Rust loader (loadbench) | {med['rust']:.2f} ms |")
    print(f"| epoch, NumPy loader (np.load mmap + slicing) | {med['numpy']:.2f} ms |")
    print(f"| **binding / Rust** | **{med['binding'] / med['rust']:.2f}x** (target <= 1.25x) |")
    print(f"| **NumPy / binding** | **{med['numpy'] / med['binding']:.1f}x** (target >= 2x) |")
    print(f"| open + first batch, Python | {med['first']:.2f} ms (target < 5 ms) |")
    print(json.dumps({k + "_ms": round(v, 3) for k, v in med.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
