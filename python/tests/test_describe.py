"""`socialctx describe`: the dataset table equals the same computation done
with pandas from `dump` and the corpus's own JSON files; every output form;
the HTML page opened in headless Chromium (no console errors, no network
requests, a screenshot that is not blank)."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_arrow import (
    depths_from_dump,
    dump,
    label_code,
    reaction_authors,
    replies_of,
    user_key,
)

import socialctx
from conftest import CORPORA, REPO

pd = pytest.importorskip("pandas")
pytest.importorskip("pyarrow")

from browser import chromium, open_page  # noqa: E402

from socialctx.describe import COLUMNS  # noqa: E402


def source_tweets(corpus: Path) -> dict[str, tuple[int, str]]:
    """source id -> (created_at in seconds, author id), read from the
    corpus's source-tweet files with Python's strptime."""
    out = {}
    for folder in corpus.rglob("source-tweet*"):
        thread = folder.parent
        f = folder / f"{thread.name}.json"
        if not (thread.name.isdigit() and f.is_file()):
            continue
        try:
            tweet = json.loads(f.read_text(encoding="utf-8"))
            when = dt.datetime.strptime(tweet["created_at"], "%a %b %d %H:%M:%S %z %Y")
            out[thread.name] = (int(when.timestamp()), str(tweet["user"]["id_str"]))
        except (ValueError, KeyError, TypeError):
            continue
    return out


def expected_table(cache_dir: Path, corpus: Path) -> dict[str, dict[str, Any]]:
    """The dataset table computed with pandas from `dump` (threads, labels,
    replies, parents, times) and the tweets' JSON (source times, every
    tweet's author: dump has no authors)."""
    sources = source_tweets(corpus)
    by_reaction = reaction_authors(corpus)
    rows = []
    users = []
    for line in dump(cache_dir):
        created, author = sources[line["source_id"]]
        users.append({"event": line["event"], "user": user_key(author)})
        for r in line["reactions"]:
            (who,) = by_reaction[line["source_id"], r["id"]]
            users.append({"event": line["event"], "user": user_key(who)})
        replies = replies_of(line)
        retweets = [r for r in line["reactions"] if r["kind"] == "retweet"]
        retweets = [r for r in retweets if r["id"] != line["source_id"]]
        delays = [r["created_at"] - created for r in replies]
        rows.append(
            {
                "event": line["event"],
                "label_code": label_code(line),
                "veracity": line["veracity"],
                "author": author,
                "replies": len(replies),
                "retweets": len(retweets),
                "depth": depths_from_dump(line),
                "first": min(delays) if delays else np.nan,
                "median": float(np.median(delays)) if delays else np.nan,
            }
        )
    frame = pd.DataFrame(rows)
    frame["size"] = frame["replies"] + 1
    # Keys as strings: ints and non-decimal ids in one comparable column.
    authors = pd.DataFrame(users).astype({"user": str})

    def table(g: Any, users: Any) -> dict[str, Any]:
        annotated = g["veracity"].notna().any()
        # Veracity is a rumour's: a non-rumour annotated "unclear" carries
        # "unverified" in the cache but is no rumour of the table.
        rumour = g["label_code"] == 1
        ver = {
            v: int(((g["veracity"] == v) & rumour).sum()) if annotated else None
            for v in ("true", "false", "unverified")
        }
        replied = g[g["replies"] > 0]
        return {
            "threads": len(g),
            "rumours": int((g["label_code"] == 1).sum()),
            "non_rumours": int((g["label_code"] == 0).sum()),
            "unlabelled": int((g["label_code"] == -1).sum()),
            **ver,
            "replies": int(g["replies"].sum()),
            "retweets": int(g["retweets"].sum()),
            "users": int(users.nunique()),
            "source_authors": int(g["author"].nunique()),
            "size_median": float(np.median(g["size"])),
            "size_p90": float(np.percentile(g["size"], 90)),
            "size_max": int(g["size"].max()),
            "depth_median": float(np.median(g["depth"])),
            "depth_max": int(g["depth"].max()),
            "first_reply_s": float(np.median(replied["first"])) if len(replied) else None,
            "median_reply_s": float(np.median(replied["median"])) if len(replied) else None,
        }

    by_event = authors.groupby("event")["user"]
    out = {str(e): table(g, by_event.get_group(e)) for e, g in frame.groupby("event")}
    out["Total"] = table(frame, authors["user"])
    return out


