//! The package's exception classes and how the crate's errors become them.
//!
//! Rust's orphan rule forbids `From<socialctx::OpenError> for PyErr` here
//! (both types are foreign), so, as polars' `PyPolarsErr`, the crate's
//! errors convert into [`PyScError`], which converts into `PyErr`: a binding
//! function returns [`Result`] and `?` does both. Which Python exception
//! each error becomes is decided once, in `From<PyScError> for PyErr`.

use pyo3::create_exception;
use pyo3::exceptions::{
    PyException, PyIndexError, PyKeyError, PyKeyboardInterrupt, PyMemoryError, PyValueError,
};
use pyo3::prelude::*;

use socialctx as sc;

create_exception!(
    socialctx,
    Error,
    PyException,
    "Base class of every socialctx error."
);
create_exception!(
    socialctx,
    CacheError,
    Error,
    "A cache is missing, damaged or of another format version; the message names the file and the reason."
);
create_exception!(
    socialctx,
    BuildError,
    Error,
    "A build failed (an unusable corpus or cache directory, a lock held by another build, an I/O error)."
);
create_exception!(
    socialctx,
    EmbeddingError,
    Error,
    "An embedding store is missing, damaged, or was computed for another content of the cache (rebuilt since); the message says which and why."
);
create_exception!(
    socialctx,
    BadInputError,
    BuildError,
    "A strict build met bad input: `path` (relative to the corpus) and `reason` say which and why."
);

/// Adds the exception classes to the extension module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("Error", py.get_type::<Error>())?;
    m.add("CacheError", py.get_type::<CacheError>())?;
    m.add("BuildError", py.get_type::<BuildError>())?;
    m.add("BadInputError", py.get_type::<BadInputError>())?;
    m.add("EmbeddingError", py.get_type::<EmbeddingError>())?;
    Ok(())
}

/// An error of the crate, or one Python raised: what binding functions return.
#[derive(Debug)]
pub(crate) enum PyScError {
    Python(PyErr),
    Crate(sc::Error),
}

/// What the binding's functions return: `?` takes crate and Python errors.
pub(crate) type Result<T, E = PyScError> = std::result::Result<T, E>;

impl From<PyErr> for PyScError {
    fn from(e: PyErr) -> Self {
        PyScError::Python(e)
    }
}

impl From<numpy::AsSliceError> for PyScError {
    fn from(e: numpy::AsSliceError) -> Self {
        PyScError::Python(e.into())
    }
}

impl From<pyo3::CastError<'_, '_>> for PyScError {
    fn from(e: pyo3::CastError<'_, '_>) -> Self {
        PyScError::Python(e.into())
    }
}

macro_rules! from_crate_error {
    ($($t:ty),*) => {$(
        impl From<$t> for PyScError {
            fn from(e: $t) -> Self {
                PyScError::Crate(e.into())
            }
        }
    )*};
}
from_crate_error!(
    sc::Error,
    sc::OpenError,
    sc::BuildError,
    sc::LoadError,
    sc::EmbeddingError
);

impl From<PyScError> for PyErr {
    fn from(e: PyScError) -> PyErr {
        match e {
            PyScError::Python(e) => e,
            PyScError::Crate(sc::Error::Open(e)) => CacheError::new_err(e.to_string()),
            PyScError::Crate(sc::Error::Build(e)) => build_error(e),
            PyScError::Crate(sc::Error::Load(e)) => load_error(e),
            PyScError::Crate(sc::Error::Embedding(e)) => EmbeddingError::new_err(e.to_string()),
            PyScError::Crate(other) => Error::new_err(other.to_string()),
        }
    }
}

fn build_error(e: sc::BuildError) -> PyErr {
    match e {
        sc::BuildError::StrictBadInput {
            ref path,
            ref reason,
        } => {
            let err = BadInputError::new_err(e.to_string());
            Python::attach(|py| {
                let value = err.value(py);
                let _ = value.setattr("path", path.to_string_lossy().into_owned());
                let _ = value.setattr("reason", reason.clone());
            });
            err
        }
        sc::BuildError::Cancelled => PyKeyboardInterrupt::new_err(e.to_string()),
        other => BuildError::new_err(other.to_string()),
    }
}

fn load_error(e: sc::LoadError) -> PyErr {
    match e {
        sc::LoadError::Cache(e) => CacheError::new_err(e.to_string()),
        e @ sc::LoadError::NoSuchThread { .. } => PyIndexError::new_err(e.to_string()),
        e @ sc::LoadError::NoSuchSource { .. } => PyKeyError::new_err(e.to_string()),
        e @ sc::LoadError::TooLarge { .. } => PyMemoryError::new_err(e.to_string()),
        e @ (sc::LoadError::BatchTooSmall { .. }
        | sc::LoadError::BufferSize { .. }
        | sc::LoadError::BadBatching { .. }) => PyValueError::new_err(e.to_string()),
        other => Error::new_err(other.to_string()),
    }
}

/// Warns that `obj[key]` (a summary read as the dict it used to be) is
/// deprecated in favour of the attribute.
pub(crate) fn deprecated_item(py: Python<'_>, class: &str, key: &str) -> PyResult<()> {
    let message = std::ffi::CString::new(format!(
        "{class}[{key:?}] is deprecated: read the attribute {class}.{key} instead \
         (results are typed classes, no longer dicts)"
    ))
    .unwrap_or_default();
    PyErr::warn(
        py,
        &py.get_type::<pyo3::exceptions::PyDeprecationWarning>(),
        &message,
        1,
    )
}

/// Warns that keyword `old` is deprecated in favour of `new`.
pub(crate) fn deprecated_keyword(py: Python<'_>, call: &str, old: &str, new: &str) -> PyResult<()> {
    let message = std::ffi::CString::new(format!(
        "{call}: {old}= is deprecated, use {new}= ({old} are the conversation threads a cache holds; {new} run the build)"
    ))
    .unwrap_or_default();
    PyErr::warn(
        py,
        &py.get_type::<pyo3::exceptions::PyDeprecationWarning>(),
        &message,
        1,
    )
}
