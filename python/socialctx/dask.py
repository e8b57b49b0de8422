"""Partitioned builds on Dask: plan here, build partitions as Dask tasks, merge.

Dask is optional (``pip install "dask[distributed]"``); importing this module
needs it. The result is byte-identical to :func:`socialctx.build`::

    from dask.distributed import Client, LocalCluster
    import socialctx.dask

    with Client(LocalCluster(n_workers=2, threads_per_worker=1)) as client:
        socialctx.dask.build("corpus", "cache", partitions=8, client=client)

On a Slurm cluster, make the client from ``dask_jobqueue.SLURMCluster``; the
corpus must be mounted on every worker (at the same path, or pass
``corpus_on_workers``) and the partition directory ``work_dir`` must be
shared.
"""

from __future__ import annotations

import os
import shutil
import warnings
from pathlib import Path
from typing import Any

import dask

from . import _socialctx

__all__ = ["build"]


def build(
    corpus: str | os.PathLike[str],
    cache_dir: str | os.PathLike[str],
    *,
    partitions: int,
    client: Any = None,
    work_dir: str | os.PathLike[str] | None = None,
    corpus_on_workers: str | os.PathLike[str] | None = None,
    workers_per_partition: int = 1,
    strict: bool = False,
    extended: bool = True,
    threads_per_partition: int | None = None,
    pin_files: bool = False,
) -> _socialctx.BuildSummary:
    """Builds the cache of ``corpus`` at ``cache_dir`` in ``partitions`` Dask tasks.

    The plan (one walk) is made here; each partition is one task, a Rust call
    with the GIL released, writing a partition cache under ``work_dir``
    (default: ``.<cache name>.parts`` beside ``cache_dir``, removed after a
    successful merge). With ``client`` None, Dask's default scheduler runs the
    tasks. ``workers_per_partition`` worker threads build each partition
    (``threads_per_partition``, its former name, still works with a
    ``DeprecationWarning``). ``pin_files=True`` makes each partition refuse a
    thread with files added or removed since the plan, or edited during its
    read (:func:`socialctx.plan`'s ``pin_files``). Returns the merge's
    :class:`~socialctx.BuildSummary` (with ``partitions`` and ``plan_id``).
    """
    if partitions < 1:
        raise ValueError("partitions must be at least 1")
    if threads_per_partition is not None:
        warnings.warn(
            "threads_per_partition= is deprecated, use workers_per_partition= "
            "(threads are the conversation threads a cache holds)",
            DeprecationWarning,
            stacklevel=2,
        )
        workers_per_partition = threads_per_partition
    cache_dir = Path(cache_dir)
    work = Path(work_dir) if work_dir is not None else cache_dir.parent / f".{cache_dir.name}.parts"
    work.mkdir(parents=True, exist_ok=True)
    plan_file = work / "plan.json"
    _socialctx.plan(corpus, plan_file, strict=strict, extended=extended, pin_files=pin_files)
    remote_corpus = os.fspath(corpus_on_workers if corpus_on_workers is not None else corpus)
    parts = [work / f"part-{i:05}-of-{partitions:05}" for i in range(partitions)]
    tasks = [
        dask.delayed(_socialctx.build_partition, pure=False)(
            remote_corpus,
            os.fspath(plan_file),
            i,
            partitions,
            os.fspath(part),
            workers=workers_per_partition,
        )
        for i, part in enumerate(parts)
    ]
    if client is not None:
        client.gather(client.compute(tasks))
    else:
        dask.compute(*tasks)
    summary = _socialctx.merge(cache_dir, parts)
    shutil.rmtree(work, ignore_errors=True)
    return summary
