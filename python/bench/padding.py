"""Padding of a bucketed epoch, and its floor, on one cache.

    python python/bench/padding.py [CACHE_DIR] [--batch 128] [--multiple 8]

CACHE_DIR defaults to the PHEME-sized cache (``/tmp/socialctx-bench/
cache-pheme``, ``gen-corpus --threads 6425``, as ``arrow.py`` builds it).
Padded rows per real row of one epoch (seed 0, noise 0.1) with
``pad="longest"``, for the bucketed order by noisy length alone (the
previous order: what a ``pad="max"`` Loader plans) and by padded width
first (``pad="longest"``'s plan now), beside two floors:

- *any order*: every thread is in some batch at least as wide as its own
  length rounded up to the multiple, so no plan pads less than the sum of
  those widths over the real rows, whatever the order or batch size;
- *batch B*: the least padding of any cut of the width-sorted threads into
  batches of at most B (dynamic programming; sorted order is optimal for
  cost = batch size x widest member, by an exchange argument);
- *full batches of B*: the same when every batch but one holds exactly B
  threads, as the plan cuts them (the width-sorted runs of B, the short
  one placed where it costs least).

Prints a Markdown table and a JSON line.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

import socialctx

sys.path.insert(0, str(Path(__file__).parent))
from arrow import cache_dir  # noqa: E402


def padded(plan: list[Any], lengths: np.ndarray, multiple: int, max_cxt: int) -> int:
    total = 0
    for b in plan:
        longest = max(1, int(lengths[b].max()))
        total += len(b) * min(-(-longest // multiple) * multiple, max_cxt)
    return total


def floor_for_batches(widths: np.ndarray, batch: int) -> int:
    """The least sum of (size x widest) over cuts of the sorted widths into
    runs of at most ``batch``: only cuts where the width changes or a run
    is full matter, so the DP runs over the width classes."""
    w = np.sort(widths)
    n = len(w)
    best = np.full(n + 1, np.iinfo(np.int64).max, dtype=np.int64)
    best[0] = 0
    for end in range(1, n + 1):
        start = np.arange(max(0, end - batch), end)
        best[end] = int(np.min(best[start] + (end - start) * w[end - 1]))
    return int(best[n])


def floor_full_batches(widths: np.ndarray, batch: int) -> int:
    """The least padding of any order when every batch but one holds
    exactly ``batch`` threads (as the plan cuts them): the width-sorted
    threads in runs of ``batch``, the short run placed where it costs
    least (fixed run sizes: sorted order minimizes the sum of the runs'
    maxima)."""
    w = np.sort(widths)
    n = len(w)
    short = n % batch
    best = None
    for k in range(n // batch + 1):  # the short run after k full ones
        sizes = [batch] * k + ([short] if short else []) + [batch] * (n // batch - k)
        ends = np.cumsum(sizes)
        cost = int(sum(size * w[end - 1] for size, end in zip(sizes, ends)))
        best = cost if best is None else min(best, cost)
    return int(best or 0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("cache", nargs="?", type=Path, default=Path("/tmp/socialctx-bench/cache-pheme"))
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--multiple", type=int, default=8)
    args = ap.parse_args()
    cache = socialctx.open(cache_dir(args.cache))
    n, m, bs = len(cache), args.multiple, args.batch
    longest = socialctx.Loader(cache, pad="longest", pad_multiple=m)
    lengths = longest.lengths(range(n))
    real = int(lengths.sum())
    max_cxt = 200
    widths = np.minimum(-(-np.maximum(lengths, 1) // m) * m, max_cxt)
    by_length = socialctx.Loader(cache, pad="max").plan(range(n), bs, seed=0, bucket=True)
    by_width = longest.plan(range(n), bs, seed=0, bucket=True)
    epoch = longest.epoch(range(n), bs, seed=0, bucket=True)
    fig = {
        "by_length": padded(by_length, lengths, m, max_cxt) / real,
        "by_width": padded(by_width, lengths, m, max_cxt) / real,
        "epoch_padded_rows": epoch.padded_rows / epoch.real_rows,
        "floor_any_order": int(widths.sum()) / real,
        "floor_batch": floor_for_batches(widths, bs) / real,
        "floor_full_batches": floor_full_batches(widths, bs) / real,
        "threads_below_multiple": float(np.mean(lengths < m)),
        "median_length": float(np.median(lengths)),
    }
    assert abs(fig["epoch_padded_rows"] - fig["by_width"]) < 1e-9, fig
    print(f"cache {args.cache}: {n:,} threads, {real:,} rows; batch {bs}, multiple {m}\n")
    print("| padded rows / real rows | value |")
    print("|---|---:|")
    for k, v in fig.items():
        print(f"| {k} | {v:.4f} |")
    print(json.dumps({"bench": "padding", "batch": bs, "multiple": m, **fig}))


if __name__ == "__main__":
    main()
