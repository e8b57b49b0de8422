"""Issue 34's defects of socialctx.torch, one test each (each failed on
c32e47b): generations, resumption, epochs, resume points, inputs, plans,
start methods, and the smaller ones. The state-machine test
(test_torch_state.py) then walks the same surface at random."""

from __future__ import annotations

import copy
import json
import os
import pickle
import shutil
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

if os.environ.get("SOCIALCTX_REQUIRE_TORCH"):
    import torch
else:
    torch = pytest.importorskip("torch")

from torch.utils.data import DataLoader  # noqa: E402

import socialctx  # noqa: E402
from conftest import REPO  # noqa: E402
from socialctx.torch import CacheDataset, EmbeddingTable, GraphDataset  # noqa: E402

METHODS = ["fork", "spawn", "forkserver"]


def toy(tokens: list[str]) -> np.ndarray:
    h = sum(len(t) * (i + 1) for i, t in enumerate(tokens))
    return np.array([len(tokens), h % 97, len("".join(tokens)), 1.5], dtype=np.float32)


def embed(cache: socialctx.Cache) -> None:
    socialctx.embed(cache, lambda b: np.stack([toy(t) for t in b]), field="reply", name="r")


class Corpus:
    """A private corpus and its cache, rebuilt on demand with a thread less
    (the first in source-id order, so that every later position shifts)."""

    def __init__(self, root: Path) -> None:
        self.corpus = root / "corpus"
        shutil.copytree(REPO / "data-samples/corpus", self.corpus)
        self.cache = root / "cache"
        socialctx.build(self.corpus, self.cache, workers=1, progress=False)

    def open(self) -> socialctx.Cache:
        return socialctx.open(self.cache)

    def drop_first_thread_and_rebuild(self) -> None:
        first = int(self.open().source_ids[0])
        (gone,) = [p for p in self.corpus.rglob(str(first)) if p.is_dir()]
        shutil.rmtree(gone)
        socialctx.build(self.corpus, self.cache, workers=1, progress=False, incremental=True)


@pytest.fixture()
def corpus(tmp_path) -> Corpus:
    return Corpus(tmp_path)


def items_of(ds, workers: int = 0, **kw) -> list:
    return list(DataLoader(ds, batch_size=None, num_workers=workers, **kw))


def ids(items) -> list[int]:
    return [i for s in items for i in s["source_ids"].tolist()]


# --- 1. one generation per dataset ------------------------------------


@pytest.mark.parametrize("method", METHODS)
def test_workers_read_the_datasets_generation_or_refuse_after_a_rebuild(corpus, method):
    """The bug: spawn workers reopened the path and read the rebuilt
    cache's threads under the old positions and labels (300 of 300)."""
    old = corpus.open()
    positions = np.arange(len(old))
    ds = CacheDataset(old, positions, 4, seed=1)
    want = sorted(old.source_ids.astype(np.int64).tolist())
    corpus.drop_first_thread_and_rebuild()
    assert corpus.open().content_id != ds.content_id
    # In-process: the dataset's own open cache, the old generation.
    assert sorted(ids(items_of(ds))) == want
    dl = DataLoader(ds, batch_size=None, num_workers=2, multiprocessing_context=method)
    if method == "fork":
        # A fork inherits the open cache: still the generation it was made on.
        assert sorted(ids(list(dl))) == want
    else:
        with pytest.raises(socialctx.CacheError, match="rebuilt after this dataset was made"):
            list(dl)


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_graph_dataset_workers_refuse_a_rebuilt_cache(corpus, method):
    ds = GraphDataset(corpus.open(), range(len(corpus.open())), 8, pyg=False)
    corpus.drop_first_thread_and_rebuild()
    dl = DataLoader(ds, batch_size=None, num_workers=1, multiprocessing_context=method)
    with pytest.raises(socialctx.CacheError, match=str(corpus.cache)):
        list(dl)


def test_a_cache_object_of_an_older_generation_is_refused(corpus):
    """Positions and labels taken from a Cache opened before a rebuild mean
    other threads now: the dataset (and the table) refuse that Cache."""
    old = corpus.open()
    embed(old)
    corpus.drop_first_thread_and_rebuild()
    for make in (
        lambda: CacheDataset(old, range(5), 2),
        lambda: GraphDataset(old, range(5), 2),
        lambda: EmbeddingTable(old, "r"),
    ):
        with pytest.raises(socialctx.CacheError, match="rebuilt after this Cache object"):
            make()


