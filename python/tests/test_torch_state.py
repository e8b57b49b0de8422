"""socialctx.torch as a state machine: hypothesis drives CacheDataset and
GraphDataset through random sequences (make, set_epoch, iterate k batches
in-process or with 1-3 workers under fork/spawn/forkserver, break,
state_dict, load into a fresh dataset, pickle, rebuild the cache
underneath, change an option) against a small pure-Python model: the
plan (the crate's Batching::plan, rewritten here) and the dataset's epoch,
resume point and count. Every yielded batch must equal a fresh Loader fill
of its positions on the dataset's generation, and the sequence of batches
the model's.

Two machines share the rules: one in-process (most sequences, cheap), one
that may also iterate with DataLoader workers (few sequences, each with
at most two worker runs: worker processes cost seconds). Both are
derandomized (the same sequences every run; hypothesis prints the failing
one), and their counts are printed (``-s``) for the report."""

from __future__ import annotations

import collections
import math
import os
import pickle
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

if os.environ.get("SOCIALCTX_REQUIRE_TORCH"):
    # CI: installed there (.ci/run), so that this never silently skips.
    import hypothesis
    import torch
else:
    torch = pytest.importorskip("torch")
    hypothesis = pytest.importorskip("hypothesis")

from hypothesis import HealthCheck, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.stateful import (  # noqa: E402
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)
from torch.utils.data import DataLoader  # noqa: E402

import socialctx  # noqa: E402
from conftest import REPO  # noqa: E402
from socialctx.torch import CacheDataset, GraphDataset  # noqa: E402

# --- the reference model of the plan -----------------------------------------

M64 = (1 << 64) - 1


def splitmix(state: int):
    while True:
        state = (state + 0x9E3779B97F4A7C15) & M64
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
        yield z ^ (z >> 31)


def shuffle(items: list, seed: int) -> None:
    draw = splitmix(seed)
    for i in range(len(items) - 1, 0, -1):
        j = (next(draw) * (i + 1)) >> 64
        items[i], items[j] = items[j], items[i]


