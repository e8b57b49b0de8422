"""The PyTorch adapter. torch is optional for users; CI installs it and sets
SOCIALCTX_REQUIRE_TORCH=1, so that these tests fail there instead of
silently skipping."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest

if os.environ.get("SOCIALCTX_REQUIRE_TORCH"):
    import torch
else:
    torch = pytest.importorskip("torch")

from torch.utils.data import DataLoader  # noqa: E402

import socialctx  # noqa: E402
from socialctx.torch import CacheDataset, EmbeddingTable  # noqa: E402


def toy(tokens: list[str]) -> np.ndarray:
    h = sum(len(t) * (i + 1) for i, t in enumerate(tokens))
    return np.array([len(tokens), h % 97, len("".join(tokens)), 1.5], dtype=np.float32)


@pytest.fixture()
def sample(built, tmp_path) -> socialctx.Cache:
    """A private copy of the sample cache with a reply embedding store."""
    out = tmp_path / "cache"
    shutil.copytree(built["sample"], out)
    cache = socialctx.open(out)
    socialctx.embed(cache, lambda b: np.stack([toy(t) for t in b]), field="reply", name="r")
    return cache


def steps(ds: CacheDataset, workers: int, **kw) -> list[dict]:
    return list(DataLoader(ds, batch_size=None, num_workers=workers, **kw))


def ids_of(items: list[dict]) -> list[int]:
    return [i for s in items for i in s["source_ids"].tolist()]


@pytest.mark.parametrize("workers", [0, 2])
def test_dataset_covers_the_epoch_once_across_workers(built, workers):
    cache = socialctx.open(built["sample"])
    positions = np.arange(len(cache))
    ds = CacheDataset(socialctx.open(built["sample"]), positions, 5, seed=1, labels=positions % 2)
    items = steps(ds, workers)
    for s in items:
        assert s["features"].dtype == torch.float32 and s["features"].shape[1:] == (200, 28)
        assert s["mask"].dtype == torch.bool and s["labels"].dtype == torch.int64
    ids = ids_of(items)
    assert sorted(ids) == sorted(cache.source_ids.astype(np.int64).tolist())
    by_id = dict(zip(cache.source_ids.tolist(), (positions % 2).tolist()))
    assert [i for s in items for i in s["labels"].tolist()] == [by_id[i] for i in ids]


@pytest.mark.parametrize("workers", [0, 2])
def test_yielded_batches_never_change(sample, workers):
    """Kept tensors still hold their own batch at the end of the epoch (the
    bug: views of one reused buffer, refilled while queued)."""
    ds = CacheDataset(sample, range(len(sample)), 3, seed=4, embeddings=["r"], dense=True)
    items = steps(ds, workers)
    loader = socialctx.Loader(sample, embeddings=["r"])
    batch = loader.new_batch(3)
    assert len(items) == len(ds)
    for s in items:
        loader.fill(s["positions"].numpy(), batch)
        n = batch.size
        assert torch.equal(s["features"], torch.from_numpy(batch.features[:n]))
        assert torch.equal(s["mask"], torch.from_numpy(batch.mask[:n]).bool())
        assert torch.equal(s["embeddings"]["r"], torch.from_numpy(batch.embeddings["r"][:n]))
        assert torch.equal(
            s["embedding_index"]["r"], torch.from_numpy(batch.embedding_index["r"][:n])
        )


def test_set_epoch_reaches_persistent_workers(built):
    ds = CacheDataset(socialctx.open(built["sample"]), range(30), 4, seed=7)
    dl = DataLoader(ds, batch_size=None, num_workers=2, persistent_workers=True)
    orders = []
    for epoch in range(3):
        ds.set_epoch(epoch)
        orders.append(ids_of(list(dl)))
    assert orders[0] != orders[1] != orders[2]
    for epoch, got in enumerate(orders):
        ds.set_epoch(epoch)
        assert got == ids_of(steps(ds, 0))


@pytest.mark.parametrize("workers", [0, 2])
def test_resumption_equals_the_uninterrupted_run(built, workers):
    ds = CacheDataset(
        socialctx.open(built["sample"]), range(36), 3, seed=2, bucket=True, pad="longest"
    )
    ds.set_epoch(5)
    whole = steps(ds, workers)
    # Interrupt after 4 steps; save; restore into a new dataset.
    seen = []
    for k, s in enumerate(DataLoader(ds, batch_size=None, num_workers=workers)):
        seen.append(s)
        if k == 3:
            break
    # In-process the dataset counts by itself; workers run ahead, so name the item.
    state = ds.state_dict() if workers == 0 else ds.state_dict(after=seen[-1])
    assert state["epoch"] == 5 and state["batches_done"] == 4
    again = CacheDataset(
        socialctx.open(built["sample"]), range(36), 3, seed=2, bucket=True, pad="longest"
    )
    again.load_state_dict(state)
    rest = steps(again, workers)
    assert ids_of(seen + rest) == ids_of(whole)
    for a, b in zip(seen + rest, whole):
        assert torch.equal(a["features"], b["features"])
    # The next epoch starts from its beginning again.
    again.set_epoch(6)
    assert len(steps(again, 0)) == len(ds)


def _rank_main(rank: int, world: int, init: str, out: str, corpus_cache: str) -> None:
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    try:
        ds = CacheDataset(
            socialctx.open(corpus_cache), range(37), 4, seed=3, bucket=True, pad="longest"
        )
        assert (ds.rank, ds.world_size) == (rank, world)
        got = ids_of(steps(ds, 0))
        n = torch.tensor([len(ds)])
        counts = [torch.zeros(1, dtype=n.dtype) for _ in range(world)]
        dist.all_gather(counts, n)
        assert len({int(c) for c in counts}) == 1, "ranks got different batch counts"
        Path(out, f"rank{rank}.txt").write_text("\n".join(map(str, got)))
    finally:
        dist.destroy_process_group()


def test_two_ranks_get_disjoint_batches_covering_the_epoch(built, tmp_path):
    import torch.multiprocessing as mp

    init = f"file://{tmp_path / 'rendezvous'}"
    mp.spawn(_rank_main, args=(2, init, str(tmp_path), str(built["sample"])), nprocs=2)
    ranks = [[int(x) for x in (tmp_path / f"rank{r}.txt").read_text().split()] for r in range(2)]
    assert not set(ranks[0]) & set(ranks[1])
    cache = socialctx.open(built["sample"])
    assert sorted(ranks[0] + ranks[1]) == sorted(cache.source_ids[:37].astype(np.int64).tolist())


def test_embedding_table_gathers_the_dense_rows_bit_for_bit(sample):
    table = EmbeddingTable(sample, "r", device="cpu")
    ds_dense = CacheDataset(sample, range(len(sample)), 4, embeddings=["r"], dense=True)
    for s in steps(ds_dense, 0):
        rows = table(s["embedding_index"]["r"])
        assert rows.dtype == torch.float32
        assert torch.equal(rows, s["embeddings"]["r"])
        assert (rows[~s["mask"]] == 0).all()


def test_bucketed_longest_batches_hold_the_same_real_rows(sample):
    positions = np.arange(len(sample))
    longest = CacheDataset(sample, positions, 4, seed=1, bucket=True, pad="longest")
    plain = socialctx.Loader(sample)
    batch = plain.new_batch(1)
    seen = []
    for s in steps(longest, 0):
        assert s["features"].shape[1] % 8 == 0 or s["features"].shape[1] == 200
        for b, pos in enumerate(s["positions"].tolist()):
            plain.fill([pos], batch)
            n = int(batch.lengths[0])
            assert int(s["lengths"][b]) == n
            assert torch.equal(s["features"][b, :n], torch.from_numpy(batch.features[0, :n]))
            assert not s["features"][b, n:].any() and not s["mask"][b, n:].any()
            seen.append(pos)
    assert sorted(seen) == positions.tolist()


def test_pinned_in_process_mode_falls_back_and_matches(sample):
    kw = dict(seed=0, embeddings=["r"], dense=True)
    plain = steps(CacheDataset(sample, range(len(sample)), 4, **kw), 0)
    with pytest.warns(UserWarning, match="no CUDA") if not torch.cuda.is_available() else _null():
        it = iter(CacheDataset(sample, range(len(sample)), 4, pin_memory=True, **kw))
        for a in plain:
            b = next(it)
            assert torch.equal(a["features"], b["features"])
            assert torch.equal(a["embeddings"]["r"], b["embeddings"]["r"])


class _null:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def test_graph_dataset_yields_the_loaders_graph_batches(built, monkeypatch):
    """GraphDataset's tensors are Loader.fill_graph's arrays. Without
    torch_geometric the items are dicts and ``pyg=True`` is an ImportError
    (PyG made unimportable here; with it, see test_pyg.py)."""
    import sys

    from socialctx.torch import GraphDataset

    monkeypatch.setitem(sys.modules, "torch_geometric", None)
    monkeypatch.setitem(sys.modules, "torch_geometric.data", None)
    cache = socialctx.open(built["sample"])
    positions = np.arange(len(cache))
    plain = GraphDataset(socialctx.open(built["sample"]), positions, 8, kinds="both", max_cxt=20)
    items = list(plain)
    assert all(isinstance(i, dict) for i in items)
    assert len(items) == len(plain) and sum(len(i["y"]) for i in items) == len(cache)
    loader = socialctx.Loader(cache, kinds="both", max_cxt=20)
    graph = socialctx.GraphBatch()
    for item in items:
        loader.fill_graph(item["positions"].numpy(), graph)
        for key in ("x", "edge_index", "batch", "ptr", "parent"):
            np.testing.assert_array_equal(item[key].numpy(), getattr(graph, key), err_msg=key)
        assert item["edge_index"].dtype == torch.int64 and item["y"].dtype == torch.int64
    with pytest.raises(ImportError):
        GraphDataset(socialctx.open(built["sample"]), positions, 8, pyg=True)


def test_graph_dataset_bag_of_words(built):
    """``bag_of_words=vocab`` adds each batch's bags of words as a sparse CSR
    tensor: Vocabulary.bag_of_words's, in workers too."""
    from socialctx.torch import GraphDataset

    cache = socialctx.open(built["sample"])
    vocab = cache.vocabulary(max_size=30)
    positions = np.arange(len(cache))
    loader = socialctx.Loader(cache, kinds="both", max_cxt=20)
    graph = socialctx.GraphBatch()
    for unknown in (True, False):
        ds = GraphDataset(
            socialctx.open(built["sample"]), positions, 8, pyg=False, kinds="both", max_cxt=20,
            bag_of_words=vocab, bow_unknown=unknown,
        )  # fmt: skip
        for workers in (0, 2):
            items = list(DataLoader(ds, batch_size=None, num_workers=workers))
            assert len(items) == len(ds)
            unknowns = 0.0
            for item in items:
                loader.fill_graph(item["positions"].numpy(), graph)
                indptr, indices, counts = vocab.bag_of_words(graph, unknown=unknown)
                bow = item["bow"]
                assert bow.layout == torch.sparse_csr and bow.shape == (graph.num_nodes, 32)
                want = np.zeros((graph.num_nodes, 32), np.float32)
                for n in range(graph.num_nodes):
                    lo, hi = indptr[n], indptr[n + 1]
                    want[n, indices[lo:hi]] = counts[lo:hi]
                np.testing.assert_array_equal(bow.to_dense().numpy(), want)
                unknowns += want[:, 1].sum()
            assert (unknowns > 0) == unknown


