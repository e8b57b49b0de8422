//! Conversions between Python values and the crate's: the reader every
//! class holds, positions and labels from NumPy arrays or sequences, the
//! option strings, keyword options into typed structs, and read-only NumPy
//! views of the memory map.

use std::time::Duration;

use numpy::ndarray::{ArrayView1, ArrayView2};
use numpy::{
    Element, PyArray1, PyArray2, PyArrayDescrMethods, PyArrayMethods, PyUntypedArray,
    PyUntypedArrayMethods,
};
use pyo3::conversion::FromPyObjectOwned;
use pyo3::exceptions::{PyIndexError, PyKeyError, PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict};

use socialctx as sc;

use crate::error::{Error, deprecated_item};

/// An open cache, validated all at once or file by file on first use: the
/// one type every class reads through (`socialctx.open` makes it).
pub(crate) type Reader = dyn sc::ThreadSource + Send + Sync;

/// An argument that is a Cache, or has one as its `cache` (a Loader), as
/// the cache's reader. Extracted in `cache.rs`, beside the Cache class, so
/// that a module taking one (`vocab.rs`) need not import `cache.rs`, which
/// imports it.
pub(crate) struct CacheReader(pub(crate) std::sync::Arc<Reader>);

/// Python's reading of index `i` into `len` items (negative counts from
/// the end); IndexError with `what(i, len)` when out of range.
pub(crate) fn py_index(
    i: isize,
    len: usize,
    what: impl FnOnce(isize, usize) -> String,
) -> PyResult<usize> {
    let n = len as isize;
    let j = if i < 0 { i + n } else { i };
    if j < 0 || j >= n {
        return Err(PyIndexError::new_err(what(i, len)));
    }
    Ok(j as usize)
}

/// How a negative thread position reads.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Negative {
    /// As Python's indexing: from the end (`Cache`'s reads, `to_arrow`).
    FromEnd,
    /// Refused: the Loader's positions, where -1 is more often a "none"
    /// marker than a wish for the last thread.
    Refused,
}

/// Positions from an int64 NumPy array or any iterable of ints, checked
/// against the cache's length. Booleans (a mask) and floats are refused,
/// never converted: read as integers, a mask's True/False would pick
/// threads 1 and 0, silently.
pub(crate) fn positions_of(
    obj: &Bound<'_, PyAny>,
    reader: &Reader,
    negative: Negative,
) -> PyResult<Vec<usize>> {
    same_generation(obj, reader, "positions")?;
    let len = reader.len();
    let check = |i: i64| -> PyResult<usize> {
        let j = if i < 0 && negative == Negative::FromEnd {
            i + len as i64
        } else {
            i
        };
        if j < 0 || j as u64 >= len as u64 {
            let hint = if negative == Negative::Refused {
                format!(
                    " (positions are 0 to {}; negative ones do not count from the end)",
                    len as i64 - 1
                )
            } else {
                String::new()
            };
            Err(PyIndexError::new_err(format!(
                "thread position {i} out of range for a cache of {len} threads{hint}"
            )))
        } else {
            Ok(j as usize)
        }
    };
    if let Ok(array) = obj.cast::<PyArray1<i64>>() {
        let ro = array.readonly();
        return ro.as_array().iter().map(|&i| check(i)).collect();
    }
    if let Ok(array) = obj.cast::<PyUntypedArray>() {
        let kind = array.dtype().kind();
        if kind != b'i' && kind != b'u' {
            return Err(PyTypeError::new_err(format!(
                "positions must be integers, not an array of {} (a boolean mask? \
                 use np.flatnonzero(mask))",
                array.dtype()
            )));
        }
    }
    let mut out = Vec::new();
    for item in obj.try_iter()? {
        let item = item?;
        if item.is_instance_of::<PyBool>() {
            return Err(PyTypeError::new_err(
                "positions must be integers, not booleans (a mask? use np.flatnonzero(mask))",
            ));
        }
        out.push(check(item.extract::<i64>()?)?);
    }
    Ok(out)
}

/// Positions when given (and not None), else None.
pub(crate) fn some_positions_of(
    obj: Option<&Bound<'_, PyAny>>,
    reader: &Reader,
) -> PyResult<Option<Vec<usize>>> {
    obj.filter(|p| !p.is_none())
        .map(|p| positions_of(p, reader, Negative::FromEnd))
        .transpose()
}

