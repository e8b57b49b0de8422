"""Leave-one-event-out folds, as every PHEME paper (RPDNN included)
evaluates: for each event, train on the threads of every other event and
test on its own.

    import socialctx

    cache = socialctx.open("target/socialctx-cache")
    for fold in socialctx.folds(cache):
        fold.event, fold.train, fold.test      # positions (np.int64), sorted
        fold.leakage                           # what crosses the split
        fold.write_csv("splits/" + fold.event) # RPDNN's split CSVs

Folds are deterministic (events in name order, positions in cache order).
Only threads with a known label (0 or 1) are placed in folds; the others
are listed in ``Fold.unlabelled``. The leakage audit names, per fold, the
source authors who posted both a test thread and a training thread, and the
test threads whose source text also occurs (exactly) in training: both let
a model score by memorising rather than by generalising across events.
"""

from __future__ import annotations

import csv
import datetime as dt
import os
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
import numpy.typing as npt

from ._socialctx import Cache

__all__ = ["Fold", "folds"]


@dataclass(frozen=True)
class Fold:
    """One held-out event: ``train`` and ``test`` positions (sorted)."""

    event: str
    train: npt.NDArray[np.int64]
    test: npt.NDArray[np.int64]
    #: ``{"shared_source_authors": [...], "shared_source_texts": [...]}``:
    #: user ids posting source tweets on both sides; source ids of test
    #: threads whose text occurs in training too.
    leakage: dict[str, list[str]] = field(default_factory=dict)
    unlabelled: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    cache: Cache | None = field(default=None, repr=False, compare=False)

    def write_csv(self, directory: str | os.PathLike[str]) -> tuple[Path, Path]:
        """Writes ``all_rnr_train_set_combined.csv`` and
        ``all_rnr_test_set_combined.csv`` (RPDNN's columns: tweet_id,
        created_at, text, label, user_id, user_name; user_name is empty, the
        cache does not keep it) into ``directory``; returns their paths."""
        if self.cache is None:
            raise ValueError("this Fold has no cache to read the threads from")
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        paths = []
        for name, positions in (("train", self.train), ("test", self.test)):
            path = out / f"all_rnr_{name}_set_combined.csv"
            tmp = path.with_name(path.name + ".tmp")
            with open(tmp, "w", newline="", encoding="utf-8") as f:
                w = csv.writer(f)
                w.writerow(["tweet_id", "created_at", "text", "label", "user_id", "user_name"])
                for p in positions.tolist():
                    t = self.cache[p]
                    when = dt.datetime.fromtimestamp(t.source_created_at, dt.timezone.utc)
                    w.writerow(
                        [
                            t.source_id,
                            when.strftime("%Y-%m-%d %H:%M:%S+00:00"),
                            t.source_text,
                            t.label_code,
                            t.source_user_id,
                            "",
                        ]
                    )
            os.replace(tmp, path)
            paths.append(path)
        return paths[0], paths[1]


def folds(cache: Cache, by: Literal["event"] = "event") -> list[Fold]:
    """One fold per event of ``cache`` (see the module's documentation)."""
    if by != "event":
        raise ValueError(f'folds can be made by "event" only, not {by!r}')
    events: dict[str, list[int]] = defaultdict(list)
    unlabelled = []
    authors: list[str] = []
    texts: list[str] = []
    ids: list[str] = []
    for p, t in enumerate(cache):
        authors.append(t.source_user_id)
        texts.append(t.source_text)
        ids.append(str(t.source_id))
        if t.label_code in (0, 1):
            events[t.event].append(p)
        else:
            unlabelled.append(p)
    out = []
    for event in sorted(events):
        test = np.array(events[event], dtype=np.int64)
        train = np.array(
            sorted(p for e, ps in events.items() if e != event for p in ps), dtype=np.int64
        )
        train_authors = {authors[p] for p in train.tolist()}
        train_texts = {texts[p] for p in train.tolist()}
        leakage = {
            "shared_source_authors": sorted({authors[p] for p in test.tolist()} & train_authors),
            "shared_source_texts": [ids[p] for p in test.tolist() if texts[p] in train_texts],
        }
        out.append(
            Fold(
                event,
                train,
                test,
                leakage,
                np.array(unlabelled, dtype=np.int64),
                cache,
            )
        )
    return out
