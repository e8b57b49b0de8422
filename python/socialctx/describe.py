"""The dataset table and figures every PHEME paper shows, from a cache.

::

    import socialctx

    d = socialctx.describe(socialctx.open("target/socialctx-cache"))
    d.events            # pandas DataFrame, one row per event
    d.total             # pandas Series, the same over every thread
    d.table()           # both as one pyarrow Table
    d.markdown(), d.latex(), d.text(), d.json()
    d.figures()         # {name: matplotlib Figure}
    d.write_html("corpus.html")   # one self-contained page: table, figures, folds

The numbers come from ``cache.to_arrow(level="threads")`` (one row per
thread, computed in Rust) aggregated with pandas. Definitions (also in
:data:`COLUMNS`):

- *replies*, *retweets*: as stored, less the source tweet itself where a
  thread's reactions hold it (PHEME's ``reactions/`` folders often do; the
  threads level counts these in ``source_copies``);
- *size*: the tweets of a conversation, the source and its replies
  (retweets are counted apart);
- *depth*: the longest path from the source down the propagation tree of
  the replies (``FEATURES.md``, "Propagation tree"); 0 without replies;
- *first reply*, *median reply*: per thread with at least one reply, the
  seconds from the source to its first reply and to the median of its
  replies' times; the table gives the median over those threads;
- *users*: distinct authors of every tweet, source tweets and reactions
  (replies and retweets), by user key (``source_user_key`` of the threads
  level, ``user_key`` of the reactions level: ``user.id_str``);
  *source authors*: distinct authors of source tweets.

Needs pandas and pyarrow; the figures and the page need matplotlib (the
``describe`` extra: ``pip install './python[describe]'`` from a clone).
"""

from __future__ import annotations

import html
import io
import json as _json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Literal

from ._extras import missing
from ._output import write_output
from ._socialctx import FEATURE_NAMES, Cache
from .folds import Fold, folds

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa
    from matplotlib.figure import Figure

__all__ = ["COLUMNS", "Description", "describe"]

#: The table's columns: (key, heading, definition).
COLUMNS: list[tuple[str, str, str]] = [
    ("threads", "Threads", "threads (source tweets)"),
    ("rumours", "Rumours", "threads labelled rumour"),
    ("non_rumours", "Non-rumours", "threads labelled non-rumour"),
    ("unlabelled", "Unlabelled", "threads with neither label"),
    ("true", "True", "rumours annotated true (empty: no veracity annotation)"),
    ("false", "False", "rumours annotated false"),
    ("unverified", "Unverified", "rumours annotated unverified"),
    ("replies", "Replies", "replies stored (not the source tweet, which reactions/ may hold too)"),
    ("retweets", "Retweets", "retweets stored"),
    ("users", "Users", "distinct authors of source tweets and reactions (replies, retweets)"),
    ("source_authors", "Src. authors", "distinct authors of source tweets"),
    ("size_median", "Size med.", "thread size (source + replies), median"),
    ("size_p90", "Size p90", "thread size, 90th percentile (linear interpolation)"),
    ("size_max", "Size max", "thread size, maximum"),
    ("depth_median", "Depth med.", "propagation depth of the replies, median"),
    ("depth_max", "Depth max", "propagation depth, maximum"),
    (
        "first_reply_s",
        "1st reply",
        "time from the source to its first reply, median over threads with replies (JSON: seconds)",
    ),
    (
        "median_reply_s",
        "Med. reply",
        "time from the source to the median of its replies, median over threads with replies",
    ),
]

_TIMES = ("first_reply_s", "median_reply_s")
_FLOATS = ("size_median", "size_p90", "depth_median")


def _require(package: str, what: str = "socialctx.describe") -> None:
    raise missing(what, package) from None


def _pd() -> Any:
    try:
        import pandas
    except ImportError:
        _require("pandas")
    return pandas


def _pa() -> Any:
    try:
        import pyarrow
    except ImportError:
        _require("pyarrow")
    return pyarrow


