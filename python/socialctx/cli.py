"""The ``socialctx`` command: the batch jobs of the Rust examples (``precache``,
``dump``, ``stats``, ``merge``) for an installed package, no cargo needed.

::

    socialctx build (CORPUS | --sample) CACHE [--incremental] [--strict] [--workers N] [--report FILE]
    socialctx dump CACHE [--retweets] [--extended | --tokens] [--graph]
    socialctx stats CACHE [--split CSV ...] [--retweets] [--save FILE]
    socialctx plan CORPUS PLAN_FILE
    socialctx build-partition CORPUS OUT --plan PLAN_FILE --partition I/N
    socialctx merge CACHE PART [PART ...]
    socialctx info CACHE [--json]
    socialctx embed CACHE --model MODULE:CALLABLE --name NAME [--field F] [--model-id ID]
    socialctx describe CACHE [--markdown | --latex | --json] [--html FILE]
    socialctx export CACHE OUT.parquet [--level reactions|threads] [--columns A,B,...]

The same Rust code runs as in the examples: ``build`` writes the same bytes
as ``precache`` and prints the same summary. Exit status: 0 on success, 1 on
error (one ``error: ...`` line naming the file and the reason, never a
traceback), 2 on bad usage, 130 when interrupted (SIGINT or SIGTERM: the
build stops between threads and nothing is published).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Callable

from . import _socialctx as _ext

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def _exit_status(interrupted: str) -> str:
    return (
        "Exit status: 0 on success, 1 on error, 2 on bad usage, 130 when interrupted "
        f"(SIGINT or SIGTERM: {interrupted})."
    )


_EXIT_STATUS = _exit_status("the build stops between threads, nothing is published")


def _count(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 1 <= n <= 65535:
        raise argparse.ArgumentTypeError(f"{n} is not in 1..=65535")
    return n


def _non_negative(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"{n} is negative")
    return n


def _shard_mib(text: str) -> int:
    n = _non_negative(text)
    if not 1 <= n <= 1024:
        raise argparse.ArgumentTypeError(f"{n} is not in 1..=1024")
    return n


def _partition(text: str) -> tuple[int, int]:
    """``I/N`` as the precache example reads it."""
    i, sep, n = text.partition("/")
    if not sep:
        raise argparse.ArgumentTypeError(f"{text!r} is not I/N (e.g. 0/4)")
    try:
        index = int(i.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{i!r} is not a number") from None
    try:
        count = int(n.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{n!r} is not a number") from None
    if count <= 0 or not 0 <= index < count:
        raise argparse.ArgumentTypeError(f"partition {index}/{count}: need 0 <= I < N")
    return index, count


def _add_workers(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-j",
        "--workers",
        type=_count,
        metavar="N",
        help="worker threads [default: available cores]; the cache is byte-identical for any N",
    )
    # The former name (a cache's "threads" are conversation threads), kept
    # working as precache keeps it; not shown.
    p.add_argument("--threads", dest="workers", type=_count, help=argparse.SUPPRESS)


def _add_content_options(p: argparse.ArgumentParser) -> None:
    """Options that shape the cache's content (a plan records them)."""
    p.add_argument(
        "--strict",
        action="store_true",
        help="stop at the first bad input (exit 1; any existing cache is left untouched); "
        "without it, bad files are skipped and reported",
    )
    p.add_argument(
        "--max-file-bytes",
        type=_non_negative,
        metavar="BYTES",
        help=f"skip tweet files larger than this [default: {_ext._DEFAULT_MAX_FILE_BYTES}]",
    )
    p.add_argument(
        "--shard-mib",
        type=_shard_mib,
        default=16,
        metavar="MIB",
        help="cap on one shard file, in MiB (1 to 1024) [default: 16]",
    )
    p.add_argument(
        "--no-extended",
        action="store_true",
        help="only the reference's 28 features: skip structure.json, annotation.json, "
        "who-follows-whom.dat and retweets.json (the extended features)",
    )


