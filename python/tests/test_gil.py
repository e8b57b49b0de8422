"""Rust work runs with the GIL released: another Python thread makes
progress while `build` and `fill` run."""

from __future__ import annotations

import threading

import numpy as np

import socialctx


class Counter(threading.Thread):
    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.n = 0
        self.stop = False

    def run(self) -> None:
        while not self.stop:
            self.n += 1


def progress_during(call) -> int:
    c = Counter()
    c.start()
    while c.n == 0:
        pass
    before = c.n
    call()
    during = c.n - before
    c.stop = True
    c.join()
    return during


def test_build_releases_the_gil(big_corpus, tmp_path):
    during = progress_during(
        lambda: socialctx.build(big_corpus, tmp_path / "c", workers=1, progress=False)
    )
    # Holding the GIL, the counter could not move at all during the call.
    assert during > 10_000, during


def test_fill_releases_the_gil(big_corpus, tmp_path):
    socialctx.build(big_corpus, tmp_path / "c", workers=2, progress=False)
    cache = socialctx.open(tmp_path / "c")
    loader = socialctx.Loader(cache, kinds="both", max_cxt=64)
    positions = np.tile(np.arange(len(cache)), 4)
    batch = loader.new_batch(len(positions))
    during = progress_during(lambda: loader.fill(positions, batch))
    assert batch.size == len(positions)
    assert during > 1_000, during