def summarize(threads: pd.DataFrame, users: pd.Series, by_label: Sequence[int]) -> dict[str, Any]:
    """The table's row for the threads in ``threads`` (rows of
    ``cache.to_arrow(level="threads")``) whose tweets' authors' keys are
    ``users`` (sources and reactions, repeats included) and whose counts
    per label are ``by_label`` (``[unknown, non_rumour, rumour]``, from
    ``Cache.thread_counts``: the crate's count, the build summary's): plain
    Python numbers, None where a value does not exist (no thread, no reply,
    no veracity annotation)."""
    n = len(threads)
    unlabelled, non_rumours, rumours = (int(c) for c in by_label)
    if unlabelled + non_rumours + rumours != n:
        raise RuntimeError(
            f"socialctx bug: Cache.thread_counts() counts {unlabelled + non_rumours + rumours}"
            f" threads where the cache's threads table has {n}; please report it"
        )
    replies = threads["replies"].astype("int64")
    size = replies + 1
    depth = threads["depth"].astype("int64")
    replied = threads[replies > 0]
    veracity = threads["veracity"]
    annotated = bool(veracity.notna().any())
    # A veracity is a rumour's: PHEME annotates some non-rumours too (an
    # "unclear" is_rumour reads as unverified), which no column counts.
    rumour = threads["label_code"] == 1

    def count(mask: Any) -> int:
        return int(mask.sum())

    def median(values: Any) -> float | None:
        return float(values.median()) if len(values) else None

    return {
        "threads": n,
        "rumours": rumours,
        "non_rumours": non_rumours,
        "unlabelled": unlabelled,
        "true": count((veracity == "true") & rumour) if annotated else None,
        "false": count((veracity == "false") & rumour) if annotated else None,
        "unverified": count((veracity == "unverified") & rumour) if annotated else None,
        "replies": int(replies.sum()),
        "retweets": int(threads["retweets"].astype("int64").sum()),
        "users": int(users.nunique()),
        "source_authors": int(threads["source_user_id"].nunique()),
        "size_median": median(size),
        "size_p90": float(size.quantile(0.9)) if n else None,
        "size_max": int(size.max()) if n else None,
        "depth_median": median(depth),
        "depth_max": int(depth.max()) if n else None,
        "first_reply_s": median(replied["first_reply_s"].astype("float64")),
        "median_reply_s": median(replied["median_reply_s"].astype("float64")),
    }


def _cell(key: str, value: Any, *, minutes: bool) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if key in _TIMES and minutes:
        m = value / 60
        return f"{m:.1f} min" if m < 120 else f"{m / 60:.1f} h"
    if key in _FLOATS:
        return f"{value:g}" if float(value).is_integer() else f"{value:.1f}"
    return f"{int(value):,}" if isinstance(value, int) else str(value)


def _latex_escape(s: str) -> str:
    out = []
    for c in s:
        if c in "&%$#_{}":
            out.append("\\" + c)
        elif c == "~":
            out.append(r"\textasciitilde{}")
        elif c == "^":
            out.append(r"\textasciicircum{}")
        elif c == "\\":
            out.append(r"\textbackslash{}")
        elif c in "<>|":
            # OT1 (LaTeX's default encoding) prints them as ¡ ¿ and a dash.
            out.append({"<": r"\textless{}", ">": r"\textgreater{}", "|": r"\textbar{}"}[c])
        else:
            out.append(c)
    return "".join(out)


_MD_PUNCT = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")


def _markdown_text(s: str) -> str:
    """`s` as the text of a GitHub Markdown table cell: an event folder named
    ``<b>x</b>`` or ``a_b_c`` reads as those characters, not as HTML or
    emphasis. CommonMark lets any ASCII punctuation be backslash-escaped;
    line breaks and other white space (a table drops a cell's outer white
    space) become character references."""
    out = []
    for i, c in enumerate(s):
        if c in _MD_PUNCT:
            out.append("\\" + c)
        elif (c.isspace() and c != " ") or (c == " " and i in (0, len(s) - 1)):
            out.append(f"&#{ord(c)};")
        else:
            out.append(c)
    return "".join(out)