def _add_run_options(p: argparse.ArgumentParser) -> None:
    """Options of any build that writes a cache."""
    p.add_argument(
        "--report",
        type=Path,
        metavar="FILE",
        help="also write the bad-input report to FILE as JSON Lines "
        '({"path": ..., "reason": ...}, paths relative to the corpus); '
        "checked for writing before anything is replaced",
    )
    p.add_argument(
        "-q", "--quiet", action="store_true", help="do not show a progress bar on a terminal"
    )


def _parser() -> argparse.ArgumentParser:
    from . import __version__

    parser = argparse.ArgumentParser(
        prog="socialctx",
        description="Build and inspect socialctx feature caches: the RPDNN social-context "
        "features of PHEME-style Twitter corpora, computed once into a memory-mapped cache. "
        "`socialctx COMMAND --help` says more about each command. " + _EXIT_STATUS,
    )
    parser.add_argument("--version", action="version", version=f"socialctx {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def command(
        name: str, summary: str, description: str, status: str = _EXIT_STATUS
    ) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=summary, description=f"{description} {status}")
        p.set_defaults(parser=p)
        return p

    p = command(
        "build",
        "build the feature cache of a corpus (the precache example)",
        "Walk CORPUS for thread directories (an all-digit name with a source-tweets/ or "
        "source-tweet/ folder; replies in reactions/ or replies/, retweets in retweets/), compute "
        "the 28 features of every reply and retweet (and, unless --no-extended, the extended "
        "features) and write a memory-mappable cache to CACHE, replacing any cache there "
        "atomically (a directory that is not a cache is never replaced). Files that cannot be "
        "used are skipped and listed in the report (report.jsonl in the cache); the build still "
        "succeeds. Shows a progress bar on a terminal and ends with a summary.",
    )
    # CORPUS is optional only for --sample (main() checks): argparse fills the
    # first positional, so `build --sample CACHE` arrives as corpus=CACHE.
    p.usage = "%(prog)s [options] (CORPUS | --sample) CACHE"
    p.add_argument("corpus", type=Path, nargs="?", metavar="CORPUS", help="the corpus root")
    p.add_argument(
        "cache", type=Path, nargs="?", metavar="CACHE", help="the cache directory to write"
    )
    p.add_argument(
        "--sample",
        action="store_true",
        help="build the sample corpus that ships with the package (38 threads) instead of CORPUS",
    )
    _add_workers(p)
    _add_content_options(p)
    _add_run_options(p)
    p.add_argument(
        "--incremental",
        action="store_true",
        help="re-read only the threads whose files changed since the cache in CACHE was built "
        "(by size, mtime, ctime, inode) and take the others from it; byte-identical to a full "
        "build. Falls back to a full build, and says why, when reuse is not safe",
    )
    p.add_argument(
        "--verify",
        action="store_true",
        help="with --incremental: also compare file contents (xxh3), for file systems with "
        "coarse or unreliable timestamps (reads every file)",
    )
    p.add_argument(
        "--io-depth",
        type=_non_negative,
        metavar="N",
        help="prefetch threads that keep reads in flight when the corpus is not in the page "
        "cache (0 = none) [default: 32; 0 under `ulimit -v`]",
    )
    p.set_defaults(run=_build)

    p = command(
        "plan",
        "walk a corpus once into the plan of a partitioned build",
        "Walk CORPUS once and write the plan of a partitioned build to PLAN_FILE (paths "
        "relative to the corpus root). Then build its partitions anywhere the corpus is mounted "
        "(`socialctx build-partition`) and join them (`socialctx merge`): byte for byte what "
        "one `socialctx build` writes.",
    )
    p.add_argument("corpus", type=Path, metavar="CORPUS", help="the corpus root")
    p.add_argument("plan", type=Path, metavar="PLAN_FILE", help="where to write the plan (JSON)")
    _add_workers(p)
    _add_content_options(p)
    p.set_defaults(run=_plan)

    p = command(
        "build-partition",
        "build one partition of a plan",
        "Build partition I of N of PLAN_FILE into the cache directory OUT (I from 0; "
        "contiguous source-id ranges balanced by file count; reads no other partition's files). "
        "Content options come from the plan. The corpus must be as planned: a thread "
        "added, gone, moved or edited since is refused, naming it. Slurm: --partition "
        "$SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT; Kubernetes Indexed Job: --partition "
        "$JOB_COMPLETION_INDEX/N.",
    )
    p.add_argument("corpus", type=Path, metavar="CORPUS", help="the corpus root")
    p.add_argument("out", type=Path, metavar="OUT", help="the partition cache directory to write")
    p.add_argument(
        "--plan",
        type=Path,
        required=True,
        metavar="PLAN_FILE",
        help="the plan (from `socialctx plan`)",
    )
    p.add_argument(
        "--partition",
        type=_partition,
        required=True,
        metavar="I/N",
        help="which partition to build: I of N, 0 <= I < N",
    )
    _add_workers(p)
    _add_run_options(p)
    p.set_defaults(run=_build_partition)

    p = command(
        "merge",
        "join the partition caches of a plan into one cache",
        "Merge the partition caches of one plan (every partition, each once, in any order) into "
        "CACHE, published atomically; byte-identical to a single build of the whole corpus. A "
        "missing, repeated, damaged or foreign partition is an error and nothing is published.",
    )
    p.add_argument("cache", type=Path, metavar="CACHE", help="the cache directory to write")
    p.add_argument("parts", type=Path, nargs="+", metavar="PART", help="the partition caches")
    p.set_defaults(run=_merge)

    p = command(
        "dump",
        "print a cache as JSON Lines in the oracle's format",
        "Print CACHE as JSON Lines in the format of rpdnn_oracle.py: one line per thread in "
        'source-id order, {"source_id", "label", "reactions": [{"id", "kind", "created_at", '
        '"features"}]}; replies only unless --retweets. Every file is validated first.',
    )
    p.add_argument("cache", type=Path, metavar="CACHE", help="the cache directory")
    p.add_argument(
        "--retweets",
        action="store_true",
        help="include retweets (the oracle's --retweets; a cache built with the extended "
        "features also holds the retweets of retweets.json files, which the oracle does not read)",
    )
    group = p.add_mutually_exclusive_group()
    group.add_argument(
        "--extended",
        action="store_true",
        help="add the extended features as extra keys (per thread: event, veracity, "
        "annotated_rumour; per reaction: depth, persistence, follows_source, followed_by_source, "
        "reciprocal_follow, user_reliability; null = unknown)",
    )
    group.add_argument(
        "--tokens",
        action="store_true",
        help='print the texts for embedding instead, as rpdnn_tokens.py does: {"source_id", '
        '"reactions": [{"id", "reply_tokens", "description_tokens"}]}',
    )
    p.add_argument(
        "--graph",
        action="store_true",
        help='add each reaction\'s parent in the propagation tree: "parent" (a tweet id; the '
        "source's for the root's children) and \"parent_how\" (in_reply_to, structure or "
        "defaulted); not with --tokens",
    )
    p.set_defaults(run=_dump)

    p = command(
        "stats",
        "the 28 features' statistics (for normalisation)",
        "Per-feature count, mean, population std (ddof 0), min and max over the cache's replies "
        "(or replies and retweets), optionally only the threads of RPDNN split CSVs; what "
        "normalised training uses (socialctx.FeatureStats.load reads the saved file).",
    )
    p.add_argument("cache", type=Path, metavar="CACHE", help="the cache directory")
    p.add_argument(
        "--split",
        type=Path,
        action="append",
        default=[],
        metavar="CSV",
        help="only threads listed in this split CSV (repeatable)",
    )
    p.add_argument(
        "--retweets",
        action="store_true",
        help="include retweets (default: replies only, as the reference)",
    )
    p.add_argument("--save", type=Path, metavar="FILE", help="save the statistics as JSON")
    p.set_defaults(run=_stats)

    p = command(
        "info",
        "what a cache holds: format, counts, content id, derived stores",
        "Print CACHE's format version, counts, build options, content id and what derived/ "
        "holds (embedding stores and incremental-build fingerprints, each marked current or "
        "stale against the content id). Reads only the manifest and derived/.",
    )
    p.add_argument("cache", type=Path, metavar="CACHE", help="the cache directory")
    p.add_argument("--json", action="store_true", help="print the same as one JSON object")
    p.set_defaults(run=_info)

    p = command(
        "embed",
        "embed a text field's distinct inputs with your model into a store",
        "Run MODEL once per batch of the distinct non-empty inputs of --field in CACHE and "
        "write the embedding store derived/embeddings/NAME (what Loader(embeddings=[NAME]) "
        "and socialctx.torch.EmbeddingTable read). MODEL is `module:callable`, importable "
        "from the current directory or PYTHONPATH: called with a list of token lists, it "
        "returns a [len, dim] array. With --model-id, a store of the cache's previous "
        "content (after `socialctx build --incremental`) gives back the rows of every input "
        "it already has, and MODEL runs only for the new ones. Resumes after an "
        "interruption. Shows a progress bar on a terminal and ends with a summary.",
        _exit_status(
            "the embed stops between batches; the store is not published, and the next "
            "embed resumes from the rows already computed"
        ),
    )
    p.add_argument("cache", type=Path, metavar="CACHE", help="the cache directory")
    p.add_argument("--model", required=True, metavar="MODULE:CALLABLE", help="the model")
    p.add_argument("--name", required=True, help="the store's name")
    p.add_argument(
        "--field",
        choices=("reply", "description"),
        default="reply",
        help="RPDNN's reply tokens or the authors' descriptions [default: reply]",
    )
    p.add_argument(
        "--model-id",
        metavar="ID",
        help="the model's identity (e.g. a hash of its weights): rows are reused only "
        "under the same id",
    )
    p.add_argument(
        "--batch-size", type=_count, default=256, metavar="N", help="inputs per call [256]"
    )
    p.add_argument("--dtype", choices=("float32", "float16"), default="float32", help="[float32]")
    p.add_argument(
        "--compact",
        action="store_true",
        help="write the store as one segment without the rows no reaction uses (otherwise "
        "when those exceed a quarter of the rows); byte for byte a from-scratch embed",
    )
    p.add_argument(
        "-q", "--quiet", action="store_true", help="do not show a progress bar on a terminal"
    )
    p.set_defaults(run=_embed)
    _add_describe_commands(command)
    return parser


