"""Where a training step's time goes: the model, the data path, or both.

    python python/bench/gpu_feed.py [CACHE_DIR] [--steps 20] [--batch 32]
        [--hidden 256] [--dim 1024] [--workers 2] [--device cpu|cuda]

CACHE_DIR defaults to the PHEME-sized cache of ``benches/measure.sh``
(``/tmp/socialctx-bench/cache``). A reply embedding store ``bench-<dim>``
(a deterministic toy model's rows, ELMo-sized by default) is made on first
use. Everything below is measured in one run, on this machine:

1. **Loader epochs** (NumPy, no torch): features only; with the reply store
   in index mode (``dense=False``); dense rows (``dense=True``); and the
   padding of an epoch with ``pad="max"`` against bucketed ``pad="longest"``.
2. **An RPDNN-sized model** (an LSTM over the 28 features and an LSTM over
   the reply embeddings, ``--hidden`` units each, attention over the
   context, a classifier) trained for ``--steps`` steps, for two data paths:

   - *old*: ``[B, 200]`` batches with dense embedding rows copied on the
     host and moved to the device (what a padded, dense loader gives);
   - *new*: bucketed ``pad="longest"`` batches carrying only the embedding
     index; rows gathered on the device by ``EmbeddingTable``.

   For each: (a) the model alone on one batch already on the device,
   (b) the data path alone (DataLoader with ``--workers`` workers, copies
   to the device included), (c) both. Reported: steps/s, the share of a
   step spent waiting for data in (c), host-to-device bytes per step, and
   the padding share of the rows.

With ``--device cuda`` copies are non-blocking from pinned memory and the
figures include GPU-busy shares (the model's time alone over the time of a
step). Prints a Markdown table and a JSON line.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import zlib
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
from feed_timing import time_feed
from torch import nn
from torch.utils.data import DataLoader

import socialctx
from socialctx.torch import CacheDataset, EmbeddingTable


def toy_rows(batch: list[list[str]], dim: int) -> np.ndarray:
    """Deterministic rows: a seeded normal vector per input."""
    out = np.empty((len(batch), dim), dtype=np.float32)
    for i, tokens in enumerate(batch):
        seed = zlib.crc32(" ".join(tokens).encode())
        out[i] = np.random.default_rng(seed).standard_normal(dim, dtype=np.float32)
    return out


def ensure_store(cache: socialctx.Cache, dim: int) -> str:
    name = f"bench-{dim}"
    try:
        socialctx.open_store(cache, name)
    except socialctx.EmbeddingError:
        print(f"making store {name} ({dim}-dim toy rows)...", flush=True)
        socialctx.embed(
            cache, lambda b: toy_rows(b, dim), field="reply", name=name, batch_size=1024
        )
    return name


def time_epoch(loader: socialctx.Loader, n: int, batch: int, **kw: Any) -> tuple[float, Any]:
    start = time.perf_counter()
    epoch = loader.epoch(range(n), batch, seed=0, **kw)
    for _ in epoch:
        pass
    return time.perf_counter() - start, epoch


class RpdnnLike(nn.Module):  # type: ignore[misc]
    """The shape of RPDNN's social-context encoder: two LSTMs over the
    context (features, reply embeddings), attention, a classifier."""

    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.meta = nn.LSTM(28, hidden, batch_first=True)
        self.text = nn.LSTM(dim, hidden, batch_first=True)
        self.att = nn.Linear(2 * hidden, 1)
        self.out = nn.Linear(2 * hidden, 2)

    def forward(self, feats: torch.Tensor, emb: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        h = torch.cat([self.meta(feats)[0], self.text(emb)[0]], dim=-1)
        score = self.att(h).squeeze(-1).masked_fill(~mask, -1e9)
        ctx = (torch.softmax(score, dim=1).unsqueeze(-1) * h).sum(1)
        return self.out(ctx)


def batches(
    ds: CacheDataset, workers: int, device: torch.device
) -> Iterator[tuple[dict[str, Any], int]]:
    """Items of the dataset on the device, with the host-to-device bytes."""
    pin = device.type == "cuda"
    dl = DataLoader(
        ds,
        batch_size=None,
        num_workers=workers,
        # A dataset that pins its own buffers (in-process) needs no copy more.
        pin_memory=pin and not ds.pin_memory,
        persistent_workers=workers > 0,
    )
    while True:
        for item in dl:
            moved = 0

            def to(t: torch.Tensor) -> torch.Tensor:
                nonlocal moved
                moved += t.numel() * t.element_size()
                return t.to(device, non_blocking=pin)

            out = {k: to(v) for k, v in item.items() if isinstance(v, torch.Tensor)}
            out["embedding_index"] = {k: to(v) for k, v in item["embedding_index"].items()}
            out["embeddings"] = {k: to(v) for k, v in item.get("embeddings", {}).items()}
            yield out, moved


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def run_path(
    name: str,
    ds: CacheDataset,
    store: str,
    table: EmbeddingTable | None,
    args: argparse.Namespace,
    device: torch.device,
) -> dict[str, Any]:
    torch.manual_seed(0)
    model = RpdnnLike(args.dim, args.hidden).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)

    def step(item: dict[str, Any]) -> None:
        emb = table(item["embedding_index"][store]) if table else item["embeddings"][store]
        logits = model(item["features"], emb, item["mask"])
        loss = nn.functional.cross_entropy(logits, item["labels"].clamp(min=0))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    it = batches(ds, 0 if ds.pin_memory else args.workers, device)
    first, _ = next(it)
    moved = []

    def next_item() -> dict[str, Any]:
        item, nbytes = next(it)
        moved.append(nbytes)
        return item

    def gather(item: dict[str, Any]) -> None:
        if table:
            table(item["embedding_index"][store])

    times = time_feed(step, first, next_item, args.steps, lambda: sync(device), gather)
    return {
        "path": name,
        **times.figures(args.steps),
        "h2d_bytes_per_step": statistics.mean(moved),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("cache", nargs="?", default="/tmp/socialctx-bench/cache")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--dim", type=int, default=1024)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--rounds", type=int, default=3, help="loader epochs: median of this many")
    args = ap.parse_args()
    device = torch.device(args.device)
    cache = socialctx.open(args.cache)
    store = ensure_store(cache, args.dim)
    n = len(cache)

    # 1. Loader epochs, NumPy only.
    plain = socialctx.Loader(cache)
    index = socialctx.Loader(cache, embeddings=[store], dense=False)
    dense = socialctx.Loader(cache, embeddings=[store], dense=True)
    longest = socialctx.Loader(cache, pad="longest")
    time_epoch(index, n, 128)  # page the store in
    rows: dict[str, list[float]] = {"features": [], "index": [], "dense": []}
    for _ in range(args.rounds):
        for key, loader in (("features", plain), ("index", index), ("dense", dense)):
            rows[key].append(time_epoch(loader, n, 128)[0])
    ep = {k: statistics.median(v) for k, v in rows.items()}
    _, max_epoch = time_epoch(plain, n, args.batch)
    _, bucket_epoch = time_epoch(longest, n, args.batch, bucket=True)
    loader_figures = {
        "epoch_features_ms": ep["features"] * 1e3,
        "epoch_index_ms": ep["index"] * 1e3,
        "epoch_dense_ms": ep["dense"] * 1e3,
        "index_over_features": ep["index"] / ep["features"],
        "dense_over_features": ep["dense"] / ep["features"],
        "padded_over_real_max": max_epoch.padded_rows / max_epoch.real_rows,
        "padded_over_real_bucketed": bucket_epoch.padded_rows / bucket_epoch.real_rows,
    }

    # 2. The model and the two data paths.
    positions = np.arange(n)
    labels = np.asarray(cache.labels)
    old = CacheDataset(
        cache, positions, args.batch, labels=labels, seed=0, embeddings=[store], dense=True
    )
    new = CacheDataset(
        cache,
        positions,
        args.batch,
        labels=labels,
        seed=0,
        bucket=True,
        pad="longest",
        embeddings=[store],
    )
    # The same batches filled in the training process into page-locked
    # buffers (a fill is ~0.1 ms of Rust with the GIL released): no worker
    # processes, no inter-process queue.
    pinned = CacheDataset(
        cache,
        positions,
        args.batch,
        labels=labels,
        seed=0,
        bucket=True,
        pad="longest",
        embeddings=[store],
        pin_memory=device.type == "cuda",
    )
    table = EmbeddingTable(cache, store, device=device)
    results = [
        run_path("old: pad 200, dense rows from the host", old, store, None, args, device),
        run_path("new: bucketed, longest, index + device gather", new, store, table, args, device),
        run_path("new, in-process: pinned buffers, no workers", pinned, store, table, args, device),
    ]
    results[0]["padding_share"] = 1 - max_epoch.real_rows / max_epoch.padded_rows
    results[1]["padding_share"] = 1 - bucket_epoch.real_rows / bucket_epoch.padded_rows
    results[2]["padding_share"] = results[1]["padding_share"]

    print(f"\nLoader epochs ({n} threads, batch 128, median of {args.rounds}):\n")
    print("| figure | value |\n|---|---|")
    for k, v in loader_figures.items():
        print(f"| {k} | {v:.2f} |")
    print(
        f"\nTraining steps (batch {args.batch}, hidden {args.hidden}, dim {args.dim}, "
        f"{args.workers} workers, {args.device}, {args.steps} steps each):\n"
    )
    cols = [
        "model_steps_per_s",
        "data_steps_per_s",
        "both_steps_per_s",
        "wait_share",
        "busy_share",
        "h2d_bytes_per_step",
        "padding_share",
    ]
    print("| path | " + " | ".join(cols) + " |")
    print("|---" * (len(cols) + 1) + "|")
    for r in results:
        print(f"| {r['path']} | " + " | ".join(f"{r[c]:.3g}" for c in cols) + " |")
    speedup = results[1]["both_steps_per_s"] / results[0]["both_steps_per_s"]
    print(f"\nnew / old steps per second: {speedup:.2f}x")
    print(json.dumps({"loader": loader_figures, "training": results, "speedup": speedup}))


if __name__ == "__main__":
    main()
