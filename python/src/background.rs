//! Running a build from Python: the build on a thread of its own, the
//! calling thread waiting with the GIL released and checking Python's
//! signals, so that Ctrl-C (or SIGTERM where the command makes it raise)
//! stops the build between threads and nothing is published.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use pyo3::prelude::*;

use socialctx as sc;

use crate::BuildError;

/// Runs `job` on a new thread and waits for it, calling `tick` about every
/// 100 ms (progress display). A Python signal meanwhile sets `cancel` (the
/// job's `Progress::cancelled`) and is returned beside the job's result,
/// which is then `Cancelled`, or `Ok` when the job had already published.
pub(crate) fn run_build<T: Send + 'static>(
    py: Python<'_>,
    about: &Path,
    cancel: &AtomicBool,
    job: impl FnOnce() -> Result<T, sc::BuildError> + Send + 'static,
    mut tick: impl FnMut(),
) -> PyResult<(Result<T, sc::BuildError>, Option<PyErr>)> {
    let (tx, rx) = crossbeam_channel::bounded(1);
    let handle = std::thread::Builder::new()
        .name("socialctx-build".into())
        .spawn(move || {
            let _ = tx.send(job());
        })
        .map_err(|e| BuildError::new_err(format!("cannot start the build thread: {e}")))?;
    let mut interrupted = None;
    let result = loop {
        match py.detach(|| rx.recv_timeout(Duration::from_millis(100))) {
            Ok(r) => break r,
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => {
                break Err(sc::BuildError::Internal {
                    path: about.to_owned(),
                    message: "the build thread stopped without a result".into(),
                });
            }
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
        }
        if interrupted.is_none()
            && let Err(e) = py.check_signals()
        {
            // Stop between threads; the staging directory is removed and
            // any old cache stays. Wait for that, then report it.
            cancel.store(true, Ordering::Relaxed);
            interrupted = Some(e);
        }
        tick();
    };
    let _ = py.detach(|| handle.join());
    Ok((result, interrupted))
}