def test_graph_dataset_pinned_in_process_mode_matches(built):
    """GraphDataset(pin_memory=True) in-process: two buffer sets in turn
    (ordinary memory without CUDA, with a warning), the same graphs; a
    yielded graph stays valid until the next-but-one step."""
    from socialctx.torch import GraphDataset

    kw = dict(seed=3, pyg=False, kinds="both", max_cxt=20)
    plain = list(GraphDataset(socialctx.open(built["sample"]), range(38), 5, **kw))
    with pytest.warns(UserWarning, match="no CUDA") if not torch.cuda.is_available() else _null():
        pinned = iter(
            GraphDataset(socialctx.open(built["sample"]), range(38), 5, pin_memory=True, **kw)
        )
        previous = None
        for a in plain:
            b = next(pinned)
            for key in ("x", "edge_index", "batch", "ptr", "parent", "y", "positions"):
                assert torch.equal(a[key], b[key]), key
            assert (a["epoch"], a["plan_index"]) == (b["epoch"], b["plan_index"])
            if previous is not None:  # the step before's graph, still intact
                assert torch.equal(previous[0]["x"], previous[1]["x"])
            previous = (a, b)
        assert next(pinned, None) is None


def test_a_table_and_a_dataset_of_two_generations_of_a_store_are_refused(sample):
    """Red team: a dataset made before an embed replaced store "r" on the
    same cache content (``--compact``, another model) and an EmbeddingTable
    made after it: the dataset's indices number the old store's rows, the
    table holds the new ones (after a compaction, 177 of 211 rows were other
    inputs' rows, with no error). Both directions are refused: the table
    with the item, and a worker's Loader opened after the replacement."""
    ds = CacheDataset(sample, range(len(sample)), 4, embeddings=["r"])
    first = next(iter(steps(ds, 0)))
    EmbeddingTable(sample, "r")(first)  # the same generation: accepted
    socialctx.embed(sample, lambda b: np.stack([toy(t) * 3 for t in b]), name="r")
    table = EmbeddingTable(sample, "r")
    with pytest.raises(socialctx.CacheError, match="made on another version of the store"):
        table(first)
    # A spawned worker opens its own Loader, on the new store: refused (a
    # forked one keeps the dataset's, of the old store, and reads it).
    with pytest.raises(Exception, match="the embedding store was rewritten"):
        steps(ds, 1, multiprocessing_context="spawn")
    # Made again on the new store, they agree.
    again = CacheDataset(sample, range(len(sample)), 4, embeddings=["r"], dense=True)
    for s in steps(again, 1):
        assert torch.equal(table(s), s["embeddings"]["r"])


