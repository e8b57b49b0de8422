"""The PyTorch adapter (runs only where torch is installed: it is optional)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import socialctx  # noqa: E402
from socialctx.torch import CacheDataset  # noqa: E402


@pytest.mark.parametrize("workers", [0, 2])
def test_dataset_covers_the_epoch_once_across_workers(built, workers):
    from torch.utils.data import DataLoader

    cache = socialctx.open(built["sample"])
    positions = np.arange(len(cache))
    ds = CacheDataset(built["sample"], positions, 5, seed=1, labels=positions % 2)
    ids, labels = [], []
    for step in DataLoader(ds, batch_size=None, num_workers=workers):
        assert step["features"].dtype == torch.float32 and step["features"].shape[1:] == (200, 28)
        ids += step["source_ids"].tolist()
        labels += step["labels"].tolist()
    assert sorted(ids) == sorted(cache.source_ids.astype(np.int64).tolist())
    by_id = dict(zip(cache.source_ids.tolist(), (positions % 2).tolist()))
    assert labels == [by_id[i] for i in ids]


def test_tensors_share_the_batch_memory(built):
    ds = CacheDataset(built["golden"], range(4), 4)
    step = next(iter(ds))
    assert step["features"].numpy().base is not None
