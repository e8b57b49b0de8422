"""A vocabulary's indices per batch (issue 29, item 3): token ids per row
slot against a pure-Python construction from each thread's tokens, and bags
of words per graph node against collections.Counter."""

from __future__ import annotations

import collections

import numpy as np
import pytest

import socialctx

SELECTIONS = [
    {"kinds": "replies", "max_cxt": 200},
    {"kinds": "both", "max_cxt": 5, "pad": "longest", "pad_multiple": 4},
    {"kinds": "replies", "window_s": 3600.0, "max_cxt": 10, "pad": "longest", "empty": "masked"},
]
SEL_IDS = ["replies-max", "both-5-longest", "window-1h-longest-masked"]
KINDS = {"replies": {1}, "retweets": {0}, "both": {0, 1}}


def picked(thread: socialctx.Thread, sel: dict) -> list[int]:
    """The reactions the Loader's selection keeps, written out here."""
    start = thread.source_created_at
    keep = [
        i
        for i in range(len(thread))
        if int(thread.kinds[i]) in KINDS[sel["kinds"]]
        and ("window_s" not in sel or 0 <= int(thread.created_at[i]) - start <= sel["window_s"])
    ]
    return keep[: sel["max_cxt"]]


def field_tokens(thread: socialctx.Thread, field: str) -> list[list[str] | None]:
    return thread.reply_tokens if field == "reply" else thread.description_tokens