@dataclass(frozen=True)
class Description:
    """What :func:`describe` computes: the table per event and in total, the
    per-thread rows it comes from, and the leave-one-event-out folds."""

    #: One row per event (index: event name, in name order), columns :data:`COLUMNS`.
    events: pd.DataFrame
    #: The same over every thread of the cache.
    total: pd.Series
    #: ``cache.to_arrow(level="threads")`` as a pyarrow Table.
    threads: pa.Table
    #: ``socialctx.folds(cache)``: sizes and leakage audit per held-out event.
    folds: list[Fold]
    cache: Cache

    @property
    def definition(self) -> str | None:
        """The definition digest of the code that computed the cache's values
        (``socialctx.DEFINITION`` of the library that built it; None if the
        cache predates it)."""
        d = self.cache.manifest.get("definition")
        return str(d) if d else None

    def provenance(self) -> str:
        """What made the table, as every output says it: the definition
        digest of the code that computed the values and the cache
        generation (content id) they are of."""
        return (
            f"values computed by definition {self.definition or 'none recorded'}, "
            f"cache generation {self.cache.content_id}"
        )

    def rows(self) -> list[tuple[str, dict[str, Any]]]:
        """(event, row) per event, then ("Total", row)."""
        out = [(str(e), self._row(r)) for e, r in self.events.iterrows()]
        out.append(("Total", self._row(self.total)))
        return out

    @staticmethod
    def _row(r: Any) -> dict[str, Any]:
        row: dict[str, Any] = {}
        for key, _, _ in COLUMNS:
            v = r[key]
            if v is None or (isinstance(v, float) and math.isnan(v)):
                row[key] = None
            elif key in _FLOATS or key in _TIMES:
                row[key] = float(v)
            else:
                row[key] = int(v)
        return row

    def table(self) -> pa.Table:
        """The table as a pyarrow Table: an ``event`` column (``"Total"`` on
        the last row) and :data:`COLUMNS`."""
        pa = _pa()
        rows = self.rows()
        data: dict[str, list[Any]] = {"event": [e for e, _ in rows]}
        for key, _, _ in COLUMNS:
            data[key] = [r[key] for _, r in rows]
        return pa.table(data)

    def columns(self, columns: Sequence[str] | None = None, *, paper: bool = False) -> list[str]:
        """The keys of the columns to show: ``columns`` (keys of
        :data:`COLUMNS`, in that order; ``["all"]`` for every one) or, when
        None, every column, less, for a ``paper`` table (LaTeX), those that
        are zero or empty in every row (no retweets, no unlabelled thread,
        no veracity annotation): PHEME's LaTeX table keeps 16 of the 18."""
        keys = [k for k, _, _ in COLUMNS]
        if columns is None:
            if not paper:
                return keys
            rows = [r for _, r in self.rows()]
            return [k for k in keys if k == "threads" or any(r[k] not in (None, 0) for r in rows)]
        # "a,b" as --columns takes it (a str is a Sequence of characters).
        columns = columns.split(",") if isinstance(columns, str) else list(columns)
        if columns == ["all"]:
            return keys
        unknown = [c for c in columns if c not in keys]
        if unknown or not columns or len(set(columns)) != len(columns):
            why = (
                f"unknown {', '.join(map(repr, unknown))}"
                if unknown
                else "none given"
                if not columns
                else "one named twice"
            )
            raise ValueError(f"columns: {why}; the table's are all or {', '.join(keys)}")
        return columns

    def _grid(self, keys: list[str], *, minutes: bool) -> tuple[list[str], list[list[str]]]:
        heads = {k: h for k, h, _ in COLUMNS}
        head = ["Event"] + [heads[k] for k in keys]
        body = [
            [event] + [_cell(k, row[k], minutes=minutes) for k in keys]
            for event, row in self.rows()
        ]
        return head, body

    def text(self, columns: Sequence[str] | None = None) -> str:
        """The table for a terminal (times in minutes or hours); ``columns``
        as in :meth:`columns` (default: every one)."""
        keys = self.columns(columns)
        head, body = self._grid(keys, minutes=True)
        widths = [max(len(r[i]) for r in [head, *body]) for i in range(len(head))]

        def line(cells: list[str]) -> str:
            first = cells[0].ljust(widths[0])
            rest = [c.rjust(w) for c, w in zip(cells[1:], widths[1:])]
            return "  ".join([first, *rest]).rstrip()

        rule = "-" * len(line(head))
        lines = [line(head), rule, *(line(r) for r in body[:-1]), rule, line(body[-1])]
        defs = {k: (h, d) for k, h, d in COLUMNS}
        notes = [f"  {defs[k][0]}: {defs[k][1]}" for k in keys]
        notes.append(f"  {self.provenance()}")
        return "\n".join(lines) + "\n\n" + "\n".join(notes) + "\n"

    def markdown(self, columns: Sequence[str] | None = None) -> str:
        """The table as GitHub-flavoured Markdown (times in minutes or hours);
        ``columns`` as in :meth:`columns` (default: every one)."""
        head, body = self._grid(self.columns(columns), minutes=True)

        def row(cells: list[str], bold: bool = False) -> str:
            # Event names are the user's folder names: escaped whole. The
            # other cells are this module's numbers and headings.
            first, rest = _markdown_text(cells[0]), [c.replace("|", "\\|") for c in cells[1:]]
            cells = [f"**{c}**" if bold else c for c in [first, *rest]]
            return "| " + " | ".join(cells) + " |"

        lines = [row(head)]
        lines.append("|" + "|".join([":---"] + ["---:"] * (len(head) - 1)) + "|")
        lines += [row(r) for r in body[:-1]]
        lines.append(row(body[-1], bold=True))
        # What made it, under the table (a pasted table keeps it).
        lines += ["", f"*socialctx: {self.provenance()}.*"]
        return "\n".join(lines) + "\n"

    def latex(self, columns: Sequence[str] | None = None) -> str:
        """The table as a LaTeX ``tabular`` with booktabs rules, as a paper
        pastes it (times in minutes or hours); ``columns`` as in
        :meth:`columns` (default: those not zero or empty in every row)."""
        head, body = self._grid(self.columns(columns, paper=True), minutes=True)
        cols = "l" + "r" * (len(head) - 1)

        def line(cells: list[str]) -> str:
            return " & ".join(_latex_escape(c).replace("–", "--") for c in cells) + r" \\"

        lines = [
            # What made it, as a comment: the paper's table stays as it was.
            f"% socialctx: {self.provenance()}",
            r"% \usepackage{booktabs}",
            rf"\begin{{tabular}}{{{cols}}}",
            r"\toprule",
            line(head),
            r"\midrule",
            *(line(r) for r in body[:-1]),
            r"\midrule",
            line(body[-1]),
            r"\bottomrule",
            r"\end{tabular}",
        ]
        return "\n".join(lines) + "\n"

    def json(self, columns: Sequence[str] | None = None) -> str:
        """The table as JSON: ``{"columns": {key: definition}, "events":
        {event: row}, "total": row, "folds": ..., "definition": digest,
        "content_id": generation}``; times
        in seconds, null where a value does not exist; ``columns`` as in
        :meth:`columns` (default: every one)."""
        keys = self.columns(columns)
        rows = [(e, {k: r[k] for k in keys}) for e, r in self.rows()]
        doc = {
            "columns": {k: d for k, _, d in COLUMNS if k in keys},
            "events": dict(rows[:-1]),
            "total": rows[-1][1],
            "folds": self._folds_doc(),
            "definition": self.definition,
            "content_id": self.cache.content_id,
        }
        return _json.dumps(doc, indent=2, ensure_ascii=False) + "\n"

    def _folds_doc(self) -> list[dict[str, Any]]:
        return [
            {
                "event": f.event,
                "train": len(f.train),
                "test": len(f.test),
                "shared_source_authors": len(f.leakage.get("shared_source_authors", [])),
                "shared_source_texts": len(f.leakage.get("shared_source_texts", [])),
            }
            for f in self.folds
        ]

    def figures(self) -> dict[str, Figure]:
        """The figures, as matplotlib Figures: ``thread_sizes``,
        ``reply_arrival``, ``depths``, ``features``, ``folds``."""
        from ._describe_figures import make_figures

        return make_figures(self)

    def html(self) -> str:
        """One self-contained HTML page: the table, the figures (inline SVG)
        and the folds with their leakage audit. Nothing is fetched to view it."""
        from ._describe_figures import page

        return page(self)

    def write_html(self, path: str | os.PathLike[str]) -> Path:
        """Writes :meth:`html` to ``path`` (whole or not at all) and returns it."""
        return _write_atomic(Path(path), self.html().encode("utf-8"))


