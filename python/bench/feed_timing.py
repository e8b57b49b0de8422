"""The three timings both feed benchmarks report, taken one way: the model
alone on one batch already on the device, the data path alone, and both,
with the time the host is blocked on the next batch."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass
class FeedTimes:
    model_s: float  # per step
    data_s: float  # per batch
    both_s: float  # per step
    wait_s: float  # in all, over the steps of `both`

    def figures(self, steps: int) -> dict[str, float]:
        return {
            "model_steps_per_s": 1 / self.model_s,
            "data_steps_per_s": 1 / self.data_s,
            "both_steps_per_s": 1 / self.both_s,
            "wait_share": self.wait_s / (self.both_s * steps),
            "busy_share": self.model_s / self.both_s,
        }


def time_feed(
    step: Callable[[Any], None],
    first: Any,
    next_item: Callable[[], Any],
    steps: int,
    sync: Callable[[], None],
    data_only: Callable[[Any], None] = lambda item: None,
) -> FeedTimes:
    """``step(item)`` trains on one batch; ``next_item()`` is the next batch
    on the device; ``data_only(item)`` is what the data path alone does with
    it besides (e.g. a device-side gather the step would do itself)."""
    step(first)  # warm-up
    sync()
    t0 = time.perf_counter()
    for _ in range(steps):
        step(first)
    sync()
    model_s = (time.perf_counter() - t0) / steps
    t0 = time.perf_counter()
    for _ in range(steps):
        data_only(next_item())
    sync()
    data_s = (time.perf_counter() - t0) / steps
    # The wait is the time the host is blocked on the next batch (copies
    # enqueued included). No device sync inside it: a sync there would count
    # the previous step's GPU work, still running, as waiting for data.
    wait = 0.0
    t0 = time.perf_counter()
    for _ in range(steps):
        w0 = time.perf_counter()
        item = next_item()
        wait += time.perf_counter() - w0
        step(item)
    sync()
    both_s = (time.perf_counter() - t0) / steps
    return FeedTimes(model_s, data_s, both_s, wait)