/// Refuses positions or labels that name another cache generation than
/// `reader`'s (`socialctx.folds.Positions`: a Fold's, a Selection's, a
/// Split's parts carry a `content_id`): after a rebuild the same positions
/// name other threads, so taking them would train on other threads'
/// values and labels with no error. Untagged values (plain arrays, lists)
/// are the caller's word, as before.
pub(crate) fn same_generation(obj: &Bound<'_, PyAny>, reader: &Reader, what: &str) -> PyResult<()> {
    // Only NumPy arrays carry the tag: a plain object's `content_id`
    // (a Cache passed by mistake) is not a generation of positions.
    if obj.cast::<PyUntypedArray>().is_err() {
        return Ok(());
    }
    let Ok(tag) = obj.getattr(intern!(obj.py(), "content_id")) else {
        return Ok(());
    };
    let Ok(tag) = tag.extract::<String>() else {
        return Ok(()); // None: untagged
    };
    let now = reader.content_id();
    if tag == now {
        return Ok(());
    }
    Err(crate::error::CacheError::new_err(format!(
        "these {what} are of cache generation {tag} (taken before a rebuild), the cache is \
         now {now}: they would name other threads; fold.on(cache) or selection.on(cache) \
         (or read_split again) gives the same threads on this generation"
    )))
}

/// Labels from an int8 NumPy array or a sequence of ints (None: none).
pub(crate) fn labels_of(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Vec<i8>>> {
    let Some(obj) = obj else { return Ok(None) };
    if obj.is_none() {
        return Ok(None);
    }
    if let Ok(array) = obj.cast::<PyArray1<i8>>() {
        return Ok(Some(array.readonly().as_array().to_vec()));
    }
    Ok(Some(obj.extract()?))
}

/// `labels`, checked to have one label per position.
pub(crate) fn labels_for(
    labels: Option<&Bound<'_, PyAny>>,
    positions: usize,
) -> PyResult<Option<Vec<i8>>> {
    let labels = labels_of(labels)?;
    if let Some(l) = &labels
        && l.len() != positions
    {
        return Err(PyValueError::new_err(format!(
            "{} labels for {positions} positions",
            l.len()
        )));
    }
    Ok(labels)
}

pub(crate) fn kinds_of(kinds: &str) -> PyResult<sc::Kinds> {
    match kinds {
        "replies" => Ok(sc::Kinds::Replies),
        "retweets" => Ok(sc::Kinds::Retweets),
        "both" => Ok(sc::Kinds::Both),
        other => Err(PyValueError::new_err(format!(
            "kinds must be \"replies\", \"retweets\" or \"both\", not {other:?}"
        ))),
    }
}

pub(crate) fn window_of(window_s: Option<f64>) -> PyResult<Option<Duration>> {
    window_s
        .map(|w| {
            Duration::try_from_secs_f64(w).map_err(|_| {
                PyValueError::new_err(format!("window_s must be a non-negative number, not {w}"))
            })
        })
        .transpose()
}

/// The keyword arguments of a call whose options are one typed struct: each
/// option is taken by name with its default, and [`finish`](Self::finish)
/// rejects any keyword not taken, as Python does for a misspelt one.
pub(crate) struct Keywords<'a, 'py> {
    given: Option<&'a Bound<'py, PyDict>>,
    call: &'static str,
    taken: Vec<&'static str>,
}

impl<'a, 'py> Keywords<'a, 'py> {
    /// The keywords of `call` (its name in messages, e.g. `"Loader()"`).
    pub(crate) fn new(call: &'static str, given: Option<&'a Bound<'py, PyDict>>) -> Self {
        Keywords {
            given,
            call,
            taken: Vec::new(),
        }
    }

    /// Option `name`, `default` when not given.
    pub(crate) fn get<T>(&mut self, name: &'static str, default: T) -> PyResult<T>
    where
        T: FromPyObjectOwned<'py>,
    {
        Ok(self.given_value(name)?.unwrap_or(default))
    }

    /// Option `name` if given (a deprecated alias, or one whose default
    /// depends on others).
    pub(crate) fn given_value<T>(&mut self, name: &'static str) -> PyResult<Option<T>>
    where
        T: FromPyObjectOwned<'py>,
    {
        self.taken.push(name);
        let Some(value) = self.given.map(|d| d.get_item(name)).transpose()?.flatten() else {
            return Ok(None);
        };
        value.extract::<T>().map(Some).map_err(|e| {
            let e: PyErr = e.into();
            PyTypeError::new_err(format!("{} argument '{name}': {e}", self.call))
        })
    }

    /// TypeError for a keyword no option took.
    pub(crate) fn finish(self) -> PyResult<()> {
        let Some(given) = self.given else {
            return Ok(());
        };
        for key in given.keys() {
            let key: String = key.extract()?;
            if !self.taken.contains(&key.as_str()) {
                return Err(PyTypeError::new_err(format!(
                    "{} got an unexpected keyword argument '{key}'",
                    self.call
                )));
            }
        }
        Ok(())
    }
}

/// `repr` of a result class: `socialctx.NAME(field=value, ...)`.
pub(crate) fn fields_repr(slf: &Bound<'_, PyAny>, name: &str, fields: &[&str]) -> PyResult<String> {
    let mut parts = Vec::with_capacity(fields.len());
    for f in fields {
        parts.push(format!("{f}={}", slf.getattr(*f)?.repr()?));
    }
    Ok(format!("socialctx.{name}({})", parts.join(", ")))
}

/// `__reduce__` of a result class: rebuilt from its fields by the class's
/// `_from_fields` (so that results cross processes: Dask, multiprocessing).
pub(crate) fn fields_reduce<'py>(
    slf: &Bound<'py, PyAny>,
    fields: &[&str],
) -> PyResult<(Bound<'py, PyAny>, (Bound<'py, PyDict>,))> {
    let d = PyDict::new(slf.py());
    for f in fields {
        d.set_item(*f, slf.getattr(*f)?)?;
    }
    Ok((slf.get_type().getattr("_from_fields")?, (d,)))
}

/// Field `name` of the dict `fields_reduce` made.
pub(crate) fn field<'py, T: FromPyObjectOwned<'py>>(
    fields: &Bound<'py, PyDict>,
    name: &str,
) -> PyResult<T> {
    let value = fields
        .get_item(name)?
        .ok_or_else(|| PyKeyError::new_err(name.to_owned()))?;
    value.extract::<T>().map_err(Into::into)
}

/// `summary["key"]`, the deprecated reading of a result as the dict it was.
pub(crate) fn field_item<'py>(
    slf: &Bound<'py, PyAny>,
    name: &str,
    fields: &[&str],
    key: &str,
) -> PyResult<Bound<'py, PyAny>> {
    deprecated_item(slf.py(), name, key)?;
    if fields.contains(&key) {
        slf.getattr(key)
    } else {
        Err(PyKeyError::new_err(key.to_owned()))
    }
}

