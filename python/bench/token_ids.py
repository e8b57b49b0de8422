"""What a vocabulary's indices add to an epoch, in one run: per batch the
plain ``Loader.fill`` against ``Vocabulary.token_ids`` on the filled batch,
and ``Loader.fill_graph`` against ``Vocabulary.bag_of_words`` on the graphs.

    python python/bench/token_ids.py [CACHE_DIR] [--rounds 5] [--batch 32]
        [--max-tokens 40] [--vocab-size 5000]

CACHE_DIR defaults to the PHEME-sized cache of ``benches/measure.sh``
(``/tmp/socialctx-bench/cache``). The reply vocabulary is counted once
(top ``--vocab-size``); each round is one epoch over every thread in
shuffled batches, the two calls timed back to back on each batch so that a
busy machine slows both alike. Reported per padding (``max``: ``[B, 200]``,
``longest``: bucketed) and for graphs: seconds per epoch of each (min,
median, max over rounds) and their ratio per round. Prints a Markdown table
and a JSON line.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

import socialctx


def epoch(
    cache: socialctx.Cache,
    vocab: socialctx.Vocabulary,
    how: str,
    batch_size: int,
    max_tokens: int,
    seed: int,
) -> tuple[float, float]:
    """Seconds of (the loader's fill, the vocabulary's indices) over one epoch."""
    positions = np.arange(len(cache))
    if how == "graph":
        loader = socialctx.Loader(cache)
        graph = socialctx.GraphBatch()
        base = extra = 0.0
        for b in loader.plan(positions, batch_size, seed=seed):
            t0 = time.perf_counter()
            loader.fill_graph(positions[b], graph)
            t1 = time.perf_counter()
            vocab.bag_of_words(graph)
            t2 = time.perf_counter()
            base, extra = base + t1 - t0, extra + t2 - t1
        return base, extra
    loader = socialctx.Loader(cache, pad="longest" if how == "longest" else "max")
    batch = loader.new_batch(batch_size)
    base = extra = 0.0
    for b in loader.plan(positions, batch_size, seed=seed, bucket=how == "longest"):
        t0 = time.perf_counter()
        loader.fill(positions[b], batch)
        t1 = time.perf_counter()
        vocab.token_ids(loader, batch, max_tokens=max_tokens)
        t2 = time.perf_counter()
        base, extra = base + t1 - t0, extra + t2 - t1
    return base, extra


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("cache", nargs="?", default="/tmp/socialctx-bench/cache")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--max-tokens", type=int, default=40)
    ap.add_argument("--vocab-size", type=int, default=5000)
    args = ap.parse_args()
    cache = socialctx.open(args.cache)
    vocab = cache.vocabulary("reply", max_size=args.vocab_size)
    epoch(cache, vocab, "max", args.batch, args.max_tokens, 0)  # pages everything in
    out: dict[str, dict[str, list[float]]] = {}
    for how in ("max", "longest", "graph"):
        runs = [
            epoch(cache, vocab, how, args.batch, args.max_tokens, r) for r in range(args.rounds)
        ]
        out[how] = {
            "fill_s": [r[0] for r in runs],
            "indices_s": [r[1] for r in runs],
            "ratio": [r[1] / r[0] for r in runs],
        }

    def spread(v: list[float]) -> str:
        return f"{min(v):.3f} / {statistics.median(v):.3f} / {max(v):.3f}"

    print("| batches | fill s (min/med/max) | indices s | indices / fill |\n|---|---|---|---|")
    for how, f in out.items():
        name = {"max": "pad=max", "longest": "pad=longest", "graph": "graphs (bag of words)"}[how]
        print(
            f"| {name} | {spread(f['fill_s'])} | {spread(f['indices_s'])} | {spread(f['ratio'])} |"
        )
    print(json.dumps({"threads": len(cache), "vocabulary": len(vocab), **vars(args), **out}))


if __name__ == "__main__":
    main()
