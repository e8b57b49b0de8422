"""Batches through the binding equal the documented selection procedure
applied to the thread views, labels come from the cache or the caller, and
the buffers are filled in place."""

from __future__ import annotations

import numpy as np
import pytest

import socialctx


def reference(t, kinds, window_s, max_cxt, stats):
    rows = t.features
    keep = {
        "replies": t.kinds == 1,
        "retweets": t.kinds == 0,
        "both": np.ones(len(t), bool),
    }[kinds]
    if window_s is not None:
        dt = t.created_at - t.source_created_at
        keep &= (dt >= 0) & (dt <= int(window_s))
    rows = rows[keep][:max_cxt]
    if stats is not None:
        rows = ((rows.astype(np.float64) - stats.mean) / (stats.std + 1e-6)).astype(np.float32)
    return rows


SETTINGS = [
    ("replies", None, 200, False),
    ("both", None, 5, True),
    ("retweets", 3600.0, 40, False),
    ("replies", 600.0, 3, True),
]


@pytest.mark.parametrize("kinds,window_s,max_cxt,normalise", SETTINGS)
@pytest.mark.parametrize("name", ["golden", "sample"])
def test_batches_match_the_reference(built, name, kinds, window_s, max_cxt, normalise):
    cache = socialctx.open(built[name])
    stats = socialctx.FeatureStats.compute(cache, kinds=kinds) if normalise else None
    loader = socialctx.Loader(cache, kinds=kinds, window_s=window_s, max_cxt=max_cxt, stats=stats)
    bs = 7
    seen = []
    for batch in loader.epoch(np.arange(len(cache)), bs, seed=3):
        assert batch.features.shape == (bs, max_cxt, 28) and batch.features.dtype == np.float32
        for b in range(batch.size):
            t = cache.get(int(batch.source_ids[b]))
            seen.append(t.position)
            want = reference(t, kinds, window_s, max_cxt, stats)
            n = len(want) if len(want) else 1  # the reference's zero row
            assert batch.lengths[b] == n
            assert batch.mask[b, :n].all() and not batch.mask[b, n:].any()
            if len(want):
                assert np.array_equal(batch.features[b, :n].view(np.uint32), want.view(np.uint32))
            else:
                assert not batch.features[b, 0].any()
            assert not batch.features[b, n:].any()
            assert batch.labels[b] == t.label_code
        assert not batch.mask[batch.size :].any() and not batch.lengths[batch.size :].any()
    assert sorted(seen) == list(range(len(cache)))
    order = socialctx.shuffled(len(cache), 3)
    assert seen == order.tolist()


def test_fill_writes_in_place_with_given_labels(built):
    cache = socialctx.open(built["golden"])
    loader = socialctx.Loader(cache, kinds="both", max_cxt=16, empty="masked")
    batch = loader.new_batch(4)
    arrays = [batch.features, batch.mask, batch.lengths, batch.source_ids, batch.labels]
    pointers = [a.ctypes.data for a in arrays]
    for a in arrays:
        assert a.flags.writeable and a.flags.c_contiguous
    batch.features[...] = np.nan
    loader.fill([0, 2, len(cache) - 1], batch, labels=[1, 0, 1])
    assert [
        a.ctypes.data
        for a in (
            batch.features,
            batch.mask,
            batch.lengths,
            batch.source_ids,
            batch.labels,
        )
    ] == pointers
    assert batch.size == len(batch) == 3
    assert batch.labels.tolist() == [1, 0, 1, 0]
    assert batch.source_ids[2] == cache[-1].source_id
    assert not np.isnan(batch.features).any()
    loader.fill(np.array([1], dtype=np.int64), batch)
    assert batch.size == 1 and batch.labels[0] == cache[1].label_code
    assert not batch.features[1:].any() and batch.source_ids[1:].tolist() == [0, 0, 0]
    with pytest.raises(IndexError):
        loader.fill([len(cache)], batch)
    with pytest.raises(ValueError):
        loader.fill([0, 1, 2, 3, 4], batch)
    with pytest.raises(ValueError):
        loader.fill([0, 1], batch, labels=[1])
    with pytest.raises(ValueError):
        socialctx.Loader(cache, kinds="quotes")
    with pytest.raises(ValueError):
        socialctx.Loader(cache, empty="none")