def _build(a: argparse.Namespace) -> int:
    summary = _ext._cli_build(
        a.corpus,
        a.cache,
        workers=a.workers,
        strict=a.strict,
        report=a.report,
        max_file_bytes=a.max_file_bytes,
        shard_mib=a.shard_mib,
        extended=not a.no_extended,
        io_depth=a.io_depth,
        incremental=a.incremental,
        verify=a.verify,
        quiet=a.quiet,
    )
    _out(summary)
    return EXIT_OK


def _build_partition(a: argparse.Namespace) -> int:
    summary = _ext._cli_build(
        a.corpus,
        a.out,
        workers=a.workers,
        report=a.report,
        plan=a.plan,
        partition=a.partition,
        quiet=a.quiet,
    )
    _out(summary)
    return EXIT_OK


def _plan(a: argparse.Namespace) -> int:
    line = _ext._cli_plan(
        a.corpus,
        a.plan,
        workers=a.workers,
        strict=a.strict,
        max_file_bytes=a.max_file_bytes,
        shard_mib=a.shard_mib,
        extended=not a.no_extended,
    )
    _out(line)
    return EXIT_OK


def _merge(a: argparse.Namespace) -> int:
    _out(_ext._cli_merge(a.cache, a.parts))
    return EXIT_OK