/// A read-only NumPy view of `data` whose base is `owner` (which keeps the
/// memory map alive).
pub(crate) fn view1<'py, T: Element>(
    owner: Bound<'py, PyAny>,
    data: &[T],
) -> PyResult<Bound<'py, PyAny>> {
    let view = ArrayView1::from(data);
    // SAFETY: `data` lives in a memory map owned (through an Arc) by
    // `owner`, which becomes the array's base, and is never written.
    let array = unsafe { PyArray1::borrow_from_array(&view, owner) };
    readonly(array.into_any())
}

pub(crate) fn view2<'py, T: Element>(
    owner: Bound<'py, PyAny>,
    data: &[T],
    cols: usize,
) -> PyResult<Bound<'py, PyAny>> {
    let rows = data.len().checked_div(cols).unwrap_or(0);
    let view = ArrayView2::from_shape((rows, cols), data)
        .map_err(|e| Error::new_err(format!("internal: bad view shape: {e}")))?;
    // SAFETY: as in `view1`.
    let array = unsafe { PyArray2::borrow_from_array(&view, owner) };
    readonly(array.into_any())
}

fn readonly(array: Bound<'_, PyAny>) -> PyResult<Bound<'_, PyAny>> {
    let kwargs = PyDict::new(array.py());
    kwargs.set_item(intern!(array.py(), "write"), false)?;
    array.call_method(intern!(array.py(), "setflags"), (), Some(&kwargs))?;
    Ok(array)
}