def _write_atomic(path: Path, data: bytes) -> Path:
    """Writes ``data`` to ``path`` (see :func:`socialctx._output.write_output`)."""

    def write(f: BinaryIO) -> None:
        f.write(data)

    return write_output(path, write)


def describe(cache: Cache) -> Description:
    """The dataset table of ``cache`` per event and in total, with the folds
    (see the module's documentation)."""
    pd = _pd()
    pa = _pa()
    threads = pa.table(cache.to_arrow(level="threads"))
    frame = threads.to_pandas()
    # Every tweet's author with its thread's event: the sources', then the
    # reactions' (the source stored among its reactions is its own author).
    reactions = pa.table(cache.to_arrow(columns=["event", "user_key"])).to_pandas()
    sources = frame[["event", "source_user_key"]].rename(columns={"source_user_key": "user_key"})
    authors = pd.concat([sources, reactions], ignore_index=True)
    by_event = dict(iter(authors.groupby("event", sort=True)["user_key"]))
    keys = [k for k, _, _ in COLUMNS]
    counts = cache.thread_counts()
    per_event = counts["event_labels"]
    rows = (
        {e: summarize(g, by_event[e], per_event[e]) for e, g in frame.groupby("event", sort=True)}
        if len(frame)
        else {}
    )
    events = pd.DataFrame.from_dict(rows, orient="index", columns=keys) if rows else None
    if events is None:
        events = pd.DataFrame(columns=keys)
    events.index.name = "event"
    labels = counts["labels"]
    by_label = [
        sum(n for c, n in labels.items() if c not in (0, 1)),
        labels.get(0, 0),
        labels.get(1, 0),
    ]
    total = pd.Series(summarize(frame, authors["user_key"], by_label), name="Total", dtype=object)
    return Description(events, total, threads, folds(cache), cache)