def test_an_old_embedding_table_refuses_items_of_the_rebuilt_cache(corpus):
    """The bug: a table made before the rebuild disagreed with the dense
    rows in 10 of 10 batches, silently."""
    old = corpus.open()
    embed(old)
    table = EmbeddingTable(old, "r")
    corpus.drop_first_thread_and_rebuild()
    new = corpus.open()
    embed(new)
    ds = CacheDataset(new, range(len(new)), 4, embeddings=["r"], dense=True)
    item = next(iter(ds))
    with pytest.raises(socialctx.CacheError, match="rebuilt"):
        table(item)
    fresh = EmbeddingTable(new, "r")
    for item in items_of(ds):
        assert torch.equal(fresh(item), item["embeddings"]["r"])


def test_an_unpickled_dataset_refuses_a_rebuilt_cache(corpus):
    ds = CacheDataset(corpus.open(), range(10), 3)
    blob = pickle.dumps(ds)
    corpus.drop_first_thread_and_rebuild()
    with pytest.raises(socialctx.CacheError, match="rebuilt"):
        list(pickle.loads(blob))


# --- 2. resumption without arithmetic ------------------------------------


def run_interrupted(make, stops: list[int], workers: int, persistent: bool) -> list[dict]:
    """Trains one epoch, stopping after each count in ``stops`` (a new
    dataset and DataLoader each time, as after a restart) and resuming from
    the saved state; returns every item trained on."""
    trained: list[dict] = []
    state = None
    for stop in [*stops, None]:
        ds = make()
        if state is not None:
            ds.load_state_dict(state)
        dl = DataLoader(
            ds, batch_size=None, num_workers=workers, persistent_workers=persistent and workers > 0
        )
        for n, item in enumerate(dl):
            trained.append(item)
            state = ds.state_dict(after=item) if workers else ds.state_dict()
            if stop is not None and n + 1 == stop:
                break
    return trained


@pytest.mark.parametrize(("workers", "persistent"), [(0, False), (2, False), (2, True), (3, True)])
def test_resuming_twice_trains_each_batch_once(corpus, workers, persistent):
    """The bug: the README's ``batches_done=step + 1`` counted from the
    resume point: stopping at 3, then 2, trained 15 batches of 12."""

    def make() -> CacheDataset:
        ds = CacheDataset(corpus.open(), range(36), 3, seed=4, bucket=True, pad="longest")
        ds.set_epoch(2)
        return ds

    whole = items_of(make())
    assert len(whole) == 12
    got = run_interrupted(make, [3, 2], workers, persistent)
    assert [i["plan_index"] for i in got] == list(range(12))
    assert ids(got) == ids(whole)
    for a, b in zip(got, whole):
        assert torch.equal(a["features"], b["features"])


def test_state_dict_without_an_item_refuses_after_worker_iteration(corpus):
    """The bug: with workers, ``state_dict()`` returned batches_done=0
    after 3 batches; now it says what to pass instead of guessing."""
    ds = CacheDataset(corpus.open(), range(36), 3)
    for n, _item in enumerate(DataLoader(ds, batch_size=None, num_workers=2)):
        if n == 2:
            break
    with pytest.raises(ValueError, match="after=item"):
        ds.state_dict()
    ds.set_epoch(1)  # a new epoch: nothing consumed of it, known without workers
    assert ds.state_dict()["batches_done"] == 0


@pytest.mark.parametrize("workers", [0, 2])
def test_stateful_dataloader_resumes_exactly(corpus, workers):
    """torchdata's StatefulDataLoader protocol: the dataset's state_dict is
    taken in each worker; a fresh loader on a fresh dataset resumes."""
    if not os.environ.get("SOCIALCTX_REQUIRE_TORCH"):
        pytest.importorskip("torchdata")  # CI installs it (.ci/run)
    from torchdata.stateful_dataloader import StatefulDataLoader

    def make() -> CacheDataset:
        ds = CacheDataset(corpus.open(), range(37), 3, seed=9)
        ds.set_epoch(1)
        return ds

    whole = items_of(make())
    trained, state = [], None
    for stop in (4, 3, None):
        dl = StatefulDataLoader(make(), batch_size=None, num_workers=workers)
        if state is not None:
            dl.load_state_dict(state)
        for n, item in enumerate(dl):
            trained.append(item)
            state = dl.state_dict()
            if stop is not None and n + 1 == stop:
                break
    assert ids(trained) == ids(whole)


