"""Partitioned builds from Python, and on Dask when it is installed."""

from __future__ import annotations

import pytest

import socialctx
from conftest import REPO


def files(d):
    return {p.name: p.read_bytes() for p in d.iterdir()}


def test_plan_partitions_merge_equal_a_single_build(tmp_path):
    corpus = REPO / "tests/fixtures/golden/corpus"
    socialctx.build(corpus, tmp_path / "single", progress=False)
    planned = socialctx.plan(corpus, tmp_path / "plan.json")
    # Thread directories found; the cache holds those whose source is usable.
    assert planned.threads >= len(socialctx.open(tmp_path / "single")) > 0
    assert len(planned.id) == 16
    parts = [tmp_path / f"p{i}" for i in range(3)]
    for i, p in enumerate(parts):
        part = socialctx.build_partition(corpus, tmp_path / "plan.json", i, 3, p)
        assert (part.plan_id, part.partitions, part.cache_dir) == (planned.id, 3, str(p))
    summary = socialctx.merge(tmp_path / "merged", parts[::-1])
    assert isinstance(summary, socialctx.BuildSummary)
    assert summary.threads == len(socialctx.open(tmp_path / "single"))
    assert (summary.plan_id, summary.partitions) == (planned.id, 3)
    assert files(tmp_path / "merged") == files(tmp_path / "single")
    with pytest.raises(socialctx.BuildError, match="missing"):
        socialctx.merge(tmp_path / "again", parts[:2])


def test_pin_files_refuses_a_reply_added_since_the_plan_and_the_default_reads_it(tmp_path):
    import shutil

    corpus = tmp_path / "corpus"
    shutil.copytree(REPO / "data-samples/corpus", corpus)
    socialctx.plan(corpus, tmp_path / "loose.json")
    pinned = socialctx.plan(corpus, tmp_path / "pinned.json", pin_files=True)
    assert pinned.id != socialctx.plan(corpus, tmp_path / "again.json").id
    reactions = next(p for p in sorted(corpus.rglob("reactions")) if any(p.iterdir()))
    thread = reactions.parent.relative_to(corpus)
    shutil.copy(sorted(reactions.iterdir())[0], reactions / "1.json")
    with pytest.raises(socialctx.BuildError, match=f"{thread}.*files added or removed"):
        socialctx.build_partition(corpus, tmp_path / "pinned.json", 0, 1, tmp_path / "p")
    assert not (tmp_path / "p").exists()
    # The default plan: the reply is read as it is, as a build reads it.
    socialctx.build_partition(corpus, tmp_path / "loose.json", 0, 1, tmp_path / "q")
    socialctx.merge(tmp_path / "merged", [tmp_path / "q"])
    socialctx.build(corpus, tmp_path / "single", progress=False)
    assert files(tmp_path / "merged") == files(tmp_path / "single")


def test_dask_local_cluster_build_equals_a_single_build(tmp_path):
    pytest.importorskip("dask")
    distributed = pytest.importorskip("dask.distributed")
    import socialctx.dask

    corpus = REPO / "data-samples/corpus"
    socialctx.build(corpus, tmp_path / "single", progress=False)
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        summary = socialctx.dask.build(corpus, tmp_path / "cache", partitions=3, client=client)
    assert summary.partitions == 3 and summary.plan_id is not None
    assert files(tmp_path / "cache") == files(tmp_path / "single")
    assert not (tmp_path / ".cache.parts").exists()
    # The default scheduler, no client.
    socialctx.dask.build(corpus, tmp_path / "cache2", partitions=2)
    assert files(tmp_path / "cache2") == files(tmp_path / "single")


def test_incremental_build_from_python(tmp_path):
    import shutil

    corpus = tmp_path / "corpus"
    shutil.copytree(REPO / "tests/fixtures/golden/corpus", corpus)
    first = socialctx.build(corpus, tmp_path / "c", progress=False, incremental=True)
    assert first.incremental is not None and first.incremental.startswith("full build")
    again = socialctx.build(corpus, tmp_path / "c", progress=False, incremental=True)
    assert again.incremental is not None and again.incremental.startswith("incremental")
    assert again.files_read == 0
    assert again.reused >= len(socialctx.open(tmp_path / "c"))
