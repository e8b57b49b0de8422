//! The `socialctx` command of the Python package (`socialctx/cli.py`): the
//! command defined once in crates/cli, run here with the GIL released. The
//! commands that need Python (`info`, `embed`, `describe`, `export`) come
//! back parsed, for cli.py to run.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use pyo3::prelude::*;

use socialctx_cli::{Context, EXIT_INTERRUPTED, Outcome};

use crate::build::run_build;
use crate::error::Result;

/// Adds this module's functions to the extension module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_socialctx, m)?)?;
    Ok(())
}

/// Runs `argv` (the program name first) as the `socialctx` command, with
/// `sample` the corpus of `build --sample`. Returns `(status, None, None)`
/// when it ran, or `(0, COMMAND, ARGS_JSON)` for a command Python runs,
/// with the arguments clap parsed. A Python signal (Ctrl-C, or SIGTERM where
/// cli.py makes it raise) stops a build between threads: nothing is
/// published and the status is 130.
#[pyfunction]
#[pyo3(signature = (argv, sample=None))]
fn _socialctx(
    py: Python<'_>,
    argv: Vec<OsString>,
    sample: Option<PathBuf>,
) -> Result<(u8, Option<String>, Option<String>)> {
    let ctx = Context {
        sample_corpus: sample,
        ..Context::default()
    };
    let cancel = Arc::clone(&ctx.cancel);
    // On a thread of its own while this one waits, the GIL released, and
    // checks Python's signals (they are delivered to the main thread only).
    let (outcome, interrupted) = run_build(
        py,
        Path::new("socialctx"),
        &cancel,
        move || Ok(socialctx_cli::run(argv, &ctx)),
        || {},
    )?;
    match outcome? {
        Outcome::Python { command, args } => Ok((0, Some(command), Some(args.to_string()))),
        // The build said what the signal did.
        Outcome::Exit(EXIT_INTERRUPTED) => Ok((EXIT_INTERRUPTED, None, None)),
        // Another command ran to its end (it does not stop between steps).
        Outcome::Exit(_) if interrupted.is_some() => {
            eprintln!("interrupted: stopped");
            Ok((EXIT_INTERRUPTED, None, None))
        }
        Outcome::Exit(code) => Ok((code, None, None)),
    }
}
