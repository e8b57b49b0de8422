//! `_Replacement`: the crate's one routine for replacing an output (a
//! temporary file beside it, the old file's mode, group and links kept, a
//! dead writer's temporary file removed), for the package's writers
//! (`describe`'s HTML, `export`'s Parquet) so that they follow the same
//! rules as the command's.

use std::path::PathBuf;

use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;

use socialctx::internals::Replacement;

/// An `io::Error` as Python's `OSError` of its errno (so the right
/// subclass: `PermissionError`, `IsADirectoryError`...), with the system's
/// text without Rust's "(os error N)".
fn os_error(e: &std::io::Error) -> PyErr {
    let text = e.to_string();
    let text = text
        .rsplit_once(" (os error ")
        .map_or(text.as_str(), |(t, _)| t)
        .to_string();
    // The crate's own errors carry a kind, not an errno: the errno of that
    // kind, so that Python shows a message ("[Errno None] ..." otherwise)
    // and picks the subclass.
    let errno = e.raw_os_error().or_else(|| {
        use std::io::ErrorKind as K;
        Some(match e.kind() {
            K::IsADirectory => libc::EISDIR,
            K::NotADirectory => libc::ENOTDIR,
            K::NotFound => libc::ENOENT,
            K::PermissionDenied => libc::EACCES,
            K::AlreadyExists => libc::EEXIST,
            K::InvalidInput | K::InvalidFilename => libc::EINVAL,
            K::StorageFull => libc::ENOSPC,
            K::ReadOnlyFilesystem => libc::EROFS,
            _ => return None,
        })
    });
    match errno {
        Some(n) => PyOSError::new_err((n, text)),
        None => PyOSError::new_err(text),
    }
}

/// A file being written to replace `path` (see `socialctx.describe`'s
/// `_write_output`). Not a public API.
#[pyclass(module = "socialctx._socialctx", name = "_Replacement")]
pub(crate) struct PyReplacement {
    inner: Option<Replacement>,
}

#[pymethods]
impl PyReplacement {
    #[new]
    fn new(path: PathBuf) -> PyResult<Self> {
        let inner = Replacement::begin(&path).map_err(|e| os_error(&e))?;
        Ok(PyReplacement { inner: Some(inner) })
    }

    /// The temporary file's descriptor (duplicate it to write through a
    /// Python file: the lock that marks it live stays with this object).
    fn fileno(&mut self) -> PyResult<i32> {
        use std::os::fd::AsRawFd;
        let r = self
            .inner
            .as_mut()
            .ok_or_else(|| PyValueError::new_err("the replacement is finished"))?;
        Ok(r.file().as_raw_fd())
    }

    /// The temporary file's path.
    #[getter]
    fn temp_path(&self) -> Option<PathBuf> {
        self.inner.as_ref().map(|r| r.temp_path().to_path_buf())
    }

    /// Puts the written file in place of the output (synced, with the old
    /// file's metadata).
    fn commit(&mut self) -> PyResult<()> {
        let r = self
            .inner
            .take()
            .ok_or_else(|| PyValueError::new_err("the replacement is finished"))?;
        r.commit().map_err(|e| os_error(&e))
    }

    /// Removes the temporary file; the output stays as it was.
    fn abort(&mut self) {
        self.inner = None;
    }
}
