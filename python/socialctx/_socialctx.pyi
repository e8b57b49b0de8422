"""Type stubs of the extension module (re-exported by ``socialctx``)."""

from collections.abc import Iterator, Mapping, Sequence
from os import PathLike
from pathlib import Path
from typing import Any, Literal, overload

import numpy as np
import numpy.typing as npt

_Path = str | PathLike[str]
_Positions = npt.NDArray[np.int64] | Sequence[int] | range
_Labels = npt.NDArray[np.int8] | Sequence[int]

FEATURE_NAMES: list[str]
NUM_FEATURES: int
FORMAT_VERSION: int
#: This library's definition digest (16 hex digits): a digest, made when the
#: extension was compiled, of the sources that compute the values a cache
#: stores. A cache records the one that built it (``manifest["definition"]``);
#: an incremental build over a cache of another definition builds in full.
DEFINITION: str

class Error(Exception):
    """Base class of every socialctx error."""

class EmbeddingError(Error):
    """An embedding store is missing, damaged, or was computed for another content of the cache."""

class CacheError(Error):
    """A cache is missing, damaged or of another format version; the message names the file and the reason."""

class BuildError(Error):
    """A build failed (an unusable corpus or cache directory, a lock held by another build, an I/O error)."""

class BadInputError(BuildError):
    """A strict build met bad input."""

    path: str
    """The bad file or thread, relative to the corpus root."""
    reason: str
    """Why it was rejected."""

class BuildSummary:
    """What a build, an incremental build, a partition build or a merge made.

    ``summary["threads"]`` (results were dicts before) still works for now,
    with a ``DeprecationWarning``: read the attributes."""

    cache_dir: str
    """The cache directory written."""
    threads: int
    """Conversation threads in the cache."""
    reactions: int
    """Reactions (replies and retweets) in the cache."""
    replies: int
    retweets: int
    skipped: int
    """Inputs skipped as bad (the cache's report)."""
    shards: int
    """Shard files written."""
    workers: int
    """Worker threads the build ran."""
    seconds: float
    """Wall-clock seconds."""
    reused: int
    """Threads taken from the old cache (incremental builds)."""
    files_read: int
    """Thread files read."""
    incremental: str | None
    """An incremental build's note: what was reused, or why it built in full."""
    plan_id: str | None
    """The plan's id, for a partition build or a merge."""
    partitions: int | None
    """How many partitions the plan was cut into, for a partition build or a merge."""
    warnings: list[str]
    """What failed after the new cache was published (the build succeeded; the
    next build cleans up): the lines ``socialctx build`` prints as warnings."""
    def __getitem__(self, key: str) -> Any:
        """Deprecated: read the attribute ``key``."""

class PlanSummary:
    """The plan of a partitioned build, as :func:`plan` wrote it."""

    threads: int
    """Conversation threads the plan covers."""
    id: str
    """The plan's id (16 hex digits): every partition of it carries it."""
    def __getitem__(self, key: str) -> Any:
        """Deprecated: read the attribute ``key``."""

class BadInput:
    """One input a build skipped."""

    @property
    def path(self) -> str:
        """The file or thread directory, relative to the corpus root."""
    @property
    def reason(self) -> str:
        """Why it was skipped."""
    def __getitem__(self, key: Literal["path", "reason"]) -> str:
        """Deprecated (``Cache.report`` gave dicts): read the attribute ``key``."""