@pytest.mark.parametrize("name", sorted(CORPORA))
def test_table_equals_pandas_from_dump(built: dict[str, Path], name: str) -> None:
    d = socialctx.describe(socialctx.open(built[name]))
    got = dict(d.rows())
    expected = expected_table(built[name], REPO / CORPORA[name][0])
    assert list(got) == list(expected)
    for event, row in expected.items():
        assert list(got[event]) == list(row), event
        for key, want in row.items():
            have = got[event][key]
            if want is None or isinstance(want, int):
                assert have == want, (event, key)
            else:
                assert have == pytest.approx(want, rel=1e-12), (event, key)
    assert [k for k, _, _ in COLUMNS] == list(expected["Total"])
    # The Arrow and pandas forms hold the same numbers.
    table = d.table()
    assert table.column("event").to_pylist() == list(expected)
    assert table.column("threads").to_pylist() == [r["threads"] for r in expected.values()]
    assert d.events.loc[list(expected)[0], "replies"] == list(expected.values())[0]["replies"]
    assert d.total["threads"] == len(socialctx.open(built[name]))


@pytest.mark.parametrize("name", sorted(CORPORA))
def test_thread_counts_are_the_crates_one_count(built: dict[str, Path], name: str) -> None:
    # Cache.thread_counts (the crate's Tally, the build summary's count) per
    # label, event, and event and label, against the threads themselves.
    # The describe extra (collected in a venv without it, this module skips
    # through test_arrow's import; a module-level import would error).
    pa = pytest.importorskip("pyarrow")
    cache = socialctx.open(built[name])
    counts = cache.thread_counts()
    threads = pa.table(cache.to_arrow(level="threads"))
    events = [str(e) for e in threads.column("event").to_pylist()]
    labels = [int(c) for c in cache.labels]
    assert counts["labels"] == {c: labels.count(c) for c in set(labels)}
    assert counts["events"] == {e: events.count(e) for e in set(events)}
    per_event: dict[str, list[int]] = {e: [0, 0, 0] for e in set(events)}
    for e, c in zip(events, labels):
        per_event[e][c + 1] += 1
    assert counts["event_labels"] == per_event
    assert sum(counts["events"].values()) == len(cache) > 0


def test_veracity_counts_only_rumours(built: dict[str, Path]) -> None:
    # pheme-veracity's germanwings-crash holds a non-rumour whose annotation
    # is "unclear" (veracity "unverified" in the stored column): the table's
    # True / False / Unverified are rumours annotated so, and add up to the
    # rumours; the threads level gives that non-rumour no veracity.
    d = socialctx.describe(socialctx.open(built["pheme-veracity"]))
    threads = d.threads.to_pandas()
    odd = threads[(threads["label_code"] != 1) & (threads["annotated_rumour"] == "unclear")]
    assert len(odd) > 0  # the case this test is about is in the fixture
    assert odd["veracity"].isna().all()
    rows = dict(d.rows())
    for event, row in rows.items():
        assert row["true"] + row["false"] + row["unverified"] == row["rumours"], event


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "socialctx", *args], capture_output=True, text=True, check=False
    )


