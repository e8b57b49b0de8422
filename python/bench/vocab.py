"""A vocabulary of the replies' tokens two ways, in one run: socialctx's
(counted in Rust from the stored tokens) against ``collections.Counter``
over the token lists as a Python pipeline holds them (AllenNLP's
``Vocabulary.from_instances`` counts instances held in memory).

    python python/bench/vocab.py [CACHE_DIR] [--rounds 3]

CACHE_DIR defaults to the PHEME-sized cache of ``benches/measure.sh``
(``/tmp/socialctx-bench/cache``). Each way runs in a fresh process: time
(median of ``--rounds``) and peak memory above the process's baseline
(``ru_maxrss`` after opening the cache). Both must give the same counts.
Prints a Markdown table and a JSON line.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

CHILD = r"""
import collections, json, resource, sys, time
import socialctx
cache = socialctx.open(sys.argv[1])
len(cache.vocabulary())  # every text shard validated and paged in, for both ways
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t = time.perf_counter()
if sys.argv[2] == "rust":
    v = cache.vocabulary("reply")
    counts = dict(zip(v.tokens, v.counts.tolist()))
    took = time.perf_counter() - t
else:
    lists = [ts for th in cache for ts in th.reply_tokens if ts is not None]
    c = collections.Counter()
    for ts in lists:
        c.update(ts)
    took = time.perf_counter() - t
    counts = dict(c)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base
digest = hash(frozenset(counts.items()))
print(json.dumps({"s": took, "peak_kib": peak, "tokens": len(counts), "digest": digest}))
"""


def run(cache: str, way: str) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, cache, way],
        check=True,
        capture_output=True,
        text=True,
        env={"PYTHONHASHSEED": "0"},
    )
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("cache", nargs="?", default="/tmp/socialctx-bench/cache")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    res: dict[str, list[dict[str, float]]] = {"rust": [], "counter": []}
    for _ in range(args.rounds):
        for way in res:
            res[way].append(run(args.cache, way))
    assert res["rust"][0]["digest"] == res["counter"][0]["digest"], "the counts differ"
    fig = {
        way: {
            "s": statistics.median(r["s"] for r in rs),
            "peak_mib": statistics.median(r["peak_kib"] for r in rs) / 1024,
        }
        for way, rs in res.items()
    }
    ratios = {
        "time_rust_over_counter": fig["rust"]["s"] / fig["counter"]["s"],
        "peak_rust_over_counter": fig["rust"]["peak_mib"] / max(fig["counter"]["peak_mib"], 1e-9),
        "tokens": res["rust"][0]["tokens"],
    }
    print("| way | seconds | peak MiB above baseline |\n|---|---|---|")
    for way, f in fig.items():
        print(f"| {way} | {f['s']:.3f} | {f['peak_mib']:.1f} |")
    print(json.dumps({"figures": fig, **ratios}))


if __name__ == "__main__":
    main()
