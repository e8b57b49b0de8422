//! `Cache.to_arrow`: the cache as an Arrow C stream (the Arrow PyCapsule
//! interface, `__arrow_c_stream__`), which pyarrow, polars, DuckDB, pandas
//! (through pyarrow) and `datasets` read without parsing anything.
//!
//! The arrays are arrow-rs's, exported through its C data interface. One
//! record batch per run of threads whose reactions lie back to back in one
//! shard (all of a shard's threads when `positions` is None), so that an
//! extended column of a batch is one slice of the memory map: its values
//! are handed over without a copy (the buffer's owner is the cache's
//! reader, which keeps the map alive), and only its validity bitmap (NaN
//! means unknown, which Arrow spells null) is computed. Everything else is
//! built: ids, times, kinds and parents are fields of an array of structs
//! on disk, the 28 features are stored row by row (`[f32; 28]` per
//! reaction) and an Arrow column is one feature of every row (a transpose),
//! and the strings repeat each thread's value per reaction. The rows as they
//! are stored are the `features` column on request: a
//! `fixed_size_list<float32>[28]`, shared like the extended columns.

use std::ffi::CStr;
use std::panic::AssertUnwindSafe;
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use arrow_array::builder::{StringBuilder, UInt64Builder};
use arrow_array::ffi::FFI_ArrowSchema;
use arrow_array::ffi_stream::FFI_ArrowArrayStream;
use arrow_array::{
    ArrayRef, BooleanArray, FixedSizeListArray, Float32Array, Float64Array, Int8Array, Int64Array,
    RecordBatch, RecordBatchReader, StringArray, TimestampSecondArray, UInt32Array, UInt64Array,
};
use arrow_buffer::{BooleanBuffer, Buffer, NullBuffer, ScalarBuffer};
use arrow_schema::{ArrowError, DataType, Field, Schema, SchemaRef, TimeUnit};
use pyo3::exceptions::{PyKeyError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyCapsule;

use socialctx as sc;

use crate::convert::{Reader, some_positions_of};
use crate::error::{Error, Result};
use crate::thread::view_at;

/// The columns of the two levels, in their default order.
const REACTION_BASE: [&str; 14] = [
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
];

const THREAD_BASE: [&str; 19] = [
    "thread_id",
    "position",
    "event",
    "label",
    "label_code",
    "veracity",
    "annotated_rumour",
    "source_user_id",
    "source_user_key",
    "source_created_at",
    "reactions",
    "replies",
    "retweets",
    "source_copies",
    "depth",
    "first_reply_s",
    "median_reply_s",
    "last_reply_s",
    "retweets_before_first_reply",
];

/// The 28 features as one `fixed_size_list<float32>[28]` column: the
/// stored rows, shared. Only when named in `columns` (a list column is what
/// a tensor wants, not what a DataFrame shows).
const FEATURES: &str = "features";

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Level {
    Reactions,
    Threads,
}

fn level_columns(level: Level) -> Vec<&'static str> {
    match level {
        Level::Reactions => REACTION_BASE
            .iter()
            .chain(sc::Feature::NAMES.iter())
            .chain(sc::Manifest::REACTION_COLUMNS.iter())
            .copied()
            .collect(),
        Level::Threads => THREAD_BASE.to_vec(),
    }
}

fn data_type(level: Level, name: &str) -> DataType {
    let utc = || DataType::Timestamp(TimeUnit::Second, Some("UTC".into()));
    if level == Level::Reactions && name == FEATURES {
        return DataType::FixedSizeList(feature_item(), sc::Feature::COUNT as i32);
    }
    if level == Level::Reactions
        && (sc::Manifest::REACTION_COLUMNS.contains(&name)
            || sc::Feature::from_name(name).is_some())
    {
        return DataType::Float32;
    }
    match name {
        "thread_id" | "reaction_id" | "parent_id" | "position" | "user_key" | "source_user_key" => {
            DataType::UInt64
        }
        "event" | "label" | "veracity" | "annotated_rumour" | "kind" | "parent_how"
        | "source_user_id" => DataType::Utf8,
        "label_code" => DataType::Int8,
        "is_source_copy" => DataType::Boolean,
        "created_at" | "source_created_at" => utc(),
        "reactions"
        | "replies"
        | "retweets"
        | "source_copies"
        | "depth"
        | "retweets_before_first_reply" => DataType::UInt32,
        "first_reply_s" | "last_reply_s" => DataType::Int64,
        "median_reply_s" => DataType::Float64,
        _ => DataType::Null,
    }
}

