"""The nightly job as a state machine (issue 43, item 6): hypothesis runs
the guide's training loop as a series of jobs, each restarted from the
last checkpoint and preempted after some steps, with rebuilds of the
corpus between them (threads added, deleted, edited; ``build
--incremental``). Each job picks its loader (the dataset in-process,
a DataLoader with ``state_dict(after=item)``, out-of-order saves with
``in_order=False``, torchdata's StatefulDataLoader with 0 or 2 workers),
whether it calls ``set_epoch`` before or after loading, and when it
checkpoints (every few steps, and after an epoch ended). The model says,
by source id, which threads each epoch must train exactly once: the
selection of the generation the epoch ended on, each thread once, none
twice (what was trained before a checkpoint counts; after it, a
preempted job's work is lost). Counts are printed with ``-s``."""

from __future__ import annotations

import collections
import os
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

if os.environ.get("SOCIALCTX_REQUIRE_TORCH"):
    import hypothesis
    import torch
    import torchdata  # noqa: F401
else:
    torch = pytest.importorskip("torch")
    hypothesis = pytest.importorskip("hypothesis")
    pytest.importorskip("torchdata")

from hypothesis import HealthCheck, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule  # noqa: E402
from torch.utils.data import DataLoader  # noqa: E402
from torchdata.stateful_dataloader import StatefulDataLoader  # noqa: E402

import socialctx  # noqa: E402
from conftest import REPO  # noqa: E402
from socialctx.torch import CacheDataset  # noqa: E402

EPOCHS = 3
STATS: collections.Counter[str] = collections.Counter()


