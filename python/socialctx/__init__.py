"""socialctx: RPDNN social-context features, built once, memory-mapped forever.

Build a cache from a PHEME-style corpus once, then open it in microseconds and
read the 28 features of every reaction as zero-copy NumPy views, or fill
padded, masked, normalised training batches in place::

    import socialctx

    socialctx.build(socialctx.sample_corpus(), "sample-cache")  # the corpus that ships
    cache = socialctx.open("sample-cache")
    thread = cache[0]
    thread.features          # np.float32 [n, 28], a read-only view of the map

    loader = socialctx.Loader(cache, stats=socialctx.FeatureStats.compute(cache))
    for batch in loader.epoch(range(len(cache)), 128, seed=0):
        batch.features, batch.mask, batch.lengths, batch.labels  # NumPy, reused

Texts for embedding: ``thread.reply_tokens`` (RPDNN's tokens of each reply),
``cache.unique_texts(...)`` (distinct inputs and counts) and
:func:`socialctx.embed`, which runs a model once per distinct input into a
store that ``Loader(cache, embeddings=[name])`` reads (:mod:`socialctx.embed`).

Everything heavy runs in Rust with the GIL released. For PyTorch, see
:mod:`socialctx.torch` (imported on demand; torch is not a dependency).
"""

from ._socialctx import (
    DEFINITION,
    FEATURE_NAMES,
    FORMAT_VERSION,
    NUM_FEATURES,
    ArrowData,
    BadInput,
    BadInputError,
    Batch,
    BuildError,
    BuildSummary,
    Cache,
    CacheError,
    Epoch,
    Error,
    FeatureStats,
    GraphBatch,
    Loader,
    PlanSummary,
    Thread,
    UniqueTexts,
    Vocabulary,
    build,
    build_partition,
    merge,
    open,
    plan,
    shuffled,
)
from .describe import Description, describe
from .embed import EmbeddingError, EmbedSummary, embed
from .folds import Fold, Selection, Split, folds, read_split, select
from .sample import sample_corpus
from .store import Embeddings, open_store, verify_store

__version__ = "0.1.0"

__all__ = [
    "DEFINITION",
    "FEATURE_NAMES",
    "FORMAT_VERSION",
    "NUM_FEATURES",
    "ArrowData",
    "BadInput",
    "BadInputError",
    "Batch",
    "BuildError",
    "BuildSummary",
    "Cache",
    "CacheError",
    "Epoch",
    "Error",
    "FeatureStats",
    "GraphBatch",
    "Loader",
    "PlanSummary",
    "Split",
    "Thread",
    "UniqueTexts",
    "Vocabulary",
    "Fold",
    "Selection",
    "folds",
    "select",
    "Description",
    "describe",
    "sample_corpus",
    "EmbeddingError",
    "Embeddings",
    "EmbedSummary",
    "embed",
    "open_store",
    "verify_store",
    "build",
    "build_partition",
    "merge",
    "open",
    "plan",
    "read_split",
    "shuffled",
]
