"""The figures and the HTML page of :mod:`socialctx.describe` (matplotlib,
imported here only, on demand; the Agg backend, so no display is needed)."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

import numpy as np

from .describe import COLUMNS, _cell, _escape, _svg, features_by_label, reply_delays

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from .describe import Description

_LABELS = {1: "rumour", 0: "non-rumour", -1: "unlabelled"}
_COLOURS = {1: "#c0392b", 0: "#2471a3", -1: "#7f8c8d"}


def _figure(**kw: Any) -> Figure:
    try:
        from matplotlib.figure import Figure
    except ImportError:
        from ._extras import missing

        raise missing("socialctx.describe (figures)", "matplotlib") from None
    # Figure() directly, not pyplot: no global state, no backend selection.
    return Figure(**kw)


def _labels_present(codes: Any) -> list[int]:
    present = {int(c) for c in np.unique(np.asarray(codes))}
    return [c for c in (1, 0, -1) if c in present]


def make_figures(d: Description) -> dict[str, Figure]:
    threads = d.threads.to_pandas()
    out: dict[str, Figure] = {}
    labels = _labels_present(threads["label_code"]) if len(threads) else []

    # Thread sizes (source + replies), per label, log-spaced bins.
    fig = _figure(figsize=(6, 3.6))
    ax = fig.add_subplot()
    size = threads["replies"].astype("int64") + 1
    top = int(size.max()) if len(size) else 1
    bins = np.unique(np.geomspace(1, max(top, 2) + 1, 30).astype(int)).tolist()
    for c in labels:
        ax.hist(
            size[threads["label_code"] == c],
            bins=bins,
            histtype="step",
            linewidth=1.5,
            color=_COLOURS[c],
            label=_LABELS[c],
        )
    ax.set_xscale("log")
    ax.set_xlabel("thread size (source + replies)")
    ax.set_ylabel("threads")
    ax.set_title("Thread sizes")
    if labels:
        ax.legend()
    out["thread_sizes"] = fig

    # Reply arrival: share of a label's replies that arrived within t.
    fig = _figure(figsize=(6, 3.6))
    ax = fig.add_subplot()
    delays = reply_delays(d.cache)
    for c in _labels_present(delays["label_code"]) if len(delays) else []:
        x = np.maximum(np.sort(delays.loc[delays["label_code"] == c, "delay_s"].to_numpy()), 1)
        y = np.arange(1, len(x) + 1) / len(x)
        ax.step(x, y, where="post", color=_COLOURS[c], label=f"{_LABELS[c]} ({len(x):,} replies)")
    ax.set_xscale("log")
    ax.set_ylim(0, 1)
    ax.set_xlabel("time since the source tweet (s, log)")
    ax.set_ylabel("share of replies")
    ax.set_title("Reply arrival")
    for seconds, name in ((60, "1 min"), (3600, "1 h"), (86400, "1 day")):
        ax.axvline(seconds, color="#bbbbbb", linewidth=0.8, zorder=0)
        ax.text(seconds, 0.02, f" {name}", color="#888888", fontsize=8)
    if len(delays):
        ax.legend(loc="upper left")
    out["reply_arrival"] = fig

    # Propagation depth.
    fig = _figure(figsize=(6, 3.6))
    ax = fig.add_subplot()
    depth = threads["depth"].astype("int64")
    dmax = int(depth.max()) if len(depth) else 0
    edges = np.arange(-0.5, dmax + 1.5)
    width = 0.8 / max(len(labels), 1)
    for i, c in enumerate(labels):
        counts, _ = np.histogram(depth[threads["label_code"] == c], bins=edges)
        ax.bar(
            np.arange(dmax + 1) + (i - (len(labels) - 1) / 2) * width,
            counts,
            width=width,
            color=_COLOURS[c],
            label=_LABELS[c],
        )
    ax.set_xlabel("propagation depth of the replies")
    ax.set_ylabel("threads")
    ax.set_title("Propagation depth")
    if labels:
        ax.legend()
    out["depths"] = fig

    # The 28 features by label: density histograms over the 1st..99th percentile.
    feats = features_by_label(d.cache)
    from ._socialctx import FEATURE_NAMES

    fig = _figure(figsize=(14, 14))
    flabels = _labels_present(feats["label_code"]) if len(feats) else []
    for i, name in enumerate(FEATURE_NAMES):
        ax = fig.add_subplot(7, 4, i + 1)
        values = feats[name].to_numpy(dtype=np.float64)
        finite = values[np.isfinite(values)]
        if len(finite):
            lo, hi = np.percentile(finite, [1, 99])
            if hi <= lo:
                lo, hi = lo - 0.5, hi + 0.5
            bins = np.linspace(lo, hi, 31).tolist()
            for c in flabels:
                v = values[(feats["label_code"] == c).to_numpy() & np.isfinite(values)]
                if len(v):
                    ax.hist(
                        np.clip(v, lo, hi),
                        bins=bins,
                        density=True,
                        histtype="step",
                        color=_COLOURS[c],
                        label=_LABELS[c],
                    )
        ax.set_title(name, fontsize=9)
        ax.tick_params(labelsize=7)
        ax.set_yticks([])
    fig.suptitle("The 28 features by label (density; 1st–99th percentile, the rest clipped)")
    if flabels:
        fig.legend(
            *fig.axes[0].get_legend_handles_labels(),
            loc="upper center",
            bbox_to_anchor=(0.5, 0.975),
            ncol=len(flabels),
            frameon=False,
        )
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    out["features"] = fig

    # Leave-one-event-out folds.
    fig = _figure(figsize=(6, 0.5 + 0.35 * max(len(d.folds), 1)))
    ax = fig.add_subplot()
    names = [f.event for f in d.folds]
    slots = np.arange(len(names))
    tests = [len(f.test) for f in d.folds]
    ax.barh(slots, tests, color="#e67e22", label="test (held out)")
    ax.barh(slots, [len(f.train) for f in d.folds], left=tests, color="#95a5a6", label="train")
    # Event names are folder names: "$...$" in one is text, not mathtext.
    ax.set_yticks(slots, names, parse_math=False)
    ax.invert_yaxis()
    ax.set_xlabel("threads")
    ax.set_title("Leave-one-event-out folds")
    if names:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    out["folds"] = fig
    return out


_CSS = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; max-width: 1400px; }
table { border-collapse: collapse; font-size: 0.85em; margin: 1em 0; }
th, td { padding: 0.25em 0.6em; border-bottom: 1px solid #ddd; text-align: right; }
th:first-child, td:first-child { text-align: left; }
tr.total td { font-weight: bold; border-top: 2px solid #444; }
figure { margin: 1.5em 0; }
figure svg { max-width: 100%; height: auto; }
dl { font-size: 0.85em; } dt { font-weight: bold; } dd { margin: 0 0 0.4em 1.5em; }
"""


