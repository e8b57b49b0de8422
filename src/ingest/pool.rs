//! An ordered worker pool: `n` jobs run on up to `threads` workers in any
//! order, and their results reach one sink in job order.
//!
//! ```text
//!  worker 1..N: take the next job index ──results──► sink (calling thread)
//!     ▲        (one atomic counter)        (any order)  reorders by index
//!     └──────── window: job i starts once i < consumed + window ◄──┘
//! ```
//!
//! A worker may start job `i` only once the sink has consumed all but
//! `window` of the jobs before it, so at most `window` results are ever in
//! flight or waiting to be reordered: memory stays bounded whatever the
//! number of jobs, even when one slow job holds up the ones behind it.
//!
//! There is no feeder thread and no channel: workers take job indices from
//! an atomic counter, and the sink and the workers wait on condition
//! variables, which park at once. A channel's receiver spins and calls
//! `sched_yield` before it parks, and on a machine with as many busy
//! workers as cores that spinning is taken from the workers (measured: the
//! sink's yields were 2.5% of a warm build's CPU, the feeder's wake-ups 1%).
//!
//! Threads are started with [`std::thread::Builder`], so an OS refusal
//! (memory or process limits) is an error, not a panic: the pool goes on with
//! the workers that did start, and fails clearly if none did. A panicking job
//! becomes [`BuildError::Internal`] naming the job; the sink's first error
//! stops the workers quickly.

use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

use crate::error::BuildError;

type Result<T, E = BuildError> = std::result::Result<T, E>;
type Done<T> = std::result::Result<T, String>;

/// What the workers and the sink share, under one lock.
struct State<T> {
    /// Finished jobs not yet consumed, by index.
    done: BTreeMap<usize, Done<T>>,
    /// Jobs the sink has consumed (all of `0..consumed`).
    consumed: usize,
    /// Workers still running.
    live: usize,
    /// Whether the sink waits for a result.
    sink_waiting: bool,
    /// Workers waiting for the window to move.
    workers_waiting: usize,
}

struct Shared<T> {
    state: Mutex<State<T>>,
    /// Signalled when the job the sink waits for is done, or a worker exits.
    result_ready: Condvar,
    /// Signalled when the sink consumes, or at the stop.
    window_moved: Condvar,
    next_job: AtomicUsize,
    stop: AtomicBool,
    window: usize,
}

impl<T> Shared<T> {
    fn lock(&self) -> MutexGuard<'_, State<T>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The next job for a worker, once the window allows it; None when there
    /// are no more or the pool is stopping.
    fn take_job(&self, n: usize) -> Option<usize> {
        let i = self.next_job.fetch_add(1, Ordering::Relaxed);
        if i >= n || self.stop.load(Ordering::Relaxed) {
            return None;
        }
        let mut state = self.lock();
        if i >= state.consumed + self.window {
            // The sink may be waiting for a full batch that this worker
            // will not add to: it should take what is there.
            if state.sink_waiting {
                self.result_ready.notify_one();
            }
            state.workers_waiting += 1;
            while i >= state.consumed + self.window && !self.stop.load(Ordering::Relaxed) {
                state = self
                    .window_moved
                    .wait(state)
                    .unwrap_or_else(PoisonError::into_inner);
            }
            state.workers_waiting -= 1;
        }
        (!self.stop.load(Ordering::Relaxed)).then_some(i)
    }

    /// Stores job `i`'s result. The waiting sink is woken once a batch is
    /// ready (or at the last job), not for every result: each wake-up
    /// preempts a worker on a machine with as many workers as cores.
    fn put(&self, i: usize, out: Done<T>, n: usize) {
        let mut state = self.lock();
        state.done.insert(i, out);
        if state.sink_waiting
            && state.done.contains_key(&state.consumed)
            && (state.done.len() >= self.wake_batch() || i + 1 == n)
        {
            self.result_ready.notify_one();
        }
    }

    fn wake_batch(&self) -> usize {
        self.window / 4
    }

    fn worker_exited(&self) {
        let mut state = self.lock();
        state.live -= 1;
        if state.sink_waiting {
            self.result_ready.notify_one();
        }
    }

    fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
        let _state = self.lock();
        self.window_moved.notify_all();
    }
}

/// Calls [`Shared::worker_exited`] when dropped.
struct ExitGuard<'a, T>(&'a Shared<T>);

impl<T> Drop for ExitGuard<'_, T> {
    fn drop(&mut self) {
        self.0.worker_exited();
    }
}