fn nullable(level: Level, name: &str) -> bool {
    matches!(
        name,
        "veracity" | "annotated_rumour" | "first_reply_s" | "median_reply_s" | "last_reply_s"
    ) || (level == Level::Reactions && sc::Manifest::REACTION_COLUMNS.contains(&name))
}

/// The memory map's owner, as the owner of a zero-copy Arrow buffer.
struct MapOwner(#[allow(dead_code)] AssertUnwindSafe<Arc<Reader>>);

/// One thread's part of a batch, with what the batch's columns need.
struct Part<'a> {
    position: usize,
    view: sc::ThreadView<'a>,
    num: sc::NumView<'a>,
}

/// Per-thread values both levels share.
fn veracity(reader: &Reader, t: &sc::ThreadView<'_>) -> Option<&'static str> {
    crate::cache::veracity_of(reader, &t.numbers()).map(sc::Veracity::as_str)
}

fn annotated(reader: &Reader, t: &sc::ThreadView<'_>) -> Option<&'static str> {
    let c = reader.thread_column("annotated_rumour")?;
    sc::Annotated::from_code(t.thread_value(c)?).map(sc::Annotated::as_str)
}

/// A string column with one value per thread repeated `times(thread)` times.
fn repeated<'a>(
    parts: &[Part<'a>],
    times: impl Fn(&Part<'a>) -> usize,
    value: impl Fn(&Part<'a>) -> Option<&'a str>,
) -> ArrayRef {
    let rows: usize = parts.iter().map(&times).sum();
    let mut b = StringBuilder::with_capacity(rows, rows * 8);
    for p in parts {
        let v = value(p);
        for _ in 0..times(p) {
            b.append_option(v);
        }
    }
    Arc::new(b.finish())
}

/// The values of `slices` (one per thread of a batch, back to back in one
/// shard) as one buffer: the memory map's, shared, when they are one
/// aligned run; else (never for the batches `batches` makes) built.
fn shared_values(owner: &Arc<MapOwner>, slices: &[&[f32]]) -> ScalarBuffer<f32> {
    let rows: usize = slices.iter().map(|s| s.len()).sum();
    let contiguous = slices.windows(2).all(|w| {
        let end = w[0].as_ptr_range().end;
        std::ptr::eq(end, w[1].as_ptr())
    });
    match slices.iter().find(|s| !s.is_empty()) {
        Some(first) if contiguous && first.as_ptr().align_offset(align_of::<f32>()) == 0 => {
            let ptr = NonNull::from(&first[0]).cast::<u8>();
            let owner: Arc<dyn arrow_buffer::alloc::Allocation> = owner.clone();
            // SAFETY: the slices are one run of `rows` f32 in a memory map
            // (checked contiguous and aligned above) that is never written
            // and is unmapped only when the reader drops; the buffer holds
            // the reader (through `owner`) for as long as it lives.
            let buffer =
                unsafe { Buffer::from_custom_allocation(ptr, rows * size_of::<f32>(), owner) };
            ScalarBuffer::new(buffer, 0, rows)
        }
        _ => slices.iter().flat_map(|s| s.iter().copied()).collect(),
    }
}

/// An extended column of the reactions of a batch: the map's values; NaN
/// (unknown) is null.
fn shared_column(owner: &Arc<MapOwner>, slices: &[&[f32]], rows: usize) -> ArrayRef {
    if slices.iter().all(|s| s.is_empty()) {
        // A cache built without extended columns.
        return Arc::new(Float32Array::new_null(rows));
    }
    let values = shared_values(owner, slices);
    let valid = BooleanBuffer::collect_bool(values.len(), |i| !values[i].is_nan());
    let nulls = Some(NullBuffer::new(valid)).filter(|n| n.null_count() > 0);
    Arc::new(Float32Array::new(values, nulls))
}

/// The 28 features as one fixed-size-list column over the stored rows.
fn features_column(owner: &Arc<MapOwner>, parts: &[Part<'_>]) -> ArrayRef {
    let slices: Vec<&[f32]> = parts
        .iter()
        .map(|p| p.view.features().as_flattened())
        .collect();
    let values = Float32Array::new(shared_values(owner, &slices), None);
    Arc::new(FixedSizeListArray::new(
        feature_item(),
        sc::Feature::COUNT as i32,
        Arc::new(values),
        None,
    ))
}

fn feature_item() -> Arc<Field> {
    Arc::new(Field::new("item", DataType::Float32, false))
}

fn reaction_batch(
    reader: &Reader,
    owner: &Arc<MapOwner>,
    schema: &SchemaRef,
    parts: &[Part<'_>],
) -> std::result::Result<RecordBatch, ArrowError> {
    let rows: usize = parts.iter().map(|p| p.view.reaction_count()).sum();
    let count = |p: &Part<'_>| p.view.reaction_count();
    let records = || parts.iter().flat_map(|p| p.num.reaction_records());
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
    for field in schema.fields() {
        let name = field.name().as_str();
        let column: ArrayRef = match name {
            "thread_id" => Arc::new(UInt64Array::from_iter_values(
                parts
                    .iter()
                    .flat_map(|p| std::iter::repeat_n(p.view.source_id(), count(p))),
            )),
            "position" => Arc::new(UInt64Array::from_iter_values(
                parts
                    .iter()
                    .flat_map(|p| std::iter::repeat_n(p.position as u64, count(p))),
            )),
            "event" => repeated(parts, count, |p| Some(p.view.event())),
            "label" => repeated(parts, count, |p| Some(p.view.label())),
            "label_code" => {
                Arc::new(Int8Array::from_iter_values(parts.iter().flat_map(|p| {
                    std::iter::repeat_n(p.view.label_code(), count(p))
                })))
            }
            "veracity" => repeated(parts, count, |p| veracity(reader, &p.view)),
            "annotated_rumour" => repeated(parts, count, |p| annotated(reader, &p.view)),
            "kind" => Arc::new(StringArray::from_iter_values(
                records().map(|r| r.kind.as_str()),
            )),
            // The source tweet stored again among its own reactions
            // (PHEME's reactions/ folders): kind "reply" as stored, but no
            // reply to itself; the threads level and `describe` leave it out
            // of "replies".
            "is_source_copy" => Arc::new(BooleanArray::from_iter(parts.iter().flat_map(|p| {
                let source = p.view.source_id();
                p.num.reaction_records().map(move |r| Some(r.id == source))
            }))),
            "reaction_id" => Arc::new(UInt64Array::from_iter_values(records().map(|r| r.id))),
            "user_key" => Arc::new(UInt64Array::from_iter_values(records().map(|r| r.user_key))),
            "parent_id" => {
                let mut b = UInt64Builder::with_capacity(rows);
                for p in parts {
                    let ids: Vec<u64> = p.num.reaction_records().map(|r| r.id).collect();
                    for r in p.num.reaction_records() {
                        let parent = ids.get(r.parent as usize).copied();
                        b.append_value(parent.unwrap_or(p.view.source_id()));
                    }
                }
                Arc::new(b.finish())
            }
            "parent_how" => Arc::new(StringArray::from_iter_values(
                records().map(|r| r.parent_how.as_str()),
            )),
            "created_at" => Arc::new(
                TimestampSecondArray::from_iter_values(records().map(|r| r.created_at))
                    .with_timezone("UTC"),
            ),
            "features" => features_column(owner, parts),
            _ => match sc::Feature::from_name(name) {
                Some(f) => Arc::new(Float32Array::from_iter_values(
                    parts
                        .iter()
                        .flat_map(|p| p.view.features().iter().map(move |row| row[f])),
                )),
                None => {
                    let c = reader.reaction_column(name);
                    let slices: Vec<&[f32]> = parts
                        .iter()
                        .map(|p| c.map_or(&[][..], |c| p.num.column(c)))
                        .collect();
                    shared_column(owner, &slices, rows)
                }
            },
        };
        columns.push(column);
    }
    RecordBatch::try_new_with_options(
        schema.clone(),
        columns,
        &arrow_array::RecordBatchOptions::new().with_row_count(Some(rows)),
    )
    .map_err(|e| internal(format!("an Arrow batch is inconsistent: {e}")))
}

/// The per-thread statistics of the threads level.
struct ThreadStats {
    reactions: u32,
    source_copies: u32,
    replies: u32,
    retweets: u32,
    depth: u32,
    first_reply_s: Option<i64>,
    median_reply_s: Option<f64>,
    last_reply_s: Option<i64>,
    retweets_before_first_reply: u32,
}

fn thread_stats(t: &Part<'_>) -> ThreadStats {
    let source = t.view.source_created_at();
    let reactions = t.view.reaction_count();
    let mut depths: Vec<u32> = Vec::with_capacity(reactions);
    let mut delays: Vec<i64> = Vec::new();
    let (mut replies, mut retweets, mut depth, mut early_retweets) = (0u32, 0u32, 0u32, 0u32);
    let mut copies = 0u32;
    let source_id = t.view.source_id();
    for r in t.num.reaction_records() {
        // A parent is always an earlier reply or the source (FEATURES.md,
        // "Propagation tree"), so its depth is known here.
        let d = match r.parent {
            sc::ReactionNum::PARENT_SOURCE => 1,
            p => depths.get(p as usize).map_or(1, |d| d + 1),
        };
        depths.push(d);
        // The source tweet stored again among its own reactions (PHEME's
        // reactions/ folders hold it for many threads, at the source's
        // second): not a reply to itself, so no reply, depth or delay.
        if r.id == source_id {
            copies += 1;
            continue;
        }
        match r.kind {
            sc::ReactionKind::Reply => {
                replies += 1;
                depth = depth.max(d);
                delays.push(r.created_at - source);
            }
            sc::ReactionKind::Retweet => {
                retweets += 1;
                if replies == 0 {
                    early_retweets += 1;
                }
            }
        }
    }
    // Reactions are in (created_at, id) order, so the delays are sorted.
    let median = match delays.len() {
        0 => None,
        n if n % 2 == 1 => Some(delays[n / 2] as f64),
        n => Some((delays[n / 2 - 1] as f64 + delays[n / 2] as f64) / 2.0),
    };
    ThreadStats {
        reactions: reactions as u32,
        source_copies: copies,
        replies,
        retweets,
        depth,
        first_reply_s: delays.first().copied(),
        median_reply_s: median,
        last_reply_s: delays.last().copied(),
        retweets_before_first_reply: early_retweets,
    }
}

fn thread_batch(
    reader: &Reader,
    schema: &SchemaRef,
    parts: &[Part<'_>],
) -> std::result::Result<RecordBatch, ArrowError> {
    let stats: Vec<ThreadStats> = parts.iter().map(thread_stats).collect();
    let one = |_: &Part<'_>| 1;
    let u32s = |f: fn(&ThreadStats) -> u32| -> ArrayRef {
        Arc::new(UInt32Array::from_iter_values(stats.iter().map(f)))
    };
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
    for field in schema.fields() {
        let column: ArrayRef = match field.name().as_str() {
            "thread_id" => Arc::new(UInt64Array::from_iter_values(
                parts.iter().map(|p| p.view.source_id()),
            )),
            "position" => Arc::new(UInt64Array::from_iter_values(
                parts.iter().map(|p| p.position as u64),
            )),
            "event" => repeated(parts, one, |p| Some(p.view.event())),
            "label" => repeated(parts, one, |p| Some(p.view.label())),
            "label_code" => Arc::new(Int8Array::from_iter_values(
                parts.iter().map(|p| p.view.label_code()),
            )),
            "veracity" => repeated(parts, one, |p| veracity(reader, &p.view)),
            "annotated_rumour" => repeated(parts, one, |p| annotated(reader, &p.view)),
            "source_user_id" => repeated(parts, one, |p| Some(p.view.source_user_id())),
            "source_user_key" => Arc::new(UInt64Array::from_iter_values(
                parts.iter().map(|p| p.view.source_user_key()),
            )),
            "source_created_at" => Arc::new(
                TimestampSecondArray::from_iter_values(
                    parts.iter().map(|p| p.view.source_created_at()),
                )
                .with_timezone("UTC"),
            ),
            "reactions" => u32s(|s| s.reactions),
            "source_copies" => u32s(|s| s.source_copies),
            "replies" => u32s(|s| s.replies),
            "retweets" => u32s(|s| s.retweets),
            "depth" => u32s(|s| s.depth),
            "retweets_before_first_reply" => u32s(|s| s.retweets_before_first_reply),
            "first_reply_s" => {
                Arc::new(Int64Array::from_iter(stats.iter().map(|s| s.first_reply_s)))
            }
            "last_reply_s" => Arc::new(Int64Array::from_iter(stats.iter().map(|s| s.last_reply_s))),
            "median_reply_s" => Arc::new(Float64Array::from_iter(
                stats.iter().map(|s| s.median_reply_s),
            )),
            other => {
                return Err(ArrowError::SchemaError(format!(
                    "socialctx internal: no thread column {other:?}"
                )));
            }
        };
        columns.push(column);
    }
    RecordBatch::try_new_with_options(
        schema.clone(),
        columns,
        &arrow_array::RecordBatchOptions::new().with_row_count(Some(parts.len())),
    )
    .map_err(|e| internal(format!("an Arrow batch is inconsistent: {e}")))
}

/// Whether thread `b`'s reactions start where thread `a`'s end in the same
/// shard (then one batch shares one slice of each extended column).
fn follows(a: &sc::ThreadView<'_>, b: &sc::ThreadView<'_>) -> bool {
    let (a, b) = (a.features(), b.features());
    std::ptr::eq(a.as_ptr_range().end, b.as_ptr())
}

/// The columns `columns` (all of `level` when None), checked.
fn schema_of(level: Level, columns: Option<Vec<String>>) -> PyResult<SchemaRef> {
    let all = level_columns(level);
    let names: Vec<String> = match columns {
        None => all.iter().map(|s| (*s).to_owned()).collect(),
        Some(names) => {
            for (i, n) in names.iter().enumerate() {
                let extra = level == Level::Reactions && n == FEATURES;
                if !all.contains(&n.as_str()) && !extra {
                    return Err(PyKeyError::new_err(format!(
                        "no column {n:?} at level {:?} (the columns are {all:?}{})",
                        level_name(level),
                        if level == Level::Reactions {
                            ", and \"features\" on request"
                        } else {
                            ""
                        }
                    )));
                }
                if names[..i].contains(n) {
                    return Err(PyValueError::new_err(format!(
                        "column {n:?} is named twice"
                    )));
                }
            }
            names
        }
    };
    let fields: Vec<Field> = names
        .iter()
        .map(|n| Field::new(n, data_type(level, n), nullable(level, n)))
        .collect();
    Ok(Arc::new(Schema::new(fields)))
}

fn level_name(level: Level) -> &'static str {
    match level {
        Level::Reactions => "reactions",
        Level::Threads => "threads",
    }
}

/// Rows a batch holds at most (a thread is never split, so one thread of
/// more rows is one batch of its own): a built batch is allocated whole,
/// and a stream holds one at a time, a few MiB at most.
const MAX_ROWS: usize = 1 << 16;

/// Where the batches of one `to_arrow` are cut, found up front by a pass
/// over the threads' headers (which also checks every shard they lie in, so
/// a damaged cache fails `to_arrow`, not a consumer mid-stream); the
/// batches themselves are built only when a stream is read.
struct Plan {
    /// The threads, in order (None: every thread of the cache).
    positions: Option<Vec<usize>>,
    /// Batch `i` is the threads `starts[i]..starts[i + 1]` of `positions`;
    /// one empty batch when there is no thread (a table of no chunks is
    /// one `datasets` cannot cast).
    starts: Vec<usize>,
    rows: usize,
}

impl Plan {
    fn new(reader: &Reader, level: Level, positions: Option<Vec<usize>>) -> Result<Plan> {
        let count = positions.as_ref().map_or(reader.len(), Vec::len);
        let at = |i: usize| positions.as_ref().map_or(i, |p| p[i]);
        let mut starts = vec![0];
        let (mut rows, mut run_rows) = (0usize, 0usize);
        let mut last: Option<sc::ThreadView<'_>> = None;
        for i in 0..count {
            let view = view_at(reader, at(i))?;
            let n = match level {
                Level::Reactions => view.reaction_count(),
                Level::Threads => 1,
            };
            // One batch per run of threads back to back in one shard, so
            // that its extended columns are one slice of the map.
            let breaks = last.as_ref().is_some_and(|last| {
                (level == Level::Reactions && !follows(last, &view)) || run_rows + n > MAX_ROWS
            });
            if breaks {
                starts.push(i);
                run_rows = 0;
            }
            run_rows += n;
            rows += n;
            last = Some(view);
        }
        starts.push(count);
        Ok(Plan {
            positions,
            starts,
            rows,
        })
    }

    fn len(&self) -> usize {
        self.starts.len() - 1
    }

    /// Builds batch `i` (below [`len`](Self::len)). No Python here: a
    /// consumer may pull from any thread, with or without the GIL, so a
    /// failure is an Arrow error carrying its message.
    fn build(
        &self,
        reader: &Reader,
        owner: &Arc<MapOwner>,
        level: Level,
        schema: &SchemaRef,
        i: usize,
    ) -> std::result::Result<RecordBatch, ArrowError> {
        let range = self.starts[i]..self.starts[i + 1];
        let mut parts = Vec::with_capacity(range.len());
        for j in range {
            let position = self.positions.as_ref().map_or(j, |p| p[j]);
            let view = reader
                .thread(position)
                .map_err(|e| internal(e.to_string()))?
                .ok_or_else(|| internal(format!("no thread at position {position}")))?;
            parts.push(Part {
                position,
                num: view.numbers(),
                view,
            });
        }
        if parts.is_empty() {
            return Ok(RecordBatch::new_empty(schema.clone()));
        }
        match level {
            Level::Reactions => reaction_batch(reader, owner, schema, &parts),
            Level::Threads => thread_batch(reader, schema, &parts),
        }
    }
}

/// One stream of a [`PyArrowData`]: builds each batch when the consumer
/// pulls it, and holds none after handing it over.
struct Batches {
    data: Arc<Shared>,
    next: usize,
}

impl Iterator for Batches {
    type Item = std::result::Result<RecordBatch, ArrowError>;

    fn next(&mut self) -> Option<Self::Item> {
        let d = &*self.data;
        if self.next >= d.plan.len() {
            return None;
        }
        let i = self.next;
        self.next += 1;
        d.built.fetch_add(1, Ordering::Relaxed);
        Some(d.plan.build(&*d.reader, &d.owner, d.level, &d.schema, i))
    }
}

impl RecordBatchReader for Batches {
    fn schema(&self) -> SchemaRef {
        self.data.schema.clone()
    }
}

/// A batch that could not be built, as the consumer's Arrow error (the
/// plan read every thread's header, so only an internal fault lands here).
fn internal(message: String) -> ArrowError {
    ArrowError::ComputeError(format!("socialctx internal: {message}"))
}

/// What an [`PyArrowData`] and its streams share.
struct Shared {
    reader: Arc<Reader>,
    owner: Arc<MapOwner>,
    schema: SchemaRef,
    level: Level,
    plan: Plan,
    /// Batches built so far by every stream (the observable of laziness).
    built: AtomicUsize,
}

/// Arrow data read from a cache (made by `Cache.to_arrow`): pass it to
/// `pyarrow.table`, `polars.DataFrame`, `duckdb.sql` or anything that reads
/// the Arrow PyCapsule interface; it can be read any number of times, and
/// each read builds its batches one at a time as they are pulled.
#[pyclass(frozen, module = "socialctx", name = "ArrowData")]
pub(crate) struct PyArrowData {
    data: Arc<Shared>,
}

const STREAM: &CStr = c"arrow_array_stream";
const SCHEMA: &CStr = c"arrow_schema";

#[pymethods]
impl PyArrowData {
    /// The Arrow PyCapsule interface: a new stream of the batches each call
    /// (`requested_schema` is not honoured: the schema is the one given).
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_stream__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        let _ = requested_schema;
        let reader = Batches {
            data: Arc::clone(&self.data),
            next: 0,
        };
        let stream = FFI_ArrowArrayStream::new(Box::new(reader));
        PyCapsule::new_with_value(py, stream, STREAM)
    }

    /// The schema, through the Arrow PyCapsule interface.
    fn __arrow_c_schema__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyCapsule>> {
        let schema = FFI_ArrowSchema::try_from(self.data.schema.as_ref())
            .map_err(|e| Error::new_err(format!("internal: Arrow schema: {e}")))?;
        PyCapsule::new_with_value(py, schema, SCHEMA)
    }

    /// Number of rows.
    fn __len__(&self) -> usize {
        self.data.plan.rows
    }

    /// The column names, in order.
    #[getter]
    fn column_names(&self) -> Vec<String> {
        self.data
            .schema
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect()
    }

    /// "reactions" or "threads".
    #[getter]
    fn level(&self) -> &'static str {
        level_name(self.data.level)
    }

    /// Number of record batches in the stream.
    #[getter]
    fn num_batches(&self) -> usize {
        self.data.plan.len()
    }

    /// Record batches built so far by all of this object's streams: each
    /// is built when a consumer pulls it, none up front.
    #[getter]
    fn batches_built(&self) -> usize {
        self.data.built.load(Ordering::Relaxed)
    }

    fn __repr__(&self) -> String {
        format!(
            "socialctx.ArrowData(level={:?}, rows={}, columns={}, batches={})",
            level_name(self.data.level),
            self.__len__(),
            self.data.schema.fields().len(),
            self.num_batches()
        )
    }
}

/// `Cache.to_arrow` (see the stub for the documentation).
pub(crate) fn to_arrow(
    py: Python<'_>,
    reader: &Arc<Reader>,
    level: &str,
    columns: Option<Vec<String>>,
    positions: Option<&Bound<'_, PyAny>>,
) -> Result<PyArrowData> {
    let level = match level {
        "reactions" => Level::Reactions,
        "threads" => Level::Threads,
        other => {
            return Err(PyValueError::new_err(format!(
                "level must be \"reactions\" or \"threads\", not {other:?}"
            ))
            .into());
        }
    };
    // Which code computed the values (issue 42), kept by a Parquet file.
    let definition = reader.manifest().definition.clone();
    let schema = Arc::new(
        Arc::unwrap_or_clone(schema_of(level, columns)?).with_metadata(
            std::collections::HashMap::from([("socialctx.definition".to_owned(), definition)]),
        ),
    );
    let positions = some_positions_of(positions, &**reader)?;
    let plan = py.detach(|| Plan::new(&**reader, level, positions))?;
    Ok(PyArrowData {
        data: Arc::new(Shared {
            reader: Arc::clone(reader),
            owner: Arc::new(MapOwner(AssertUnwindSafe(Arc::clone(reader)))),
            schema,
            level,
            plan,
            built: AtomicUsize::new(0),
        }),
    })
}