def build(
    corpus: _Path,
    cache_dir: _Path,
    *,
    workers: int | None = None,
    strict: bool = False,
    extended: bool = True,
    progress: bool = True,
    incremental: bool = False,
    changed: _Path | None = None,
) -> BuildSummary:
    """Builds the cache for ``corpus`` at ``cache_dir``, replacing any cache there atomically.

    ``workers``: worker threads (default: one per core); the cache is
    byte-identical for any number. (``threads=``, its former name, still
    works with a ``DeprecationWarning``.)

    With ``incremental``, only threads whose files changed since the cache
    there was built are re-read (byte-identical to a full build); the result's
    ``incremental`` says what was reused or why a full build was done.

    ``changed`` (with ``incremental``): a file listing what changed since the
    previous incremental build started, one path a line, relative to
    ``corpus`` or absolute inside it (``"-"``: standard input), as the
    command's ``--changed`` (GUIDE.md). The list is trusted: threads it does
    not name are reused without looking at their files; what it cannot
    settle alone is walked, and ``incremental`` says why. A list that cannot
    be read or names a path outside ``corpus`` raises ``BuildError`` naming
    it, before anything is written.

    The same bytes as ``cargo run --release --example precache`` with the same
    options. The GIL is released; Ctrl-C raises ``KeyboardInterrupt`` within a
    second and leaves any old cache intact and no temporary directory (if
    the build had already published, the message says so). With
    ``progress`` and a terminal on stderr, a progress line is shown.

    Returns a :class:`BuildSummary`. Raises ``BadInputError`` in strict mode
    on the first bad input, ``BuildError`` otherwise.
    """

def plan(
    corpus: _Path,
    plan_file: _Path,
    *,
    workers: int | None = None,
    strict: bool = False,
    extended: bool = True,
    pin_files: bool = False,
) -> PlanSummary:
    """Walks ``corpus`` once and writes the plan of a partitioned build: its thread
    folders (one in a ``rumours`` or ``non-rumours`` folder taken by its name and
    source folder, unlisted; its partition lists it and refuses a wrong guess);
    each partition reads its threads' files as they are.
    ``pin_files=True`` also lists every tweet folder (partitions balanced by file
    count), and each partition refuses a thread of its own with files added or
    removed since the plan or edited during its read."""

def build_partition(
    corpus: _Path,
    plan_file: _Path,
    index: int,
    count: int,
    out: _Path,
    *,
    workers: int = 1,
) -> BuildSummary:
    """Builds partition ``index`` of ``count`` of a plan into the cache directory ``out``
    (reads only that partition's threads; GIL released)."""

def merge(out: _Path, parts: Sequence[_Path]) -> BuildSummary:
    """Merges every partition of one plan into the cache ``out``, byte-identical to a
    single build; raises ``BuildError`` for a missing, repeated, damaged or foreign part."""

def open(cache_dir: _Path, *, validate: Literal["lazy", "all"] = "lazy") -> Cache:
    """Opens a cache. ``"lazy"`` reads only the manifest (microseconds) and checks
    each file on first use; ``"all"`` checks every file now. The cache keeps
    reading the generation it opened even if a rebuild publishes a new one.
    Raises ``CacheError`` naming the file and the reason."""

def read_split(csv_path: _Path, cache: Cache) -> Split:
    """Reads an RPDNN split CSV (``tweet_id``, ``label`` columns) and finds its threads in ``cache``."""

def shuffled(n: int, seed: int) -> npt.NDArray[np.int64]:
    """A deterministic permutation of ``range(n)`` (the same as the Rust crate's ``shuffle`` of ``0..n``)."""