# --- 3. epochs and resume points -----------------------------------------


@pytest.mark.parametrize("persistent", [False, True])
def test_set_epoch_after_iter_does_not_mix_epochs(corpus, persistent):
    """The bug: ``set_epoch(1)`` right after ``iter(dl)`` gave epochs with
    duplicated and missing threads (4 of 6 runs). As DistributedSampler:
    the iteration keeps the epoch it started with; the next one has the new."""
    ds = CacheDataset(corpus.open(), range(36), 2, seed=3)
    epochs = []
    for e in range(3):
        ds.set_epoch(e)
        epochs.append(ids(items_of(ds)))
    dl = DataLoader(ds, batch_size=None, num_workers=3, persistent_workers=persistent)
    for e in range(3):
        ds.set_epoch(e)
        it = iter(dl)
        ds.set_epoch(e + 1)
        assert ids(list(it)) == epochs[e]
        if persistent:
            ds.set_epoch(e)  # reset before the next round's iter


def test_a_resume_point_applies_to_the_next_iteration_only(corpus):
    """The bug: after ``load_state_dict(... batches_done=4 ...)`` every later
    iteration of that epoch skipped 4 batches (forever with seed=None)."""
    for workers in (0, 2):
        ds = CacheDataset(corpus.open(), range(36), 3)
        state = ds.state_dict()
        state["batches_done"] = 4
        ds.load_state_dict(state)
        assert len(ds) == 8  # len() is what the next iteration yields
        dl = DataLoader(ds, batch_size=None, num_workers=workers, persistent_workers=workers > 0)
        first = list(dl)
        # Nothing between the iterations (len() would tidy the dataset up):
        # the next workers must themselves know the point was used.
        second = list(DataLoader(ds, batch_size=None, num_workers=workers))
        assert [i["plan_index"] for i in first] == list(range(4, 12))
        assert [i["plan_index"] for i in second] == list(range(12))
        assert len(ds) == 12
        assert [i["plan_index"] for i in list(dl)] == list(range(12))


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_a_resume_point_applies_once_with_loaders_seeded_alike(corpus, method):
    """Red team: DataLoaders made with generators seeded alike (the PyTorch
    reproducibility recipe) give their iterations the same worker seeds, so
    the next fork workers took the used resume point as theirs: the second
    whole pass skipped its first 3 batches, silently."""
    ds = CacheDataset(corpus.open(), range(36), 3)
    ds.load_state_dict({**ds.state_dict(), "batches_done": 3})

    def seeded() -> DataLoader:
        gen = torch.Generator().manual_seed(0)
        return DataLoader(
            ds, batch_size=None, num_workers=2, multiprocessing_context=method, generator=gen
        )

    passes = [sorted(i["plan_index"] for i in seeded()) for _ in range(3)]
    assert passes == [list(range(3, 12)), list(range(12)), list(range(12))]


# --- 5. inputs -------------------------------------------------------------


def test_bad_positions_and_labels_are_refused(corpus):
    """The bugs: a boolean mask gave thread 1 four times, floats were
    truncated, -1 trained on the last thread, labels 200 and 128 wrapped."""
    n = len(corpus.open())
    mask = np.zeros(n, dtype=bool)
    mask[[1, 3, 5, 7]] = True
    bad_positions = [
        (mask, TypeError, "boolean mask"),
        ([True, False], TypeError, "bool"),
        (np.array([0.0, 1.7]), TypeError, "float"),
        ([0, -1], IndexError, "-1"),
        ([0, n], IndexError, str(n)),
        (np.array([[0, 1]]), ValueError, "one-dimensional"),
    ]
    for positions, error, match in bad_positions:
        for cls in (CacheDataset, GraphDataset):
            with pytest.raises(error, match=match):
                cls(corpus.open(), positions, 2)
    for labels, error, match in [
        (np.array([200, 1, 128]), ValueError, "200"),
        ([0, 1, -129], ValueError, "-129"),
        (np.array([0.5, 1.0, 0.0]), TypeError, "float"),
        ([0, 1], ValueError, "2 labels for 3"),
    ]:
        with pytest.raises(error, match=match):
            CacheDataset(corpus.open(), [0, 1, 2], 2, labels=labels)
    ok = CacheDataset(corpus.open(), [0, 1, 2], 3, labels=np.array([-1, 0, 127]))
    assert next(iter(ok))["labels"].tolist() == [-1, 0, 127]