def test_every_output_form(built: dict[str, Path], tmp_path: Path) -> None:
    cache = str(built["pheme-veracity"])
    expected = dict(socialctx.describe(socialctx.open(cache)).rows())
    events = [e for e in expected if e != "Total"]

    r = cli("describe", cache, "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["events"] == {e: expected[e] for e in events}
    assert doc["total"] == expected["Total"]
    assert [f["event"] for f in doc["folds"]] == sorted(events)
    assert all(f["train"] + f["test"] == expected["Total"]["threads"] for f in doc["folds"])

    r = cli("describe", cache)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split()[:3] == ["Event", "Threads", "Rumours"]
    for event in [*events, "Total"]:
        (row,) = [ln for ln in lines if ln.split() and ln.split()[0] == event]
        assert row.split()[1] == f"{expected[event]['threads']:,}"

    r = cli("describe", cache, "--markdown")
    assert r.returncode == 0, r.stderr
    md = r.stdout.splitlines()
    # The table, then a blank line and what made it.
    assert md[-2] == "" and md[-1].startswith("*socialctx: values computed by definition ")
    md = md[:-2]
    assert len(md) == 2 + len(events) + 1
    assert all(ln.startswith("| ") and ln.endswith(" |") for ln in md if not ln.startswith("|:"))
    assert md[-1].startswith("| **Total** | **" + f"{expected['Total']['threads']:,}")

    r = cli("describe", cache, "--latex")
    assert r.returncode == 0, r.stderr
    tex = r.stdout
    for rule in (r"\toprule", r"\midrule", r"\bottomrule", r"\begin{tabular}", r"\end{tabular}"):
        assert rule in tex
    body = [ln for ln in tex.splitlines() if ln.endswith(r"\\")]
    assert len(body) == 1 + len(events) + 1
    # A paper's table: the columns zero or empty in every row (this corpus
    # has no retweets, no unlabelled thread) are left out; there were 19.
    shown = [k for k, _, _ in COLUMNS if any(r[k] not in (None, 0) for r in expected.values())]
    assert "retweets" not in shown and "unlabelled" not in shown and "replies" in shown
    assert all(ln.count(" & ") == len(shown) for ln in body)
    heads = dict((k, h) for k, h, _ in COLUMNS)
    assert body[0] == " & ".join(["Event", *(heads[k] for k in shown)]) + r" \\"
    assert r"germanwings-crash" in tex and "_" not in tex.replace(r"\_", "")
    r = cli("describe", cache, "--latex", "--columns", "all")
    body = [ln for ln in r.stdout.splitlines() if ln.endswith(r"\\")]
    assert r.returncode == 0 and all(ln.count(" & ") == len(COLUMNS) for ln in body), r.stderr

    # --columns picks and orders, in every form.
    r = cli("describe", cache, "--latex", "--columns", "replies,threads")
    assert r.returncode == 0, r.stderr
    assert r"Event & Replies & Threads \\" in r.stdout
    total = expected["Total"]
    assert rf"Total & {total['replies']:,} & {total['threads']:,} \\" in r.stdout
    r = cli("describe", cache, "--json", "--columns", "rumours")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["total"] == {"rumours": total["rumours"]}
    r = cli("describe", cache, "--columns", "threads,retweets")
    assert r.returncode == 0 and r.stdout.splitlines()[0].split() == [
        "Event",
        "Threads",
        "Retweets",
    ]
    r = cli("describe", cache, "--markdown", "--columns", "threads")
    assert r.returncode == 0 and r.stdout.splitlines()[0] == "| Event | Threads |", r.stdout
    for bad in ("nope", "threads,Threads", ","):
        r = cli("describe", cache, "--columns", bad)
        assert r.returncode in (1, 2) and r.stderr.startswith("error: "), (bad, r.stderr)
        assert "Traceback" not in r.stderr and r.stdout == "", (bad, r.stderr)
    r = cli("describe", cache, "--columns", "nope")
    assert "nope" in r.stderr and "threads" in r.stderr, r.stderr

    r = cli("describe", cache, "--json", "--latex")
    assert r.returncode == 2
    r = cli("describe", str(tmp_path / "nope"))
    assert r.returncode == 1 and "nope" in r.stderr and "Traceback" not in r.stderr


def test_latex_escapes_what_tex_reads_as_commands() -> None:
    from socialctx.describe import _latex_escape

    assert _latex_escape("a_b&c%d$e#f{g}h~i^j\\k") == (
        r"a\_b\&c\%d\$e\#f\{g\}h\textasciitilde{}i\textasciicircum{}j\textbackslash{}k"
    )
    # In text mode with LaTeX's default (OT1) encoding, < > | print as
    # inverted marks and a dash: a paper's table would show "a¡b¿c—d".
    assert _latex_escape("a<b>c|d") == r"a\textless{}b\textgreater{}c\textbar{}d"


def cache_with_events(tmp_path: Path, events: list[str]) -> socialctx.Cache:
    """A cache of one real rumour thread per event, the events named
    `events` (event names are the user's folder names: any text)."""
    rnr = REPO / "tests/fixtures/real/pheme-rnr/corpus/charliehebdo/rumours"
    threads = sorted(p for p in rnr.iterdir() if p.is_dir())[: len(events)]
    for event, thread in zip(events, threads):
        shutil.copytree(thread, tmp_path / "corpus" / event / "rumours" / thread.name)
    socialctx.build(tmp_path / "corpus", tmp_path / "cache", progress=False)
    return socialctx.open(tmp_path / "cache")


def test_dollar_signs_in_event_names_are_text_in_the_figures(tmp_path: Path) -> None:
    # matplotlib reads "$...$" as mathtext: an event folder named like
    # "p$\\badcmd{$q" made `describe --html` fail ("error: " and a pyparsing
    # message, no page), and "u$x_1$v" was drawn as math.
    pytest.importorskip("matplotlib")
    events = ["p$\\badcmd{$q", "u$x_1$v"]
    d = socialctx.describe(cache_with_events(tmp_path, events))
    assert sorted(f.event for f in d.folds) == sorted(events)
    page = d.write_html(tmp_path / "page.html").read_text()
    assert "p$\\badcmd{$q" in page and "<svg" in page
    folds = d.figures()["folds"]
    folds.canvas.draw()
    ticks = folds.axes[0].get_yticklabels()
    assert sorted(t.get_text() for t in ticks) == sorted(events)
    assert not any(t.get_parse_math() for t in ticks)


def test_html_page_is_whole_and_self_contained(built: dict[str, Path], tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    page = tmp_path / "corpus.html"
    r = cli("describe", str(built["pheme-veracity"]), "--html", str(page))
    assert r.returncode == 0, r.stderr
    # The page is the output: nothing on stdout (it printed the whole text
    # table too), one line naming the page on stderr.
    assert r.stdout == "" and r.stderr == f"wrote {page}\n", (r.stdout, r.stderr)
    text = page.read_text(encoding="utf-8")
    assert text.count("<svg") == 5
    # Nothing to fetch: no scripts, stylesheets, images or fonts by URL (the
    # SVG namespaces name w3.org, which a browser never requests).
    urls = set(re.findall(r"""(?:src|href)\s*=\s*["']([^"'#][^"']*)""", text))
    assert urls == set(), urls
    assert "<script" not in text
    assert list(tmp_path.iterdir()) == [page]
    assert oct(page.stat().st_mode & 0o777) != oct(0o600)
    # A page that cannot be written is an error, and leaves nothing behind.
    r = cli("describe", str(built["golden"]), "--html", str(tmp_path / "no" / "x.html"))
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert list(tmp_path.iterdir()) == [page]


def test_every_output_form_names_what_made_it(built: dict[str, Path], tmp_path: Path) -> None:
    """Issue 42, red team D8: the Markdown, LaTeX and HTML outputs lacked
    the definition digest (text and JSON had it)."""
    pytest.importorskip("matplotlib")
    cache = socialctx.open(built["golden"])
    d = socialctx.describe(cache)
    made = f"definition {socialctx.DEFINITION}, cache generation {cache.content_id}"
    assert made in d.text()
    assert made in d.markdown()
    assert made in d.latex() and d.latex().startswith("% socialctx: ")
    doc = json.loads(d.json())
    assert (doc["definition"], doc["content_id"]) == (socialctx.DEFINITION, cache.content_id)
    page = d.html()
    assert f"definition <code>{socialctx.DEFINITION}</code>" in page
    assert f"content id <code>{cache.content_id}</code>" in page


def test_html_page_renders_in_headless_chromium(built: dict[str, Path], tmp_path: Path) -> None:
    """Chromium from Debian's package (.ci/run installs it); missing, the test
    fails when SOCIALCTX_REQUIRE_CHROMIUM is set (CI), else skips."""
    pytest.importorskip("matplotlib")
    image = pytest.importorskip("matplotlib.image")
    exe = chromium()
    if exe is None:
        if os.environ.get("SOCIALCTX_REQUIRE_CHROMIUM"):
            pytest.fail("chromium is not installed (apt-get install chromium)")
        pytest.skip("chromium is not installed")
    page = tmp_path / "corpus.html"
    socialctx.describe(socialctx.open(built["pheme-veracity"])).write_html(page)
    shot = tmp_path / "corpus.png"
    seen = open_page(exe, page, shot)
    assert seen["exceptions"] == []
    assert seen["console"] == []
    assert seen["log"] == [], seen["log"]
    assert seen["requests"] == [page.resolve().as_uri()]
    pixels = image.imread(shot)[..., :3]
    assert pixels.shape[0] == seen["height"] > 2000 and pixels.shape[1] == 1400
    ink = (pixels < 0.9).any(axis=2)
    assert ink.mean() > 0.02, "the screenshot is (nearly) blank"
    # Colour: the figures' red and blue label lines were drawn.
    red = (pixels[..., 0] > 0.6) & (pixels[..., 1] < 0.4) & (pixels[..., 2] < 0.4)
    blue = (pixels[..., 2] > 0.5) & (pixels[..., 0] < 0.3)
    assert red.sum() > 500 and blue.sum() > 500
    if os.environ.get("SOCIALCTX_SCREENSHOT"):
        Path(os.environ["SOCIALCTX_SCREENSHOT"]).write_bytes(shot.read_bytes())


def test_the_browser_check_sees_errors_and_requests(tmp_path: Path) -> None:
    """The check above could fail: a page with a console error, an exception
    and a request for a remote image is seen as such."""
    exe = chromium()
    if exe is None:
        if os.environ.get("SOCIALCTX_REQUIRE_CHROMIUM"):
            pytest.fail("chromium is not installed (apt-get install chromium)")
        pytest.skip("chromium is not installed")
    page = tmp_path / "bad.html"
    page.write_text(
        '<html><body><img src="http://192.0.2.1/x.png">'
        '<script>console.error("boom"); nope();</script></body></html>'
    )
    seen = open_page(exe, page, tmp_path / "bad.png")
    assert "http://192.0.2.1/x.png" in seen["requests"]
    assert seen["console"] and seen["exceptions"]


def test_figures_hold_the_data(built: dict[str, Path]) -> None:
    pytest.importorskip("matplotlib")
    from socialctx.describe import reply_delays

    name = "pheme-veracity"
    cache = socialctx.open(built[name])
    sources = source_tweets(REPO / CORPORA[name][0])
    expected: dict[int, list[int]] = {}
    for line in dump(built[name]):
        created = sources[line["source_id"]][0]
        for r in replies_of(line):
            expected.setdefault(label_code(line), []).append(r["created_at"] - created)
    delays = reply_delays(cache)
    for code, want in expected.items():
        got = delays.loc[delays["label_code"] == code, "delay_s"].tolist()
        assert sorted(got) == sorted(want), code

    figs = socialctx.describe(cache).figures()
    assert list(figs) == ["thread_sizes", "reply_arrival", "depths", "features", "folds"]
    arrival = figs["reply_arrival"].axes[0]
    curves = [ln for ln in arrival.get_lines() if len(ln.get_xdata()) > 2]
    assert len(curves) == len(expected)
    for ln in curves:
        y = np.asarray(ln.get_ydata())
        assert y[-1] == 1.0 and np.all(np.diff(y) >= 0)
    assert len(figs["features"].axes) == socialctx.NUM_FEATURES
    assert [a.get_title() for a in figs["features"].axes] == socialctx.FEATURE_NAMES


@pytest.mark.parametrize(
    ("missing", "args"),
    [("pandas", []), ("pyarrow", []), ("matplotlib", ["--html", "x.html"])],
)
def test_a_missing_optional_package_is_one_error_line(
    built: dict[str, Path], tmp_path: Path, missing: str, args: list[str]
) -> None:
    # sys.modules[name] = None makes `import name` raise ImportError.
    code = (
        f"import sys; sys.modules[{missing!r}] = None; "
        "from socialctx.cli import main; sys.exit(main(sys.argv[1:]))"
    )
    r = subprocess.run(
        [sys.executable, "-c", code, "describe", str(built["golden"]), *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )
    assert r.returncode == 1, r.stderr
    assert r.stderr.startswith("error: ") and missing in r.stderr and "Traceback" not in r.stderr
    # The hint fits the install (socialctx[describe] is not on PyPI): the
    # packages by name, or a wheel's own path with the extra.
    assert "pip install " in r.stderr and "pandas pyarrow matplotlib" in r.stderr, r.stderr
    assert list(tmp_path.iterdir()) == []


def _cells(html: str) -> list[list[str]]:
    """The text of each table row's cells in rendered HTML."""
    from html.parser import HTMLParser

    rows: list[list[str]] = []

    class P(HTMLParser):
        cell: list[str] | None = None

        def handle_starttag(self, tag: str, attrs: Any) -> None:
            if tag == "tr":
                rows.append([])
            elif tag in ("td", "th"):
                self.cell = []

        def handle_endtag(self, tag: str) -> None:
            if tag in ("td", "th") and self.cell is not None:
                rows[-1].append("".join(self.cell))
                self.cell = None

        def handle_data(self, data: str) -> None:
            if self.cell is not None:
                self.cell.append(data)

    P(convert_charrefs=True).feed(html)
    return rows


def _render(md: str) -> str:
    markdown_it = pytest.importorskip("markdown_it")
    return str(markdown_it.MarkdownIt("commonmark").enable("table").render(md))


def test_markdown_cells_read_as_the_event_names() -> None:
    # Event names are folder names, any text: a "<b>" or "*a*" must read as
    # those characters in a rendered table, never as HTML or emphasis.
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from socialctx.describe import _markdown_text

    alphabet = st.characters(codec="utf-8", exclude_categories=("Cs", "Cc"), max_codepoint=0x2FF)
    names = st.text(alphabet | st.sampled_from("\n\t<>|\\`*_[]()&#!"), min_size=1, max_size=16)

    @settings(max_examples=300, deadline=None)
    @given(names)
    def check(name: str) -> None:
        md = f"| Event | N |\n|:---|---:|\n| {_markdown_text(name)} | 1 |\n"
        assert _cells(_render(md))[1] == [name, "1"]

    check()


def test_markdown_table_escapes_event_folder_names(tmp_path: Path) -> None:
    events = ["<b>x&amp;y<b>", "a*b*_c_ [l](u)"]
    md = socialctx.describe(cache_with_events(tmp_path, events)).markdown()
    rows = _cells(_render(md))
    assert rows[0][0] == "Event" and rows[-1][0] == "Total"
    assert sorted(r[0] for r in rows[1:-1]) == sorted(events)