def _dump(a: argparse.Namespace) -> int:
    # The extension writes to file descriptor 1 itself (fast, no copies).
    sys.stdout.flush()
    _ext._cli_dump(
        a.cache, retweets=a.retweets, extended=a.extended, tokens=a.tokens, graph=a.graph
    )
    return EXIT_OK


def _stats(a: argparse.Namespace) -> int:
    notes, table = _ext._cli_stats(a.cache, splits=a.split, retweets=a.retweets, save=a.save)
    for note in notes:
        print(note, file=sys.stderr)
    _out(table)
    if a.save is not None:
        print(f"saved {a.save}", file=sys.stderr)
    return EXIT_OK


def info(cache_dir: str | Path) -> dict[str, Any]:
    """What ``socialctx info`` prints, as a dict: the manifest's format, version,
    counts and options, the content id, and the entries of ``derived/`` (embedding
    stores with their field, dtype, dim and whether they match the content id;
    incremental-build fingerprints; anything else by name)."""
    from . import open as open_cache

    cache = open_cache(cache_dir)
    m = cache.manifest
    content_id = cache.content_id
    derived = Path(cache.derived_dir)
    stores: list[dict[str, Any]] = []
    fingerprints: list[dict[str, Any]] = []
    other: list[str] = []
    if derived.is_dir():
        # Hidden entries are locks and staging directories.
        for entry in sorted(derived.iterdir()):
            if entry.name.startswith("."):
                continue
            if entry.name == "embeddings" and entry.is_dir():
                for store in sorted(entry.iterdir()):
                    if store.is_dir() and not store.name.startswith("."):
                        stores.append(_store_info(cache, store, content_id))
            elif entry.name.startswith("fingerprints-") and entry.name.endswith(".json"):
                of = entry.name[len("fingerprints-") : -len(".json")]
                fingerprints.append(
                    {"file": entry.name, "content_id": of, "current": of == content_id}
                )
            else:
                other.append(entry.name + ("/" if entry.is_dir() else ""))
    return {
        "cache": str(cache_dir),
        "format": m["format"],
        "format_version": m["format_version"],
        "content_id": content_id,
        "threads": m["threads"],
        "reactions": m["reactions"],
        "replies": m["replies"],
        "retweets": m["retweets"],
        "skipped": m["skipped"],
        "shards": len(m["shards"]),
        "bytes": sum(int(s["bytes"]) + int(s["text"]["bytes"]) for s in m["shards"]),
        "options": m["options"],
        "reaction_columns": m["reaction_columns"],
        "thread_columns": m["thread_columns"],
        "derived": str(derived),
        "embeddings": stores,
        "fingerprints": fingerprints,
        "other": other,
    }