def test_the_loader_refuses_negative_positions_and_masks(corpus):
    cache = corpus.open()
    loader = socialctx.Loader(cache)
    batch = loader.new_batch(4)
    for bad, error in [
        ([0, -1], IndexError),
        (np.array([-2], dtype=np.int64), IndexError),
        ([True, False], TypeError),
        (np.ones(3, dtype=bool), TypeError),
        ([0.0], TypeError),
        ([len(cache)], IndexError),
    ]:
        with pytest.raises(error):
            loader.fill(bad, batch)
        with pytest.raises(error):
            loader.plan(bad, 2)
        with pytest.raises(error):
            loader.fill_graph(bad, socialctx.GraphBatch())
    loader.fill(np.array([0, len(cache) - 1], dtype=np.int32), batch)
    assert batch.source_ids[:2].tolist() == cache.source_ids[[0, -1]].tolist()


# --- 6. plans checked on load ----------------------------------------------


@pytest.mark.parametrize(
    ("field", "change"),
    [
        ("batch_size", {"batch_size": 16}),
        ("bucket", {"bucket": True}),
        ("noise", {"bucket": True, "noise": 0.2}),
        ("drop_last", {"drop_last": True}),
        ("world_size", {"world_size": 2}),
        ("seed", {"seed": 1}),
        ("pad", {"pad": "longest"}),
        ("positions", {"positions": range(1, 33)}),
        ("positions", {"labels": [1] * 32}),
        ("max_cxt", {"max_cxt": 50}),
        # Red team: empty threads' lengths (1 or 0) order a bucketed plan;
        # a state of empty="row" loaded into "masked" trained 3 to 6 of
        # 37 threads twice (and skipped as many), silently.
        ("empty", {"empty": "masked"}),
    ],
)
def test_load_state_dict_refuses_another_plan_naming_the_field(corpus, field, change):
    """The bug: only seed and world size were checked: a state of batch
    size 32 loaded into batch size 16 (275 threads followed instead of 195)."""
    base = {"positions": range(32), "batch_size": 8, "seed": 0}
    if "noise" in change:
        base["bucket"] = True
    ds = CacheDataset(corpus.open(), **base)
    next(iter(ds))
    state = ds.state_dict()
    other = CacheDataset(corpus.open(), **{**base, **change})
    with pytest.raises(ValueError, match=f"another plan: {field}"):
        other.load_state_dict(state)


def test_load_state_dict_refuses_another_generation(corpus):
    ds = CacheDataset(corpus.open(), range(10), 2)
    state = ds.state_dict()
    corpus.drop_first_thread_and_rebuild()
    again = CacheDataset(corpus.open(), range(10), 2)
    with pytest.raises(ValueError, match="another plan: content_id"):
        again.load_state_dict(state)


# --- 7 and 8. every start method, everything that reaches the items ---------


