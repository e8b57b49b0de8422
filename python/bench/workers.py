"""DataLoader workers or not: batches per second of one epoch of
``CacheDataset`` in-process (``num_workers=0``) and with 1, 2 and 4
workers, for two batch sizes, with no model step and with a small model's
forward and backward pass per batch.

    python python/bench/workers.py [CACHE_DIR] [--rounds 3] [--batches 32,128]

CACHE_DIR defaults to the PHEME-sized cache that ``benches/measure.sh``
builds (``/tmp/socialctx-bench/cache-pheme``). Configurations are measured
round-robin, one timed epoch each per round, so that a machine's changing load
falls on all of them alike; each figure is the median over the rounds
(the range in brackets, with the ratio to in-process in the same rounds).
Each configuration's loader is made, run for one epoch (its workers'
start-up: not counted), timed for one epoch and shut down, so that only one
loader's workers are alive at a time. Prints the load average, a Markdown table and a JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader

import socialctx
from socialctx.torch import CacheDataset


def model_step(model: torch.nn.Module | None, opt: Any, item: dict[str, Any]) -> None:
    if model is None:
        # The least a training loop does with a batch: read it.
        float(item["features"][0, 0, 0])
        return
    x, mask = item["features"], item["mask"]
    h = model(x)  # [B, T, 2]
    pooled = (h * mask.unsqueeze(-1)).sum(1) / mask.sum(1, keepdim=True).clamp(min=1)
    loss = torch.nn.functional.cross_entropy(pooled, item["labels"])
    opt.zero_grad()
    loss.backward()
    opt.step()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("cache", nargs="?", default="/tmp/socialctx-bench/cache-pheme")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batches", default="32,128")
    ap.add_argument("--workers", default="0,1,2,4")
    args = ap.parse_args()
    workers = [int(w) for w in args.workers.split(",")]
    cache = socialctx.open(args.cache)
    positions = np.flatnonzero(cache.labels >= 0)
    labels = cache.labels[positions]
    sizes = [int(b) for b in args.batches.split(",")]
    torch.manual_seed(0)
    # A small model: per reaction 28 -> 128 -> 2, pooled over the thread.
    model = torch.nn.Sequential(torch.nn.Linear(28, 128), torch.nn.ReLU(), torch.nn.Linear(128, 2))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    times: dict[tuple[int, int, str], list[float]] = {}
    counts: dict[int, int] = {}
    load = [os.getloadavg()[0]]
    for _ in range(args.rounds):
        for step in ("none", "mlp"):
            m = model if step == "mlp" else None
            for b in sizes:
                for w in workers:
                    # One loader alive at a time, as in training: the idle
                    # workers of other loaders slowed the in-process runs.
                    ds = CacheDataset(cache, positions, b, labels=labels, seed=0, pad="longest")
                    kw: dict[str, Any] = {"num_workers": w}
                    if w:
                        kw["persistent_workers"] = True
                    dl = DataLoader(ds, batch_size=None, **kw)
                    for _ in dl:  # starts the workers: not measured
                        pass
                    n = 0
                    t = time.perf_counter()
                    for item in dl:
                        model_step(m, opt, item)
                        n += 1
                    times.setdefault((b, w, step), []).append(time.perf_counter() - t)
                    counts[b] = n
                    del dl
        load.append(os.getloadavg()[0])
    print(f"load average (1 min) during the rounds: {min(load):.1f} to {max(load):.1f}")
    print(f"torch threads {torch.get_num_threads()}, cores {os.cpu_count()}")
    print()
    print("| batch | model step | " + " | ".join(f"{w} workers" for w in workers) + " |")
    print("|---|---|" + "---:|" * len(workers))
    out = []
    for b in sizes:
        for step in ("none", "mlp"):
            base = statistics.median(times[(b, 0, step)])
            cells = []
            for w in workers:
                ts = times[(b, w, step)]
                med = statistics.median(ts)
                rate = counts[b] / med
                lo, hi = counts[b] / max(ts), counts[b] / min(ts)
                cells.append(f"{rate:,.0f}/s ({base / med:.2f}x; {lo:,.0f}-{hi:,.0f})")
                out.append({"batch": b, "step": step, "workers": w, "batches_per_s": rate})
            print(f"| {b} | {step} | " + " | ".join(cells) + " |")
    print()
    print(json.dumps({"cache": str(Path(args.cache)), "rounds": args.rounds, "results": out}))


if __name__ == "__main__":
    main()