def python_token_ids(
    cache: socialctx.Cache,
    vocab: socialctx.Vocabulary,
    positions: list[int],
    sel: dict,
    batch_size: int,
    max_tokens: int,
) -> tuple[np.ndarray, np.ndarray]:
    """[B, T, L] ids and [B, T] lengths, built from the threads' tokens."""
    rows = [picked(cache[p], sel) for p in positions]
    if sel.get("pad", "max") == "max":
        width = sel["max_cxt"]
    else:
        longest = max([len(r) or (sel.get("empty", "row") == "row") for r in rows] + [1])
        m = sel["pad_multiple"] if "pad_multiple" in sel else 8
        width = min(-(-longest // m) * m, sel["max_cxt"])
    ids = np.zeros((batch_size, width, max_tokens), np.int32)
    lengths = np.zeros((batch_size, width), np.uint32)
    for b, (p, reactions) in enumerate(zip(positions, rows)):
        tokens = field_tokens(cache[p], vocab.field)
        for t, r in enumerate(reactions):
            kept = [vocab.index(tok) for tok in (tokens[r] or [])][:max_tokens]
            ids[b, t, : len(kept)] = kept
            lengths[b, t] = len(kept)
    return ids, lengths


@pytest.mark.parametrize("name", ["pheme-veracity", "sample"])
@pytest.mark.parametrize("sel", SELECTIONS, ids=SEL_IDS)
@pytest.mark.parametrize("field", ["reply", "description"])
def test_token_ids_equal_a_python_construction(built, name, sel, field):
    cache = socialctx.open(built[name])
    vocab = cache.vocabulary(field, kinds="both", max_size=60)
    assert vocab.field == field
    loader = socialctx.Loader(cache, **sel)
    batch = loader.new_batch(16)
    order = np.random.default_rng(3).permutation(len(cache))
    seen = collections.Counter[str]()
    for k in range(0, len(cache), 13):  # every thread; 13 of 16 slots: padding threads too
        positions = [int(p) for p in order[k : k + 13]]
        loader.fill(positions, batch)
        source = cache if k % 2 else loader
        ids, lengths = vocab.token_ids(source, batch, max_tokens=7, lengths=True)
        want_ids, want_lengths = python_token_ids(cache, vocab, positions, sel, 16, 7)
        assert ids.dtype == np.int32 and lengths.dtype == np.uint32
        assert ids.shape == (16, batch.width, 7) == want_ids.shape
        np.testing.assert_array_equal(ids, want_ids)
        np.testing.assert_array_equal(lengths, want_lengths)
        np.testing.assert_array_equal(vocab.token_ids(cache, batch, max_tokens=7), want_ids)
        seen.update(
            known=int((ids >= 2).sum()),
            unknown=int((ids == 1).sum()),
            cut=int((lengths == 7).sum()),
        )
    assert seen["known"] and seen["unknown"] and seen["cut"], seen


def test_token_ids_errors(built):
    cache = socialctx.open(built["sample"])
    other = socialctx.open(built["golden"])
    vocab = cache.vocabulary()
    loader = socialctx.Loader(cache)
    batch = loader.new_batch(4)
    # Before any fill: all padding.
    assert not vocab.token_ids(cache, batch, max_tokens=3).any()
    loader.fill([0, 1, 2], batch)
    with pytest.raises(ValueError, match="another cache"):
        vocab.token_ids(other, batch, max_tokens=3)
    with pytest.raises(ValueError, match="max_tokens"):
        vocab.token_ids(cache, batch, max_tokens=0)
    with pytest.raises(TypeError, match="Cache or socialctx.Loader"):
        vocab.token_ids("not a cache", batch, max_tokens=3)  # type: ignore[call-overload]


def counter_rows(
    cache: socialctx.Cache,
    vocab: socialctx.Vocabulary,
    graph: socialctx.GraphBatch,
    unknown: bool,
) -> list[collections.Counter[int]]:
    rows = []
    for n in range(graph.num_nodes):
        r = int(graph.reactions[n])
        c: collections.Counter[int] = collections.Counter()
        if r != 2**32 - 1:
            thread = cache[int(graph.positions[graph.batch[n]])]
            tokens = field_tokens(thread, vocab.field)[r] or []
            c.update(i for i in map(vocab.index, tokens) if unknown or i != 1)
        rows.append(c)
    return rows


@pytest.mark.parametrize("name", ["pheme-veracity", "sample"])
@pytest.mark.parametrize("sel", SELECTIONS, ids=SEL_IDS)
def test_bags_of_words_equal_a_counter(built, name, sel):
    cache = socialctx.open(built[name])
    vocab = cache.vocabulary(min_count=2)
    loader = socialctx.Loader(
        cache, **{k: v for k, v in sel.items() if k in ("kinds", "max_cxt", "window_s")}
    )
    graph = socialctx.GraphBatch()
    order = np.random.default_rng(5).permutation(len(cache))
    nonempty = 0
    for k in range(0, len(cache), 16):
        loader.fill_graph([int(p) for p in order[k : k + 16]], graph)
        for unknown in (True, False):
            indptr, indices, counts = vocab.bag_of_words(graph, unknown=unknown)
            assert indptr.dtype == indices.dtype == np.int64 and counts.dtype == np.float32
            assert len(indptr) == graph.num_nodes + 1 and indptr[-1] == len(indices) == len(counts)
            want = counter_rows(cache, vocab, graph, unknown)
            for n, c in enumerate(want):
                lo, hi = int(indptr[n]), int(indptr[n + 1])
                assert indices[lo:hi].tolist() == sorted(c), n
                assert counts[lo:hi].tolist() == [float(c[i]) for i in sorted(c)], n
                nonempty += hi > lo
            assert not np.diff(indptr)[graph.ptr[:-1]].any(), "root rows are empty"
            # The same with the cache or its Loader named.
            again = vocab.bag_of_words(graph, loader, unknown=unknown)
            for got, exp in zip(again, (indptr, indices, counts)):
                np.testing.assert_array_equal(got, exp)
    assert nonempty > 0


@pytest.mark.parametrize("name", ["pheme-veracity", "sample"])
@pytest.mark.parametrize("pad", ["max", "longest"])
def test_a_loader_with_token_ids_fills_them_with_every_batch(built, name, pad):
    """``Loader(token_ids=vocab, max_tokens=L)``: every fill writes
    ``batch.token_ids``, equal to ``vocab.token_ids`` of the same batch (the
    pure-Python construction above checks that one), refilled in place."""
    cache = socialctx.open(built[name])
    vocab = cache.vocabulary(max_size=50)
    loader = socialctx.Loader(
        cache, kinds="both", max_cxt=7, pad=pad, token_ids=vocab, max_tokens=5
    )
    plain = socialctx.Loader(cache, kinds="both", max_cxt=7, pad=pad)
    assert plain.new_batch(4).token_ids is None
    batch = loader.new_batch(4)
    seen_unknown = seen_known = False
    for start in range(0, len(cache), 4):
        positions = list(range(start, min(start + 4, len(cache))))
        loader.fill(positions, batch)
        got = batch.token_ids
        assert got.dtype == np.int32 and got.shape == (4, batch.width, 5)
        np.testing.assert_array_equal(got, vocab.token_ids(loader, batch, max_tokens=5))
        seen_unknown |= bool((got == 1).any())
        seen_known |= bool((got > 1).any())
    assert seen_unknown and seen_known
    assert loader.cache is cache


def test_loader_token_ids_arguments_are_checked(built):
    cache = socialctx.open(built["sample"])
    vocab = cache.vocabulary()
    with pytest.raises(ValueError, match="max_tokens"):
        socialctx.Loader(cache, token_ids=vocab)
    with pytest.raises(ValueError, match="token_ids"):
        socialctx.Loader(cache, max_tokens=4)
    with pytest.raises(ValueError, match="at least 1"):
        socialctx.Loader(cache, token_ids=vocab, max_tokens=0)
    with pytest.raises(TypeError):
        socialctx.Loader(cache, token_ids="not a vocabulary", max_tokens=4)
