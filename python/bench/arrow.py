"""A cache as a polars DataFrame two ways, measured in one run.

    python python/bench/arrow.py [CACHE_DIR] [--rounds 3]

CACHE_DIR defaults to the PHEME-sized cache (``/tmp/socialctx-bench/
cache-pheme``, built here from ``gen-corpus --threads 6425`` when absent,
as ``benches/measure.sh`` builds it). Each way runs in a fresh child
process (so that peak memory is its own), ``--rounds`` times; the figures
are medians:

1. ``polars.DataFrame(cache.to_arrow())``: every reaction (replies and
   retweets), 46 columns, through the Arrow PyCapsule interface;
2. the baseline: ``polars.read_ndjson`` of ``socialctx dump --retweets
   --extended --graph``'s output (already written, in the page cache), one
   row per thread with its reactions nested, then exploded and unnested
   (the features list too) to one row per reaction with the same columns
   (less position and label_code; also timed without that step).

Time from after ``import polars`` and ``socialctx.open`` to the finished
frame; peak memory is the child's peak RSS less its RSS at that point.
Prints a Markdown table and a JSON line.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

CHILD = r"""
import json, resource, sys, time
import polars as pl
import socialctx
way, cache_dir, dump = sys.argv[1], sys.argv[2], sys.argv[3]
cache = socialctx.open(cache_dir, validate="all")
def rss_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
base = rss_kib()
t = time.perf_counter()
if way == "arrow":
    df = pl.DataFrame(cache.to_arrow())
else:
    df = pl.read_ndjson(dump, infer_schema_length=None)
    if way == "ndjson_flat":
        df = df.explode("reactions").unnest("reactions")
        names = socialctx.FEATURE_NAMES
        df = df.with_columns(pl.col("features").list.to_struct(fields=names)).unnest("features")
s = time.perf_counter() - t
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"s": s, "peak_kib": peak - base, "rows": df.height, "cols": df.width}))
"""


def cache_dir(path: Path) -> Path:
    if (path / "manifest.json").is_file():
        return path
    corpus = path.parent / "pheme"
    if not corpus.is_dir():
        gen = REPO / "target" / "release" / "gen-corpus"
        print(f"generating {corpus} (gen-corpus --threads 6425)", file=sys.stderr)
        subprocess.run([gen, corpus, "--threads", "6425"], check=True, capture_output=True)
    print(f"building {path}", file=sys.stderr)
    subprocess.run(
        [sys.executable, "-m", "socialctx", "build", corpus, path, "-q"],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return path


def run(way: str, cache: Path, dump: Path) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, way, str(cache), str(dump)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    result: dict[str, float] = json.loads(out)
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("cache", nargs="?", type=Path, default=Path("/tmp/socialctx-bench/cache-pheme"))
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    cache = cache_dir(args.cache)
    with tempfile.TemporaryDirectory() as tmp:
        dump = Path(tmp) / "dump.jsonl"
        with open(dump, "wb") as f:
            subprocess.run(
                [sys.executable, "-m", "socialctx", "dump", str(cache)]
                + ["--retweets", "--extended", "--graph"],
                check=True,
                stdout=f,
            )
        dump.read_bytes()  # in the page cache for every round
        ways = ["arrow", "ndjson", "ndjson_flat"]
        res: dict[str, list[dict[str, float]]] = {w: [] for w in ways}
        for _ in range(args.rounds):
            for way in ways:
                res[way].append(run(way, cache, dump))
        dump_mib = dump.stat().st_size / 2**20
    assert res["arrow"][0]["rows"] == res["ndjson_flat"][0]["rows"], "row counts differ"
    fig = {
        w: {
            "s": statistics.median(r["s"] for r in rs),
            "peak_mib": statistics.median(r["peak_kib"] for r in rs) / 1024,
            "rows": rs[0]["rows"],
            "cols": rs[0]["cols"],
        }
        for w, rs in res.items()
    }
    a = fig["arrow"]
    print(f"cache {cache}: {a['rows']:,} reactions; dump {dump_mib:.0f} MiB\n")
    print("| way | time (s) | peak RSS over base (MiB) | rows x cols | time ratio | memory ratio |")
    print("|---|---:|---:|---:|---:|---:|")
    names = {
        "arrow": "polars.DataFrame(cache.to_arrow())",
        "ndjson": "polars.read_ndjson(dump) (nested)",
        "ndjson_flat": "read_ndjson + explode + unnest (flat)",
    }
    for w, r in fig.items():
        print(
            f"| {names[w]} | {r['s']:.3f} | {r['peak_mib']:.0f} | {r['rows']:,} x {r['cols']} "
            f"| {r['s'] / a['s']:.1f}x | {r['peak_mib'] / max(a['peak_mib'], 1e-9):.1f}x |"
        )
    print(json.dumps({"bench": "arrow", "rounds": args.rounds, **fig}))


if __name__ == "__main__":
    main()
