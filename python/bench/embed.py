"""socialctx.embed against RPDNN's way (one model call per reaction), measured
in one run with the same deterministic toy model.

    python python/bench/embed.py [CACHE_DIR] [--field description] [--batch 256]

CACHE_DIR defaults to the PHEME-sized cache of ``benches/measure.sh``
(``/tmp/socialctx-bench/cache-pheme``). The toy model costs a fixed amount
per call (``--call-us``, default 100 us, far below a real ELMo forward
pass) plus a little per token; the figures are calls and wall time. Prints a Markdown table
and a JSON line.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

import socialctx

DIM = 64
CALL_S = 100e-6


def toy(batch: list[list[str]]) -> np.ndarray:
    """A deterministic stand-in for ELMo: one row per input, after a fixed
    per-call cost (``--call-us``, busy-waited: a model's launch overhead)."""
    until = time.perf_counter() + CALL_S
    while time.perf_counter() < until:
        pass
    out = np.empty((len(batch), DIM), dtype=np.float32)
    for i, tokens in enumerate(batch):
        out[i] = (len(tokens) + sum(map(len, tokens))) % 97
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cache", nargs="?", default="/tmp/socialctx-bench/cache-pheme")
    ap.add_argument("--field", default="description", choices=["reply", "description"])
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument(
        "--call-us", type=float, default=100.0, help="fixed cost per model call (default 100 us)"
    )
    args = ap.parse_args()
    global CALL_S
    CALL_S = args.call_us * 1e-6
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "cache"
        shutil.copytree(args.cache, copy, ignore=shutil.ignore_patterns("derived"))
        cache = socialctx.open(copy)

        calls = 0

        def counted(batch: list[list[str]]) -> np.ndarray:
            nonlocal calls
            calls += 1
            return toy(batch)

        start = time.perf_counter()
        result = socialctx.embed(
            cache, counted, field=args.field, name="bench", batch_size=args.batch
        )
        embed_s = time.perf_counter() - start

        # RPDNN's way: every reaction with an input, one call each.
        per_reaction_calls = 0
        start = time.perf_counter()
        for thread in cache:
            lists = (
                thread.description_tokens if args.field == "description" else thread.reply_tokens
            )
            for tokens in lists:
                if tokens:
                    toy([tokens])
                    per_reaction_calls += 1
        per_reaction_s = time.perf_counter() - start

    row = {
        "field": args.field,
        "reactions": result.reactions,
        "unique": result.unique,
        "embed_calls": calls,
        "embed_s": round(embed_s, 3),
        "per_reaction_calls": per_reaction_calls,
        "per_reaction_s": round(per_reaction_s, 3),
        "speedup": round(per_reaction_s / embed_s, 2),
    }
    print(
        "| field | reactions | unique | embed calls | embed s | per-reaction calls | per-reaction s | ratio |"
    )
    print("|---|---|---|---|---|---|---|---|")
    print("| " + " | ".join(str(v) for v in row.values()) + " |")
    print(json.dumps(row))


if __name__ == "__main__":
    main()