GRAPH_KW = dict(pyg=False, kinds="both", max_cxt=20)


def _flat_and_graph_outputs(sample, **outputs) -> tuple[list[dict], list[dict]]:
    """The same epoch as CacheDataset's and GraphDataset's items."""
    from socialctx.torch import GraphDataset

    kw = dict(kinds="both", max_cxt=20, **outputs)
    flat = list(CacheDataset(sample, range(len(sample)), 8, **kw))
    graphs = list(GraphDataset(sample, range(len(sample)), 8, pyg=False, **kw))
    return flat, graphs


def assert_nodes_hold_their_slots(flat: dict, graph: dict, names: list[str]) -> int:
    """Node k of graph b holds what row slot k - 1 of thread b holds; a root
    what a padding slot holds. Returns the nodes checked."""
    ptr = graph["ptr"].tolist()
    checked = 0
    for name in names:
        got, want = graph[name], flat[name]
        pairs = got.items() if isinstance(got, dict) else [(None, got)]
        for key, g in pairs:
            w = want if key is None else want[key]
            assert g.shape[0] == graph["x"].shape[0], (name, key)
            assert g.shape[1:] == w.shape[2:], (name, key)
            for b in range(len(ptr) - 1):
                root = g[ptr[b]]
                pad = -1 if name == "embedding_index" else 0
                assert bool((root == pad).all()), (name, key, b)
                n = ptr[b + 1] - ptr[b] - 1
                assert torch.equal(g[ptr[b] + 1 : ptr[b + 1]], w[b, :n]), (name, key, b)
                checked += n
    return checked