def ref_plan(
    lengths: list[int],
    batch_size: int,
    seed: int | None,
    noise: float | None,
    world: int,
    drop_last: bool,
    multiple: int | None = None,
) -> list[list[int]]:
    """The crate's Batching::plan, in Python: the epoch's batches of
    indices into the positions, for every rank (bucketed with
    `pad="longest"`: by the width a thread pads to, rounded up to
    `multiple`, first)."""
    n = len(lengths)
    order = list(range(n))
    if noise is not None:
        draw = splitmix((seed or 0) ^ 0x5EEDB0C4E7ED0001)
        keys = []
        for length in lengths:
            u = (next(draw) >> 11) / float(1 << 52) - 1.0 if seed is not None else 0.0
            width = -(-max(length, 1) // multiple) * multiple if multiple else 0
            keys.append((width, length * (1.0 + u * noise)))
        order.sort(key=lambda a: (*keys[a], a))
    elif seed is not None:
        shuffle(order, seed)
    if world == 1:
        batches = [order[i : i + batch_size] for i in range(0, n, batch_size)]
    elif drop_last:
        k = n // batch_size // world * world
        batches = [order[i : i + batch_size] for i in range(0, k * batch_size, batch_size)]
    else:
        count = math.ceil(n / batch_size)
        count = -(-count // world) * world
        if n == 0:
            batches = []
        elif count > n:
            # No empty batch: batches of one, the first threads repeated.
            batches = [[order[i % n]] for i in range(count)]
        else:
            base, extra = divmod(n, count)
            batches, start = [], 0
            for i in range(count):
                size = base + (i < extra)
                batches.append(order[start : start + size])
                start += size
    if noise is not None and seed is not None:
        shuffle(batches, seed ^ 0xBA7C4E500DE20002)
    return batches


# --- the corpus, rebuilt underneath --------------------------------------------


class Corpus:
    """The sample corpus and its cache, rebuilt alternately without and
    with its first thread: two generations, each rebuilt to the same
    content id (builds are deterministic)."""

    def __init__(self, root: Path) -> None:
        self.corpus = root / "corpus"
        shutil.copytree(REPO / "data-samples/corpus", self.corpus)
        self.cache = root / "cache"
        socialctx.build(self.corpus, self.cache, workers=1, progress=False)
        first = int(socialctx.open(self.cache).source_ids[0])
        (self.thread,) = [p for p in self.corpus.rglob(str(first)) if p.is_dir()]
        self.aside = root / "aside"
        self.rebuilds = 0

    def rebuild(self) -> None:
        if self.thread.exists():
            shutil.move(self.thread, self.aside)
        else:
            shutil.move(self.aside, self.thread)
        socialctx.build(self.corpus, self.cache, workers=1, progress=False, incremental=True)
        self.rebuilds += 1


STATS: collections.Counter[str] = collections.Counter()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Corpus:
    return Corpus(tmp_path_factory.mktemp("state"))


# --- the machine ---------------------------------------------------------------

OPTIONS = {
    # option: (a value, another value) for "change an option"
    "batch_size": (3, 5),
    "seed": (0, 1),
    "bucket": (False, True),
    "drop_last": (False, True),
    "pad": ("max", "longest"),
    "max_cxt": (200, 6),
}


WORKER_RUN = st.fixed_dictionaries(
    {
        "k": st.one_of(st.none(), st.integers(1, 6)),
        "workers": st.integers(1, 3),
        "method": st.sampled_from(["fork", "spawn", "forkserver", "fork"]),
        "persistent": st.booleans(),
        "bump": st.sampled_from([None, None, 1, 3]),
    }
)


class Machine(RuleBasedStateMachine):
    corpus: Corpus
    with_workers = False

    def __init__(self) -> None:
        super().__init__()
        self.ds: CacheDataset | None = None
        self.worker_runs = 0
        self.rebuilds = 0
        STATS["sequences"] += 1

    # model state
    def _reset_model(self, params: dict[str, Any], gen: socialctx.Cache) -> None:
        self.params = params
        self.gen = gen  # the open cache of the dataset's generation
        self.epoch = 0
        self.pending: tuple[int, int] | None = None
        self.position = (0, 0)
        self.workers_ran: bool | None = False
        self.last_item: Any = None
        # The dataset reopens its cache by path at its next iteration (it was
        # unpickled): refused if the cache at the path is another generation.
        self.reopens = False

    def _make(self, params: dict[str, Any]) -> CacheDataset:
        p = dict(params)
        kind = p.pop("kind")
        if len(p["positions"]) == 0:
            raise ValueError("no threads")
        if kind == "graph":
            return GraphDataset(socialctx.open(self.corpus.cache), pyg=p.pop("pyg"), **p)
        p.pop("pyg")
        return CacheDataset(socialctx.open(self.corpus.cache), **p)

    @initialize(
        kind=st.sampled_from(["cache", "graph"]),
        n=st.integers(4, 37),
        order_seed=st.integers(0, 3),
        batch_size=st.integers(1, 9),
        seed=st.one_of(st.none(), st.integers(0, 4)),
        bucket=st.booleans(),
        world=st.sampled_from([1, 1, 2, 3]),
        rank=st.integers(0, 2),
        drop_last=st.booleans(),
        pad=st.sampled_from(["max", "longest"]),
        max_cxt=st.sampled_from([200, 6]),
        labelled=st.booleans(),
        pyg=st.sampled_from([False, False, None]),
        workers_run=WORKER_RUN,
    )
    def make(self, kind, n, order_seed, batch_size, seed, bucket, world, rank, drop_last,
             pad, max_cxt, labelled, pyg, workers_run) -> None:  # fmt: skip
        gen = socialctx.open(self.corpus.cache)
        positions = np.random.default_rng(order_seed).permutation(len(gen))[:n]
        labels = np.random.default_rng(order_seed + 10).integers(-1, 3, n) if labelled else None
        params = dict(
            kind=kind, positions=positions, batch_size=batch_size, labels=labels, seed=seed,
            bucket=bucket, world_size=world, rank=rank % world, drop_last=drop_last, pad=pad,
            max_cxt=max_cxt, pyg=pyg,
        )  # fmt: skip
        self.ds = self._make(params)
        self._reset_model(params, gen)
        STATS[f"made {kind}"] += 1
        if self.with_workers:
            # Every sequence of the worker machine starts with a worker run.
            self.iterate_with_workers(**workers_run)

    # the model's plan
    def plan(self, epoch: int) -> list[list[int]]:
        return self.plan_of(self.params, self.gen, epoch)

    @staticmethod
    def plan_of(p: dict[str, Any], gen: socialctx.Cache, epoch: int) -> list[list[int]]:
        loader = socialctx.Loader(gen, max_cxt=p["max_cxt"])
        lengths = loader.lengths(p["positions"]).tolist()
        seed = None if p["seed"] is None else p["seed"] + epoch
        batches = ref_plan(
            lengths, p["batch_size"], seed, 0.1 if p["bucket"] else None, p["world_size"],
            p["drop_last"], 8 if p["pad"] == "longest" else None,
        )  # fmt: skip
        return batches[p["rank"] :: p["world_size"]]

    def start(self) -> int:
        if self.pending is not None and self.pending[0] == self.epoch:
            return self.pending[1]
        return 0

    @invariant()
    def len_is_what_the_next_iteration_yields(self) -> None:
        if self.ds is None:
            return
        assert self.ds.epoch == self.epoch
        assert len(self.ds) == len(self.plan(self.epoch)) - self.start()

    # checks of yielded items
    def check_items(self, items: list, epoch: int, first: int) -> None:
        p = self.params
        plan = self.plan(epoch)
        positions = p["positions"]
        labels = p["labels"]
        assert [int(i["plan_index"]) for i in items] == list(range(first, first + len(items)))
        if p["kind"] == "cache":
            loader = socialctx.Loader(self.gen, max_cxt=p["max_cxt"], pad=p["pad"])
            batch = loader.new_batch(max(p["batch_size"], 1))
        else:
            loader = socialctx.Loader(self.gen, max_cxt=p["max_cxt"])
            graph = socialctx.GraphBatch()
        for k, item in zip(range(first, first + len(items)), items):
            assert int(item["epoch"]) == epoch
            picked = plan[k]
            want = positions[picked]
            assert item["positions"].tolist() == want.tolist()
            lab = None if labels is None else labels[picked]
            if p["kind"] == "cache":
                loader.fill(want, batch, lab)
                n = batch.size
                assert torch.equal(item["features"], torch.from_numpy(batch.features[:n]))
                assert torch.equal(item["mask"], torch.from_numpy(batch.mask[:n]).bool())
                assert item["labels"].tolist() == batch.labels[:n].tolist()
                assert item["source_ids"].tolist() == batch.source_ids[:n].view(np.int64).tolist()
            else:
                loader.fill_graph(want, graph, lab)
                np.testing.assert_array_equal(item["x"].numpy(), graph.x)
                np.testing.assert_array_equal(item["edge_index"].numpy(), graph.edge_index)
                assert item["y"].tolist() == graph.labels.tolist()
            STATS["batches checked"] += 1

    def stale(self, reopen: bool) -> bool:
        return reopen and self.gen.content_id != self._disk_id()

    def take(self, source: Any, k: int | None, bump: int | None = None) -> list:
        """Iterates ``source``, training on k items (all for None): the
        loop breaks after its k-th step, as a preempted loop does. With
        ``bump``, ``set_epoch(bump)`` right after ``iter()``: the running
        iteration keeps its epoch (DistributedSampler's semantics)."""
        it = iter(source)
        if bump is not None:
            self.ds.set_epoch(bump)
        items: list = []
        if k == 0:
            return items
        for item in it:
            items.append(item)
            if k is not None and len(items) == k:
                break
        return items

    @rule(epoch=st.integers(0, 3))
    def set_epoch(self, epoch: int) -> None:
        assert self.ds is not None
        if self.pending is not None and self.pending[0] != epoch:
            # One epoch rule: a loaded state's epoch, not another.
            with pytest.raises(ValueError, match=rf"set_epoch\({self.pending[0]}\) resumes it"):
                self.ds.set_epoch(epoch)
            STATS["refused: set_epoch of another epoch than the loaded state's"] += 1
            return
        self.ds.set_epoch(epoch)
        self.epoch = epoch
        self.position = (epoch, self.start())
        self.workers_ran = False
        self.last_item = None
        STATS["set_epoch"] += 1

    @rule(k=st.one_of(st.none(), st.integers(0, 6)), through_loader=st.booleans())
    def iterate(self, k: int | None, through_loader: bool) -> None:
        assert self.ds is not None
        if self.stale(self.reopens):
            with pytest.raises(socialctx.CacheError, match="rebuilt"):
                iter(self.ds)
            STATS["refused: rebuilt under a reopening dataset"] += 1
            return
        self.reopens = False
        source = DataLoader(self.ds, batch_size=None) if through_loader else self.ds
        first = self.start()
        self.pending = None
        items = self.take(source, k)
        if items:
            self.last_item = items[-1]
        self.check_items(items, self.epoch, first)
        self.position = (self.epoch, first + len(items))
        self.workers_ran = False
        STATS["in-process iterations"] += 1

    @precondition(lambda self: self.with_workers and self.worker_runs < 2)
    @rule(workers_run=WORKER_RUN)
    def another_worker_run(self, workers_run: dict[str, Any]) -> None:
        self.iterate_with_workers(**workers_run)

    def iterate_with_workers(self, k, workers, method, persistent, bump) -> None:
        assert self.ds is not None
        self.worker_runs += 1
        if method != "fork":
            workers = min(workers, 2)  # each spawned worker imports torch: seconds
        dl = DataLoader(
            self.ds, batch_size=None, num_workers=workers, multiprocessing_context=method,
            persistent_workers=persistent,
        )  # fmt: skip
        STATS[f"worker runs {method}"] += 1
        # Fork workers inherit the dataset's open cache, unless it has none yet.
        if self.stale(method != "fork" or self.reopens):
            with pytest.raises(socialctx.CacheError, match="rebuilt"):
                list(dl)
            STATS[f"refused: rebuilt under {method} workers"] += 1
            return
        for round in range(2 if persistent else 1):
            if round:
                # The next iteration through the same persistent workers.
                self.set_epoch((self.epoch + 1) % 4)
            first = self.start()
            self.pending = None
            bumped = bump if round == 0 and bump != self.epoch else None
            items = self.take(dl, k, bumped)
            self.check_items(items, self.epoch, first)
            if items:
                self.last_item = items[-1]
                self.position = (self.epoch, first + len(items))
            self.workers_ran = True
            if bumped is not None:
                # The next iteration has the new epoch, from its start.
                self.epoch = bumped
                # Whether the workers began before or after set_epoch (which
                # clears the flag) is a race: state_dict() without an item
                # is then not asserted until the next rule settles it.
                self.workers_ran = None
                STATS["set_epoch right after iter(dl)"] += 1
        if self.workers_ran:
            with pytest.raises(ValueError, match="after=item"):
                self.ds.state_dict()
        if self.last_item is not None:
            state = self.ds.state_dict(after=self.last_item)
            assert (state["epoch"], state["batches_done"]) == self.position

    def _disk_id(self) -> str:
        return socialctx.open(self.corpus.cache).content_id

    @rule()
    def save(self) -> None:
        assert self.ds is not None
        if self.workers_ran is None:
            return
        if self.workers_ran:
            with pytest.raises(ValueError, match="after=item"):
                self.ds.state_dict()
            if self.last_item is None:
                return
            if self.stale(self.reopens):
                # Checking the item needs the dataset's generation, gone.
                with pytest.raises(socialctx.CacheError, match="rebuilt"):
                    self.ds.state_dict(after=self.last_item)
                STATS["refused: an item's state after its generation was gone"] += 1
                return
            state = self.ds.state_dict(after=self.last_item)
        else:
            state = self.ds.state_dict()
        assert (state["epoch"], state["batches_done"]) == self.position
        if self.reopens and not self.stale(True):
            self.reopens = False  # state_dict opened the dataset's generation
        self.saved = (state, dict(self.params), self.gen)
        STATS["saves"] += 1

    @precondition(lambda self: hasattr(self, "saved"))
    @rule()
    def load_into_a_fresh_dataset(self) -> None:
        state, params, gen = self.saved
        if self._disk_id() != state["plan"]["content_id"]:
            try:
                fresh = self._make(params)
            except IndexError:
                STATS["refused: positions out of the rebuilt cache"] += 1
                return
            except socialctx.CacheError as e:
                # A Selection's positions name their generation (red team
                # 42b): refused with the fix, never bound to the rebuilt one.
                assert "selection.on(cache)" in str(e)
                STATS["refused: a selection's positions of another generation"] += 1
                return
            with pytest.raises(ValueError, match="resume_across_rebuild=True"):
                fresh.load_state_dict(state)
            STATS["refused: another generation"] += 1
            return
        self.ds = self._make(params)
        self._reset_model(params, socialctx.open(self.corpus.cache))
        self.ds.load_state_dict(state)
        self.epoch = state["epoch"]
        self.pending = (state["epoch"], state["batches_done"])
        self.position = self.pending
        STATS["loads"] += 1

    @precondition(lambda self: hasattr(self, "saved"))
    @rule(through_loader=st.booleans())
    def resume_across_the_rebuild(self, through_loader: bool) -> None:
        """Loads the saved state into a dataset of the generation at hand,
        its selection held by source id (socialctx.select), with
        resume_across_rebuild=True: the rest of the epoch is the selection's
        threads no rank trained in it, each once (padding aside)."""
        state, params, gen = self.saved
        now = socialctx.open(self.corpus.cache)
        old_ids = gen.source_ids[params["positions"]].astype(np.int64)
        sel = socialctx.select(now, old_ids, params["labels"])
        p = dict(params, positions=sel, labels=None, resume_across_rebuild=True)
        try:
            ds = self._make(p)
        except (ValueError, socialctx.Error):
            return
        if "ids" not in state and state["plan"]["content_id"] != now.content_id:
            with pytest.raises(ValueError, match="resumes on its own generation only"):
                ds.load_state_dict(state)
            STATS["refused across a rebuild: a state without ids"] += 1
            return
        ds.load_state_dict(state)
        # The model: every rank's first batches_done batches of the saved plan.
        w = params["world_size"]
        everyone = [self.plan_of(dict(params, rank=r), gen, state["epoch"]) for r in range(w)]
        done = state["batches_done"]
        if state["plan"]["content_id"] != now.content_id and 0 < len(everyone[0]) <= done:
            # The state's epoch had ended: the next epoch, whole (issue 43).
            assert ds.epoch == state["epoch"] + 1 and ds.resumed["remaining"] == 0
            got = [int(i) for it in ds for i in it["source_ids"].tolist()]
            if w == 1 and not params["drop_last"]:
                assert sorted(got) == sorted(sel.source_ids.tolist())
            STATS["resumed across a rebuild: the epoch had ended"] += 1
            del self.saved
            return
        trained = {int(i) for rp in everyone for b in rp[:done] for i in old_ids[b].tolist()}
        left = [int(i) for i in sel.source_ids.tolist() if int(i) not in trained]
        source = DataLoader(ds, batch_size=None) if through_loader else ds
        items = list(source)
        got = [int(i) for it in items for i in it["source_ids"].tolist()]
        assert all(len(it["source_ids"]) for it in items)
        assert not set(got) & trained
        if w == 1:
            assert sorted(got) == sorted(left)
        else:
            assert set(got) <= set(left)
        if state["plan"]["content_id"] != now.content_id:
            assert ds.resumed["remaining"] == len(left)
            STATS["resumed across a rebuild: threads dropped"] += ds.resumed["dropped"]
        # On from here: a fresh dataset of this generation.
        STATS["resumed across a rebuild"] += 1
        fresh = dict(
            params,
            positions=sel.positions,
            labels=sel.labels if params["labels"] is not None else None,
        )
        try:
            self.ds = self._make(fresh)
        except (ValueError, socialctx.Error):
            return  # the old dataset and its model go on
        self._reset_model(fresh, now)
        del self.saved

    @precondition(lambda self: hasattr(self, "saved"))
    @rule(option=st.sampled_from(sorted(OPTIONS)))
    def change_an_option(self, option: str) -> None:
        state, params, _ = self.saved
        if self._disk_id() != state["plan"]["content_id"]:
            return
        a, b = OPTIONS[option]
        changed = dict(params)
        changed[option] = b if params[option] == a else a
        try:
            other = self._make(changed)
        except (ValueError, socialctx.Error):
            return  # e.g. fewer threads than ranks
        with pytest.raises(ValueError, match=f"another plan: {option}"):
            other.load_state_dict(state)
        STATS[f"refused: {option}"] += 1

    @rule()
    def pickle_round_trip(self) -> None:
        assert self.ds is not None
        self.ds = pickle.loads(pickle.dumps(self.ds))
        self.reopens = True
        STATS["pickles"] += 1

    @precondition(lambda self: self.rebuilds < 3)
    @rule()
    def rebuild(self) -> None:
        self.rebuilds += 1
        self.corpus.rebuild()
        STATS["rebuilds"] += 1


def run_machine(corpus: Corpus, with_workers: bool, examples: int, steps: int) -> None:
    cls = type(
        "WorkerMachine" if with_workers else "InProcessMachine",
        (Machine,),
        {"corpus": corpus, "with_workers": with_workers},
    )
    cls.TestCase.settings = settings(
        max_examples=examples,
        stateful_step_count=steps,
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
        print_blob=True,
    )
    cls.TestCase("runTest").runTest()


def test_state_machine_in_process(corpus):
    before = STATS["sequences"]
    run_machine(corpus, with_workers=False, examples=300, steps=20)
    print("\nin-process machine:", dict(STATS))
    assert STATS["sequences"] - before >= 300


def test_state_machine_with_workers(corpus):
    before = STATS["sequences"]
    run_machine(corpus, with_workers=True, examples=20, steps=8)
    print("\nworker machine:", dict(STATS))
    assert STATS["sequences"] - before >= 20
    assert all(STATS[f"worker runs {m}"] for m in ("fork", "spawn", "forkserver"))
