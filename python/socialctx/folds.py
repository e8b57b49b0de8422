"""Leave-one-event-out folds, as every PHEME paper (RPDNN included)
evaluates: for each event, train on the threads of every other event and
test on its own; and selections of threads held by source id.

    import socialctx

    cache = socialctx.open("target/socialctx-cache")
    for fold in socialctx.folds(cache, dev=0.1, seed=0):
        fold.event, fold.train, fold.test      # positions (np.int64), sorted
        fold.train_labels, fold.test_veracity  # aligned with them (np.int8)
        fold.dev                               # stratified, seeded, from train
        fold.leakage                           # what crosses the split
        fold.write_csv("splits/" + fold.event) # RPDNN's split CSVs
        fold.selection("train")                # positions tied to their generation

Folds are deterministic (events in name order, positions in cache order).
Only threads with a known label (0 or 1) are placed in folds; the others
are listed in ``Fold.unlabelled``. The leakage audit names, per fold, the
source authors who posted both a test thread and a training thread, and the
test threads whose source text also occurs (exactly) in training: both let
a model score by memorising rather than by generalising across events.

Positions mean threads of one cache generation; source ids mean the same
threads on every generation. A fold (``fold.on(new_cache)``) or any list
of source ids (:func:`select`) is resolved to the positions of the
generation at hand: threads deleted since are reported (``missing``), new
threads are never added (a test fold stays the threads it was).
"""

from __future__ import annotations

import csv
import dataclasses
import datetime as dt
import io
import os
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Literal, TypeVar, cast

import numpy as np
import numpy.typing as npt

from ._output import write_output
from ._socialctx import Cache
from ._socialctx import read_split as _read_split

__all__ = ["Fold", "Selection", "Split", "folds", "read_split", "select"]

#: Veracity codes (``Thread.value("veracity")``): a rumour's annotated truth.
VERACITY = {0: "false", 1: "true", 2: "unverified"}


def _empty() -> npt.NDArray[np.int64]:
    return np.zeros(0, dtype=np.int64)


def _veracity(cache: Cache, positions: npt.NDArray[np.int64]) -> npt.NDArray[np.int8]:
    """Veracity codes per position: 0 false, 1 true, 2 unverified, -1 for
    a non-rumour (whatever its annotation says) or no annotation, as
    ``Cache.veracity`` gives them."""
    return np.asarray(cache.veracity, dtype=np.int8)[positions]


class Positions(np.ndarray):
    """Thread positions (or their labels) that remember the cache
    generation they mean: ``content_id``. A :class:`Fold`'s parts and
    labels, a :class:`Selection`'s and a :class:`Split`'s are these, so a
    dataset given them with the cache of another generation (after a
    nightly rebuild the same positions name other threads) refuses them
    instead of training on other threads' labels. Slices, arithmetic and
    joins (``np.concatenate``, ``np.union1d``, ...) keep the tag (parts of
    two generations never join); ``np.asarray`` drops it."""

    content_id: str | None

    def __new__(cls, array: Any, content_id: str | None) -> Positions:
        out = np.asarray(array).view(cls)
        out.content_id = content_id
        return out

    def __array_finalize__(self, obj: Any) -> None:
        self.content_id = getattr(obj, "content_id", None)

    def __reduce__(self) -> Any:
        # Pickled (a DataLoader worker, a checkpoint): the tag travels too.
        return (Positions, (np.asarray(self), self.content_id))

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        # Joined parts (np.concatenate([fold.train, fold.dev]), ...) keep
        # their generation: NumPy returns a bare array there, which a
        # dataset takes with the cache of any generation. Parts of two
        # generations never join.
        result = super().__array_function__(func, types, args, kwargs)
        if func not in _JOINS:
            return result
        tags = {t for t in _tags((args, kwargs)) if t is not None}
        if len(tags) > 1:
            raise ValueError(
                f"np.{func.__name__} of positions of two cache generations "
                f"({', '.join(sorted(tags))}): they name threads of different caches; "
                "move them to one first (fold.on(cache), selection.on(cache))"
            )
        if tags and isinstance(result, np.ndarray) and result.dtype.kind in "iu":
            return Positions(np.asarray(result), tags.pop())
        return result


