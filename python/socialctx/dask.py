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
    threads_per_partition: int = 1,
    strict: bool = False,
    extended: bool = True,
) -> dict[str, Any]:
    """Builds the cache of ``corpus`` at ``cache_dir`` in ``partitions`` Dask tasks.

    The plan (one walk) is made here; each partition is one task, a Rust call
    with the GIL released, writing a partition cache under ``work_dir``
    (default: ``.<cache name>.parts`` beside ``cache_dir``, removed after a
    successful merge). With ``client`` None, Dask's default scheduler runs the
    tasks. Returns the merge's summary dict plus ``partitions`` and
    ``plan_id``.
    """
    if partitions < 1:
        raise ValueError("partitions must be at least 1")
    cache_dir = Path(cache_dir)
    work = Path(work_dir) if work_dir is not None else cache_dir.parent / f".{cache_dir.name}.parts"
    work.mkdir(parents=True, exist_ok=True)
    plan_file = work / "plan.json"
    planned = _socialctx.plan(corpus, plan_file, strict=strict, extended=extended)
    remote_corpus = os.fspath(corpus_on_workers if corpus_on_workers is not None else corpus)
    parts = [work / f"part-{i:05}-of-{partitions:05}" for i in range(partitions)]
    tasks = [
        dask.delayed(_socialctx.build_partition, pure=False)(
            remote_corpus,
            os.fspath(plan_file),
            i,
            partitions,
            os.fspath(part),
            threads=threads_per_partition,
        )
        for i, part in enumerate(parts)
    ]
    if client is not None:
        client.gather(client.compute(tasks))
    else:
        dask.compute(*tasks)
    summary: dict[str, Any] = _socialctx.merge(cache_dir, parts)
    shutil.rmtree(work, ignore_errors=True)
    summary["partitions"] = partitions
    summary["plan_id"] = planned["id"]
    return summary
