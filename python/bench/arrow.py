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

    python python/bench/arrow.py [CACHE_DIR] --memory [--repeat 160]
        [--baseline DIR] [--rounds 1]

``--memory``: what streaming costs at scale. The cache's threads repeated
``--repeat`` times (``positions``: millions of rows without a corpus of
that size; every batch is built anew) are read two ways, each in a fresh
child: *stream*, a ``RecordBatchReader`` over ``cache.to_arrow`` whose
batches the consumer drops as it goes, and *export*, that data written to
Parquet as ``socialctx export`` writes it. Reported: the child's peak
anonymous memory (``RssAnon``, sampled every millisecond, less its value
before ``to_arrow``; the cache's memory map is file-backed and not in it)
and the time. ``--baseline DIR``: a directory holding a previous
``socialctx`` package (its extension built), run the same way in the same
run (the ways alternate), its export checked byte for byte against this
one's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

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


MEMORY_CHILD = r"""
import hashlib, importlib, json, sys, threading, time
import pyarrow as pa
import pyarrow.parquet as pq
import socialctx
describe = importlib.import_module("socialctx.describe")  # the module, not the function
way, cache_dir, repeat, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
cache = socialctx.open(cache_dir, validate="all")
positions = list(range(len(cache))) * repeat
def anon_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1])
peak, done = [anon_kib()], False
def sample():
    while not done:
        peak[0] = max(peak[0], anon_kib())
        time.sleep(0.001)
base = anon_kib()
sampler = threading.Thread(target=sample)
sampler.start()
t = time.perf_counter()
data = cache.to_arrow(positions=positions)
rows = 0
digest = None
if way == "stream":
    for b in pa.RecordBatchReader.from_stream(data):
        rows += b.num_rows
else:
    with open(out, "wb") as f:
        if hasattr(describe, "_write_stream"):
            describe._write_stream(data, f)  # this socialctx's export
        else:
            pq.write_table(pa.table(data), f)  # the previous one's
    rows = len(data)
s = time.perf_counter() - t
done = True
sampler.join()
if way == "export":
    digest = hashlib.sha256(open(out, "rb").read()).hexdigest()
print(json.dumps({"s": s, "peak_kib": max(peak[0], anon_kib()) - base, "rows": rows,
                  "sha256": digest}))
"""


def memory(cache: Path, repeat: int, rounds: int, baseline: Path | None) -> None:
    """``--memory``: stream and export at scale, this socialctx against the
    baseline's, alternating."""
    versions = {"now": None, **({"baseline": baseline} if baseline else {})}
    res: dict[tuple[str, str], list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(rounds):
            for way in ("stream", "export"):
                for name, where in versions.items():
                    env = dict(os.environ)
                    if where is not None:
                        env["PYTHONPATH"] = str(where)
                    out = subprocess.run(
                        [sys.executable, "-c", MEMORY_CHILD, way, str(cache), str(repeat)]
                        + [str(Path(tmp) / f"{name}.parquet")],
                        check=True,
                        capture_output=True,
                        text=True,
                        env=env,
                    ).stdout
                    res.setdefault((way, name), []).append(json.loads(out))
    fig = {
        f"{way}_{name}": {
            "s": statistics.median(r["s"] for r in rs),
            "peak_mib": statistics.median(r["peak_kib"] for r in rs) / 1024,
            "rows": rs[0]["rows"],
            "sha256": rs[0]["sha256"],
        }
        for (way, name), rs in res.items()
    }
    print(f"cache {cache} x {repeat}: {fig['stream_now']['rows']:,} rows\n")
    print("| way | socialctx | time (s) | peak anonymous memory over base (MiB) |")
    print("|---|---|---:|---:|")
    for key, r in fig.items():
        way, name = key.split("_")
        print(f"| {way} | {name} | {r['s']:.2f} | {r['peak_mib']:.0f} |")
    if baseline:
        for way in ("stream", "export"):
            now, base = fig[f"{way}_now"], fig[f"{way}_baseline"]
            print(
                f"\n{way}: memory now / baseline {now['peak_mib'] / base['peak_mib']:.4f}x, "
                f"time {now['s'] / base['s']:.2f}x"
            )
        same = fig["export_now"]["sha256"] == fig["export_baseline"]["sha256"]
        print(f"export byte for byte the baseline's: {same}")
        assert same, "the exports differ"
    print(json.dumps({"bench": "arrow-memory", "repeat": repeat, "rounds": rounds, **fig}))


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
    ap.add_argument("--memory", action="store_true", help="stream and export at scale")
    ap.add_argument("--repeat", type=int, default=160, help="--memory: the threads this often")
    ap.add_argument("--baseline", type=Path, help="--memory: a previous socialctx package's parent")
    args = ap.parse_args()
    cache = cache_dir(args.cache)
    if args.memory:
        memory(cache, args.repeat, args.rounds, args.baseline)
        return
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