def test_graph_dataset_carries_the_loaders_outputs_per_node(sample):
    """GraphDataset(embeddings=, dense=, token_ids=, outputs=) works (it was
    refused: a graph batch had no slots for them): each node holds what the
    flat batch's row slot of its reaction holds, each root a padding slot's;
    an EmbeddingTable takes a graph item as a flat one, store checks
    included; pinned, the same values."""
    from socialctx.torch import GraphDataset

    vocab = sample.vocabulary(max_size=30)
    kw = dict(embeddings=["r"], dense=True, token_ids=vocab, max_tokens=5, outputs=[])
    flat, graphs = _flat_and_graph_outputs(sample, **kw)
    assert len(flat) == len(graphs)
    names = ["embedding_index", "embeddings", "token_ids"]
    checked = sum(assert_nodes_hold_their_slots(f, g, names) for f, g in zip(flat, graphs))
    assert checked > 100
    table = EmbeddingTable(sample, "r")
    for g in graphs:
        assert g["store_ids"] == flat[0]["store_ids"]
        assert torch.equal(table(g), g["embeddings"]["r"])
    # Index only (dense=False): no rows, the index per node.
    flat, graphs = _flat_and_graph_outputs(sample, embeddings=["r"])
    assert all("embeddings" not in g for g in graphs)
    assert sum(
        assert_nodes_hold_their_slots(f, g, ["embedding_index"]) for f, g in zip(flat, graphs)
    )
    # Pinned in-process: the same values, two buffer sets in turn.
    plain = list(GraphDataset(sample, range(38), 5, **GRAPH_KW, **kw))
    with pytest.warns(UserWarning, match="no CUDA") if not torch.cuda.is_available() else _null():
        pinned = list(GraphDataset(sample, range(38), 5, pin_memory=True, **GRAPH_KW, **kw))
    for a, b in zip(plain[-2:], pinned[-2:]):
        assert torch.equal(a["token_ids"], b["token_ids"])
        assert torch.equal(a["embeddings"]["r"], b["embeddings"]["r"])


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_graph_dataset_workers_yield_the_same_outputs(sample, method):
    """Workers (forked or spawned: the Loader, its vocabulary and stores
    made again in each) yield what the process does."""
    from socialctx.torch import GraphDataset

    vocab = sample.vocabulary(max_size=30)
    kw = dict(embeddings=["r"], dense=True, token_ids=vocab, max_tokens=4, seed=2, **GRAPH_KW)
    ds = GraphDataset(sample, range(len(sample)), 6, **kw)
    here = list(ds)
    there = steps(ds, 2, multiprocessing_context=method)
    assert sorted(i["plan_index"] for i in there) == [i["plan_index"] for i in here]
    by_index = {i["plan_index"]: i for i in there}
    for a in here:
        b = by_index[a["plan_index"]]
        for key in ("x", "token_ids", "positions"):
            assert torch.equal(a[key], b[key]), key
        assert torch.equal(a["embedding_index"]["r"], b["embedding_index"]["r"])
        assert torch.equal(a["embeddings"]["r"], b["embeddings"]["r"])


