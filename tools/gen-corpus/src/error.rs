//! The error type of [`generate`](crate::generate).

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use crate::{MAX_RETWEETS, MAX_THREADS};

/// Why [`generate`](crate::generate) failed.
///
/// The [`Display`](fmt::Display) text is one line that names the path and the
/// reason, for example `cannot write out/…/123.json: No space left on device`
/// or `out is not empty (pass --force to write into it anyway)`. The
/// underlying I/O error is part of that text; it is also available from
/// [`Error::io_error`] (and is therefore not repeated as
/// [`source`](std::error::Error::source)).
#[derive(Debug)]
pub struct Error {
    repr: Repr,
}

#[derive(Debug)]
enum Repr {
    Threads(u64),
    Retweets(f64),
    NotEmpty(PathBuf),
    OutputDir(PathBuf, io::Error),
    CreateDir(PathBuf, io::Error),
    Write(PathBuf, io::Error),
}

/// The broad class of an [`Error`], for callers that react differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The [`Options`](crate::Options) are out of range; nothing was written.
    InvalidOptions,
    /// The output directory exists and is not empty, and
    /// [`Options::force`](crate::Options::force) is not set; nothing was written.
    NotEmpty,
    /// The output directory could not be used or created, or a file could not
    /// be written; files written before the failure are left in place.
    Io,
}

impl Error {
    pub(crate) fn threads(n: u64) -> Self {
        Error {
            repr: Repr::Threads(n),
        }
    }

    pub(crate) fn retweets(f: f64) -> Self {
        Error {
            repr: Repr::Retweets(f),
        }
    }

    pub(crate) fn not_empty(path: &Path) -> Self {
        Error {
            repr: Repr::NotEmpty(path.to_path_buf()),
        }
    }

    pub(crate) fn output_dir(path: &Path, e: io::Error) -> Self {
        Error {
            repr: Repr::OutputDir(path.to_path_buf(), e),
        }
    }

    pub(crate) fn create_dir(path: &Path, e: io::Error) -> Self {
        Error {
            repr: Repr::CreateDir(path.to_path_buf(), e),
        }
    }

    pub(crate) fn write(path: &Path, e: io::Error) -> Self {
        Error {
            repr: Repr::Write(path.to_path_buf(), e),
        }
    }

    /// The class of the error.
    pub fn kind(&self) -> ErrorKind {
        match self.repr {
            Repr::Threads(_) | Repr::Retweets(_) => ErrorKind::InvalidOptions,
            Repr::NotEmpty(_) => ErrorKind::NotEmpty,
            Repr::OutputDir(..) | Repr::CreateDir(..) | Repr::Write(..) => ErrorKind::Io,
        }
    }

    /// The directory or file the error is about, if any (invalid options have none).
    pub fn path(&self) -> Option<&Path> {
        match &self.repr {
            Repr::Threads(_) | Repr::Retweets(_) => None,
            Repr::NotEmpty(p)
            | Repr::OutputDir(p, _)
            | Repr::CreateDir(p, _)
            | Repr::Write(p, _) => Some(p),
        }
    }

    /// The I/O error behind an [`ErrorKind::Io`] error.
    pub fn io_error(&self) -> Option<&io::Error> {
        match &self.repr {
            Repr::OutputDir(_, e) | Repr::CreateDir(_, e) | Repr::Write(_, e) => Some(e),
            Repr::Threads(_) | Repr::Retweets(_) | Repr::NotEmpty(_) => None,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.repr {
            Repr::Threads(n) => write!(
                f,
                "invalid thread count {n}: it must be between 1 and {MAX_THREADS}"
            ),
            Repr::Retweets(x) => write!(
                f,
                "invalid retweet fraction {x}: it must be between 0 and {MAX_RETWEETS}"
            ),
            Repr::NotEmpty(p) => write!(
                f,
                "{} is not empty (pass --force to write into it anyway)",
                p.display()
            ),
            Repr::OutputDir(p, e) => {
                write!(f, "cannot use {} as the output directory: {e}", p.display())
            }
            Repr::CreateDir(p, e) => write!(f, "cannot create directory {}: {e}", p.display()),
            Repr::Write(p, e) => write!(f, "cannot write {}: {e}", p.display()),
        }
    }
}

impl std::error::Error for Error {}
