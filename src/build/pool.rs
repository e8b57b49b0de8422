//! An ordered worker pool: `n` jobs run on up to `threads` workers in any
//! order, and their results reach one sink in job order.
//!
//! ```text
//!  feeder ──jobs──► worker 1..N ──results──► sink (calling thread)
//!     ▲  (bounded)                (any order)  reorders by index
//!     └────────────── credits ◄───────────────┘
//! ```
//!
//! The feeder takes one *credit* per job it sends and the sink returns it
//! when the job's result is consumed, so at most `window` results are ever in
//! flight or waiting to be reordered: memory stays bounded whatever the
//! number of jobs, even when one slow job holds up the ones behind it.
//!
//! Threads are started with [`std::thread::Builder`], so an OS refusal
//! (memory or process limits) is an error, not a panic: the pool goes on with
//! the workers that did start, and fails clearly if none did. A panicking job
//! becomes [`BuildError::Internal`] naming the job; the sink's first error
//! stops the feeder and the workers quickly.

use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

use crossbeam_channel::{Receiver, Sender, bounded, unbounded};

use crate::error::BuildError;

type Result<T, E = BuildError> = std::result::Result<T, E>;
type Done<T> = (usize, std::result::Result<T, String>);

/// Runs `work(state, i)` for every job `i` in `0..n` on up to `threads`
/// workers, each with its own `state` made by `make_state` (in the worker
/// thread, so it need not be `Send`), and calls `sink(i, result)` in job
/// order. `name(i)` names job `i` in errors. Returns the number of workers
/// that started.
pub(super) fn run_ordered<S, T>(
    n: usize,
    threads: usize,
    make_state: impl Fn() -> S + Sync,
    work: impl Fn(&mut S, usize) -> T + Sync,
    name: impl Fn(usize) -> PathBuf,
    mut sink: impl FnMut(usize, T) -> Result<()>,
) -> Result<usize>
where
    T: Send,
{
    let window = (threads * 16).max(64);
    let (job_tx, job_rx) = bounded::<usize>(threads * 4);
    let (done_tx, done_rx) = unbounded::<Done<T>>();
    let (credit_tx, credit_rx) = bounded::<()>(window);
    for _ in 0..window {
        let _ = credit_tx.send(());
    }
    let stop = AtomicBool::new(false);
    let (make_state, work) = (&make_state, &work);

    std::thread::scope(|scope| {
        let stop = &stop;
        // The feeder first: it is one thread, and without it nothing runs.
        let fed = std::thread::Builder::new()
            .name("socialctx-feeder".into())
            .spawn_scoped(scope, move || feed(n, job_tx, credit_rx, stop));
        let mut started = 0;
        let mut refused = None;
        for w in 0..threads {
            if fed.is_err() {
                break;
            }
            let (job_rx, done_tx) = (job_rx.clone(), done_tx.clone());
            let spawned = std::thread::Builder::new()
                .name(format!("socialctx-worker-{w}"))
                .spawn_scoped(scope, move || {
                    let mut state = make_state();
                    for i in job_rx {
                        if stop.load(Ordering::Relaxed) {
                            break;
                        }
                        let out =
                            catch_unwind(AssertUnwindSafe(|| work(&mut state, i))).map_err(|p| {
                                p.downcast_ref::<&str>()
                                    .map(|s| s.to_string())
                                    .or_else(|| p.downcast_ref::<String>().cloned())
                                    .unwrap_or_else(|| "panic".into())
                            });
                        if done_tx.send((i, out)).is_err() {
                            break;
                        }
                    }
                });
            match spawned {
                Ok(_) => started += 1,
                Err(e) => {
                    refused = Some(e);
                    break;
                }
            }
        }
        drop(done_tx);
        drop(job_rx);
        if started == 0 || fed.is_err() {
            // Every closure that did not start was dropped with its channel
            // ends, so whatever did start winds down on its own.
            let source = fed
                .err()
                .or(refused)
                .unwrap_or_else(|| std::io::Error::other("no worker thread started"));
            return Err(BuildError::ThreadSpawn {
                wanted: threads,
                source,
            });
        }

        let result = in_order(n, &done_rx, &credit_tx, &name, &mut sink);
        // On error, make the feeder and the workers wind down quickly.
        stop.store(true, Ordering::Relaxed);
        drop(credit_tx);
        drop(done_rx);
        result.map(|()| started)
    })
}

fn feed(n: usize, jobs: Sender<usize>, credits: Receiver<()>, stop: &AtomicBool) {
    for i in 0..n {
        if credits.recv().is_err() || stop.load(Ordering::Relaxed) || jobs.send(i).is_err() {
            return;
        }
    }
}

fn in_order<T>(
    n: usize,
    done: &Receiver<Done<T>>,
    credits: &Sender<()>,
    name: &impl Fn(usize) -> PathBuf,
    sink: &mut impl FnMut(usize, T) -> Result<()>,
) -> Result<()> {
    let mut pending: BTreeMap<usize, std::result::Result<T, String>> = BTreeMap::new();
    let mut next = 0;
    while next < n {
        let Ok((i, out)) = done.recv() else {
            return Err(BuildError::Internal {
                path: name(next),
                message: "worker threads stopped early".into(),
            });
        };
        pending.insert(i, out);
        while let Some(out) = pending.remove(&next) {
            let out = out.map_err(|message| BuildError::Internal {
                path: name(next),
                message,
            })?;
            sink(next, out)?;
            let _ = credits.send(());
            next += 1;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_arrive_in_order_with_bounded_state() {
        let mut seen = Vec::new();
        let started = run_ordered(
            500,
            3,
            || 0u32,
            |calls, i| {
                *calls += 1;
                // Later jobs finish first now and then.
                if i % 7 == 0 {
                    std::thread::yield_now();
                }
                i * 2
            },
            |i| PathBuf::from(i.to_string()),
            |i, out| {
                assert_eq!(out, i * 2);
                seen.push(i);
                Ok(())
            },
        )
        .unwrap();
        assert!((1..=3).contains(&started));
        assert_eq!(seen, (0..500).collect::<Vec<_>>());
    }

    #[test]
    fn a_panic_names_the_job_and_a_sink_error_stops() {
        let err = run_ordered(
            50,
            2,
            || (),
            |_, i| {
                if i == 17 {
                    panic!("boom at {i}");
                }
                i
            },
            |i| PathBuf::from(format!("job-{i}")),
            |_, _| Ok(()),
        )
        .unwrap_err();
        match err {
            BuildError::Internal { path, message } => {
                assert_eq!(path, PathBuf::from("job-17"));
                assert!(message.contains("boom at 17"), "{message}");
            }
            other => panic!("{other}"),
        }
        let mut calls = 0;
        let err = run_ordered(
            10_000,
            2,
            || (),
            |_, i| i,
            |i| PathBuf::from(i.to_string()),
            |i, _| {
                calls += 1;
                if i == 3 {
                    Err(BuildError::EmptyCorpus("x".into()))
                } else {
                    Ok(())
                }
            },
        )
        .unwrap_err();
        assert!(matches!(err, BuildError::EmptyCorpus(_)));
        assert_eq!(calls, 4);
    }
}