@pytest.mark.parametrize("method", METHODS)
def test_every_configuration_runs_under_every_start_method(corpus, method):
    """The bug: spawn and forkserver workers crashed with ``stats=``,
    ``token_ids=`` and ``GraphDataset(bag_of_words=)`` (FeatureStats and
    Vocabulary did not pickle); and ``token_ids=`` never reached the items."""
    cache = corpus.open()
    embed(cache)
    stats = socialctx.FeatureStats.compute(cache)
    vocab = cache.vocabulary(max_size=40)
    positions = np.arange(len(cache))
    loader = socialctx.Loader(
        cache, stats=stats, token_ids=vocab, max_tokens=5, embeddings=["r"], max_cxt=30
    )
    ds = CacheDataset(
        cache, positions, 6, seed=2, stats=stats, token_ids=vocab, max_tokens=5,
        embeddings=["r"], dense=True, max_cxt=30,
    )  # fmt: skip
    got = items_of(ds, 2, multiprocessing_context=method)
    assert sorted(ids(got)) == sorted(cache.source_ids.astype(np.int64).tolist())
    batch = loader.new_batch(6)
    for item in got:
        loader.fill(item["positions"].numpy(), batch)
        n = batch.size
        assert torch.equal(item["features"], torch.from_numpy(batch.features[:n]))
        assert torch.equal(item["token_ids"], torch.from_numpy(batch.token_ids[:n]))
        assert torch.equal(item["embeddings"]["r"], torch.from_numpy(batch.embeddings["r"][:n]))
    gds = GraphDataset(cache, positions, 8, pyg=False, stats=stats, bag_of_words=vocab)
    graphs = items_of(gds, 2, multiprocessing_context=method)
    trees = socialctx.Loader(cache, stats=stats)
    graph = socialctx.GraphBatch()
    for item in graphs:
        trees.fill_graph(item["positions"].numpy(), graph)
        np.testing.assert_array_equal(item["x"].numpy(), graph.x)
        indptr, _, _ = vocab.bag_of_words(graph)
        np.testing.assert_array_equal(item["bow"].crow_indices().numpy(), indptr)


def test_feature_stats_and_vocabulary_pickle(corpus):
    cache = corpus.open()
    stats = socialctx.FeatureStats.compute(cache)
    vocab = cache.vocabulary(max_size=50)
    for copy_of in (lambda x: pickle.loads(pickle.dumps(x)), copy.deepcopy):
        s = copy_of(stats)
        for key in ("mean", "std", "min", "max"):
            np.testing.assert_array_equal(getattr(s, key), getattr(stats, key))
        assert (s.count, s.threads, s.feature_names) == (
            stats.count,
            stats.threads,
            stats.feature_names,
        )
        v = copy_of(vocab)
        assert v.tokens == vocab.tokens and v.field == vocab.field
        np.testing.assert_array_equal(v.counts, vocab.counts)
        assert v.index(vocab.tokens[3]) == 5
    with pytest.raises(ValueError, match="count order"):
        type(vocab)._from_parts(str(corpus.cache), cache.content_id, "reply", ["b", "a"], [1, 2])
    saved = json.loads(stats.__reduce__()[1][0])
    saved["feature_names"][0] = "not a feature"
    with pytest.raises(ValueError, match="feature names"):
        type(stats)._from_json(json.dumps(saved))
    blob = pickle.dumps(vocab)
    corpus.drop_first_thread_and_rebuild()
    with pytest.raises(socialctx.CacheError, match="rebuilt"):
        pickle.loads(blob)


# --- 9. smaller ones -----------------------------------------------------------


def test_embedding_table_refuses_indices_out_of_range(corpus):
    """The bug: index ``num_rows`` and -2 returned the zero row."""
    cache = corpus.open()
    embed(cache)
    table = EmbeddingTable(cache, "r")
    n = table.num_rows
    assert torch.equal(table(torch.tensor([-1, 0])), torch.cat([torch.zeros(1, 4), table.rows[:1]]))
    for bad in (n, -2, n + 5):
        with pytest.raises(IndexError, match=str(bad)):
            table(torch.tensor([[0, bad]]))
    for bad_type in (torch.tensor([0.5]), torch.tensor([True])):
        with pytest.raises(TypeError, match="integers"):
            table(bad_type)  # found by the red team: 0.5 was truncated to row 0


def test_datasets_deepcopy_and_pickle_as_independent_datasets(corpus):
    for cls in (CacheDataset, GraphDataset):
        ds = cls(corpus.open(), range(20), 3, seed=5)
        ds.set_epoch(2)
        whole = [i["positions"].tolist() for i in ds]
        for twin in (copy.deepcopy(ds), pickle.loads(pickle.dumps(ds))):
            assert twin.epoch == 2 and len(twin) == len(ds)
            assert [i["positions"].tolist() for i in twin] == whole
            twin.set_epoch(3)
            assert ds.epoch == 2