#: NumPy functions that join or combine positions: their result keeps the tag.
_JOINS = {
    np.concatenate,
    np.hstack,
    np.append,
    np.union1d,
    np.intersect1d,
    np.setdiff1d,
    np.setxor1d,
    np.unique,
    np.sort,
}


def _tags(obj: Any, depth: int = 0) -> list[str | None]:
    """The generation tags of the Positions in ``obj`` (arguments: nested
    lists, tuples and dicts a few levels deep)."""
    if isinstance(obj, Positions):
        return [obj.content_id]
    if depth < 4 and isinstance(obj, (list, tuple)):
        return [t for o in obj for t in _tags(o, depth + 1)]
    if depth < 4 and isinstance(obj, dict):
        return [t for o in obj.values() for t in _tags(o, depth + 1)]
    return []


_T = TypeVar("_T", bound=np.generic)


def _tagged(array: npt.NDArray[_T], cache: Cache | None) -> npt.NDArray[_T]:
    if cache is None:
        return array
    return cast("npt.NDArray[_T]", _retag(array, cache.content_id, "positions"))


def _retag(array: Any, content_id: str, what: str) -> Positions:
    """``array`` tagged with ``content_id``; refused when it is already
    tagged with another generation (``dataclasses.replace(fold,
    cache=new)`` would otherwise relabel old positions as the new
    generation's, and they would name other threads)."""
    tag = getattr(array, "content_id", None)
    if tag is not None and tag != content_id:
        raise ValueError(
            f"these {what} are of cache generation {tag}, not {content_id}: they would name "
            "other threads; fold.on(cache) or selection.on(cache) gives the same threads on "
            "another generation"
        )
    return Positions(array, content_id)


@dataclass(frozen=True, repr=False)
class Selection:
    """Threads of one cache generation, held by source id: ``positions``
    (np.int64) on the generation ``content_id``, their ``source_ids``,
    rumour ``labels`` and ``veracity`` (np.int8, aligned), and ``missing``:
    source ids asked for that this generation does not hold. Datasets
    take one in place of positions (also with a cache's path: the
    selection names its generation)."""

    positions: npt.NDArray[np.int64]
    source_ids: npt.NDArray[np.int64]
    labels: npt.NDArray[np.int8]
    veracity: npt.NDArray[np.int8]
    content_id: str
    missing: npt.NDArray[np.int64] = field(default_factory=_empty)
    #: Whether ``labels`` were given (a split's) rather than the cache's.
    own_labels: bool = False

    def __post_init__(self) -> None:
        # Positions and what is aligned with them name threads of one
        # generation: tagged with it, as a Fold's parts are, so that a
        # dataset given them with the cache of another refuses them.
        for part in ("positions", "labels", "veracity"):
            object.__setattr__(self, part, _retag(getattr(self, part), self.content_id, part))

    def __len__(self) -> int:
        return len(self.positions)

    def on(self, cache: Cache) -> Selection:
        """The same threads (by source id) on ``cache``'s generation."""
        ids = np.concatenate([self.source_ids, self.missing])
        if not self.own_labels:
            return select(cache, ids)
        # The missing ones' labels are gone with them: only the found carry over.
        found = select(cache, self.source_ids, self.labels)
        return dataclasses.replace(found, missing=np.concatenate([found.missing, self.missing]))

    def __repr__(self) -> str:
        return (
            f"socialctx.Selection(threads={len(self.positions)}, missing={len(self.missing)}, "
            f"content_id={self.content_id[:12]!r})"
        )


def _label_codes(labels: Any) -> npt.NDArray[np.int8]:
    """Labels as int8 codes, refused where the cast would change them
    (floats truncated, integers past int8 wrapped)."""
    a = np.asarray(labels).reshape(-1)
    if a.size == 0:
        return np.zeros(0, dtype=np.int8)
    if a.dtype.kind not in "iub":
        raise TypeError(f"labels must be integers, not {a.dtype}")
    if a.dtype.kind != "b":
        bad = np.flatnonzero((a < -128) | (a > 127))
        if len(bad):
            raise ValueError(
                f"label {a[bad[0]]} (at index {bad[0]}) does not fit int8 (-128 to 127), "
                "the labels' type"
            )
    return a.astype(np.int8)