def test_graph_dataset_outputs_hostile(sample, tmp_path):
    """The new surface, misused: every misuse refused in the main process,
    at construction, naming what is wrong; a store or cache changed
    underneath refused in the workers that would read it."""
    from socialctx.torch import GraphDataset

    n = len(sample)

    def make(**kw):
        return GraphDataset(sample, range(n), 4, **GRAPH_KW, **kw)

    with pytest.raises(ValueError, match="no output 'nope'|no output \"nope\""):
        make(outputs=["nope"])
    # The same name twice was taken and filled twice (a flat Loader too).
    with pytest.raises(ValueError, match="named twice"):
        make(outputs=["nope", "nope"])
    with pytest.raises(ValueError, match="named twice"):
        socialctx.Loader(sample, outputs=["a", "a"])
    with pytest.raises(TypeError):
        make(outputs="token_ids")
    with pytest.raises(ValueError, match="no output"):
        make(outputs=["token_ids"])  # a Vocabulary's output, not one made by name
    with pytest.raises(ValueError, match="max_tokens"):
        make(token_ids=sample.vocabulary(max_size=5))
    with pytest.raises(socialctx.EmbeddingError, match="nostore"):
        make(embeddings=["nostore"])
    with pytest.raises(ValueError, match="named twice"):
        make(embeddings=["r", "r"])
    with pytest.raises(socialctx.EmbeddingError, match="other-model"):
        make(embeddings={"r": "other-model"})
    # Per-slot sizes no memory holds: a flat Batch refuses them when made; a
    # graph's outputs grow in the fill, where they aborted the process
    # (10**12 tokens: "memory allocation failed") or panicked (2**62).
    vocab = sample.vocabulary(max_size=5)
    with pytest.raises(MemoryError, match="too large"):
        next(iter(make(token_ids=vocab, max_tokens=2**62)))
    huge = socialctx.Loader(sample, token_ids=vocab, max_tokens=2**62)
    graph = socialctx.GraphBatch()
    with pytest.raises(MemoryError, match="token_ids"):
        huge.fill_graph([0, 1], graph)
    assert graph.num_nodes == 0 and graph.output_names() == ["token_ids"]
    # A GraphBatch answers as a Batch does for outputs its Loader lacks.
    graph = socialctx.GraphBatch()
    socialctx.Loader(sample).fill_graph([0, 1], graph)
    assert graph.output_names() == [] and graph.outputs == {}
    assert graph.token_ids is None and graph.embedding_index == {} and graph.embeddings == {}
    with pytest.raises(AttributeError, match="no attribute .nope."):
        graph.nope  # noqa: B018
    # The store re-embedded after the dataset was made: a spawned worker's
    # Loader would read the new rows under the old numbering; refused.
    ds = make(embeddings=["r"])
    socialctx.embed(sample, lambda b: np.stack([toy(t) * 3 for t in b]), name="r")
    with pytest.raises(Exception, match="the embedding store was rewritten"):
        steps(ds, 1, multiprocessing_context="spawn")
    # The cache rebuilt underneath: spawned workers refuse it, with the
    # CacheError in the main process. A Vocabulary (token_ids=,
    # bag_of_words=) refused while the worker unpickled the dataset: the
    # worker died and the DataLoader said only "exited unexpectedly".
    vocab = sample.vocabulary(max_size=5)
    with_ids = make(embeddings=["r"], token_ids=vocab, max_tokens=3)
    with_bow = make(bag_of_words=vocab)
    flat = CacheDataset(sample, range(n), 4, token_ids=vocab, max_tokens=3)
    socialctx.build(
        socialctx.sample_corpus(), sample.path, workers=2, progress=False, extended=False
    )
    assert socialctx.open(sample.path).content_id != with_ids.content_id
    for ds in (with_ids, with_bow, flat):
        with pytest.raises(socialctx.CacheError, match="rebuilt"):
            steps(ds, 1, multiprocessing_context="spawn")