class Corpus:
    """A private copy of the sample corpus, rebuilt incrementally as the
    nightly job does; each sequence starts from the same corpus and cache
    (hypothesis replays sequences: they must not depend on earlier ones)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.corpus = root / "corpus"
        self.cache = root / "cache"
        self.aside = root / "aside"
        shutil.copytree(REPO / "data-samples/corpus", self.corpus)
        self.aside.mkdir()
        socialctx.build(self.corpus, self.cache, workers=1, progress=False)
        # Three threads held aside from the start: what "add" brings.
        ids = sorted(socialctx.open(self.cache).source_ids.tolist())
        for sid in ids[5:8]:
            self._move(sid, self.corpus, self.aside)
        self.build()
        for name in ("corpus", "aside", "cache"):
            shutil.copytree(root / name, root / "pristine" / name, symlinks=True)

    def reset(self) -> None:
        for name in ("corpus", "aside", "cache"):
            shutil.rmtree(self.root / name)
            shutil.copytree(self.root / "pristine" / name, self.root / name, symlinks=True)

    @staticmethod
    def _move(sid: int, src: Path, dst: Path) -> None:
        for d in [p for p in src.rglob(str(sid)) if p.is_dir() and p.name == str(sid)]:
            target = dst / d.relative_to(src)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(d, target)

    def build(self) -> None:
        socialctx.build(self.corpus, self.cache, workers=1, progress=False, incremental=True)

    def change(self, op: str, pick: int) -> str:
        live = sorted(socialctx.open(self.cache).source_ids.tolist())
        out = sorted(
            {int(p.name) for p in self.aside.rglob("*") if p.is_dir() and p.name.isdigit()}
        )
        if op == "add" and out:
            self._move(out[pick % len(out)], self.aside, self.corpus)
        elif op == "delete" and len(live) > 20:
            self._move(live[pick % len(live)], self.corpus, self.aside)
        else:
            op = "edit"
            edits = sorted(self.corpus.rglob("reactions/*.json"))
            edits[pick % len(edits)].unlink()  # a reply gone: same thread, other content
        self.build()
        return op


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Corpus:
    return Corpus(tmp_path_factory.mktemp("rebuild-machine"))


JOB = st.fixed_dictionaries(
    {
        "loader": st.sampled_from(["ds", "dl", "ooo", "sdl0", "sdl2"]),
        "steps": st.integers(1, 9),
        "save_every": st.integers(1, 4),
        "save_after_end": st.booleans(),
        "set_epoch_first": st.booleans(),
        "shuffle": st.integers(0, 5),
    }
)


class Machine(RuleBasedStateMachine):
    corpus: Corpus

    def __init__(self) -> None:
        super().__init__()
        self.corpus.reset()
        self.mode = "all"
        STATS["sequences"] += 1
        gen = socialctx.open(self.corpus.cache)
        self.fixed = gen.source_ids[: len(gen) // 2 + 2].astype(np.int64)
        # The last checkpoint: (state, kind, content id, epoch, model), the
        # model holding the trained ids per epoch and, per epoch ended, the
        # selection of the generation it ended on.
        self.ckpt: tuple[Any, ...] | None = None

    @initialize(mode=st.sampled_from(["all", "even", "ids"]))
    def choose_the_selection(self, mode: str) -> None:
        """The job's selection, by source id: every thread (new ones join),
        the even ids (new even ones join), or a fixed set (none join)."""
        self.mode = mode
        STATS[f"selection {mode}"] += 1

    # --- the dataset a job makes ------------------------------------------------

    def selection(self, gen: socialctx.Cache, mode: str | None = None) -> socialctx.Selection:
        mode = mode or self.mode
        every = gen.source_ids.astype(np.int64)
        ids = {"all": every, "even": every[every % 2 == 0], "ids": self.fixed}[mode]
        return socialctx.select(gen, ids)

    def make(self, gen: socialctx.Cache, in_order: bool, mode: str | None = None) -> CacheDataset:
        return CacheDataset(
            gen, self.selection(gen, mode), 3, seed=1, bucket=True, in_order=in_order,
            resume_across_rebuild=True,
        )  # fmt: skip

    # --- a job ---------------------------------------------------------------------

    def job(self, job: dict[str, Any], final: bool) -> None:
        gen = socialctx.open(self.corpus.cache)
        kind = job["loader"]
        ds = self.make(gen, in_order=kind != "ooo")
        if kind.startswith("sdl"):
            dl: Any = StatefulDataLoader(
                ds, batch_size=None, num_workers=int(kind[3]),
                **({"multiprocessing_context": "fork"} if kind == "sdl2" else {}),
            )  # fmt: skip
        elif kind == "dl":
            dl = DataLoader(ds, batch_size=None)
        else:
            dl = ds
        trained: dict[int, list[int]] = {}
        ended: dict[int, list[int]] = {}
        self.by_ids: int | None = None  # the epoch this job resumed by source id
        if self.ckpt is not None:
            state, saved_kind, content_id, epoch, model = self.ckpt
            trained = {e: list(v) for e, v in model["trained"].items()}
            ended = dict(model["ended"])
            by_ids = content_id != gen.content_id or model["by_ids"]
            # The epoch a restarted loop starts at: the state's; the next
            # when the state's epoch had ended and the dataset cannot
            # resume it as is (another generation, or an epoch resumed by
            # source id), or a StatefulDataLoader had ended its iteration
            # (it starts a fresh one: else that epoch trains twice).
            complete = model["complete"]
            finished = model["after_end"] and saved_kind.startswith("sdl")
            effective = epoch + 1 if finished or (by_ids and complete) else epoch
            if effective > epoch:
                # It ended on the generation it was saved on.
                ended.setdefault(epoch, model["selection"])
            if job["set_epoch_first"]:
                ds.set_epoch(effective)
                STATS["set_epoch before load"] += 1
            if kind == saved_kind and kind.startswith("sdl"):
                dl.load_state_dict(state)
            # Another loader than the checkpoint's: the dataset alone
            # resumes (a fresh StatefulDataLoader's workers use its point).
            ds.load_state_dict(state)
            STATS["loads across a rebuild" if content_id != gen.content_id else "loads"] += 1
            assert ds.epoch == effective, (ds.epoch, effective)
            if by_ids and effective == epoch:
                self.by_ids = epoch
                STATS["epochs resumed by source id"] += 1
        steps = 0
        for epoch in range(ds.epoch, EPOCHS):
            ds.set_epoch(epoch)
            rng = random.Random(job["shuffle"] + epoch)
            last = None
            for item in self.deliver(dl, kind, rng):
                got = item["source_ids"].tolist()
                assert int(item["epoch"]) == epoch and got
                trained.setdefault(epoch, []).extend(got)
                last = item
                if kind == "ooo":
                    # in_order=False: every item is handed over.
                    self.latest = ds.state_dict(after=item)
                steps += 1
                STATS["batches trained"] += 1
                if steps % job["save_every"] == 0:
                    self.save(ds, dl, kind, item, epoch, False, gen, trained, ended)
                if not final and steps == job["steps"]:
                    STATS["preempted"] += 1
                    return
            ended[epoch] = self.selection(gen).source_ids.tolist()
            if job["save_after_end"]:
                self.save(ds, dl, kind, last, epoch, True, gen, trained, ended)
        if final:
            self.check(trained, ended)

    def deliver(self, dl: Any, kind: str, rng: random.Random):
        """Items as the loop trains them; ``ooo``: in a shuffled order
        within windows of three (out-of-order delivery; at a preemption the
        window's rest was in flight, never trained), each handed to
        ``state_dict(after=item)``."""
        if kind != "ooo":
            yield from dl
            return
        window: list[Any] = []
        for item in dl:
            window.append(item)
            if len(window) == 3:
                rng.shuffle(window)
                while window:
                    yield window.pop()
        rng.shuffle(window)
        while window:
            yield window.pop()

    def save(self, ds, dl, kind, item, epoch, after_end, gen, trained, ended) -> None:
        if kind.startswith("sdl"):
            state = dl.state_dict()
        elif kind == "ds":
            state = ds.state_dict()
        elif item is None:
            state = ds.state_dict()  # nothing of this epoch yielded here
        elif kind == "ooo":
            state = self.latest
        else:
            # In order, handing over the items saved after is enough.
            state = ds.state_dict(after=item)
        model = {
            "trained": {e: list(v) for e, v in trained.items()},
            "ended": dict(ended),
            "after_end": after_end,
            "by_ids": self.by_ids == epoch,
            "selection": self.selection(gen).source_ids.tolist(),
        }
        # Every thread of the epoch's selection trained when it was saved.
        model["complete"] = set(model["selection"]) <= set(trained.get(epoch, []))
        self.ckpt = (state, kind, gen.content_id, epoch, model)
        STATS[f"saves {kind}" + (" after an epoch ended" if after_end else "")] += 1

    def check(self, trained: dict[int, list[int]], ended: dict[int, list[int]]) -> None:
        assert sorted(ended) == list(range(EPOCHS))
        for epoch in range(EPOCHS):
            got = collections.Counter(trained.get(epoch, []))
            twice = [i for i, n in got.items() if n > 1]
            assert not twice, f"epoch {epoch}: trained twice: {twice}"
            missed = set(ended[epoch]) - set(got)
            assert not missed, f"epoch {epoch}: never trained: {sorted(missed)}"
        STATS["epochs checked"] += EPOCHS

    # --- rules ---------------------------------------------------------------------

    @rule(job=JOB)
    def run_a_job(self, job: dict[str, Any]) -> None:
        self.job(job, final=False)
        STATS[f"jobs {job['loader']}"] += 1

    @rule(op=st.sampled_from(["add", "delete", "edit"]), pick=st.integers(0, 50))
    def rebuild(self, op: str, pick: int) -> None:
        STATS[f"rebuilds {self.corpus.change(op, pick)}"] += 1

    @precondition(lambda self: self.ckpt is not None)
    @rule()
    def another_selection_is_refused(self) -> None:
        state = self.ckpt[0]
        other = {"all": "even", "even": "all", "ids": "all"}[self.mode]
        gen = socialctx.open(self.corpus.cache)
        ds = self.make(gen, in_order=self.ckpt[1] != "ooo", mode=other)
        with pytest.raises(ValueError, match="another (selection|plan)"):
            ds.load_state_dict(state)
        STATS["refused: another selection"] += 1

    def teardown(self) -> None:
        # The last job runs to the end of the last epoch; then the model.
        final = {
            "loader": "ds", "steps": 0, "save_every": 1 << 30, "save_after_end": False,
            "set_epoch_first": False, "shuffle": 0,
        }  # fmt: skip
        self.job(final, final=True)


def test_the_nightly_job_trains_each_epoch_exactly_once(corpus):
    cls = type("NightlyMachine", (Machine,), {"corpus": corpus})
    cls.TestCase.settings = settings(
        max_examples=30,
        stateful_step_count=8,
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
        print_blob=True,
    )
    cls.TestCase("runTest").runTest()
    print("\nnightly machine:", dict(STATS))
    assert STATS["epochs checked"] >= 30 * EPOCHS
    for key in ("loads across a rebuild", "set_epoch before load", "saves sdl2"):
        assert STATS[key], key
