"""`Cache.to_arrow`: equal to `dump` column by column on every fixture corpus,
read by pyarrow, polars, DuckDB, pandas and `datasets`, zero-copy where it
says so, and exported to Parquet by `socialctx export`."""

from __future__ import annotations

import functools
import gc
import io
import json
import math
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import socialctx
from conftest import CORPORA, REPO

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
pd = pytest.importorskip("pandas")

EXTENDED = ["depth", "persistence", "follows_source", "followed_by_source", "reciprocal_follow"]
EXTENDED += ["user_reliability"]


@functools.cache
def dump(cache: Path) -> list[dict[str, Any]]:
    """`socialctx dump --retweets --extended --graph`: the oracle format
    (once per cache directory and session; the callers only read it)."""
    out = subprocess.run(
        [sys.executable, "-m", "socialctx", "dump", str(cache), "--retweets", "--extended"]
        + ["--graph"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def label_code(line: dict[str, Any]) -> int:
    """The label's code: the folder's, else annotation.json's (RumourEval,
    the journalism release), else -1."""
    by_folder = {"rumours": 1, "non-rumours": 0}.get(line["label"])
    if by_folder is not None:
        return by_folder
    return {"rumour": 1, "nonrumour": 0}.get(line["annotated_rumour"], -1)


def veracity(line: dict[str, Any]) -> str | None:
    """A rumour's veracity: none for a thread not labelled rumour, whatever
    its annotation says (the stored column, which `dump --extended` prints,
    gives PHEME's one non-rumour annotated "unclear" a veracity)."""
    return line["veracity"] if label_code(line) == 1 else None


def same_f32(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    x, y = np.float32(a), np.float32(b)
    return bool(x == y or (math.isnan(x) and math.isnan(y)))


@pytest.mark.parametrize("name", sorted(CORPORA))
def test_reactions_equal_dump_column_by_column(built: dict[str, Path], name: str) -> None:
    cache = socialctx.open(built[name])
    table = pa.table(cache.to_arrow())
    assert table.column_names[:14] == [
        "thread_id",
        "position",
        "event",
        "label",
        "label_code",
        "veracity",
        "annotated_rumour",
        "kind",
        "is_source_copy",
        "reaction_id",
        "user_key",
        "parent_id",
        "parent_how",
        "created_at",
    ]
    assert table.column_names[14:42] == socialctx.FEATURE_NAMES
    assert table.column_names[42:] == EXTENDED
    got = table.to_pydict()
    got["created_at"] = table.column("created_at").cast(pa.int64()).to_pylist()
    lines = dump(built[name])
    # dump (the parity contract) has no authors: they come from the JSON.
    authors = reaction_authors(REPO / CORPORA[name][0])
    expected: dict[str, list[Any]] = {k: [] for k in got}
    for position, line in enumerate(lines):
        for r in line["reactions"]:
            expected["user_key"].append(author_key(authors, line["source_id"], r["id"]))
            expected["thread_id"].append(int(line["source_id"]))
            expected["position"].append(position)
            expected["event"].append(line["event"])
            expected["label"].append(line["label"])
            expected["label_code"].append(label_code(line))
            expected["veracity"].append(veracity(line))
            expected["annotated_rumour"].append(line["annotated_rumour"])
            expected["kind"].append(r["kind"])
            expected["is_source_copy"].append(r["id"] == line["source_id"])
            expected["reaction_id"].append(int(r["id"]))
            expected["parent_id"].append(int(r["parent"]))
            expected["parent_how"].append(r["parent_how"])
            expected["created_at"].append(r["created_at"])
            for i, f in enumerate(socialctx.FEATURE_NAMES):
                expected[f].append(r["features"][i])
            for c in EXTENDED:
                expected[c].append(r[c])
    assert len(lines) == len(cache)
    assert table.num_rows == sum(len(t["reactions"]) for t in lines)
    for column, values in expected.items():
        if column in socialctx.FEATURE_NAMES or column in EXTENDED:
            bad = [i for i, (a, b) in enumerate(zip(got[column], values)) if not same_f32(a, b)]
            assert not bad, (column, bad[:5])
        elif column == "user_key":
            assert same_keys(got[column], values), column
        else:
            assert got[column] == values, column
    # The thread view's keys are the column's.
    start = 0
    for t in cache:
        assert t.user_keys.tolist() == got["user_key"][start : start + len(t)]
        start += len(t)
    # NaN never crosses as a value: an unknown extended value is null.
    for c in EXTENDED:
        assert not any(v is not None and math.isnan(v) for v in got[c]), c


def user_key(id_str: str) -> int | str:
    """A user id as the cache keys it, where that can be said without its
    hash: the number when ``id_str`` is ASCII decimal below 2^64; else the
    string itself (stored as a hash with the top bit set)."""
    if re.fullmatch(r"[0-9]+", id_str) and int(id_str) < 2**64:
        return int(id_str)
    return id_str


def reaction_authors(corpus: Path) -> dict[tuple[str, str], set[str]]:
    """(source id, reaction id) -> the ``user.id_str`` of the tweets stored
    under that thread with that id, read from the corpus's JSON: the files
    of reactions/, replies/ and retweets/, and retweets.json's lines."""
    out: dict[tuple[str, str], set[str]] = {}

    def add(thread: str, tweet: Any) -> None:
        try:
            out.setdefault((thread, str(tweet["id_str"])), set()).add(tweet["user"]["id_str"])
        except (KeyError, TypeError):
            pass

    for thread in corpus.rglob("*"):
        if not (thread.name.isdigit() and thread.is_dir()):
            continue
        for folder in ("reactions", "replies", "retweets"):
            for f in sorted((thread / folder).glob("*.json")):
                try:
                    add(thread.name, json.loads(f.read_bytes()))
                except ValueError:
                    continue
        lines = thread / "retweets.json"
        if lines.is_file():
            for line in lines.read_bytes().splitlines():
                try:
                    add(thread.name, json.loads(line))
                except ValueError:
                    continue
    return out


def author_key(authors: dict[tuple[str, str], set[str]], source: str, reaction: str) -> Any:
    """The key of the one author the JSON gives reaction ``reaction`` of
    thread ``source``."""
    found = authors.get((source, reaction), set())
    assert len(found) == 1, (source, reaction, found)
    return user_key(next(iter(found)))


def same_keys(got: list[int], expected: list[int | str]) -> bool:
    """Whether the cache's keys are ``expected``'s: the numbers equal, and
    each non-decimal id one hash with the top bit set, distinct ids distinct
    hashes."""
    hashed: dict[str, int] = {}
    for have, want in zip(got, expected, strict=True):
        if isinstance(want, int):
            if have != want:
                return False
        elif have < 2**63 or hashed.setdefault(want, have) != have:
            return False
    return len(set(hashed.values())) == len(hashed)


def replies_of(line: dict[str, Any]) -> list[dict[str, Any]]:
    """A thread's replies, without the source tweet stored among its own
    reactions (PHEME's reactions/ folders often hold it)."""
    return [r for r in line["reactions"] if r["kind"] == "reply" and r["id"] != line["source_id"]]


def depths_from_dump(line: dict[str, Any]) -> int:
    """The replies' tree depth, from dump's parent ids (independently of the binding)."""
    depth = {line["source_id"]: 0}
    deepest = 0
    for r in line["reactions"]:
        d = depth.get(r["parent"], 0) + 1
        # An id equal to the source's names the source (FEATURES.md: a
        # reaction stored with the source's own id attaches to the source).
        if r["kind"] == "reply" and r["id"] != line["source_id"]:
            deepest = max(deepest, d)
            depth[r["id"]] = d
    return deepest


@pytest.mark.parametrize("name", sorted(CORPORA))
def test_threads_level_equals_dump(built: dict[str, Path], name: str) -> None:
    cache = socialctx.open(built[name])
    got = pa.table(cache.to_arrow(level="threads")).to_pydict()
    lines = dump(built[name])
    assert len(got["thread_id"]) == len(lines) == len(cache)
    for p, line in enumerate(lines):
        t = cache[p]
        copies = [r for r in line["reactions"] if r["id"] == line["source_id"]]
        replies = [r for r in replies_of(line)]
        delays = sorted(r["created_at"] - t.source_created_at for r in replies)
        row = {k: v[p] for k, v in got.items()}
        assert row["thread_id"] == int(line["source_id"])
        assert row["position"] == p
        assert (row["event"], row["label"]) == (line["event"], line["label"])
        assert row["veracity"] == veracity(line)
        assert row["annotated_rumour"] == line["annotated_rumour"]
        assert row["label_code"] == t.label_code == label_code(line)
        assert row["source_user_id"] == t.source_user_id
        assert same_keys([row["source_user_key"]], [user_key(t.source_user_id)])
        assert row["source_user_key"] == t.source_user_key
        assert int(row["source_created_at"].timestamp()) == t.source_created_at
        assert row["replies"] == len(replies)
        assert row["source_copies"] == len(copies)
        assert row["retweets"] == len(line["reactions"]) - len(replies) - len(copies)
        assert row["reactions"] == len(line["reactions"])
        assert row["depth"] == depths_from_dump(line)
        assert row["first_reply_s"] == (delays[0] if delays else None)
        assert row["last_reply_s"] == (delays[-1] if delays else None)
        assert row["median_reply_s"] == (float(np.median(delays)) if delays else None)
        before = 0
        for r in line["reactions"]:
            if r["kind"] == "reply" and r["id"] != line["source_id"]:
                break
            before += r["kind"] == "retweet" and r["id"] != line["source_id"]
        assert row["retweets_before_first_reply"] == before


def test_veracity_is_a_rumours_only(built: dict[str, Path]) -> None:
    """PHEME's germanwings non-rumour 580319983676313601 is annotated
    "unclear": the threads level gave it "unverified", one veracity label
    more than there are rumours. `cache.veracity` is the same per thread."""
    cache = socialctx.open(built["pheme-veracity"])
    threads = pa.table(cache.to_arrow(level="threads")).to_pydict()
    odd = threads["thread_id"].index(580319983676313601)
    assert threads["label_code"][odd] == 0 and threads["annotated_rumour"][odd] == "unclear"
    assert threads["veracity"][odd] is None
    codes = {"false": 0, "true": 1, "unverified": 2, None: -1}
    v = cache.veracity
    assert v.dtype == np.int8 and v.shape == (len(cache),)
    assert v.tolist() == [codes[x] for x in threads["veracity"]]
    labels = cache.labels
    assert (v[labels != 1] == -1).all() and (v[labels == 1] >= 0).any()
    reactions = pa.table(cache.to_arrow(columns=["position", "veracity"])).to_pydict()
    assert all(
        x == threads["veracity"][p] for p, x in zip(reactions["position"], reactions["veracity"])
    )


def test_every_consumer_reads_the_same(built: dict[str, Path]) -> None:
    pl = pytest.importorskip("polars")
    duckdb = pytest.importorskip("duckdb")
    datasets = pytest.importorskip("datasets")
    cache = socialctx.open(built["pheme-veracity"])
    x = cache.to_arrow()
    table = pa.table(x)
    assert len(x) == table.num_rows > 0
    # Read again: each call is a new stream of the same batches.
    assert pa.table(x).equals(table)
    assert pa.RecordBatchReader.from_stream(x).read_all().equals(table)

    frame = pl.DataFrame(x)
    assert frame.shape == (table.num_rows, table.num_columns)
    assert frame.equals(pl.from_arrow(table))
    assert frame["reaction_id"].to_list() == table.column("reaction_id").to_pylist()
    seconds = table.column("created_at").cast(pa.int64()).to_pylist()
    assert frame["created_at"].dt.epoch("s").to_list() == seconds
    # polars.from_arrow of a stream object gives one struct Series (polars'
    # own rule for PyCapsule streams); unnested it is the same frame.
    assert pl.from_arrow(x).struct.unnest().equals(frame)  # type: ignore[union-attr]

    df = table.to_pandas()
    assert df["num_posts"].dtype == np.float32
    assert str(df["created_at"].dtype).startswith("datetime64")
    by_event = df.groupby("event").agg(
        n=("reaction_id", "size"), rt=("kind", lambda k: (k == "retweet").sum())
    )
    rows = duckdb.sql(
        "select event, count(*), sum(case when kind = 'retweet' then 1 else 0 end) "
        "from x group by event order by event"
    ).fetchall()
    assert rows == [(e, int(r.n), int(r.rt)) for e, r in by_event.sort_index().iterrows()]
    total = duckdb.sql("select sum(num_posts::double), count(depth) from x").fetchall()[0]
    assert total == (
        pytest.approx(float(df["num_posts"].astype(np.float64).sum())),
        int(df["depth"].notna().sum()),
    )

    ds = datasets.Dataset(table)
    assert ds.num_rows == table.num_rows
    assert ds.column_names == table.column_names
    assert ds["reaction_id"] == table.column("reaction_id").to_pylist()
    assert ds[3]["event"] == table.column("event")[3].as_py()

    threads = pa.table(cache.to_arrow(level="threads"))  # noqa: F841 (DuckDB reads it by name)
    assert duckdb.sql("select sum(reactions) from threads").fetchall()[0] == (table.num_rows,)


def test_extended_columns_are_the_maps_memory(built: dict[str, Path], tmp_path: Path) -> None:
    cache_dir = tmp_path / "c"
    shutil.copytree(built["pheme-veracity"], cache_dir)
    cache = socialctx.open(cache_dir)
    table = pa.table(cache.to_arrow(columns=["depth", "num_posts"]))
    assert table.column("depth").num_chunks == 1
    values = table.column("depth").chunk(0).buffers()[1]
    view = cache[0].column("depth")
    assert values.address == view.__array_interface__["data"][0]
    # The features are stored row by row: a column of them is a copy.
    features = cache[0].features
    assert (
        table.column("num_posts").chunk(0).buffers()[1].address
        != (features.__array_interface__["data"][0])
    )
    before = table.column("depth").to_pylist()
    # The Arrow data keeps the map alive: no cache object, and the cache
    # directory rebuilt from another corpus underneath.
    del cache, view, features
    gc.collect()
    socialctx.build(REPO / CORPORA["pheme-rnr"][0], cache_dir, workers=2, progress=False)
    assert table.column("depth").to_pylist() == before
    assert pa.table(socialctx.open(cache_dir).to_arrow(columns=["depth"])).num_rows != len(before)


def test_features_column_is_the_stored_rows(built: dict[str, Path]) -> None:
    cache = socialctx.open(built["sample"])
    table = pa.table(cache.to_arrow(columns=["features", "num_posts", "t_diff"]))
    column = table.column("features")
    assert column.type == pa.list_(pa.field("item", pa.float32(), nullable=False), 28)
    rows = np.concatenate([t.features for t in cache])
    flat = column.combine_chunks().values.to_numpy(zero_copy_only=True)
    assert np.array_equal(flat.reshape(-1, 28), rows, equal_nan=True)
    assert np.array_equal(rows[:, 0], table.column("num_posts").to_numpy(), equal_nan=True)
    # One batch per run of the shard: its values are the map's own rows.
    chunk = column.chunk(0)
    assert chunk.values.buffers()[1].address == cache[0].features.__array_interface__["data"][0]
    # Threads out of order: still right, in the order given.
    table = pa.table(cache.to_arrow(columns=["features"], positions=[2, 0]))
    flat = table.column("features").combine_chunks().values.to_numpy()
    expected = np.concatenate([cache[2].features, cache[0].features])
    assert np.array_equal(flat.reshape(-1, 28), expected, equal_nan=True)
    with pytest.raises(KeyError, match="no column"):
        cache.to_arrow(level="threads", columns=["features"])


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_columns_and_positions_select_rows_and_columns(data: st.DataObject) -> None:
    cache, full = _PROPERTY_STATE["cache"], _PROPERTY_STATE["full"]
    names = full.column_names
    n = len(cache)
    positions = data.draw(st.none() | st.lists(st.integers(-n, n - 1), max_size=12))
    columns = data.draw(
        st.none() | st.lists(st.sampled_from(names), min_size=1, max_size=8, unique=True)
    )
    got = pa.table(cache.to_arrow(columns=columns, positions=positions))
    assert got.column_names == (columns if columns is not None else names)
    frame = full.to_pandas()
    if positions is None:
        expected = frame
    else:
        parts = [frame[frame["position"] == (p % n)] for p in positions]
        expected = frame.iloc[0:0] if not parts else pd.concat(parts)
    expected = expected[got.column_names].reset_index(drop=True)
    assert got.to_pandas().equals(expected)


_PROPERTY_STATE: dict[str, Any] = {}


@pytest.fixture(autouse=True)
def _property_state(built: dict[str, Path]) -> None:
    if not _PROPERTY_STATE:
        cache = socialctx.open(built["pheme-veracity"])
        _PROPERTY_STATE["cache"] = cache
        _PROPERTY_STATE["full"] = pa.table(cache.to_arrow())


def test_threads_positions_follow_the_order_given(built: dict[str, Path]) -> None:
    cache = socialctx.open(built["pheme-veracity"])
    t = pa.table(cache.to_arrow(level="threads", positions=[5, 2, 5, -1]))
    assert t.column("position").to_pylist() == [5, 2, 5, len(cache) - 1]
    assert t.column("thread_id").to_pylist() == [int(cache.source_ids[i]) for i in (5, 2, 5, -1)]
    empty = cache.to_arrow(positions=[])
    assert len(empty) == 0 and pa.table(empty).num_rows == 0
    assert pa.table(empty).schema.equals(pa.table(cache.to_arrow()).schema)


def test_an_empty_selection_reads_everywhere(built: dict[str, Path]) -> None:
    # No thread selected (an empty filter, an empty cache): a stream of no
    # batch is a table whose columns have no chunk, which `datasets` cannot
    # cast ("cannot construct ChunkedArray from empty vector"); one empty
    # batch reads everywhere.
    datasets = pytest.importorskip("datasets")
    cache = socialctx.open(built["golden"])
    levels: list[Literal["reactions", "threads"]] = ["reactions", "threads"]
    for level in levels:
        empty = cache.to_arrow(level=level, positions=[])
        assert len(datasets.Dataset(pa.table(empty))) == 0
        assert pa.table(empty).schema.equals(pa.table(cache.to_arrow(level=level)).schema)


def test_a_mask_is_not_positions(built: dict[str, Path]) -> None:
    # A list of booleans (a mask) read as the positions 1 and 0 gave rows of
    # the first two threads, silently; positions are integers (as Loader's).
    cache = socialctx.open(built["golden"])
    mask = [bool(i % 2) for i in range(len(cache))]
    with pytest.raises(TypeError, match="flatnonzero"):
        cache.to_arrow(positions=mask)
    with pytest.raises(TypeError, match="flatnonzero"):
        cache.to_arrow(level="threads", positions=np.array(mask))
    with pytest.raises(TypeError, match="flatnonzero"):
        cache.unique_texts(positions=mask)
    picked = pa.table(cache.to_arrow(level="threads", positions=np.flatnonzero(mask)))
    assert picked.column("position").to_pylist() == list(np.flatnonzero(mask))


def test_bad_arguments_are_clear_errors(built: dict[str, Path]) -> None:
    cache = socialctx.open(built["golden"])
    with pytest.raises(ValueError, match="level must be"):
        cache.to_arrow(level="posts")
    with pytest.raises(KeyError, match='no column "nope" at level "reactions"'):
        cache.to_arrow(columns=["nope"])
    with pytest.raises(KeyError, match='no column "num_posts" at level "threads"'):
        cache.to_arrow(level="threads", columns=["num_posts"])
    with pytest.raises(ValueError, match="named twice"):
        cache.to_arrow(columns=["event", "event"])
    with pytest.raises(TypeError):
        cache.to_arrow(columns="event")  # type: ignore[arg-type]
    with pytest.raises(IndexError, match="out of range"):
        cache.to_arrow(positions=[len(cache)])
    x = cache.to_arrow(level="threads", columns=["thread_id"])
    assert x.level == "threads" and x.column_names == ["thread_id"] and x.num_batches == 1
    assert "ArrowData" in repr(x)


def test_a_damaged_shard_is_a_cache_error(built: dict[str, Path], tmp_path: Path) -> None:
    cache_dir = tmp_path / "c"
    shutil.copytree(built["golden"], cache_dir)
    shard = next(cache_dir.glob("shard-*.rkyv"))
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF
    shard.write_bytes(bytes(data))
    cache = socialctx.open(cache_dir)  # lazy: the shard is checked on first use
    with pytest.raises(socialctx.CacheError, match="shard-"):
        cache.to_arrow()
    with pytest.raises(socialctx.CacheError):
        cache.to_arrow(level="threads")


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "socialctx", *args], capture_output=True, text=True, check=False
    )


@pytest.mark.parametrize("level", ["reactions", "threads"])
def test_export_parquet_reads_back_equal(
    built: dict[str, Path], tmp_path: Path, level: str
) -> None:
    out = tmp_path / "out.parquet"
    r = run_cli("export", str(built["pheme-veracity"]), str(out), "--level", level)
    assert r.returncode == 0, r.stderr
    back = pq.read_table(out)
    cache = socialctx.open(built["pheme-veracity"])
    expected = pa.table(cache.to_arrow(level=level))
    # Parquet has no seconds unit: timestamps come back in milliseconds,
    # the same instants (the cast back fails if any is not a whole second).
    for field in expected.schema:
        kind = back.schema.field(field.name).type
        assert kind == (
            pa.timestamp("ms", "UTC") if pa.types.is_timestamp(field.type) else field.type
        )
    assert back.cast(expected.schema).equals(expected)
    assert f"{back.num_rows:,} rows" in r.stderr
    r = run_cli("export", str(built["pheme-veracity"]), str(out), "--columns", "thread_id,event")
    assert r.returncode == 0, r.stderr
    assert pq.read_table(out).column_names == ["thread_id", "event"]


def test_export_errors_name_the_output_not_a_temporary_file(
    built: dict[str, Path], tmp_path: Path
) -> None:
    # The error named the temporary file beside OUT ("No such file or
    # directory: '.../.x.parquet.abc123.tmp'", "Is a directory:
    # '.../.out.xyz.tmp' -> 'out'"), a file the user never named.
    (tmp_path / "a-dir").mkdir()
    for out, why in [
        (tmp_path / "a-dir", "is a directory"),
        (tmp_path / "missing" / "x.parquet", "No such file or directory"),
    ]:
        r = run_cli("export", str(built["golden"]), str(out))
        assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
        assert str(out) in r.stderr and why in r.stderr, r.stderr
        assert ".tmp" not in r.stderr, r.stderr
        d = socialctx.describe(socialctx.open(built["golden"]))
        with pytest.raises(OSError, match=re.escape(str(out))):
            d.write_html(out)
    assert [p.name for p in tmp_path.iterdir()] == ["a-dir"]
    assert list((tmp_path / "a-dir").iterdir()) == []


def test_export_of_no_column_is_an_error(built: dict[str, Path], tmp_path: Path) -> None:
    # `--columns ""` (or ",") chose no column: the file written had no row
    # (Parquet keeps no row count without a column) while the command said
    # "wrote OUT: 2,xxx rows".
    out = tmp_path / "out.parquet"
    for columns in ("", ","):
        r = run_cli("export", str(built["golden"]), str(out), "--columns", columns)
        assert r.returncode == 1 and "no column" in r.stderr and "Traceback" not in r.stderr
        assert list(tmp_path.iterdir()) == []


def test_export_errors_leave_nothing_behind(built: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "out.parquet"
    r = run_cli("export", str(built["golden"]), str(out), "--columns", "thread_id,nope")
    assert r.returncode == 1 and 'no column "nope"' in r.stderr and "Traceback" not in r.stderr
    assert list(tmp_path.iterdir()) == []
    r = run_cli("export", str(built["golden"]), str(tmp_path / "missing" / "x.parquet"))
    assert r.returncode == 1 and "missing" in r.stderr and "Traceback" not in r.stderr
    r = run_cli("export", str(tmp_path / "no-cache"), str(out))
    assert r.returncode == 1 and "no-cache" in r.stderr
    assert list(tmp_path.iterdir()) == []


def test_the_guides_schema_table_is_the_schema(built: dict[str, Path]) -> None:
    """python/README.md documents the columns (they were only in the stubs):
    each level's columns, in order, with their types and nullability, are
    the table's rows."""
    text = (REPO / "python/README.md").read_text()
    rows = re.findall(r"^\| `(\w+)` \| (both|reactions|threads) \| ([^|]+) \|", text, re.M)
    assert len(rows) > 25, rows
    named = {"timestamp[s, UTC]": "timestamp[s, tz=UTC]", "float32": "float", "float64": "double"}
    cache = socialctx.open(built["pheme-veracity"])
    for level in ("reactions", "threads"):
        schema = pa.table(cache.to_arrow(level=level)).schema
        documented = [(n, t.strip()) for n, lv, t in rows if lv in ("both", level)]
        if level == "reactions":
            # On request only: checked against its own schema.
            ((_, typ),) = [d for d in documented if d[0] == "features"]
            documented.remove(("features", typ))
            f = pa.table(cache.to_arrow(columns=["features"])).schema.field("features")
            assert typ.replace("\\", "") == "fixed_size_list<float32>[28]"
            assert f.type.list_size == 28 and f.type.value_type == pa.float32(), f.type
        # The 28 features and the extended columns are one row each.
        rows_of = socialctx.FEATURE_NAMES + cache.reaction_columns if level == "reactions" else []
        got = [f for f in schema if f.name not in rows_of]
        assert [n for n, _ in documented] == [f.name for f in got], level
        for (name, typ), f in zip(documented, got):
            base, null, _ = typ.partition(", null")
            assert named.get(base, base) == str(f.type), (level, name, typ, f.type)
            assert f.nullable == bool(null), (level, name)


# --- streaming: batches built as they are pulled --------------------------------


def reversed_stream(cache: socialctx.Cache, **kw: Any) -> Any:
    """The threads back to front: no thread's reactions follow the
    previous one's, so about one reaction batch per thread (many batches on
    a small corpus)."""
    return cache.to_arrow(positions=list(range(len(cache)))[::-1], **kw)


def test_batches_are_built_when_pulled_not_up_front(built: dict[str, Path]) -> None:
    # to_arrow built every batch up front (~5 KB a thread: 1.7 GB at 128k
    # threads); the stream already was one, so it builds them when read.
    cache = socialctx.open(built["pheme-veracity"])
    x = reversed_stream(cache)
    n = x.num_batches
    assert n > 3
    assert x.batches_built == 0 and len(x) > 0  # rows and cuts known, nothing built
    r = pa.RecordBatchReader.from_stream(x)
    assert x.batches_built == 0  # opening a stream builds nothing either
    first = r.read_next_batch()
    assert x.batches_built == 1
    r.read_next_batch()
    assert x.batches_built == 2
    rest = r.read_all()
    assert x.batches_built == n
    assert first.num_rows + rest.num_rows < len(x)  # the second is in neither
    # Each read is a new stream that builds its own batches.
    whole = pa.table(x)
    assert x.batches_built == 2 * n and whole.num_rows == len(x)
    assert [b.num_rows for b in whole.to_batches()][0] == first.num_rows


def test_batches_are_bounded_in_rows(built: dict[str, Path]) -> None:
    cache = socialctx.open(built["sample"])
    big = cache.to_arrow(level="threads", positions=[0] * 200_000, columns=["thread_id"])
    sizes = [b.num_rows for b in pa.RecordBatchReader.from_stream(big)]
    assert sum(sizes) == 200_000 and max(sizes) == 1 << 16, sizes


def parquet_bytes(write: Any, data: Any, **kw: Any) -> bytes:
    """What `write(data, file, **kw)` writes."""
    buf = io.BytesIO()
    write(data, buf, **kw)
    return buf.getvalue()


@pytest.mark.parametrize("level", ["reactions", "threads"])
def test_streamed_export_is_write_table_byte_for_byte(built: dict[str, Path], level: str) -> None:
    """`export` writes row groups as the batches come, holding one row
    group's batches; the file is the one `pq.write_table` of the whole
    table wrote, byte for byte, wherever row groups and batches cut."""
    from socialctx.describe import _write_stream

    cache = socialctx.open(built["pheme-veracity"])
    for x in (cache.to_arrow(level=level), reversed_stream(cache, level=level)):
        table = pa.table(x)
        cuts = np.cumsum([b.num_rows for b in table.to_batches()]).tolist()
        # The default; row groups ending inside batches, on a batch's end,
        # spanning several batches, and one row each.
        for size in [None, 7, cuts[0], cuts[min(2, len(cuts) - 1)], len(x) // 3 + 1, 1]:
            want = parquet_bytes(pq.write_table, table, row_group_size=size)
            kw = {} if size is None else {"row_group_rows": size}
            got = parquet_bytes(_write_stream, x, **kw)
            assert got == want, (level, size)
        assert pq.read_table(io.BytesIO(got)).num_rows == len(x)
    empty = cache.to_arrow(level=level, positions=[])
    want = parquet_bytes(pq.write_table, pa.table(empty))
    assert parquet_bytes(_write_stream, empty) == want


def test_export_command_writes_what_write_table_wrote(
    built: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "out.parquet"
    r = run_cli("export", str(built["sample"]), str(out))
    assert r.returncode == 0, r.stderr
    table = pa.table(socialctx.open(built["sample"]).to_arrow())
    assert out.read_bytes() == parquet_bytes(pq.write_table, table)


def test_hostile_streams(built: dict[str, Path], tmp_path: Path) -> None:
    cache = socialctx.open(built["pheme-veracity"])
    x = reversed_stream(cache)
    want = pa.table(x)
    n = x.num_batches
    # A consumer drops its stream midway: nothing else is built, and the
    # data reads whole again.
    r = pa.RecordBatchReader.from_stream(x)
    r.read_next_batch()
    del r
    gc.collect()
    assert x.batches_built == n + 1
    assert pa.table(x).equals(want)
    # Pulling after close is pyarrow's error, not a crash or a batch.
    r = pa.RecordBatchReader.from_stream(x)
    r.read_next_batch()
    r.close()
    with pytest.raises((pa.ArrowException, OSError, ValueError)):
        r.read_next_batch()
    # Pulling past the end: StopIteration, every time.
    r = pa.RecordBatchReader.from_stream(x)
    r.read_all()
    for _ in range(2):
        with pytest.raises(StopIteration):
            r.read_next_batch()
    # A capsule is one stream: importing it twice is refused.
    capsule = x.__arrow_c_stream__()
    pa.RecordBatchReader._import_from_c_capsule(capsule).read_all()
    with pytest.raises((ValueError, pa.ArrowException)):
        pa.RecordBatchReader._import_from_c_capsule(capsule)
    # Streams of one ArrowData pulled from several threads at once (pyarrow
    # pulls with the GIL released): each reads the whole data.
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(4) as pool:
        tables = list(pool.map(pa.table, [x] * 8))
    assert all(t.equals(want) for t in tables)
    # The stream outlives the ArrowData and the Cache that made it.
    r = pa.RecordBatchReader.from_stream(reversed_stream(cache))
    del cache, x
    gc.collect()
    assert r.read_all().equals(want)


def test_a_stream_reads_its_cache_as_it_was_when_rebuilt_underneath(
    built: dict[str, Path], tmp_path: Path
) -> None:
    """The stream maps the generation to_arrow opened: a build publishing
    another corpus into the same directory mid-stream changes nothing it
    yields; a cache opened after it reads the new one."""
    cache_dir = tmp_path / "c"
    shutil.copytree(built["pheme-veracity"], cache_dir)
    cache = socialctx.open(cache_dir)
    x = reversed_stream(cache)
    want = pa.table(x)
    r = pa.RecordBatchReader.from_stream(x)
    got = [r.read_next_batch()]
    socialctx.build(REPO / CORPORA["golden"][0], cache_dir, workers=1, progress=False)
    got += list(r)
    assert pa.Table.from_batches(got).equals(want)
    assert pa.table(x).equals(want)
    new = socialctx.open(cache_dir)
    assert len(new) == len(socialctx.open(built["golden"])) != len(cache)
    assert len(pa.table(new.to_arrow())) == len(socialctx.open(built["golden"]).to_arrow())