def select(
    cache: Cache,
    source_ids: npt.NDArray[np.integer[Any]] | Sequence[int],
    labels: npt.NDArray[np.integer[Any]] | Sequence[int] | None = None,
) -> Selection:
    """The threads of ``source_ids`` (in that order) on ``cache``'s
    generation; ids it does not hold go to ``missing`` (and their
    ``labels``, when given, are left out with them). ``labels`` replace
    the cache's label codes (e.g. a split file's)."""
    if not isinstance(cache, Cache):
        raise TypeError(
            f"select takes an open cache (socialctx.open(path)), not {type(cache).__name__}"
        )
    given = np.asarray(source_ids)
    if given.size and given.dtype.kind in "fcbmM":
        # A tweet id does not survive float64: truncated, it is another id.
        raise TypeError(f"source ids must be integers (or strings of digits), not {given.dtype}")
    ids = given.astype(np.int64).reshape(-1)
    if labels is not None:
        labels = _label_codes(labels)
        if len(labels) != len(ids):
            raise ValueError(f"{len(labels)} labels for {len(ids)} source ids")
    found = [cache.position(int(i)) for i in ids.tolist()]
    here = np.array([p is not None for p in found], dtype=bool)
    positions = np.array([p for p in found if p is not None], dtype=np.int64)
    if labels is None:
        lab = cache.labels[positions] if len(positions) else np.zeros(0, dtype=np.int8)
    else:
        lab = np.asarray(labels)[here]
    return Selection(
        positions=positions,
        source_ids=ids[here],
        labels=np.asarray(lab).astype(np.int8),
        veracity=_veracity(cache, positions),
        content_id=cache.content_id,
        missing=ids[~here],
        own_labels=labels is not None,
    )


class Split:
    """A split CSV matched against a cache (:func:`read_split`):
    ``positions`` (np.int64, file order) of the threads found, their
    ``ids`` (np.uint64) and ``labels`` (np.int8, the CSV's), ``missing``
    (ids of the CSV the cache does not hold, reported, never dropped
    silently), and ``content_id``: the generation the positions mean.
    ``positions`` and ``labels`` are tagged with it, as a Fold's parts
    are, so that a dataset given them with the cache of another
    generation (rebuilt since) refuses them; read the split again on the
    rebuilt cache (or hold its ids: :func:`select`)."""

    __slots__ = ("positions", "ids", "labels", "missing", "content_id")

    def __init__(
        self,
        positions: npt.NDArray[np.int64],
        ids: npt.NDArray[np.uint64],
        labels: npt.NDArray[np.int8],
        missing: npt.NDArray[np.uint64],
        content_id: str,
    ) -> None:
        self.positions = cast("npt.NDArray[np.int64]", Positions(positions, content_id))
        self.ids = np.asarray(ids)
        self.labels = cast("npt.NDArray[np.int8]", Positions(labels, content_id))
        self.missing = np.asarray(missing)
        self.content_id = content_id

    def __len__(self) -> int:
        return len(self.positions)

    def __reduce__(self) -> Any:
        return (
            Split,
            (
                np.asarray(self.positions),
                self.ids,
                np.asarray(self.labels),
                self.missing,
                self.content_id,
            ),
        )

    def __repr__(self) -> str:
        return (
            f"socialctx.Split(threads={len(self.positions)}, missing={len(self.missing)}, "
            f"content_id={self.content_id[:12]!r})"
        )


def read_split(csv_path: str | os.PathLike[str], cache: Cache) -> Split:
    """Reads an RPDNN split CSV (``tweet_id``, ``label`` columns) and finds
    its threads in ``cache``: a :class:`Split` of ``cache``'s generation."""
    raw = _read_split(csv_path, cache)
    return Split(raw.positions, raw.ids, raw.labels, raw.missing, cache.content_id)


