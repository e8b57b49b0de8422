"""The ``socialctx`` command of an installed package, no cargo needed.

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

The command is defined once, in Rust (crates/cli: every option, help text and
usage error), and runs the same code as the ``socialctx`` binary and the
``precache``, ``merge`` and ``dump`` examples. This module runs it through the
extension, and itself runs only what needs Python: ``embed`` (it imports your
model), ``describe`` and ``export`` (pandas, pyarrow, matplotlib) and
``info``, with the arguments the Rust definition parsed. Exit status: 0 on
success, 1 on error (one ``error: ...`` line naming the file and the reason,
never a traceback), 2 on bad usage, 130 when interrupted (SIGINT or SIGTERM).
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Callable

from . import _socialctx as _ext
from ._info import info, info_text

__all__ = ["info", "main"]

EXIT_OK, EXIT_ERROR, EXIT_INTERRUPTED = 0, 1, 130
Args = dict[str, Any]


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


def _model_identity(spec: str, model: Any) -> tuple[str | None, str]:
    """``embed``'s model id without ``--model-id``, and how it was found.

    The callable's ``model_id`` attribute (a string) is taken as given.
    Otherwise the id is derived: ``MODULE:CALLABLE@`` and 16 hex digits of
    a SHA-256 of the spec, the callable's qualified name and the bytes of
    the module's file and of the file defining the callable (its class for
    an instance), so that an edit of either is another model. Weights the
    code loads from elsewhere, and modules it imports, are not in it: a
    derived id resumes an interrupted embed but never reuses a previous
    store's rows (give ``--model-id``, e.g. a hash of the weights, for
    that). A callable without readable files has no id (unknown)."""
    import hashlib
    import inspect

    from .embed import callable_model_id

    given = callable_model_id(model)
    if given is not None:
        return given, "given by the callable's model_id attribute"
    module = sys.modules.get(spec.partition(":")[0])
    defined = model if inspect.isroutine(model) or inspect.isclass(model) else type(model)
    digest = hashlib.sha256(spec.encode())
    digest.update(getattr(defined, "__qualname__", "").encode())
    try:
        files = {inspect.getfile(m) for m in (module, defined) if m is not None}
        for f in sorted(files):
            digest.update(f.encode() + b"\0" + Path(f).read_bytes())
    except (TypeError, OSError):  # a built-in, or a file gone since the import
        return None, "unknown: no readable source to derive it from; give --model-id"
    return (
        f"{spec}@{digest.hexdigest()[:16]}",
        "derived from the model's source: resumes an interrupted embed, reuses no rows "
        "(give --model-id to reuse)",
    )


def _embed(a: Args) -> int:
    import time
    import warnings

    from . import embed, open

    model = _load_model(a["model"])
    model_id, how = a["model_id"], "given"
    if model_id is None:
        model_id, how = _model_identity(a["model"], model)
    cache = open(a["cache"])
    started = time.monotonic()
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        r = embed(
            cache,
            model,
            field=a["field"],
            name=a["name"],
            batch_size=a["batch_size"],
            dtype=a["dtype"],
            model_id=model_id,
            progress=False if a["quiet"] else None,
            compact=a["compact"],
            reuse=not how.startswith("derived"),
            verify=a["verify"],
        )
    for w in said:
        print(f"warning: {w.message}", file=sys.stderr)
    notes = "".join(
        f"{label} {text}\n"
        for label, text in (("restarted ", r.restarted), ("not reused", r.not_reused))
        if text
    )
    _out(
        f"store      {Path(cache.derived_dir) / 'embeddings' / a['name']}\n"
        f"model      {model_id if model_id is not None else '(no id)'} ({how})\n"
        f"inputs     {r.unique} distinct ({r.reactions} reactions), dim {r.dim}\n"
        f"new        {r.new} (embedded now, {r.calls} model calls)\n"
        f"reused     {r.reused} (rows of the previous store)\n"
        f"dropped    {r.dropped} (rows no reaction uses; "
        f"{'removed: compacted' if r.compacted else 'kept until compaction'})\n"
        f"resumed    {r.resumed} batches from an interrupted run\n"
        f"verified   {r.segments_read} segments of the previous store read "
        f"({'all: --verify' if a['verify'] else 'the others unchanged since verified'})\n"
        f"{notes}"
        f"seconds    {time.monotonic() - started:.3f}\n"
    )
    return EXIT_OK


def _info(a: Args) -> int:
    d = info(a["cache"])
    _out(json.dumps(d, indent=2) + "\n" if a["json"] else info_text(d))
    return EXIT_OK


def _describe(a: Args) -> int:
    from .describe import describe

    # A missing optional package (pandas, pyarrow, matplotlib) is an error
    # line naming it, not a traceback.
    columns = a.get("columns")
    try:
        d = describe(_ext.open(a["cache"]))
        form = (
            d.markdown
            if a["markdown"]
            else d.latex
            if a["latex"]
            else d.json
            if a["json"]
            else d.text
        )
        # The columns are checked before the page is written.
        table = form(columns)
        if a["html"] is not None:
            d.write_html(a["html"])
            print(f"wrote {a['html']}", file=sys.stderr)
    except ImportError as e:
        raise ValueError(str(e)) from None
    # With --html the page is the output; a table too only when asked for
    # by its form (--markdown, --latex, --json) or its --columns.
    if a["html"] is None or a["markdown"] or a["latex"] or a["json"] or columns is not None:
        _out(table)
    return EXIT_OK


def _export(a: Args) -> int:
    from .describe import write_parquet

    try:
        rows = write_parquet(
            _ext.open(a["cache"]), a["out"], level=a["level"], columns=a["columns"]
        )
    except (KeyError, ImportError) as e:
        raise ValueError(e.args[0] if e.args else str(e)) from None
    print(f"wrote {a['out']}: {rows:,} rows", file=sys.stderr)
    return EXIT_OK


# The commands the Rust definition hands back to Python, by name.
_PYTHON: dict[str, Callable[[Args], int]] = {
    "embed": _embed,
    "info": _info,
    "describe": _describe,
    "export": _export,
}


def _os_path(d: dict[str, Any]) -> Any:
    """A path that is not UTF-8 comes from Rust as ``{"os_bytes": [...]}``:
    the name, as Python's argv holds it (surrogate escapes)."""
    if d.keys() == {"os_bytes"}:
        return os.fsdecode(bytes(d["os_bytes"]))
    return d