class Cache:
    """An open feature cache: a sequence of threads in source-id order."""

    def __len__(self) -> int: ...
    def __getitem__(self, i: int) -> Thread:
        """The thread at position ``i`` (negative counts from the end; ``IndexError`` past it)."""
    def __iter__(self) -> Iterator[Thread]: ...
    def get(self, source_id: int) -> Thread | None:
        """The thread with this source id, or None (O(log n))."""
    def position(self, source_id: int) -> int | None:
        """The position of this source id, or None."""
    @property
    def path(self) -> str: ...
    @property
    def content_id(self) -> str:
        """16 hex digits, equal for equal content: name derived files after it."""
    @property
    def derived_dir(self) -> str:
        """``CACHE_DIR/derived``: where files computed from the cache belong (rebuilds keep it)."""
    @property
    def feature_names(self) -> list[str]:
        """The 28 feature names, in column order."""
    @property
    def reaction_columns(self) -> list[str]:
        """Names of the extended per-reaction columns (for ``Thread.column``)."""
    @property
    def thread_columns(self) -> list[str]:
        """Names of the extended per-thread columns (for ``Thread.value``)."""
    @property
    def source_ids(self) -> npt.NDArray[np.uint64]:
        """Source id of every thread, [T]."""
    @property
    def labels(self) -> npt.NDArray[np.int8]:
        """Label code of every thread, [T]: 1 rumour, 0 non-rumour, -1 unknown."""
    def thread_counts(self) -> dict[str, Any]:
        """Threads per label code, per event and per event and label:
        ``{"labels": {code: n}, "events": {event: n}, "event_labels": {event:
        [unknown, non_rumour, rumour]}}``, the crate's one count, the build
        summary's (``describe`` takes its thread counts from here)."""
    @property
    def veracity(self) -> npt.NDArray[np.int8]:
        """Veracity code of every thread, [T]: 0 false, 1 true, 2 unverified;
        -1 for a thread not labelled rumour (whatever its ``annotation.json``
        says) and for a rumour without a veracity annotation."""
    @property
    def report(self) -> list[BadInput]:
        """Every input the build skipped."""
    def vocabulary(
        self,
        field: Literal["reply", "description"] = "reply",
        *,
        kinds: Literal["replies", "retweets", "both"] = "replies",
        positions: _Positions | None = None,
        min_count: int = 1,
        max_size: int | None = None,
    ) -> Vocabulary:
        """Token counts of ``field`` over the threads at ``positions`` (all by
        default), counted in Rust in one pass."""
    def unique_texts(
        self, field: Literal["reply", "description"] = "reply", positions: _Positions | None = None
    ) -> UniqueTexts:
        """The distinct non-empty inputs of ``field`` over the threads at
        ``positions`` (all when None), with counts and a per-reaction index."""
    @property
    def manifest(self) -> dict[str, Any]:
        """The cache's manifest.json."""
    def to_arrow(
        self,
        level: Literal["reactions", "threads"] = "reactions",
        columns: Sequence[str] | None = None,
        positions: _Positions | None = None,
    ) -> ArrowData:
        """The cache as Arrow data for pyarrow, polars, DuckDB, pandas and
        ``datasets`` (the Arrow PyCapsule interface).

        ``"reactions"``: one row per reaction (replies and retweets) of the
        threads at ``positions`` (all when None, in that order): thread_id,
        position, event, label, label_code, veracity (a rumour's; null for
        any other thread, as ``Cache.veracity``), annotated_rumour,
        kind ("reply"/"retweet", as stored), is_source_copy (the source
        tweet stored again among its reactions: no reply, and counted in no
        ``replies``), reaction_id, user_key (the author's
        ``user.id_str`` as a uint64 when decimal, else a hash with the top
        bit set), parent_id (the source's id
        for the root's children), parent_how, created_at (timestamp[s,
        UTC]), the 28 features (float32) and the extended columns (float32,
        null where unknown). ``"threads"``: one row per thread: thread_id,
        position, event, label, label_code, veracity, annotated_rumour,
        source_user_id, source_user_key (keyed as user_key),
        source_created_at, reactions (all stored),
        replies, retweets, source_copies (reactions stored with the source's
        own id, as PHEME's reactions/ folders often hold the source: counted
        in none of the others, nor in the depth and times), depth (of the
        replies' propagation tree), first_reply_s,
        median_reply_s, last_reply_s (seconds after the source; null
        without replies) and retweets_before_first_reply.

        The extended columns' values are the memory map's (no copy; the
        data keeps the cache's map alive); the other columns are built:
        they are not stored column by column (the features are stored row
        by row, ids and times as records). ``columns`` picks and orders
        columns (``KeyError`` for an unknown name); on request, also
        ``"features"``: the 28 features as stored, one
        ``fixed_size_list<float32>[28]`` per reaction, shared with the map
        (``column.values.to_numpy().reshape(-1, 28)`` without a copy)."""