@dataclass(frozen=True, repr=False)
class Fold:
    """One held-out event: ``train`` and ``test`` positions (sorted), with
    their labels (``train_labels``, ``test_labels``: 1 rumour, 0 not) and
    veracity (``train_veracity``, ...: 0 false, 1 true, 2 unverified, -1
    not a rumour), an optional ``dev`` split carved out of train
    (stratified by label, seeded; empty without one), and the source ids
    of each part (:meth:`selection`, :meth:`on`)."""

    event: str
    train: npt.NDArray[np.int64]
    test: npt.NDArray[np.int64]
    #: ``{"shared_source_authors": [...], "shared_source_texts": [...]}``:
    #: user ids posting source tweets on both sides; source ids of test
    #: threads whose text occurs in training too.
    leakage: dict[str, list[str]] = field(default_factory=dict)
    unlabelled: npt.NDArray[np.int64] = field(default_factory=_empty)
    cache: Cache | None = field(default=None, compare=False)
    dev: npt.NDArray[np.int64] = field(default_factory=_empty)
    #: Source ids asked for (by :meth:`on`) that the cache no longer holds.
    missing: npt.NDArray[np.int64] = field(default_factory=_empty)

    def __post_init__(self) -> None:
        # The parts name threads of ``cache``'s generation: tagged with it.
        for part in ("train", "test", "unlabelled", "dev"):
            object.__setattr__(self, part, _tagged(getattr(self, part), self.cache))

    def _cache(self) -> Cache:
        if self.cache is None:
            raise ValueError("this Fold has no cache to read the threads from")
        return self.cache

    def selection(self, part: str = "train") -> Selection:
        """``part`` ("train", "dev" or "test") as a :class:`Selection`:
        positions with their generation, source ids, labels, veracity."""
        positions = {"train": self.train, "dev": self.dev, "test": self.test}.get(part)
        if positions is None:
            raise ValueError(f'a fold\'s parts are "train", "dev" and "test", not {part!r}')
        cache = self._cache()
        ids = cache.source_ids[positions].astype(np.int64) if len(positions) else _empty()
        return select(cache, ids)

    @property
    def train_labels(self) -> npt.NDArray[np.int8]:
        return _tagged(self._cache().labels[np.asarray(self.train)], self.cache)

    @property
    def dev_labels(self) -> npt.NDArray[np.int8]:
        return _tagged(self._cache().labels[np.asarray(self.dev)], self.cache)

    @property
    def test_labels(self) -> npt.NDArray[np.int8]:
        return _tagged(self._cache().labels[np.asarray(self.test)], self.cache)

    @property
    def train_veracity(self) -> npt.NDArray[np.int8]:
        return _tagged(_veracity(self._cache(), np.asarray(self.train)), self.cache)

    @property
    def dev_veracity(self) -> npt.NDArray[np.int8]:
        return _tagged(_veracity(self._cache(), np.asarray(self.dev)), self.cache)

    @property
    def test_veracity(self) -> npt.NDArray[np.int8]:
        return _tagged(_veracity(self._cache(), np.asarray(self.test)), self.cache)

    def with_dev(self, fraction: float = 0.1, seed: int = 0) -> Fold:
        """This fold with ``dev``: ``fraction`` of train's threads of each
        label (at least one of each label train has, at most all but one),
        drawn with ``seed``; train keeps the rest. Deterministic."""
        if not 0.0 < fraction < 1.0:
            raise ValueError(f"dev fraction must be between 0 and 1, not {fraction!r}")
        pool = np.sort(np.concatenate([self.train, self.dev]))
        labels = self._cache().labels[pool]
        rng = np.random.default_rng(seed)
        dev: list[int] = []
        for label in np.unique(labels).tolist():
            members = pool[labels == label]
            k = min(max(1, round(fraction * len(members))), len(members) - 1)
            if k > 0:
                dev.extend(rng.choice(members, size=k, replace=False).tolist())
        dev_a = np.sort(np.array(dev, dtype=np.int64))
        return dataclasses.replace(self, train=np.setdiff1d(pool, dev_a), dev=dev_a)

    def on(self, cache: Cache) -> Fold:
        """The same fold on another generation of the cache (after a
        nightly rebuild): each part's threads by source id; threads
        deleted since go to ``missing``; threads new since are added to no
        part (a test fold stays the threads it was). The leakage audit is
        redone on the threads that remain."""
        parts = {p: self.selection(p) for p in ("train", "dev", "test")}
        unl = self._cache().source_ids[self.unlabelled].astype(np.int64)
        moved = {p: s.on(cache) for p, s in parts.items()}
        unlabelled = select(cache, unl)
        missing = np.concatenate([s.missing for s in moved.values()] + [unlabelled.missing])
        train = np.sort(moved["train"].positions)
        test = np.sort(moved["test"].positions)
        return Fold(
            self.event,
            train,
            test,
            _leakage(_sources(cache), train, test),
            np.sort(unlabelled.positions),
            cache,
            np.sort(moved["dev"].positions),
            missing,
        )

    def __repr__(self) -> str:
        leak = self.leakage
        dev = f", dev={len(self.dev)}" if len(self.dev) else ""
        gone = f", missing={len(self.missing)}" if len(self.missing) else ""
        return (
            f"socialctx.Fold(event={self.event!r}, train={len(self.train)}{dev}, "
            f"test={len(self.test)}, unlabelled={len(self.unlabelled)}{gone}, leakage: "
            f"{len(leak.get('shared_source_authors', []))} shared source authors, "
            f"{len(leak.get('shared_source_texts', []))} shared source texts)"
        )

    def write_csv(self, directory: str | os.PathLike[str]) -> tuple[Path, Path]:
        """Writes ``all_rnr_train_set_combined.csv`` and
        ``all_rnr_test_set_combined.csv`` (RPDNN's columns: tweet_id,
        created_at, text, label, user_id, user_name; user_name is empty, the
        cache does not keep it) into ``directory``; returns their paths."""
        if self.cache is None:
            raise ValueError("this Fold has no cache to read the threads from")
        cache = self.cache
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        paths = []
        for name, positions in (("train", self.train), ("test", self.test)):
            path = out / f"all_rnr_{name}_set_combined.csv"
            rows = positions.tolist()

            def write(raw: BinaryIO, rows: list[int] = rows) -> None:
                # Detached, not closed, at the end: write_output closes it.
                f = io.TextIOWrapper(raw, newline="", encoding="utf-8")
                w = csv.writer(f)
                w.writerow(["tweet_id", "created_at", "text", "label", "user_id", "user_name"])
                for p in rows:
                    t = cache[p]
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
                f.flush()
                f.detach()

            write_output(path, write)
            paths.append(path)
        return paths[0], paths[1]


