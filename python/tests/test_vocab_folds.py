"""Vocabularies counted from the stored tokens, and leave-one-event-out
folds (issue 29, items 3 and 4)."""

from __future__ import annotations

import collections
import json
from pathlib import Path

import numpy as np
import pytest

import socialctx
from conftest import REPO, TOKEN_ORACLES, jsonl


def oracle_counts(name: str, key: str) -> collections.Counter[str]:
    """Counts over the text oracle's replies (its reactions with reply
    tokens; retweets have none), with collections.Counter."""
    counter: collections.Counter[str] = collections.Counter()
    for thread in jsonl(REPO / TOKEN_ORACLES[name]):
        for r in thread["reactions"]:
            if r["reply_tokens"] is not None:
                counter.update(r[key] or [])
    return counter


@pytest.mark.parametrize("name", sorted(TOKEN_ORACLES))
@pytest.mark.parametrize(
    ("field", "key"), [("reply", "reply_tokens"), ("description", "description_tokens")]
)
def test_counts_equal_a_counter_over_the_token_oracle(built, name, field, key):
    want = oracle_counts(name, key)
    vocab = socialctx.open(built[name]).vocabulary(field)
    got = dict(zip(vocab.tokens, vocab.counts.tolist()))
    assert got == dict(want)
    # Count descending, then the token: deterministic.
    order = sorted(want.items(), key=lambda kv: (-kv[1], kv[0]))
    assert vocab.tokens == [t for t, _ in order]
    for i, t in enumerate(vocab.tokens[:50]):
        assert vocab.index(t) == i + 2 and t in vocab
    assert vocab.index("\x00 surely not a token") == 1


def test_min_count_and_max_size(built):
    cache = socialctx.open(built["pheme-rnr"])
    full = cache.vocabulary()
    frequent = cache.vocabulary(min_count=3)
    assert frequent.tokens == [t for t, c in zip(full.tokens, full.counts) if c >= 3]
    top = cache.vocabulary(max_size=10)
    assert top.tokens == full.tokens[:10]
    part = cache.vocabulary(positions=[0, 1])
    threads = [cache[0], cache[1]]
    want = collections.Counter(t for th in threads for ts in th.reply_tokens if ts for t in ts)
    assert dict(zip(part.tokens, part.counts.tolist())) == dict(want)


def _allennlp_from_files(directory: Path) -> dict[str, dict[str, int]]:
    """AllenNLP's Vocabulary.from_files, as its documentation and code
    describe it: non_padded_namespaces.txt holds namespace patterns; every
    other <namespace>.txt holds tokens one per line, index = line number
    (plus one in padded namespaces, where 0 is @@PADDING@@ and the
    @@UNKNOWN@@ line must be present)."""
    patterns = (directory / "non_padded_namespaces.txt").read_text("utf-8").split()
    vocab = {}
    for f in directory.iterdir():
        if f.name == "non_padded_namespaces.txt":
            continue
        ns = f.name.replace(".txt", "")
        padded = not any(p == ns or (p.startswith("*") and ns.endswith(p[1:])) for p in patterns)
        lines = f.read_text("utf-8").split("\n")
        if lines and lines[-1] == "":
            lines = lines[:-1]
        mapping = {"@@PADDING@@": 0} if padded else {}
        for i, line in enumerate(lines):
            mapping[line.replace("@@NEWLINE@@", "\n")] = i + 1 if padded else i
        if padded:
            assert "@@UNKNOWN@@" in mapping, "OOV token not found!"
        vocab[ns] = mapping
    return vocab


def test_saved_files_load_as_allennlp_loads_them(built, tmp_path):
    vocab = socialctx.open(built["pheme-veracity"]).vocabulary("description", max_size=200)
    vocab.save(tmp_path / "vocabulary")
    assert sorted(p.name for p in (tmp_path / "vocabulary").iterdir()) == [
        "non_padded_namespaces.txt",
        "tokens.txt",
    ]
    loaded = _allennlp_from_files(tmp_path / "vocabulary")["tokens"]
    assert loaded["@@PADDING@@"] == 0 and loaded["@@UNKNOWN@@"] == 1
    for t in vocab.tokens:
        assert loaded[t] == vocab.index(t)
    assert len(loaded) == len(vocab) + 2


def test_one_fold_per_event_every_thread_tested_once(built, tmp_path):
    # RumourEval's threads carry no rumour label: no fold.
    assert socialctx.folds(socialctx.open(built["rumoureval2017"])) == []
    for name in ("pheme-rnr", "pheme-journalism", "golden", "pheme-veracity"):
        cache = socialctx.open(built[name])
        events = {t.event for t in cache if t.label_code in (0, 1)}
        folds = socialctx.folds(cache)
        assert [f.event for f in folds] == sorted(events)
        tested = np.concatenate([f.test for f in folds])
        labelled = [p for p in range(len(cache)) if cache[p].label_code in (0, 1)]
        assert sorted(tested.tolist()) == labelled
        for f in folds:
            assert not set(f.train.tolist()) & set(f.test.tolist())
            assert sorted(f.train.tolist() + f.test.tolist()) == labelled
            assert all(cache[p].event == f.event for p in f.test.tolist())
            assert isinstance(f.leakage["shared_source_authors"], list)
        again = socialctx.folds(cache)  # deterministic
        assert [(f.event, f.train.tolist(), f.test.tolist()) for f in folds] == [
            (f.event, f.train.tolist(), f.test.tolist()) for f in again
        ]
    # RPDNN's split files, read back through the split reader.
    fold = folds[0]
    train_csv, test_csv = fold.write_csv(tmp_path / fold.event)
    split = socialctx.read_split(test_csv, cache)
    assert sorted(split.positions.tolist()) == fold.test.tolist() and len(split.missing) == 0
    assert split.labels.tolist() == [cache[p].label_code for p in split.positions.tolist()]
    assert len(socialctx.read_split(train_csv, cache).positions) == len(fold.train)


def test_leakage_audit_finds_shared_authors_and_texts(built):
    cache = socialctx.open(built["pheme-rnr"])
    authors: dict[str, set[str]] = collections.defaultdict(set)
    texts: dict[str, set[str]] = collections.defaultdict(set)
    for t in cache:
        if t.label_code in (0, 1):
            authors[t.source_user_id].add(t.event)
            texts[t.source_text].add(t.event)
    for f in socialctx.folds(cache):
        want = sorted(a for a, evs in authors.items() if f.event in evs and len(evs) > 1)
        assert f.leakage["shared_source_authors"] == want
        shared = [
            str(cache[p].source_id)
            for p in f.test.tolist()
            if len(texts[cache[p].source_text] - {f.event}) > 0
        ]
        assert f.leakage["shared_source_texts"] == shared
    json.dumps([f.leakage for f in socialctx.folds(cache)])