def test_epoch_reuses_one_batch_and_covers_every_position(built):
    cache = socialctx.open(built["sample"])
    loader = socialctx.Loader(cache)
    positions = np.arange(len(cache))
    labels = (positions % 2).astype(np.int8)
    epoch = loader.epoch(positions, 5, labels=labels)
    assert len(epoch) == -(-len(cache) // 5)
    batches = list(epoch)
    assert all(b is batches[0] for b in batches)
    got_ids, got_labels = [], []
    for b in loader.epoch(positions, 5, labels=labels):
        got_ids += b.source_ids[: b.size].tolist()
        got_labels += b.labels[: b.size].tolist()
    assert got_ids == cache.source_ids.tolist()
    assert got_labels == labels.tolist()


def test_split_labels_flow_into_batches(built, tmp_path):
    cache = socialctx.open(built["sample"])
    ids = cache.source_ids.tolist()
    csv = tmp_path / "split.csv"
    csv.write_text(
        "tweet_id,created_at,text,label,user_id,user_name\n"
        f'{ids[4]},2015-01-07,"a, ""quoted"" text",1,1,u\n'
        "999,2015-01-07,missing,0,2,v\n"
        f"{ids[1]},2015-01-07,plain,0,3,w\n"
    )
    split = socialctx.read_split(csv, cache)
    assert split.positions.tolist() == [4, 1] and split.positions.dtype == np.int64
    assert split.ids.tolist() == [ids[4], ids[1]]
    assert split.labels.tolist() == [1, 0] and split.labels.dtype == np.int8
    assert split.missing.tolist() == [999]
    loader = socialctx.Loader(cache)
    batch = loader.new_batch(2)
    loader.fill(split.positions, batch, split.labels)
    assert batch.labels.tolist() == [1, 0]
    csv.write_text("id,label\n1,1\n")
    with pytest.raises(socialctx.Error, match="tweet_id"):
        socialctx.read_split(csv, cache)


def test_stats_match_numpy_and_the_rust_file(built, tmp_path):
    import json
    import subprocess

    from conftest import binary

    cache = socialctx.open(built["sample"])
    stats = socialctx.FeatureStats.compute(cache)
    rows = np.concatenate([t.features[t.kinds == 1] for t in cache]).astype(np.float64)
    assert stats.count == len(rows) and stats.threads == len(cache)
    assert np.allclose(stats.mean, rows.mean(axis=0), rtol=1e-12, atol=1e-9)
    assert np.allclose(stats.std, rows.std(axis=0), rtol=1e-9, atol=1e-9)
    assert np.array_equal(stats.min, rows.min(axis=0)) and np.array_equal(
        stats.max, rows.max(axis=0)
    )
    stats.save(tmp_path / "py.json")
    subprocess.run(
        [binary("stats"), built["sample"], "--save", tmp_path / "rs.json"],
        check=True,
        capture_output=True,
    )
    assert json.loads((tmp_path / "py.json").read_text()) == json.loads(
        (tmp_path / "rs.json").read_text()
    )
    again = socialctx.FeatureStats.load(tmp_path / "rs.json")
    assert np.array_equal(again.mean, stats.mean) and again.feature_names == socialctx.FEATURE_NAMES
    sub = socialctx.FeatureStats.compute(cache, [0, 1, 2], kinds="both")
    assert sub.threads == 3


# --- Misuse is an exception, never a panic or an abort (issue 25, 10-11) ---


def test_a_batch_of_another_loader_is_refused(built):
    cache = socialctx.open(built["golden"])
    small = socialctx.Loader(cache, max_cxt=10)
    big = socialctx.Loader(cache, max_cxt=20)
    with pytest.raises(ValueError, match="another Loader"):
        big.fill([0], small.new_batch(2))
    with pytest.raises(ValueError, match="another Loader"):
        small.fill([0], big.new_batch(2))
    with pytest.raises(ValueError, match="do not fit"):
        small.fill([0, 1, 2], small.new_batch(2))


def test_sizes_that_cannot_be_had_are_python_errors(built):
    cache = socialctx.open(built["golden"])
    with pytest.raises(MemoryError):
        socialctx.shuffled(10**11, 0)
    with pytest.raises((ValueError, MemoryError)):
        socialctx.Loader(cache).new_batch(10**13)
    with pytest.raises((ValueError, MemoryError)):
        socialctx.Loader(cache, max_cxt=10**12).new_batch(1)
    with pytest.raises(ValueError, match="max_cxt"):
        socialctx.Loader(cache, max_cxt=0)
    with pytest.raises(TypeError, match="socialctx.open"):
        socialctx.Loader(str(built["golden"]))  # type: ignore[arg-type]


def test_two_threads_filling_one_batch_get_a_runtime_error(built):
    import threading

    cache = socialctx.open(built["sample"])
    loader = socialctx.Loader(cache, kinds="both")
    batch = loader.new_batch(len(cache))
    errors: list[BaseException] = []

    def work() -> None:
        for _ in range(200):
            try:
                loader.fill(range(len(cache)), batch)
            except BaseException as e:  # noqa: BLE001 - the type is what is tested
                errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(type(e) is RuntimeError and "another thread" in str(e) for e in errors), errors


def test_longest_padding_and_buckets(built):
    cache = socialctx.open(built["sample"])
    n = len(cache)
    max_loader = socialctx.Loader(cache)
    longest = socialctx.Loader(cache, pad="longest", pad_multiple=4)
    lengths = longest.lengths(range(n))
    plain = max_loader.epoch(range(n), 8, seed=3)
    bucketed = longest.epoch(range(n), 8, seed=3, bucket=True)
    assert plain.real_rows == bucketed.real_rows == int(lengths.sum())
    assert plain.padded_rows == n * 200
    assert bucketed.padded_rows < plain.padded_rows
    seen = []
    ref = max_loader.new_batch(1)
    for batch in bucketed:
        w = batch.width
        assert w % 4 == 0 or w == 200
        assert batch.features.shape == (8, w, 28) and batch.features.flags.c_contiguous
        assert w >= int(batch.lengths[: batch.size].max())
        for b in range(batch.size):
            sid = int(batch.source_ids[b])
            pos = cache.position(sid)
            max_loader.fill([pos], ref)
            k = int(ref.lengths[0])
            assert np.array_equal(batch.features[b, :k], ref.features[0, :k])
            assert not batch.mask[b, k:].any()
            seen.append(pos)
    assert sorted(seen) == list(range(n))
    # Bucketing is deterministic and seed-dependent.
    a = [x.tolist() for x in longest.plan(range(n), 8, seed=1, bucket=True)]
    assert a == [x.tolist() for x in longest.plan(range(n), 8, seed=1, bucket=True)]
    assert a != [x.tolist() for x in longest.plan(range(n), 8, seed=2, bucket=True)]


def test_a_batch_shows_its_outputs_by_name(built):
    """Every output of a Loader is the Batch's by its name (issue 46): in
    ``output_names()``, in ``outputs`` and as an attribute, the same view;
    a known output the Loader lacks is None (an empty dict per store), an
    unknown name an AttributeError, and ``outputs=`` refuses a name no
    output has, listing those there are."""
    cache = socialctx.open(built["sample"])
    vocab = cache.vocabulary(max_size=50)
    loader = socialctx.Loader(cache, kinds="both", max_cxt=7, token_ids=vocab, max_tokens=5)
    batch = loader.new_batch(3)
    loader.fill([0, 1, 2], batch)
    assert batch.output_names() == ["token_ids"]
    assert list(batch.outputs) == ["token_ids"]
    np.testing.assert_array_equal(batch.outputs["token_ids"], batch.token_ids)
    assert batch.outputs["token_ids"].shape == (3, batch.width, 5)
    assert batch.embedding_index == {} and batch.embeddings == {}
    plain = socialctx.Loader(cache).new_batch(2)
    assert plain.output_names() == [] and plain.outputs == {} and plain.token_ids is None
    with pytest.raises(AttributeError, match="no_such_output"):
        _ = batch.no_such_output
    with pytest.raises(ValueError, match='no output "no_such_output"'):
        socialctx.Loader(cache, outputs=["no_such_output"])


def test_a_graph_batch_shows_its_outputs_by_name_per_node(built):
    """A GraphBatch carries its Loader's outputs as a Batch does, per node
    (it had none: a graph's Loader with token ids filled only the graph):
    a node's token ids are those of its reaction's row slot, a root's all
    padding. ``outputs=`` naming one output twice is refused (it was taken
    and filled twice)."""
    cache = socialctx.open(built["sample"])
    vocab = cache.vocabulary(max_size=50)
    loader = socialctx.Loader(cache, kinds="both", max_cxt=7, token_ids=vocab, max_tokens=5)
    batch, graph = loader.new_batch(4), socialctx.GraphBatch()
    loader.fill([0, 1, 2, 3], batch)
    loader.fill_graph([0, 1, 2, 3], graph)
    assert graph.output_names() == ["token_ids"] and list(graph.outputs) == ["token_ids"]
    assert graph.token_ids.shape == (graph.num_nodes, 5)
    np.testing.assert_array_equal(graph.outputs["token_ids"], graph.token_ids)
    for b in range(4):
        lo, hi = graph.ptr[b], graph.ptr[b + 1]
        assert (graph.token_ids[lo] == 0).all()
        np.testing.assert_array_equal(
            graph.token_ids[lo + 1 : hi], batch.token_ids[b, : hi - lo - 1]
        )
    assert graph.embedding_index == {} and graph.embeddings == {}
    with pytest.raises(AttributeError, match="no_such_output"):
        _ = graph.no_such_output
    # Filled by a Loader without outputs, it has none.
    socialctx.Loader(cache).fill_graph([0], graph)
    assert graph.output_names() == [] and graph.token_ids is None
    with pytest.raises(ValueError, match="named twice"):
        socialctx.Loader(cache, outputs=["no_such_output", "no_such_output"])


def test_graph_outputs_follow_their_loader_and_keep_float16(built, tmp_path):
    """Hostile pass of graph outputs: a GraphBatch filled by Loaders of other
    outputs in turn takes each one's; no position gives [0, ...] arrays; a
    float16 store's dense rows come per node as float16, the flat batch's
    values, zeros at roots."""
    import shutil

    shutil.copytree(built["sample"], tmp_path / "c")
    cache = socialctx.open(tmp_path / "c")
    socialctx.embed(
        cache,
        lambda b: np.stack([np.array([len(t), 1, 2, 3], np.float32) for t in b]),
        field="reply", name="h", dtype="float16",
    )  # fmt: skip
    vocab = cache.vocabulary(max_size=20)
    graph = socialctx.GraphBatch()
    for max_tokens in (5, 3):
        socialctx.Loader(cache, token_ids=vocab, max_tokens=max_tokens).fill_graph([0, 1], graph)
        assert graph.token_ids.shape == (graph.num_nodes, max_tokens)
    loader = socialctx.Loader(cache, kinds="both", max_cxt=20, embeddings=["h"])
    loader.fill_graph([], graph)
    assert graph.output_names() == ["embedding_index", "embeddings"] and graph.token_ids is None
    assert graph.embeddings["h"].shape == (0, 4) and graph.embedding_index["h"].shape == (0,)
    batch = loader.new_batch(6)
    loader.fill(range(6), batch)
    loader.fill_graph(range(6), graph)
    rows = graph.embeddings["h"]
    assert rows.dtype == np.float16 and rows.shape == (graph.num_nodes, 4)
    for b in range(6):
        lo, hi = graph.ptr[b], graph.ptr[b + 1]
        assert not rows[lo].any() and graph.embedding_index["h"][lo] == -1
        np.testing.assert_array_equal(rows[lo + 1 : hi], batch.embeddings["h"][b, : hi - lo - 1])