def test_batches_are_allocated_for_the_threads_they_hold(corpus):
    """The bug: ``new_batch(batch_size)`` for 5 positions and batch size
    20,000 allocated the full batch (hundreds of MiB)."""
    ds = CacheDataset(corpus.open(), range(5), 20_000)
    tracemalloc.start()
    try:
        item = next(iter(ds))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(item["positions"]) == 5
    assert peak < 16 << 20, f"{peak >> 20} MiB for 5 threads"


# --- Red team: an embedding store rewritten on the same cache generation ----


def nightly(cache: socialctx.Cache, *, compact: bool = False, model_id: str = "toy-1") -> None:
    socialctx.embed(
        cache,
        lambda b: np.stack([toy(t) for t in b]),
        field="reply",
        name="r",
        model_id=model_id,
        compact=compact,
        progress=False,
    )


def two_segment_store(corpus: Corpus) -> socialctx.Cache:
    """Store "r" embedded, the cache rebuilt without its first thread and
    a reply rewritten, the nightly embed adding a segment: two segments
    with rows no reaction uses (what compaction renumbers)."""
    nightly(corpus.open())
    reply = sorted(corpus.corpus.rglob("reactions/*.json"))[-1]
    tweet = json.loads(reply.read_text())
    tweet["text"] = tweet["full_text"] = "a reply rewritten for the night"
    reply.write_text(json.dumps(tweet))
    corpus.drop_first_thread_and_rebuild()
    cache = corpus.open()
    nightly(cache)
    assert len(socialctx.open_store(cache, "r").segments) == 2
    return cache


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_workers_refuse_a_store_compacted_after_the_dataset_was_made(corpus, method):
    """The bug: compaction renumbers the rows on the same cache generation;
    spawn workers reopened the store and yielded the new numbering, which
    the EmbeddingTable made before gathered from its old rows (6 of 6
    batches wrong, silently)."""
    cache = two_segment_store(corpus)
    ds = CacheDataset(cache, range(len(cache)), 7, embeddings=["r"], dense=True, seed=0)
    table = EmbeddingTable(cache, "r")
    nightly(cache, compact=True)
    assert corpus.open().content_id == ds.content_id
    dl = DataLoader(ds, batch_size=None, num_workers=1, multiprocessing_context=method)
    with pytest.raises(socialctx.CacheError, match="embeddings/r"):
        list(dl)
    # In-process, the dataset's own open store: the table's rows.
    for item in items_of(ds):
        assert torch.equal(table(item), item["embeddings"]["r"])


@pytest.mark.parametrize("compact", [True, False])
def test_an_embedding_table_refuses_items_of_a_rewritten_store(corpus, compact):
    """The bug: a table made before a compaction (or a re-embed with
    another model) gathered its old rows at the new store's indices."""
    cache = two_segment_store(corpus)
    table = EmbeddingTable(cache, "r")
    if compact:
        nightly(cache, compact=True)
    else:
        nightly(cache, model_id="toy-2")
    ds = CacheDataset(cache, range(len(cache)), 7, embeddings=["r"], dense=True, seed=0)
    with pytest.raises(socialctx.CacheError, match="embeddings/r"):
        table(next(iter(ds)))
    fresh = EmbeddingTable(cache, "r")
    for item in items_of(ds):
        assert torch.equal(fresh(item), item["embeddings"]["r"])


def test_state_dict_refuses_an_item_of_another_dataset(corpus):
    """Red team: ``train.state_dict(after=val_item)`` (same cache) gave a
    state of the validation batch's index, silently."""
    train = CacheDataset(corpus.open(), range(36), 3, seed=3)
    val = CacheDataset(corpus.open(), range(5), 2)
    with pytest.raises(ValueError, match="another dataset"):
        train.state_dict(after=next(iter(val)))
    items = list(items_of(train, workers=2))
    assert train.state_dict(after=items[4])["batches_done"] == items[4]["plan_index"] + 1
    reshuffled = CacheDataset(corpus.open(), range(36), 3, seed=4)
    with pytest.raises(ValueError, match="another dataset"):
        reshuffled.state_dict(after=items[4])


def test_positions_from_an_iterator_are_refused_naming_it(corpus):
    """Red team: a generator of positions was refused as "not of shape ()"."""
    with pytest.raises(TypeError, match="not generator"):
        CacheDataset(corpus.open(), (p for p in range(3)), 2)
