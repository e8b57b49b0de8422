"""What ``socialctx info`` reports about a cache (:func:`info`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from . import _socialctx as _ext


def info(cache_dir: str | Path) -> dict[str, Any]:
    """What ``socialctx info`` prints, as a dict: the manifest's format, version,
    counts and options, the content id, the definition digest of the code that
    computed the values (and whether it is this library's), and the entries of
    ``derived/`` (embedding stores with their field, dtype, dim, model id and
    whether they match the content id; incremental-build fingerprints; anything
    else by name), and ``valid``: what was checked of the shards (all of them,
    by checksum and structure) or why the cache is damaged."""
    from . import open as open_cache

    cache = open_cache(cache_dir)
    m = cache.manifest
    # "current" is judged by the content id the manifest states: worth
    # saying only of shards that are what it states. Every shard is
    # validated (checksums and structure) and the result said.
    try:
        open_cache(cache_dir, validate="all")
        valid = "every shard's checksum and structure"
    except _ext.CacheError as e:
        valid = f"damaged: {e}"
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
        # Which code computed the values (None: built before it was recorded),
        # and whether it is this library's (an incremental build reuses only then).
        "definition": m.get("definition"),
        "definition_current": m.get("definition") == _ext.DEFINITION,
        "threads": m["threads"],
        "reactions": m["reactions"],
        "replies": m["replies"],
        "retweets": m["retweets"],
        "skipped": m["skipped"],
        "shards": len(m["shards"]),
        "bytes": sum(int(s["bytes"]) + int(s["text"]["bytes"]) for s in m["shards"]),
        "valid": valid,
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
    for key in ("field", "dtype", "dim", "unique", "reactions", "model_id"):
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


def _model(model_id: Any) -> str:
    return "unknown (no model id)" if model_id is None else json.dumps(model_id)


def info_text(d: dict[str, Any]) -> str:
    """``socialctx info``'s text: :func:`info`'s dict, one line a field."""
    opts = ", ".join(f"{k} {json.dumps(v)}" for k, v in d["options"].items())
    lines = [
        f"cache      {d['cache']}",
        f"format     {d['format']} version {d['format_version']}",
        f"content id {d['content_id']}",
        f"definition {d['definition'] or 'none recorded'} ("
        + (
            "this library's"
            if d["definition_current"]
            else f"this library computes {_ext.DEFINITION}"
        )
        + ")",
        f"threads    {d['threads']}",
        f"reactions  {d['reactions']} ({d['replies']} replies, {d['retweets']} retweets)",
        f"skipped    {d['skipped']} (see report.jsonl in the cache)",
        f"shards     {d['shards']} ({d['bytes']} bytes)",
        f"checked    {d['valid']}",
        f"options    {opts}",
        f"columns    reaction: {', '.join(d['reaction_columns']) or '-'}; "
        f"thread: {', '.join(d['thread_columns']) or '-'}",
        f"derived    {d['derived']}",
    ]

    damaged = not d["valid"].startswith("every shard")

    def state(current: bool) -> str:
        if damaged:
            return "of this content id, but the cache is damaged (see checked)"
        return "current" if current else "stale (another content id)"

    for s in d["embeddings"]:
        if "error" in s:
            lines.append(f"  embeddings/{s['name']}: {s['error']}")
        else:
            lines.append(
                f"  embeddings/{s['name']}: field {s['field']}, {s['dtype']} x {s['dim']}, "
                f"{s['unique']} distinct inputs, {s['rows']} rows in {s['segments']} "
                f"segment{'s' if s['segments'] != 1 else ''}, model {_model(s['model_id'])}, "
                f"{state(s['current'])}"
            )
    for f in d["fingerprints"]:
        lines.append(f"  {f['file']}: incremental-build fingerprints, {state(f['current'])}")
    for name in d["other"]:
        lines.append(f"  {name}")
    if not (d["embeddings"] or d["fingerprints"] or d["other"]):
        lines.append("  (empty)")
    return "\n".join(lines) + "\n"
