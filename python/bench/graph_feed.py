"""Graph batches to a BiGCN-shaped model: how fast GraphDataset feeds it.

    python python/bench/graph_feed.py [CACHE_DIR] [--steps 50] [--batch 64]
        [--vocab 5000] [--workers 2] [--device cpu|cuda]

CACHE_DIR defaults to the PHEME-sized cache of ``benches/measure.sh``. The
model is BiGCN's shape: a top-down and a bottom-up two-layer GCN
(``torch_geometric.nn.GCNConv``) over each node's bag of words (a
``--vocab``-token reply vocabulary, BiGCN's input) concatenated with its 28
features, mean-pooled per thread, one classifier. Measured in one run:
(a) the model alone on one batch already on the device, (b) the data path
alone (``GraphDataset(bag_of_words=...)``, copies to the device included),
(c) both, with the share of a step the host waits for its batch; (b) and (c)
for both data paths: ``workers`` (the baseline: a DataLoader with
``--workers`` workers) and ``pinned`` (in-process, ``pin_memory=True``: two
page-locked buffer sets in turn; ordinary memory without CUDA). Prints a
Markdown table with the ratios pinned / workers and a JSON line. Needs
torch and torch_geometric.
"""

from __future__ import annotations

import argparse
import json
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
from feed_timing import time_feed
from torch import nn
from torch.utils.data import DataLoader
from torch_geometric.nn import GCNConv, global_mean_pool

import socialctx
from socialctx.torch import GraphDataset


class BiGcnLike(nn.Module):  # type: ignore[misc]
    def __init__(self, inputs: int, hidden: int) -> None:
        super().__init__()
        self.td1, self.td2 = GCNConv(inputs, hidden), GCNConv(hidden, hidden)
        self.bu1, self.bu2 = GCNConv(inputs, hidden), GCNConv(hidden, hidden)
        self.out = nn.Linear(2 * hidden, 2)

    def forward(self, x: torch.Tensor, edges: torch.Tensor, batch: torch.Tensor) -> torch.Tensor:
        half = edges.shape[1] // 2
        td, bu = edges[:, :half], edges[:, half:]
        h_td = self.td2(torch.relu(self.td1(x, td)), td)
        h_bu = self.bu2(torch.relu(self.bu1(x, bu)), bu)
        return self.out(
            torch.cat([global_mean_pool(h_td, batch), global_mean_pool(h_bu, batch)], 1)
        )


def on_device(ds: GraphDataset, workers: int, device: torch.device) -> Iterator[dict[str, Any]]:
    pin = device.type == "cuda"
    # In-process pinned mode: the dataset pins; the DataLoader copies nothing more.
    dl = DataLoader(
        ds,
        batch_size=None,
        num_workers=workers,
        pin_memory=pin and not ds.pin_memory,
        persistent_workers=workers > 0,
    )
    while True:
        for item in dl:
            bow = item["bow"].to(device, non_blocking=pin).to_dense()
            x = torch.cat([item["x"].to(device, non_blocking=pin), bow], dim=1)
            yield {
                "x": x,
                "edge_index": item["edge_index"].to(device, non_blocking=pin),
                "batch": item["batch"].to(device, non_blocking=pin),
                "y": item["y"].to(device, non_blocking=pin).clamp(min=0),
            }


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("cache", nargs="?", default="/tmp/socialctx-bench/cache")
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--vocab", type=int, default=5000)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    device = torch.device(args.device)
    cache = socialctx.open(args.cache)
    vocab = cache.vocabulary("reply", max_size=args.vocab)
    labels = np.asarray(cache.labels)
    torch.manual_seed(0)
    model = BiGcnLike(28 + len(vocab) + 2, args.hidden).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)

    def step(item: dict[str, Any]) -> None:
        loss = nn.functional.cross_entropy(
            model(item["x"], item["edge_index"], item["batch"]), item["y"]
        )
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    figures: dict[str, dict[str, float]] = {}
    for mode in ("workers", "pinned"):
        pinned = mode == "pinned"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # pinned without CUDA
            ds = GraphDataset(
                cache, np.arange(len(cache)), args.batch, labels=labels, seed=0, pyg=False,
                bag_of_words=vocab, kinds="replies", max_cxt=200, pin_memory=pinned,
            )  # fmt: skip
            it = on_device(ds, 0 if pinned else args.workers, device)
            first = next(it)
            times = time_feed(step, first, it.__next__, args.steps, lambda: sync(device))
        figures[mode] = {"nodes_per_batch": int(first["x"].shape[0]), **times.figures(args.steps)}
    print(f"batch {args.batch}, vocab {len(vocab)}, {args.workers} workers, {args.device}\n")
    print("| figure | workers | pinned | pinned / workers |\n|---|---|---|---|")
    for k, old in figures["workers"].items():
        new = figures["pinned"][k]
        print(f"| {k} | {old:.3g} | {new:.3g} | {new / old if old else float('nan'):.2f} |")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