def _out(text: str) -> None:
    """Prints to stdout; a reader that went away (``| head``) is not an error."""
    if sys.stdout is None:  # closed by the caller (``>&-``): nothing to print to
        return
    try:
        # A path that is not UTF-8 (surrogate escapes): U+FFFD, as Rust prints it.
        sys.stdout.write(text.encode("utf-8", "surrogateescape").decode("utf-8", "replace"))
        sys.stdout.flush()
    except BrokenPipeError:
        # Python would complain again when it flushes at exit: point stdout
        # at /dev/null (the Python docs' recipe for SIGPIPE).
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except OSError as e:  # a full disk: worded as the Rust commands word it
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise OSError(f"writing output: {e.strerror} (os error {e.errno})") from None


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command with ``argv`` (default: ``sys.argv[1:]``); returns the exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
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
    try:
        # Rust writes to file descriptors 1 and 2 itself. (Python sets a
        # stream it found closed, `socialctx ... >&-`, to None.)
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
        sample = Path(__file__).resolve().parent / "sample"
        code, command, parsed = _ext._socialctx(["socialctx", *args], sample)
        if command is None or parsed is None:
            return code
        return _PYTHON[command](json.loads(parsed, object_hook=_os_path))
    except KeyboardInterrupt as e:
        print(f"interrupted: {str(e) or 'stopped'}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except (_ext.Error, OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_ERROR
    finally:
        if previous is not None:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
