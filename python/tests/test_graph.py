"""Propagation trees: each reaction's stored parent against an independent
reading of the corpus (tests/fixtures/oracle/parents.py), on every fixture
corpus and an adversarial one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import socialctx
from conftest import CORPORA, REPO, binary, jsonl

PARENTS_ORACLE = REPO / "tests/fixtures/oracle/parents.py"
TEMPLATE = (
    REPO / "data-samples/corpus/generated/ferguson-all-rnr-threads/non-rumours/"
    "524935906596499456/reactions/524935906596500533.json"
)
SOURCE = 100
HUGE = 2**53 + 1  # not a float64 integer: read exactly or not at all


def _tweet(tid: int, minute: int, **fields: object) -> dict:
    t = json.loads(TEMPLATE.read_text())
    for k in ("in_reply_to_status_id", "in_reply_to_status_id_str"):
        t.pop(k, None)
    t["id"], t["id_str"] = tid, str(tid)
    t["created_at"] = f"Wed Jan 07 11:{minute:02d}:00 +0000 2015"
    t.update(fields)
    return t


def adversarial_corpus(root: Path) -> Path:
    """One thread with every case of the rule (FEATURES.md, "Propagation tree")."""
    thread = root / "ev" / "rumours" / str(SOURCE)
    for sub in ("source-tweets", "reactions", "retweets"):
        (thread / sub).mkdir(parents=True)
    (thread / "source-tweets" / f"{SOURCE}.json").write_text(json.dumps(_tweet(SOURCE, 0)))
    s = "in_reply_to_status_id_str"
    n = "in_reply_to_status_id"
    replies = [
        _tweet(101, 1, **{s: str(SOURCE), n: SOURCE}),  # the source
        _tweet(102, 2, **{s: "999", n: 999}),  # missing; structure: 999 under 101
        _tweet(103, 3, **{s: "103"}),  # itself; structure: under 102
        _tweet(104, 5, **{s: "150"}),  # a retweet; structure: under 103
        _tweet(105, 6, **{n: 101}),  # a number only
        _tweet(106, 7, **{s: "12x", n: 102}),  # malformed string, good number
        _tweet(HUGE, 8, **{s: None, n: 105}),  # a huge id of its own
        _tweet(108, 9, **{n: HUGE}),  # names the huge id, as a number
        _tweet(109, 10, **{n: True, s: ["105"]}),  # ill-typed: structure (a cycle)
        _tweet(110, 11, **{s: "111"}),  # a later reply; not in the structure
        _tweet(111, 12, **{s: str(SOURCE)}),
        _tweet(112, 13, **{n: -5, s: ""}),  # malformed both; not in the structure
        _tweet(113, 14, **{n: 1.0e2}),  # a float is not an id
    ]
    for t in replies:
        (thread / "reactions" / f"{t['id_str']}.json").write_text(json.dumps(t))
    (thread / "retweets" / "150.json").write_text(json.dumps(_tweet(150, 4, **{s: "101"})))
    structure = (
        f'{{"{SOURCE}": {{"101": {{"999": {{"102": {{"103": {{"104": []}}}}}}}},'
        f' "105": {{"109": {{"105": {{"109": []}}}}}}, "x\u201d": {{"106": []}}}}}}'
    )
    (thread / "structure.json").write_text(structure)
    # A second thread whose structure.json is not an object, and a third with none.
    for sid, text in ((200, "[1, 2]"), (300, None)):
        t = root / "ev" / "non-rumours" / str(sid)
        (t / "source-tweets").mkdir(parents=True)
        (t / "reactions").mkdir()
        (t / "source-tweets" / f"{sid}.json").write_text(json.dumps(_tweet(sid, 0)))
        r = _tweet(sid + 1, 1, **{s: str(sid + 7)})
        (t / "reactions" / f"{sid + 1}.json").write_text(json.dumps(r))
        if text is not None:
            (t / "structure.json").write_text(text)
    return root


def graph_dump(cache: Path, graph: bool) -> list[dict]:
    args = [binary("dump"), cache, "--retweets"] + (["--graph"] if graph else [])
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    return [json.loads(line) for line in out.splitlines()]


def independent(cache: Path, corpus: Path) -> list[dict]:
    plain = subprocess.run(
        [binary("dump"), cache, "--retweets"], check=True, capture_output=True
    ).stdout
    out = subprocess.run(
        [sys.executable, PARENTS_ORACLE, corpus],
        input=plain,
        check=True,
        capture_output=True,
    ).stdout
    return [json.loads(line) for line in out.splitlines()]


EXTRA_CORPORA = {
    "edge": "tests/fixtures/edge/corpus",
    "adversarial-text": "tests/fixtures/adversarial-text/corpus",
}


@pytest.mark.parametrize("name", list(CORPORA) + list(EXTRA_CORPORA))
def test_parents_equal_an_independent_reading(built, tmp_path, name):
    if name in CORPORA:
        corpus, cache = REPO / CORPORA[name][0], built[name]
    else:
        corpus, cache = REPO / EXTRA_CORPORA[name], tmp_path / "c"
        socialctx.build(corpus, cache, workers=2, progress=False)
    got = graph_dump(cache, True)
    assert got == independent(cache, corpus)
    assert all("parent" in r for t in got for r in t["reactions"])


def test_adversarial_parents(tmp_path):
    corpus = adversarial_corpus(tmp_path / "corpus")
    cache = tmp_path / "cache"
    socialctx.build(corpus, cache, workers=1, progress=False)
    got = graph_dump(cache, True)
    assert got == independent(cache, corpus)
    by_id = {r["id"]: (r["parent"], r["parent_how"]) for t in got for r in t["reactions"]}
    src = str(SOURCE)
    assert by_id == {
        "101": (src, "in_reply_to"),
        "102": ("101", "structure"),
        "103": ("102", "structure"),
        "150": (src, "defaulted"),
        "104": ("103", "structure"),
        "105": ("101", "in_reply_to"),
        "106": ("102", "in_reply_to"),
        str(HUGE): ("105", "in_reply_to"),
        "108": (str(HUGE), "in_reply_to"),
        "109": ("105", "structure"),
        "110": (src, "defaulted"),
        "111": (src, "in_reply_to"),
        "112": (src, "defaulted"),
        "113": (src, "defaulted"),
        "201": ("200", "defaulted"),
        "301": ("300", "defaulted"),
    }
    # The structure.json that is not an object is reported; the thread is kept.
    report = [b["path"] for b in jsonl(cache / "report.jsonl")]
    assert report == ["ev/non-rumours/200/structure.json"]


def test_dump_graph_through_the_command(tmp_path, built):
    out = tmp_path / "out.jsonl"
    with out.open("w") as f:
        subprocess.run(
            [sys.executable, "-m", "socialctx", "dump", built["sample"], "--retweets", "--graph"],
            check=True,
            stdout=f,
        )
    assert jsonl(out) == graph_dump(built["sample"], True)
    r = subprocess.run(
        [sys.executable, "-m", "socialctx", "dump", built["sample"], "--graph", "--tokens"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2 and "--graph" in r.stderr


# --- graph batches ---------------------------------------------------------

SELECTIONS = [
    {"kinds": "replies", "max_cxt": 200},
    {"kinds": "both", "max_cxt": 5},
    {"kinds": "replies", "window_s": 3600.0, "max_cxt": 10},
]


def numpy_graphs(
    dump: list[dict], cache: socialctx.Cache, positions: list[int], sel: dict
) -> dict[str, np.ndarray]:
    """The graph batch built with NumPy from `dump --graph --retweets` lines."""
    kinds = {"replies": {"reply"}, "retweets": {"retweet"}, "both": {"reply", "retweet"}}
    xs, batch, parent, ptr, labels = [], [], [], [0], []
    for b, pos in enumerate(positions):
        line, thread = dump[pos], cache[pos]
        start = thread.source_created_at
        picked = [
            r
            for r in line["reactions"]
            if r["kind"] in kinds[sel["kinds"]]
            and ("window_s" not in sel or 0 <= r["created_at"] - start <= sel["window_s"])
        ][: sel["max_cxt"]]
        up = {r["id"]: r["parent"] for r in line["reactions"]}
        node = {r["id"]: ptr[-1] + 1 + k for k, r in enumerate(picked)}
        xs.append(np.zeros((1, 28), np.float32))
        batch.append(b)
        parent.append(-1)
        for r in picked:
            p = r["parent"]
            # The source's id names the root, even where a reaction has it too.
            while p != line["source_id"] and p not in node:
                p = up[p]
            parent.append(ptr[-1] if p == line["source_id"] else node[p])
            batch.append(b)
            xs.append(np.asarray([r["features"]], np.float32))
        ptr.append(ptr[-1] + 1 + len(picked))
        labels.append(thread.label_code)
    parent_a = np.asarray(parent, np.int64)
    child = np.flatnonzero(parent_a >= 0)
    td = np.stack([parent_a[child], child])
    return {
        "x": np.concatenate(xs),
        "edge_index": np.concatenate([td, td[::-1]], axis=1),
        "batch": np.asarray(batch, np.int64),
        "ptr": np.asarray(ptr, np.int64),
        "parent": parent_a,
        "labels": np.asarray(labels, np.int8),
    }


@pytest.mark.parametrize("name", ["pheme-veracity", "sample"])
@pytest.mark.parametrize("sel", SELECTIONS, ids=["replies", "both-5", "window-1h"])
def test_graph_batches_equal_a_numpy_construction(built, name, sel):
    cache = socialctx.open(built[name])
    dump = graph_dump(built[name], True)
    loader = socialctx.Loader(cache, **sel)
    graph = socialctx.GraphBatch()
    rng = np.random.default_rng(7)
    order = rng.permutation(len(cache))
    deep = 0
    for k in range(0, len(cache), 16):  # every thread, in shuffled batches
        positions = [int(p) for p in order[k : k + 16]]
        loader.fill_graph(positions, graph)
        want = numpy_graphs(dump, cache, positions, sel)
        for key, value in want.items():
            np.testing.assert_array_equal(getattr(graph, key), value, err_msg=key)
        assert (
            graph.num_edges == 2 * (graph.num_nodes - len(positions)) == want["edge_index"].shape[1]
        )
        np.testing.assert_array_equal(graph.positions, positions)
        deep += int(
            np.sum(graph.parent[graph.parent >= 0] != graph.ptr[graph.batch][graph.parent >= 0])
        )
    if sel["kinds"] != "both":
        assert deep > 0, "no reply to a reply in any batch"


def test_graph_labels_and_normalisation(built):
    cache = socialctx.open(built["sample"])
    stats = socialctx.FeatureStats.compute(cache)
    plain = socialctx.GraphBatch()
    socialctx.Loader(cache).fill_graph([0, 1, 2], plain)
    normed = socialctx.GraphBatch()
    socialctx.Loader(cache, stats=stats).fill_graph([0, 1, 2], normed, labels=[1, 0, 1])
    np.testing.assert_array_equal(normed.labels, [1, 0, 1])
    roots = plain.ptr[:-1]
    rows = np.setdiff1d(np.arange(plain.num_nodes), roots)
    want = (plain.x[rows].astype(np.float64) - stats.mean) / (stats.std + 1e-6)
    np.testing.assert_allclose(normed.x[rows], want, rtol=1e-5, atol=1e-5)
    assert not normed.x[roots].any()
    with pytest.raises(ValueError):
        socialctx.Loader(cache).fill_graph([0, 1], normed, labels=[1])