def page(d: Description) -> str:
    rows = d.rows()
    head = "".join(f"<th>{_escape(h)}</th>" for h in ["Event"] + [h for _, h, _ in COLUMNS])
    body = []
    for i, (event, row) in enumerate(rows):
        cls = ' class="total"' if i == len(rows) - 1 else ""
        cells = "".join(
            f"<td>{_escape(_cell(k, row[k], minutes=True))}</td>" for k, _, _ in COLUMNS
        )
        body.append(f"<tr{cls}><td>{_escape(event)}</td>{cells}</tr>")
    defs = "".join(f"<dt>{_escape(h)}</dt><dd>{_escape(t)}</dd>" for _, h, t in COLUMNS)
    figs = d.figures()
    captions = {
        "thread_sizes": "Thread sizes (source and replies), per label.",
        "reply_arrival": "Reply arrival: the share of each label's replies that arrived "
        "within a time of the source tweet.",
        "depths": "Propagation depth of the reply trees, per label.",
        "features": "Each of the 28 features' distribution, per label.",
        "folds": "Leave-one-event-out folds: the held-out event's threads, then the training threads.",
    }
    figure_html = "".join(
        f"<figure>{_svg(fig)}<figcaption>{_escape(captions[name])}</figcaption></figure>"
        for name, fig in figs.items()
        if name != "folds"
    )
    fold_rows = []
    for f in d.folds:
        authors = f.leakage.get("shared_source_authors", [])
        texts = f.leakage.get("shared_source_texts", [])
        fold_rows.append(
            f"<tr><td>{_escape(f.event)}</td><td>{len(f.train):,}</td><td>{len(f.test):,}</td>"
            f"<td>{len(authors):,}</td><td>{len(texts):,}</td></tr>"
        )
    unlabelled = len(d.folds[0].unlabelled) if d.folds else 0
    folds_html = (
        f"<figure>{_svg(figs['folds'])}</figure>"
        "<table><tr><th>Held-out event</th><th>Train</th><th>Test</th>"
        "<th>Shared source authors</th><th>Test sources whose text is in training</th></tr>"
        + "".join(fold_rows)
        + "</table>"
        f"<p>Threads without a label (in no fold): {unlabelled:,}. A shared author or text "
        "lets a model score by memorising rather than generalising across events.</p>"
    )
    when = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<title>socialctx: {_escape(d.cache.path)}</title><style>{_CSS}</style></head><body>"
        f"<h1>Corpus description</h1><p>Cache <code>{_escape(d.cache.path)}</code> "
        f"(content id <code>{_escape(d.cache.content_id)}</code>), values computed by "
        f"definition <code>{_escape(d.definition or 'none recorded')}</code>, described "
        f"{when}.</p>"
        f"<h2>Dataset</h2><table><tr>{head}</tr>{''.join(body)}</table><dl>{defs}</dl>"
        f"<h2>Figures</h2>{figure_html}"
        f"<h2>Folds and leakage audit</h2>{folds_html}"
        "</body></html>\n"
    )