/// Runs `work(state, i)` for every job `i` in `0..n` on up to `threads`
/// workers, each with its own `state` made by `make_state` (in the worker
/// thread, so it need not be `Send`), and calls `sink(i, result)` in job
/// order. `name(i)` names job `i` in errors. Returns the number of workers
/// that started.
/// Gives the calling thread (a worker, a prefetcher) a file descriptor
/// table of its own, holding only the standard streams of the process's.
///
/// Every `open` and `close` takes the table's lock, and two workers that
/// open and close a hundred thousand small files between them bounce that
/// lock (and its cache line) between the cores: with one table per worker
/// they never meet (a warm PHEME-sized build: 4% less CPU). It is one
/// `close_range(3, ~0, CLOSE_RANGE_UNSHARE)` (Linux 5.9): the private copy
/// keeps descriptors 0-2, so that a worker's panic message still reaches
/// stderr, and nothing else, so that no copy of the cache's lock (or of an
/// embedding application's files) outlives the build in a thread that is
/// still exiting. Where it is refused, nothing changed: the shared table
/// works, slower.
pub(super) fn private_fd_table() {
    // libc, not rustix: rustix 1.1 has no close_range.
    #[cfg(target_os = "linux")]
    // SAFETY: close_range with CLOSE_RANGE_UNSHARE closes descriptors in a
    // new table private to this thread only; no other thread's descriptors
    // are affected. Workers and prefetchers only use descriptors they open
    // themselves after this point (and the standard streams, kept).
    unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3 as libc::c_uint,
            libc::c_uint::MAX,
            libc::CLOSE_RANGE_UNSHARE,
        );
    }
}

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
    let shared = Shared {
        state: Mutex::new(State {
            done: BTreeMap::new(),
            consumed: 0,
            live: 0,
            sink_waiting: false,
            workers_waiting: 0,
        }),
        result_ready: Condvar::new(),
        window_moved: Condvar::new(),
        next_job: AtomicUsize::new(0),
        stop: AtomicBool::new(false),
        window: (threads * 16).max(64),
    };
    let (make_state, work, shared) = (&make_state, &work, &shared);

    std::thread::scope(|scope| {
        let mut started = 0;
        let mut refused = None;
        for w in 0..threads {
            // Counted before the spawn, so that the sink never sees zero
            // live workers while one is starting.
            shared.lock().live += 1;
            let spawned = std::thread::Builder::new()
                .name(format!("socialctx-worker-{w}"))
                .spawn_scoped(scope, move || {
                    // Counts the worker out however it ends (even if
                    // `make_state` panics), so the sink never waits on it.
                    let _exit = ExitGuard(shared);
                    private_fd_table();
                    let mut state = make_state();
                    while let Some(i) = shared.take_job(n) {
                        let out =
                            catch_unwind(AssertUnwindSafe(|| work(&mut state, i))).map_err(|p| {
                                p.downcast_ref::<&str>()
                                    .map(|s| s.to_string())
                                    .or_else(|| p.downcast_ref::<String>().cloned())
                                    .unwrap_or_else(|| "panic".into())
                            });
                        shared.put(i, out, n);
                    }
                });
            match spawned {
                Ok(_) => started += 1,
                Err(e) => {
                    shared.lock().live -= 1;
                    refused = Some(e);
                    break;
                }
            }
        }
        if started == 0 {
            return Err(BuildError::ThreadSpawn {
                wanted: threads,
                source: refused
                    .unwrap_or_else(|| std::io::Error::other("no worker thread started")),
            });
        }

        let result = in_order(n, shared, &name, &mut sink);
        // On error, make the workers wind down quickly.
        shared.stop();
        result.map(|()| started)
    })
}