def write_parquet(
    cache: Cache,
    path: str | os.PathLike[str],
    *,
    level: Literal["reactions", "threads"] = "reactions",
    columns: list[str] | None = None,
) -> int:
    """Writes ``cache.to_arrow(level, columns)`` to the Parquet file
    ``path``, whole or not at all (through a temporary file beside it);
    returns the number of rows."""
    try:
        import pyarrow.parquet  # noqa: F401 (checked here: the error names the export)
    except ImportError:
        _require("pyarrow", "writing Parquet (socialctx export)")
    if columns is not None and not columns:
        # Parquet keeps no row count without a column: the file would read
        # back empty.
        raise ValueError("no column to write (columns is empty)")
    data = cache.to_arrow(level=level, columns=columns)
    # The open file, not its name: pyarrow takes only names that are UTF-8
    # (a Latin-1 directory name was "surrogates not allowed").
    write_output(Path(path), lambda f: _write_stream(data, f))
    return len(data)


#: The rows of a row group ``pq.write_table`` writes when not told.
ROW_GROUP_ROWS = 1024 * 1024


def _write_stream(data: Any, f: BinaryIO, row_group_rows: int = ROW_GROUP_ROWS) -> None:
    """Writes the Arrow stream ``data`` to ``f`` as Parquet, byte for byte
    what ``pq.write_table(pa.table(data), f, row_group_size=row_group_rows)``
    writes, holding at most one row group's batches (the whole table was 5
    KB a thread): each row group is the same slice of the same chunks."""
    import pyarrow.parquet as pq

    pa = _pa()
    stream = pa.RecordBatchReader.from_stream(data)
    schema = stream.schema
    with pq.ParquetWriter(f, schema) as writer:
        held: list[Any] = []
        rows, wrote = 0, False
        for batch in stream:
            held.append(batch)
            rows += batch.num_rows
            while rows >= row_group_rows:
                table = pa.Table.from_batches(held, schema)
                writer.write_table(table.slice(0, row_group_rows), row_group_rows)
                held = table.slice(row_group_rows).to_batches()
                rows -= row_group_rows
                wrote = True
        if rows or not wrote:
            # The last, short row group; or the one empty row group
            # write_table writes for a table of no rows.
            writer.write_table(pa.Table.from_batches(held, schema), row_group_rows)


def reply_delays(cache: Cache) -> pd.DataFrame:
    """Every reply's delay after its source (``delay_s``, seconds; the
    source tweet stored among its own reactions is no reply) with its
    thread's ``position``, ``event`` and ``label_code``: the data of the
    arrival curves."""
    pa = _pa()
    import numpy as np
    import pyarrow.compute as pc

    threads = pa.table(cache.to_arrow(level="threads", columns=["source_created_at"]))
    source = threads.column("source_created_at").cast(pa.int64()).to_numpy()
    columns = ["position", "event", "label_code", "kind", "created_at", "thread_id", "reaction_id"]
    r = pa.table(cache.to_arrow(columns=columns))
    # Replies, less the source tweet stored among its own reactions.
    reply = pc.equal(r.column("kind"), "reply")
    r = r.filter(pc.and_(reply, pc.not_equal(r.column("reaction_id"), r.column("thread_id"))))
    position = r.column("position").to_numpy().astype(np.int64)
    created = r.column("created_at").cast(pa.int64()).to_numpy()
    out = r.select(["position", "event", "label_code"]).to_pandas()
    out["delay_s"] = created - source[position]
    return out


def features_by_label(cache: Cache) -> pd.DataFrame:
    """The 28 features of every reaction with its thread's ``label_code``."""
    cols = ["label_code", *FEATURE_NAMES]
    return _pa().table(cache.to_arrow(columns=cols)).to_pandas()


def _escape(s: object) -> str:
    return html.escape(str(s), quote=True)


def _svg(fig: Figure) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    text = buf.getvalue()
    # Inline SVG: drop the XML prolog and DOCTYPE (which points at w3.org).
    start = text.find("<svg")
    return text[start:] if start >= 0 else text