def _sources(cache: Cache) -> tuple[list[str], list[str], list[str]]:
    """Every thread's source author, text and id (one pass over the cache)."""
    authors, texts, ids = [], [], []
    for t in cache:
        authors.append(t.source_user_id)
        texts.append(t.source_text)
        ids.append(str(t.source_id))
    return authors, texts, ids


def _leakage(
    sources: tuple[list[str], list[str], list[str]],
    train: npt.NDArray[np.int64],
    test: npt.NDArray[np.int64],
) -> dict[str, list[str]]:
    authors, texts, ids = sources
    train_authors = {authors[p] for p in train.tolist()}
    train_texts = {texts[p] for p in train.tolist()}
    return {
        "shared_source_authors": sorted({authors[p] for p in test.tolist()} & train_authors),
        "shared_source_texts": [ids[p] for p in test.tolist() if texts[p] in train_texts],
    }


def folds(
    cache: Cache, by: Literal["event"] = "event", *, dev: float | None = None, seed: int = 0
) -> list[Fold]:
    """One fold per event of ``cache`` (see the module's documentation);
    with ``dev``, each fold's :meth:`Fold.with_dev` of that fraction and
    ``seed``."""
    if by != "event":
        raise ValueError(f'folds can be made by "event" only, not {by!r}')
    events: dict[str, list[int]] = defaultdict(list)
    unlabelled = []
    for p, t in enumerate(cache):
        if t.label_code in (0, 1):
            events[t.event].append(p)
        else:
            unlabelled.append(p)
    sources = _sources(cache)
    out = []
    for event in sorted(events):
        test = np.array(events[event], dtype=np.int64)
        train = np.array(
            sorted(p for e, ps in events.items() if e != event for p in ps), dtype=np.int64
        )
        fold = Fold(
            event,
            train,
            test,
            _leakage(sources, train, test),
            np.array(unlabelled, dtype=np.int64),
            cache,
        )
        out.append(fold if dev is None else fold.with_dev(dev, seed))
    return out