/// The sink's loop: takes every result that is next in order under one
/// lock, consumes them outside it, and waits (parked) when the next one is
/// not done yet.
fn in_order<T>(
    n: usize,
    shared: &Shared<T>,
    name: &impl Fn(usize) -> PathBuf,
    sink: &mut impl FnMut(usize, T) -> Result<()>,
) -> Result<()> {
    let mut next = 0;
    let mut ready: Vec<Done<T>> = Vec::new();
    while next < n {
        {
            let mut state = shared.lock();
            // Record what the last batch consumed, and move the window.
            state.consumed = next;
            if state.workers_waiting > 0 {
                shared.window_moved.notify_all();
            }
            loop {
                while let Some(out) = state.done.remove(&(next + ready.len())) {
                    ready.push(out);
                }
                if !ready.is_empty() {
                    break;
                }
                if state.live == 0 {
                    return Err(BuildError::Internal {
                        path: name(next),
                        message: "worker threads stopped early".into(),
                    });
                }
                state.sink_waiting = true;
                state = shared
                    .result_ready
                    .wait(state)
                    .unwrap_or_else(PoisonError::into_inner);
                state.sink_waiting = false;
            }
        }
        for out in ready.drain(..) {
            let out = out.map_err(|message| BuildError::Internal {
                path: name(next),
                message,
            })?;
            sink(next, out)?;
            next += 1;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A thread with a private table sees the standard streams and none of
    /// the descriptors open before, and the process keeps its own.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_private_fd_table_holds_only_the_standard_streams() {
        use std::os::fd::AsRawFd;
        let file = tempfile::tempfile().unwrap();
        let fd = file.as_raw_fd();
        // libc, not rustix: rustix's fcntl takes a borrowed descriptor, and
        // this asks about a number that may not be open in this thread.
        // SAFETY: F_GETFD only reads a descriptor's flags; a number that is
        // not open gives -1.
        let valid = |fd: i32| unsafe { libc::fcntl(fd, libc::F_GETFD) } != -1;
        let (inside, stderr) = std::thread::spawn(move || {
            private_fd_table();
            (valid(fd), valid(2))
        })
        .join()
        .unwrap();
        assert!(!inside, "descriptor {fd} was copied into the private table");
        assert!(stderr, "stderr is kept");
        assert!(valid(fd), "the process's own table is untouched");
    }

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

    /// No job starts more than the window ahead of what the sink has
    /// consumed, even when the sink is slow and the workers are fast.
    #[test]
    fn jobs_stay_within_the_window_of_the_sink() {
        use std::sync::atomic::AtomicUsize;
        let threads = 3;
        let window = (threads * 16).max(64);
        let consumed = AtomicUsize::new(0);
        let worst = AtomicUsize::new(0);
        run_ordered(
            2_000,
            threads,
            || (),
            |_, i| {
                let ahead = i - consumed.load(Ordering::SeqCst).min(i);
                worst.fetch_max(ahead, Ordering::SeqCst);
                i
            },
            |i| PathBuf::from(i.to_string()),
            |i, _| {
                if i % 50 == 0 {
                    std::thread::sleep(std::time::Duration::from_millis(2));
                }
                consumed.store(i + 1, Ordering::SeqCst);
                Ok(())
            },
        )
        .unwrap();
        let worst = worst.load(Ordering::SeqCst);
        assert!(worst < window, "a job started {worst} ahead of the sink");
        // The slow sink did let the workers fill the window.
        assert!(worst >= window / 2, "workers ran only {worst} ahead");
    }

    /// Fewer jobs than a wake-up batch, or than workers, all arrive.
    #[test]
    fn few_jobs_arrive_whatever_the_batch() {
        for (n, threads) in [(0, 2), (1, 1), (1, 4), (3, 2), (17, 2), (65, 8)] {
            let mut seen = Vec::new();
            run_ordered(
                n,
                threads,
                || (),
                |_, i| i,
                |i| PathBuf::from(i.to_string()),
                |i, out| {
                    assert_eq!(i, out);
                    seen.push(i);
                    Ok(())
                },
            )
            .unwrap();
            assert_eq!(seen, (0..n).collect::<Vec<_>>(), "{n} jobs on {threads}");
        }
    }

    /// A worker whose state cannot be made (a panic before its first job) is
    /// counted out: the others do the work, and with none left the sink
    /// fails instead of waiting forever.
    #[test]
    fn a_worker_that_dies_at_start_is_counted_out() {
        use std::sync::atomic::AtomicUsize;
        let made = AtomicUsize::new(0);
        let mut seen = 0;
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            run_ordered(
                100,
                2,
                || {
                    if made.fetch_add(1, Ordering::SeqCst) == 0 {
                        panic!("no state");
                    }
                },
                |_, i| i,
                |i| PathBuf::from(i.to_string()),
                |_, _| {
                    seen += 1;
                    Ok(())
                },
            )
        }));
        // The scope re-raises the worker's panic once the sink is done.
        assert!(outcome.is_err());
        assert_eq!(seen, 100, "the other worker did every job");
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            run_ordered(
                10,
                1,
                || panic!("no state"),
                |_: &mut (), i| i,
                |i| PathBuf::from(i.to_string()),
                |_, _| Ok(()),
            )
        }));
        assert!(outcome.is_err(), "the lone worker's panic surfaces");
    }
}