def _store_info(cache: _ext.Cache, store: Path, content_id: str) -> dict[str, Any]:
    out: dict[str, Any] = {"name": store.name}
    try:
        meta = json.loads((store / "meta.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        out["error"] = f"no readable meta.json ({e.__class__.__name__})"
        return out
    if not isinstance(meta, dict):
        out["error"] = "meta.json is not an object"
        return out
    for key in ("field", "dtype", "dim", "unique", "reactions"):
        out[key] = meta.get(key)
    # Version 2 had one rows file and no segments.
    segments = meta.get("segments")
    out["rows"] = meta.get("rows", meta.get("unique"))
    out["segments"] = len(segments) if isinstance(segments, list) else 1
    out["current"] = meta.get("cache_content_id") == content_id
    # Verified as a reader would (every file's checksum, finite rows): a
    # damaged segment was reported current from meta.json alone.
    try:
        _ext._open_store(cache, store.name, same_content=False)
    except _ext.EmbeddingError as e:
        out["error"] = str(e)
    return out


def _load_model(spec: str) -> Callable[[list[list[str]]], Any]:
    import importlib

    module, sep, attr = spec.partition(":")
    if not sep or not module or not attr:
        raise ValueError(f"--model {spec!r} is not MODULE:CALLABLE")
    if "" not in sys.path:
        sys.path.insert(0, "")  # the current directory, as `python -m` has it
    try:
        obj: Any = importlib.import_module(module)
    except ImportError as e:
        raise ValueError(f"--model {spec!r}: cannot import {module!r} ({e})") from None
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ValueError(f"--model {spec!r}: {module} has no {attr!r}") from None
    if not callable(obj):
        raise ValueError(f"--model {spec!r} is not callable")
    return obj  # type: ignore[no-any-return]


def _embed(a: argparse.Namespace) -> int:
    import time

    from . import embed, open

    model = _load_model(a.model)
    cache = open(a.cache)
    started = time.monotonic()
    r = embed(
        cache,
        model,
        field=a.field,
        name=a.name,
        batch_size=a.batch_size,
        dtype=a.dtype,
        model_id=a.model_id,
        progress=False if a.quiet else None,
        compact=a.compact,
    )
    _out(
        f"store      {Path(cache.derived_dir) / 'embeddings' / a.name}\n"
        f"inputs     {r.unique} distinct ({r.reactions} reactions), dim {r.dim}\n"
        f"new        {r.new} (embedded now, {r.calls} model calls)\n"
        f"reused     {r.reused} (rows of the previous store)\n"
        f"dropped    {r.dropped} (rows no reaction uses; "
        f"{'removed: compacted' if r.compacted else 'kept until compaction'})\n"
        f"resumed    {r.resumed} batches from an interrupted run\n"
        f"seconds    {time.monotonic() - started:.3f}\n"
    )
    return EXIT_OK


def _info(a: argparse.Namespace) -> int:
    d = info(a.cache)
    if a.json:
        _out(json.dumps(d, indent=2) + "\n")
        return EXIT_OK
    opts = ", ".join(f"{k} {json.dumps(v)}" for k, v in d["options"].items())
    lines = [
        f"cache      {d['cache']}",
        f"format     {d['format']} version {d['format_version']}",
        f"content id {d['content_id']}",
        f"threads    {d['threads']}",
        f"reactions  {d['reactions']} ({d['replies']} replies, {d['retweets']} retweets)",
        f"skipped    {d['skipped']} (see report.jsonl in the cache)",
        f"shards     {d['shards']} ({d['bytes']} bytes)",
        f"options    {opts}",
        f"columns    reaction: {', '.join(d['reaction_columns']) or '-'}; "
        f"thread: {', '.join(d['thread_columns']) or '-'}",
        f"derived    {d['derived']}",
    ]

    def state(current: bool) -> str:
        return "current" if current else "stale (another content id)"

    for s in d["embeddings"]:
        if "error" in s:
            lines.append(f"  embeddings/{s['name']}: {s['error']}")
        else:
            lines.append(
                f"  embeddings/{s['name']}: field {s['field']}, {s['dtype']} x {s['dim']}, "
                f"{s['unique']} distinct inputs, {s['rows']} rows in {s['segments']} "
                f"segment{'s' if s['segments'] != 1 else ''}, {state(s['current'])}"
            )
    for f in d["fingerprints"]:
        lines.append(f"  {f['file']}: incremental-build fingerprints, {state(f['current'])}")
    for name in d["other"]:
        lines.append(f"  {name}")
    if not (d["embeddings"] or d["fingerprints"] or d["other"]):
        lines.append("  (empty)")
    _out("\n".join(lines) + "\n")
    return EXIT_OK


def _out(text: str) -> None:
    """Prints to stdout; a reader that went away (``| head``) is not an error."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        # Python would complain again when it flushes at exit: point stdout
        # at /dev/null (the Python docs' recipe for SIGPIPE).
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def _add_describe_commands(command: Callable[[str, str, str], argparse.ArgumentParser]) -> None:
    p = command(
        "describe",
        "the dataset table (per event and in total) and, with --html, the figures",
        "Print the dataset table of CACHE that PHEME papers show, per event and in total: "
        "threads, rumours and non-rumours, veracity where annotated, replies, retweets, "
        "distinct users (authors of sources and reactions) and source authors, thread size, "
        "propagation depth, time to the first and to the "
        "median reply (socialctx.describe; needs pandas and pyarrow, and matplotlib for --html: "
        "pip install 'socialctx[describe]').",
    )
    p.add_argument("cache", type=Path, metavar="CACHE", help="the cache directory")
    form = p.add_mutually_exclusive_group()
    form.add_argument("--markdown", action="store_true", help="as a Markdown table")
    form.add_argument("--latex", action="store_true", help="as a LaTeX tabular (booktabs)")
    form.add_argument("--json", action="store_true", help="as JSON (times in seconds)")
    p.add_argument(
        "--html",
        type=Path,
        metavar="FILE",
        help="also write one self-contained HTML page (table, figures, folds and leakage audit)",
    )
    p.set_defaults(run=_describe)

    p = command(
        "export",
        "write a cache's reactions or threads as a Parquet file",
        "Write CACHE as Parquet (Cache.to_arrow: one row per reaction, or per thread with "
        "--level threads) to OUT, whole or not at all (needs pyarrow).",
    )
    p.add_argument("cache", type=Path, metavar="CACHE", help="the cache directory")
    p.add_argument("out", type=Path, metavar="OUT", help="the Parquet file to write")
    p.add_argument(
        "--level", choices=("reactions", "threads"), default="reactions", help="[reactions]"
    )
    p.add_argument(
        "--columns",
        type=lambda s: [c.strip() for c in s.split(",") if c.strip()],
        metavar="A,B,...",
        help="only these columns, in this order [default: all]",
    )
    p.set_defaults(run=_export)


def _describe(a: argparse.Namespace) -> int:
    from .describe import describe

    # A missing optional package (pandas, pyarrow, matplotlib) is an error
    # line naming it, not a traceback.
    try:
        d = describe(_ext.open(a.cache))
        if a.html is not None:
            d.write_html(a.html)
            print(f"wrote {a.html}", file=sys.stderr)
    except ImportError as e:
        raise ValueError(str(e)) from None
    _out(d.markdown() if a.markdown else d.latex() if a.latex else d.json() if a.json else d.text())
    return EXIT_OK


def _export(a: argparse.Namespace) -> int:
    from .describe import write_parquet

    try:
        rows = write_parquet(_ext.open(a.cache), a.out, level=a.level, columns=a.columns)
    except (KeyError, ImportError) as e:
        raise ValueError(e.args[0] if e.args else str(e)) from None
    print(f"wrote {a.out}: {rows:,} rows", file=sys.stderr)
    return EXIT_OK


def _sample_args(a: argparse.Namespace) -> None:
    """``build --sample CACHE`` names one path, which argparse put in ``corpus``."""
    if a.sample:
        if a.cache is not None:
            a.parser.error("--sample takes the place of CORPUS: give only CACHE")
        if a.corpus is None:
            a.parser.error("the following arguments are required: CACHE")
        from .sample import sample_corpus

        a.corpus, a.cache = sample_corpus(), a.corpus
    elif a.corpus is None or a.cache is None:
        missing = "CORPUS, CACHE" if a.corpus is None else "CACHE"
        a.parser.error(f"the following arguments are required: {missing}")


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command with ``argv`` (default: ``sys.argv[1:]``); returns the exit status."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command == "build":
        _sample_args(args)
    if args.command == "build" and args.verify and not args.incremental:
        args.parser.error("--verify needs --incremental")
    if args.command == "dump" and args.graph and args.tokens:
        args.parser.error("--graph does not go with --tokens")
    # SIGTERM (a scheduler's kill, `timeout`) stops a build cleanly, as Ctrl-C does;
    # so does SIGINT when it was inherited as ignored (`socialctx build ... &` from a
    # non-interactive script: `kill -INT` did nothing), unless a caller set a handler.
    handle = [signal.SIGTERM]
    if signal.getsignal(signal.SIGINT) in (signal.SIG_IGN, signal.SIG_DFL, None):
        handle.append(signal.SIGINT)
    previous: dict[signal.Signals, Any] | None = {s: signal.getsignal(s) for s in handle}
    try:
        for sig in handle:
            signal.signal(sig, signal.default_int_handler)
    except ValueError:  # not the main thread (main() called from a thread)
        previous = None
    run: Callable[[argparse.Namespace], int] = args.run
    try:
        return run(args)
    except KeyboardInterrupt as e:
        why = str(e) or "stopped"
        print(f"interrupted: {why}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except (_ext.Error, OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_ERROR
    finally:
        if previous is not None:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