class ArrowData:
    """Arrow data from ``Cache.to_arrow``: ``pyarrow.table(x)``,
    ``polars.DataFrame(x)``, ``duckdb.sql("select ... from x")``,
    ``pyarrow.RecordBatchReader.from_stream(x)``; readable any number of
    times. Each read is a stream that builds its record batches as they
    are pulled (where the batches are cut is found by ``to_arrow``, which
    also checks the shards)."""

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
        """A PyCapsule holding an ArrowArrayStream of the record batches."""
    def __arrow_c_schema__(self) -> object:
        """A PyCapsule holding the ArrowSchema."""
    def __len__(self) -> int:
        """Number of rows."""
    @property
    def column_names(self) -> list[str]: ...
    @property
    def level(self) -> Literal["reactions", "threads"]: ...
    @property
    def num_batches(self) -> int: ...
    @property
    def batches_built(self) -> int:
        """Record batches built so far by all of this object's streams: a
        stream builds each batch when its consumer pulls it (memory is one
        batch, a few MiB, whatever the cache's size), none up front."""

class Thread:
    """One thread: a source tweet and its reactions in (created_at, id) order."""

    def __len__(self) -> int:
        """Number of reactions."""
    @property
    def position(self) -> int: ...
    @property
    def source_id(self) -> int: ...
    @property
    def event(self) -> str: ...
    @property
    def label(self) -> str: ...
    @property
    def label_code(self) -> int:
        """1 rumour, 0 non-rumour, -1 unknown."""
    @property
    def source_text(self) -> str: ...
    @property
    def source_user_id(self) -> str:
        """The source author's user id."""
    @property
    def source_user_key(self) -> int:
        """The source author's key: ``int(source_user_id)`` when decimal,
        else a hash with the top bit set; comparable with ``user_keys``."""
    @property
    def source_created_at(self) -> int:
        """Seconds since the epoch."""
    @property
    def features(self) -> npt.NDArray[np.float32]:
        """[n, 28], read-only, a zero-copy view of the memory map (its base keeps the map alive)."""
    @property
    def reaction_ids(self) -> npt.NDArray[np.uint64]: ...
    @property
    def user_keys(self) -> npt.NDArray[np.uint64]:
        """The reactions' authors' keys, as ``source_user_key``."""
    @property
    def created_at(self) -> npt.NDArray[np.int64]: ...
    @property
    def kinds(self) -> npt.NDArray[np.uint8]:
        """1 reply, 0 retweet."""
    @property
    def parents(self) -> npt.NDArray[np.int64]:
        """Each reaction's parent: an earlier reply's position, -1 for the source."""
    @property
    def parent_how(self) -> npt.NDArray[np.uint8]:
        """How each parent was found: 0 in_reply_to, 1 structure, 2 defaulted."""
    @property
    def texts(self) -> list[str]: ...
    @property
    def descriptions(self) -> list[str | None]:
        """The authors' descriptions, None where null."""
    @property
    def reply_tokens(self) -> list[list[str] | None]:
        """Per reaction, RPDNN's tokens of the reply ([] where the reference
        gives none; None for retweets and replies whose ``text`` is not a string)."""
    @property
    def description_tokens(self) -> list[list[str] | None]:
        """Per reaction, the author's description split on ' ' (None without one)."""
    def column(self, name: str) -> npt.NDArray[np.float32]:
        """An extended per-reaction column, [n], NaN where unknown; a read-only zero-copy view."""
    def value(self, name: str) -> float | None:
        """An extended per-thread value (e.g. ``"veracity"``), None when unknown."""

class UniqueTexts:
    """Distinct non-empty inputs of one text field, ordered by token count."""

    NONE: int
    """``index`` value of a reaction with no input (0xFFFFFFFF)."""
    def __len__(self) -> int: ...
    def __getitem__(self, i: int) -> list[str]: ...
    @property
    def field(self) -> str: ...
    def batch(self, start: int, stop: int) -> list[list[str]]:
        """The token lists of inputs ``start..stop``."""
    @property
    def counts(self) -> npt.NDArray[np.uint32]:
        """[unique]: reactions per input."""
    @property
    def token_counts(self) -> npt.NDArray[np.uint32]:
        """[unique]: tokens per input (non-decreasing)."""
    @property
    def keys(self) -> npt.NDArray[np.uint64]:
        """[unique, 2]: each input's content key (xxh3-128 of its tokens, low then high)."""
    def positions_in(self, keys: npt.NDArray[np.uint64]) -> npt.NDArray[np.int64]:
        """Per input, the row of ``keys`` ([n, 2] content keys) with its key, or -1."""
    @property
    def index(self) -> npt.NDArray[np.uint32]:
        """[reactions]: each reaction's input, or NONE."""
    @property
    def offsets(self) -> npt.NDArray[np.uint64]:
        """[threads + 1]: where each thread's reactions start in ``index``."""

