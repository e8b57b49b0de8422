"""PyTorch adapter: batches of a socialctx cache as an ``IterableDataset``,
embedding rows gathered on the device.

Importing this module needs torch; the rest of socialctx does not::

    import torch
    from torch.utils.data import DataLoader
    from socialctx.torch import CacheDataset, EmbeddingTable

    ds = CacheDataset(cache, split.positions, 32, labels=split.labels,
                      seed=0, bucket=True, pad="longest", embeddings=["elmo-reply"])
    table = EmbeddingTable(cache, "elmo-reply", device="cuda")   # rows moved once
    dl = DataLoader(ds, batch_size=None, num_workers=2, pin_memory=True)
    for epoch in range(ds.epoch, 10):
        ds.set_epoch(epoch)
        for step in dl:
            x = step["features"].cuda(non_blocking=True)           # [B, T, 28]
            e = table(step)                                        # [B, T, dim] on the GPU
            state = ds.state_dict(after=step)                      # checkpoint this

Batching happens here, not in the DataLoader (hence ``batch_size=None``).

- **One generation.** A dataset is bound to the cache content it was made
  on (:attr:`socialctx.Cache.content_id`): its positions and labels mean
  those threads. Given a path, positions are refused unless they name
  their generation (``content_id=``, or a :class:`socialctx.Selection`).
  Every process reads that generation (a fork inherits the
  open cache) or raises :class:`socialctx.CacheError` naming the path
  when the cache was rebuilt since; never another generation's threads.
- **Batches never change once yielded.** Each yielded tensor is a fresh
  tensor (in a worker, in shared memory); the opt-in exception is
  ``pin_memory=True`` in-process (see :class:`CacheDataset`).
- **Sharding.** The epoch's batch plan (:meth:`socialctx.Loader.plan`) is
  the same in every process; DDP rank ``r`` of ``w`` takes batches
  ``r, r + w, ...`` and its DataLoader workers take every k-th of those.
- **Epochs** as ``DistributedSampler``'s: the epoch an iteration uses is
  fixed when it starts (``iter(dataloader)``), the same in every worker.
- **Resumption.** Each item carries its place: ``item["epoch"]`` and
  ``item["plan_index"]`` (its batch in this rank's plan).
  ``state_dict(after=item)`` is the state after training on ``item``
  (with DataLoader workers, which run ahead of the loop); in-process,
  ``state_dict()`` counts by itself, and torchdata's
  ``StatefulDataLoader`` calls it in each worker. ``load_state_dict``
  makes the next iteration (only) start at the first batch not trained
  on, and refuses, naming the field, a state of another plan; a state of
  another generation resumes by source id with
  ``resume_across_rebuild=True`` (the epoch's threads not yet trained).
- **One epoch rule.** A loaded state and ``set_epoch`` must name the same
  epoch, whichever comes first; disagreeing, the second raises with the
  fix. A StatefulDataLoader's state is loaded into the dataset too
  (``ds.load_state_dict(loader_state)``) so that ``ds.epoch`` is its epoch.
- **Equal batches per rank**, never an empty one: batches of one padded by
  repetition (``DistributedSampler``'s rule), or dropped with ``drop_last``.
- **torch conventions.** ``labels`` are int64, ``mask`` is bool (True for
  a real row; ``key_padding_mask`` wants its negation: ``~mask``).
"""

from .dataset import CacheDataset
from .graph import GraphDataset
from .table import EmbeddingTable

__all__ = ["CacheDataset", "EmbeddingTable", "GraphDataset"]

# Pickles name the classes where users import them (socialctx.torch.X),
# whichever module of the package defines them.
for _cls in (CacheDataset, EmbeddingTable, GraphDataset):
    _cls.__module__ = __name__
del _cls
