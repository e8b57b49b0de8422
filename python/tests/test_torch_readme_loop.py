"""The README's PyTorch training loop, run as written, as two DDP ranks
(rank and world size from torch.distributed, as the README says), each
preempted three times and resumed from its last saved state: every rank
trains exactly the batches, rows and labels of one uninterrupted run, and
the ranks together every thread once per epoch."""

from __future__ import annotations

import gc
import os
import re
import subprocess
from typing import Any

import numpy as np
import pytest

if os.environ.get("SOCIALCTX_REQUIRE_TORCH"):
    import torch
else:
    torch = pytest.importorskip("torch")

import torch.utils.data  # noqa: E402

import socialctx  # noqa: E402
from conftest import REPO, binary  # noqa: E402

# torch's own, before the test replaces it with preemptible ones.
BaseDataLoader = torch.utils.data.DataLoader


def readme_loop() -> str:
    """The Python guide's block with the resumable training loop, from its
    ``import torch`` on (the lines above it make the sample cache and store
    that let the block run alone; here the test's own cache takes their place)."""
    text = (REPO / "python/README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    (block,) = [b for b in blocks if "ds.state_dict(after=item)" in b]
    block = block[block.index("import torch\n") :]
    assert block.count("state = None") == 1
    # A restart begins from the saved state instead of None.
    return block.replace("state = None", "state = saved", 1)


class Preempted(Exception):
    """The process was killed between two steps."""


class Run:
    """Counts the steps the loop finishes and kills it after ``budget``."""

    def __init__(self, scope: dict[str, Any], budget: int | None, trained: list) -> None:
        self.scope, self.budget, self.trained = scope, budget, trained

    def loader(self) -> type:
        run = self

        class PreemptibleDataLoader(BaseDataLoader):  # type: ignore[misc]
            def __iter__(self):
                for item in super().__iter__():
                    if run.budget == 0:
                        raise Preempted
                    yield item
                    # The loop body finished with this item: what it trained on.
                    s = run.scope
                    run.trained.append(
                        (
                            int(item["epoch"]),
                            int(item["plan_index"]),
                            s["x"].clone(),
                            s["mask"].clone(),
                            s["rows"].clone(),
                            s["y"].clone(),
                            item["source_ids"].tolist(),
                        )
                    )
                    if run.budget is not None:
                        run.budget -= 1

        return PreemptibleDataLoader


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> socialctx.Cache:
    """A generated corpus of 300 threads (10 batches of 32 an epoch) with a
    reply embedding store named as the README's."""
    root = tmp_path_factory.mktemp("readme-loop")
    subprocess.run(
        [binary("gen-corpus"), root / "corpus", "--threads", "300"], check=True, capture_output=True
    )
    socialctx.build(root / "corpus", root / "cache", workers=2, progress=False)
    c = socialctx.open(root / "cache")

    def model(texts: list[list[str]]) -> np.ndarray:
        out = np.zeros((len(texts), 4), np.float32)
        for i, t in enumerate(texts):
            out[i] = [len(t), sum(map(len, t)) % 89, len(t[0]) if t else 0, 0.5]
        return out

    socialctx.embed(c, model, field="reply", name="reply")
    return c


def train(
    cache: socialctx.Cache, rank: int, world: int, budgets: list[int | None], monkeypatch
) -> list:
    """Runs the README's loop as rank ``rank`` of ``world``, restarting
    after each budget of steps from the state it saved last."""
    dist = torch.distributed
    monkeypatch.setattr(dist, "is_available", lambda: True)
    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist, "get_rank", lambda *a, **k: rank)
    monkeypatch.setattr(dist, "get_world_size", lambda *a, **k: world)
    code = compile(readme_loop(), "python/README.md", "exec")
    positions = np.arange(len(cache))
    labels = (positions * 7 % 3 == 0).astype(np.int8)
    trained: list = []
    saved = None
    for budget in budgets:
        # A new process: nothing survives but the saved state.
        scope: dict[str, Any] = {"cache": cache, "positions": positions, "labels": labels}
        scope["saved"] = saved
        run = Run(scope, budget, trained)
        monkeypatch.setattr(torch.utils.data, "DataLoader", run.loader())
        try:
            exec(code, scope)
        except Preempted:
            pass
        else:
            assert budget is None, "the loop ended before its preemption"
        saved = scope["state"]
        assert (scope["ds"].rank, scope["ds"].world_size) == (rank, world)
        # The process ends: its persistent workers with it (now, not at exit).
        scope.clear()
        gc.collect()
    return trained


def test_readme_loop_through_three_interruptions_equals_one_run(cache, monkeypatch):
    world = 2
    per_epoch: dict[int, list[int]] = {0: [], 1: []}
    for rank in range(world):
        whole = train(cache, rank, world, [None], monkeypatch)
        assert len(whole) == 10  # 10 batches a rank: 2 epochs of 5
        # Preempted after 3 steps, then 4 (across the epoch's end), then 2.
        got = train(cache, rank, world, [3, 4, 2, None], monkeypatch)
        assert [(g[0], g[1]) for g in got] == [(w[0], w[1]) for w in whole]
        for g, w in zip(got, whole):
            for a, b in zip(g[2:6], w[2:6]):
                assert torch.equal(a, b)
            assert g[6] == w[6]
        for epoch, _, _, mask, rows, _, ids in whole:
            per_epoch[epoch] += ids
            assert (rows[~mask] == 0).all()
    every = sorted(cache.source_ids.astype(np.int64).tolist())
    for epoch in (0, 1):
        assert sorted(per_epoch[epoch]) == every, f"epoch {epoch}"