class Vocabulary:
    """Token counts of a text field, most frequent first (ties by the token).
    Indices follow AllenNLP's padded namespaces: 0 padding, 1 unknown,
    ``tokens[i]`` is ``i + 2``. Pickles (spawn and forkserver DataLoader
    workers, ``copy.deepcopy``) with the path and content id of its cache;
    unpickling after a rebuild with other content raises ``CacheError``."""

    @property
    def tokens(self) -> list[str]: ...
    @property
    def counts(self) -> npt.NDArray[np.uint64]: ...
    def index(self, token: str) -> int:
        """2 and up for a known token, 1 (unknown) otherwise."""
    def save(self, directory: _Path, namespace: str = "tokens") -> None:
        """Writes AllenNLP's vocabulary directory (``Vocabulary.from_files`` loads it)."""
    @property
    def field(self) -> Literal["reply", "description"]:
        """The text field counted on, which ``token_ids`` and ``bag_of_words`` read."""
    @overload
    def token_ids(
        self,
        source: Cache | Loader,
        batch: Batch,
        *,
        max_tokens: int,
        lengths: Literal[False] = False,
    ) -> npt.NDArray[np.int32]:
        """int32 ``[batch_size, width, max_tokens]``: each row slot's token ids
        as ``batch``'s last fill left it (``source``: the Cache it was filled
        from, or its Loader): the slot's reaction's tokens of ``field``
        through ``index`` (1 for unknown), the first ``max_tokens``, padded
        with 0 (AllenNLP's padding index). Padding slots, empty-thread rows,
        retweets' replies and authors without a description are all 0. With
        ``lengths=True`` also uint32 ``[batch_size, width]``, the tokens kept
        per slot. Fresh arrays; ValueError for a Batch of another cache."""
    @overload
    def token_ids(
        self, source: Cache | Loader, batch: Batch, *, max_tokens: int, lengths: Literal[True]
    ) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.uint32]]: ...
    def bag_of_words(
        self, graph: GraphBatch, cache: Cache | Loader | None = None, *, unknown: bool = True
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        """Each node's bag of words of ``graph`` in CSR form, ``(indptr [N + 1],
        indices [nnz], counts [nnz])``: node ``n``'s token ids are
        ``indices[indptr[n]:indptr[n + 1]]``, ascending, each with its count
        (float32: a sparse product's values as they are). The matrix is
        ``[N, len(self) + 2]``. Unknown tokens count under 1 with
        ``unknown=True`` and are left out otherwise (BiGCN's top-k words).
        Root rows are empty: the cache stores the source's text, not its
        tokens. ``cache``: the one the graph was filled from (default: the
        one counted on)."""
    def __len__(self) -> int: ...
    def __contains__(self, token: str) -> bool: ...

class Split:
    """A split CSV matched against a cache."""

    def __len__(self) -> int: ...
    @property
    def positions(self) -> npt.NDArray[np.int64]:
        """Cache positions of the split's threads, in file order."""
    @property
    def ids(self) -> npt.NDArray[np.uint64]:
        """Their source ids, aligned with ``positions``."""
    @property
    def labels(self) -> npt.NDArray[np.int8]:
        """Their labels from the CSV, aligned with ``positions``."""
    @property
    def missing(self) -> npt.NDArray[np.uint64]:
        """Ids of the CSV that the cache does not hold (reported, never dropped silently)."""

class FeatureStats:
    """Per-feature count, mean, population std, min and max, for normalisation.
    Pickles (as the JSON ``save`` writes)."""

    @staticmethod
    def compute(
        cache: Cache,
        positions: _Positions | None = None,
        *,
        kinds: Literal["replies", "retweets", "both"] = "replies",
        window_s: float | None = None,
    ) -> FeatureStats:
        """Statistics over the selected reactions of the threads at ``positions`` (all when None)."""
    @staticmethod
    def load(path: _Path) -> FeatureStats:
        """Reads statistics written by ``save`` or by the Rust ``stats --save``."""
    def save(self, path: _Path) -> None: ...
    @property
    def mean(self) -> npt.NDArray[np.float64]: ...
    @property
    def std(self) -> npt.NDArray[np.float64]: ...
    @property
    def min(self) -> npt.NDArray[np.float64]: ...
    @property
    def max(self) -> npt.NDArray[np.float64]: ...
    @property
    def count(self) -> int: ...
    @property
    def threads(self) -> int: ...
    @property
    def feature_names(self) -> list[str]: ...

class Batch:
    """One batch's NumPy buffers, allocated once for ``max_cxt`` rows per
    thread and refilled in place. Every property is a view of the used
    ``[batch_size, width]`` prefix; the next fill overwrites it."""

    @property
    def features(self) -> npt.NDArray[np.float32]:
        """[batch_size, width, 28], zero-padded."""
    @property
    def mask(self) -> npt.NDArray[np.uint8]:
        """[batch_size, width]: 1 for a real row."""
    @property
    def lengths(self) -> npt.NDArray[np.uint32]:
        """[batch_size]: real rows per thread."""
    @property
    def source_ids(self) -> npt.NDArray[np.uint64]:
        """[batch_size]"""
    @property
    def labels(self) -> npt.NDArray[np.int8]:
        """[batch_size]: the cache's label codes or the labels passed to ``fill``."""
    @property
    def embedding_index(self) -> dict[str, npt.NDArray[np.int32]]:
        """Per store of the Loader: [batch_size, width], each row slot's row in
        the store, -1 for none (padding, retweets, ``[]`` tokens, no description)."""
    @property
    def embeddings(self) -> dict[str, npt.NDArray[Any]]:
        """With ``dense=True``, per store: [batch_size, width, dim] rows (float32
        or float16), zeros where the index is -1."""
    @property
    def token_ids(self) -> npt.NDArray[np.int32] | None:
        """With a Loader's ``token_ids=vocab, max_tokens=L``: [batch_size, width, L],
        each row slot's token ids (1 unknown, 0 padding); else None."""
    @property
    def outputs(self) -> dict[str, npt.NDArray[Any] | dict[str, npt.NDArray[Any]]]:
        """Every output of the Loader by name (``output_names()``): an array
        [batch_size, width, ...], or per store a dict of them by store name."""
    def output_names(self) -> list[str]:
        """The names of the Loader's outputs, in order."""
    def __getattr__(self, name: str) -> Any:
        """An output by name (one of ``output_names()``, or one a Loader
        made with ``outputs=[...]`` adds); None for a known output the
        Loader lacks."""
    size: int
    """Threads filled by the last fill (the rest is padding)."""
    width: int
    """Rows per thread of the last fill (``max_cxt`` with ``pad="max"``)."""
    @property
    def batch_size(self) -> int: ...
    @property
    def max_cxt(self) -> int: ...
    def __len__(self) -> int: ...

class Epoch:
    """One epoch of batches. Every step yields the same Batch, refilled in place."""

    real_rows: int
    """Real rows in the epoch's batches."""
    padded_rows: int
    """Rows the epoch's batches hold, padding included."""
    @property
    def padding_fraction(self) -> float: ...
    def __iter__(self) -> Iterator[Batch]: ...
    def __next__(self) -> Batch: ...
    def __len__(self) -> int: ...

class GraphBatch:
    """A batch of threads as graphs in torch_geometric's layout, refilled by
    ``Loader.fill_graph``; every property is a fresh array. The Loader's
    outputs come per node, each by its name as a :class:`Batch` has them
    per row slot: a node holds what the row slot of its reaction holds, a
    root what a padding slot holds."""

    def __init__(self) -> None: ...
    @property
    def num_graphs(self) -> int: ...
    @property
    def num_nodes(self) -> int: ...
    @property
    def num_edges(self) -> int: ...
    @property
    def x(self) -> npt.NDArray[np.float32]:
        """[N, 28]: each graph's root (a zero row) first, then its selected reactions."""
    @property
    def edge_index(self) -> npt.NDArray[np.int64]:
        """[2, E]: top-down edges in the first E/2 columns, bottom-up in the last E/2."""
    @property
    def batch(self) -> npt.NDArray[np.int64]: ...
    @property
    def ptr(self) -> npt.NDArray[np.int64]: ...
    @property
    def parent(self) -> npt.NDArray[np.int64]:
        """[N]: each node's parent node, -1 for roots."""
    @property
    def reactions(self) -> npt.NDArray[np.uint32]: ...
    @property
    def source_ids(self) -> npt.NDArray[np.uint64]: ...
    @property
    def labels(self) -> npt.NDArray[np.int8]: ...
    @property
    def positions(self) -> npt.NDArray[np.int64]: ...
    @property
    def embedding_index(self) -> dict[str, npt.NDArray[np.int32]]:
        """Per store of the Loader: [N], each node's row in the store, -1 for
        none (roots, retweets, ``[]`` tokens, no description)."""
    @property
    def embeddings(self) -> dict[str, npt.NDArray[Any]]:
        """With ``dense=True``, per store: [N, dim] rows (float32 or float16),
        zeros where the index is -1 (roots)."""
    @property
    def token_ids(self) -> npt.NDArray[np.int32] | None:
        """With a Loader's ``token_ids=vocab, max_tokens=L``: [N, L], each node's
        token ids (roots all padding, 0); else None."""
    @property
    def outputs(self) -> dict[str, npt.NDArray[Any] | dict[str, npt.NDArray[Any]]]:
        """Every output of the last fill's Loader by name (``output_names()``):
        an array [N, ...], or per store a dict of them by store name."""
    def output_names(self) -> list[str]:
        """The names of the last fill's Loader's outputs, in order."""
    def __getattr__(self, name: str) -> Any:
        """An output by name (one of ``output_names()``, or one a Loader
        made with ``outputs=[...]`` adds); None for a known output the
        Loader lacks."""
    def __len__(self) -> int: ...

class Loader:
    """Assembles padded, masked, optionally normalised batches from a cache.

    Per thread: reactions of ``kinds``, within ``window_s`` seconds of the
    source when given, the earliest ``max_cxt``; standardised with ``stats``
    when given. A thread with no selected reaction gives one zero row
    (``empty="row"``, the reference's behaviour) or none (``"masked"``).
    ``pad="max"`` makes every batch ``[B, max_cxt]``; ``pad="longest"`` as
    wide as its longest thread, rounded up to ``pad_multiple``. Stores in
    ``embeddings`` are indexed per row slot (``batch.embedding_index``) and,
    with ``dense=True``, copied (``batch.embeddings``); given as a dict
    ``{name: model_id}``, a store made by another model (or without a model
    id) is an ``EmbeddingError`` naming both ids (None: any model). With
    ``token_ids`` (a Vocabulary) and ``max_tokens``, every fill also writes
    each row slot's token ids (``batch.token_ids``, int32 ``[B, width,
    max_tokens]``). ``outputs`` names further outputs every fill writes,
    each ``batch.<name>`` ``[B, width, ...]``.
    """

    def __init__(
        self,
        cache: Cache,
        *,
        kinds: Literal["replies", "retweets", "both"] = "replies",
        max_cxt: int = 200,
        window_s: float | None = None,
        stats: FeatureStats | None = None,
        empty: Literal["row", "masked"] = "row",
        embeddings: Sequence[str] | Mapping[str, str | None] | None = None,
        pad: Literal["max", "longest"] = "max",
        pad_multiple: int = 8,
        dense: bool = True,
        token_ids: Vocabulary | None = None,
        max_tokens: int | None = None,
        outputs: Sequence[str] | None = None,
    ) -> None: ...
    @property
    def cache(self) -> Cache:
        """The Cache this Loader reads."""
    @property
    def max_cxt(self) -> int: ...
    @property
    def pad(self) -> str: ...
    @property
    def embeddings(self) -> list[str]:
        """Names of the embedding stores each batch indexes."""
    def new_batch(self, batch_size: int) -> Batch:
        """Buffers for ``batch_size`` threads: writable, C-contiguous NumPy arrays."""
    def fill(self, positions: _Positions, batch: Batch, labels: _Labels | None = None) -> None:
        """Writes the threads at ``positions`` into ``batch`` in place (GIL released).
        Positions are integers from 0 to ``len(cache) - 1`` for every Loader
        method: a negative one is an ``IndexError`` (not counted from the end),
        booleans and floats a ``TypeError``."""
    def fill_graph(
        self, positions: _Positions, graph: GraphBatch, labels: _Labels | None = None
    ) -> None:
        """Fills ``graph`` with the threads at ``positions`` as propagation trees,
        and every output of this Loader per node (``graph.outputs``). MemoryError
        (the graph left empty) when an output's values per node cannot be had."""
    def lengths(self, positions: _Positions) -> npt.NDArray[np.int64]:
        """Rows each thread contributes (at most ``max_cxt``; an empty thread's row counts)."""
    def plan(
        self,
        positions: _Positions,
        batch_size: int,
        *,
        seed: int | None = None,
        bucket: bool = False,
        noise: float = 0.1,
        world_size: int = 1,
        rank: int | None = None,
        drop_last: bool = False,
    ) -> list[npt.NDArray[np.int64]]:
        """The epoch's batches as arrays of indices into ``positions``
        (bucketed, sharded by rank); deterministic on any machine. Bucketed
        with ``pad="longest"``, threads are sorted by the width they pad to
        (length rounded up to ``pad_multiple``) first. Every
        rank gets as many batches, none empty (batches of one padded by
        repetition when they would outnumber the threads)."""
    def epoch(
        self,
        positions: _Positions,
        batch_size: int,
        *,
        seed: int | None = None,
        labels: _Labels | None = None,
        bucket: bool = False,
        noise: float = 0.1,
    ) -> Epoch:
        """Iterates one epoch in batches of ``batch_size`` (shuffled by ``seed``,
        length-bucketed with ``bucket``); yields the SAME Batch every step,
        refilled in place."""

def _open_store(
    cache: Cache, name: str, same_content: bool = True, model_id: str | None = None
) -> tuple[str, list[tuple[str, int]]]: ...
def _verify_store(cache: Cache, name: str) -> str: ...

class StoreWriter:
    def __init__(
        self,
        cache: Cache,
        name: str,
        *,
        field: str,
        half: bool = False,
        batch_size: int = 256,
        model_id: str | None = None,
        compact: bool = False,
        reuse: bool = True,
        resume: bool = True,
        verify: bool = False,
    ) -> None: ...
    @property
    def batches(self) -> int: ...
    @property
    def segments_read(self) -> int: ...
    @property
    def done(self) -> int: ...
    @property
    def resumed(self) -> int: ...
    @property
    def dim(self) -> int | None: ...
    @property
    def new_inputs(self) -> int: ...
    @property
    def unique(self) -> int: ...
    @property
    def reactions(self) -> int: ...
    @property
    def reused(self) -> int: ...
    @property
    def dropped(self) -> int: ...
    @property
    def compacting(self) -> bool: ...
    @property
    def not_reused(self) -> str | None: ...
    @property
    def restarted(self) -> str | None: ...
    def inputs(self, b: int) -> list[list[str]]: ...
    def write(self, b: int, rows: npt.NDArray[Any]) -> None: ...
    def finish(self) -> str: ...
    def close(self) -> None: ...

# The crate's one routine for replacing an output atomically, keeping its
# mode, group and links (python/src/output.rs). Not a public API.
class _Replacement:
    def __init__(self, path: _Path) -> None: ...
    def fileno(self) -> int: ...
    @property
    def temp_path(self) -> Path | None: ...
    def commit(self) -> None: ...
    def abort(self) -> None: ...

# The `socialctx` command's entry point (socialctx/cli.py; python/src/cli.rs;
# the command itself is defined once, in crates/cli). Not a public API.
def _socialctx(
    argv: Sequence[str], sample: _Path | None = None
) -> tuple[int, str | None, str | None]: ...
