//! Keeping reads in flight when the corpus is not in the page cache.
//!
//! The workers read a thread's files one after the other, so a cold build
//! has only one read per core in flight and waits on the device (4x the
//! floor measured with 64 readers). Prefetch threads run a bounded window
//! ahead of the workers and ask the kernel to read each upcoming thread's
//! files (`posix_fadvise(WILLNEED)`: asynchronous readahead into the page
//! cache, nothing copied into our memory). Their opens, which block on cold
//! metadata, overlap too. The workers then find the files cached.
//!
//! Warm, this would only cost syscalls, so each thread is first checked: if
//! its source tweet is already in the page cache (a one-byte
//! `preadv2(RWF_NOWAIT)` succeeds), the thread is skipped. And only one
//! prefetcher (the scout) runs until a thread is found cold; the others
//! sleep on a condition variable until then. A warm build thus pays one
//! listing, one open and one read per thread, on one extra thread. The
//! cache's bytes do not depend on any of this.

use std::fs::{self, File};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, PoisonError};
use std::time::Duration;

use super::discover::{THREAD_FILES, ThreadDir};

/// How far ahead of the workers (in threads) prefetching may run: enough to
/// keep `depth` readers busy, little enough that the page cache keeps what
/// was fetched until it is used.
fn window(depth: usize) -> usize {
    (depth * 32).max(1024)
}

/// Shared state of one build's prefetchers.
pub(super) struct Prefetch<'a> {
    list: &'a [ThreadDir],
    next: AtomicUsize,
    /// Threads the writer has consumed (advanced by the build).
    pub(super) done: AtomicUsize,
    stop: AtomicBool,
    /// Set once a thread is found not cached: wakes the helpers.
    cold: Mutex<bool>,
    wake: Condvar,
    window: usize,
}

impl<'a> Prefetch<'a> {
    pub(super) fn new(list: &'a [ThreadDir], depth: usize) -> Self {
        Prefetch {
            list,
            next: AtomicUsize::new(0),
            done: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
            cold: Mutex::new(false),
            wake: Condvar::new(),
            window: window(depth),
        }
    }

    /// Stops every prefetcher (the build is done or failed).
    pub(super) fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
        let _guard = self.cold.lock().unwrap_or_else(PoisonError::into_inner);
        self.wake.notify_all();
    }

    /// A helper's loop: sleep until the scout finds the corpus cold, then
    /// prefetch like it.
    pub(super) fn help(&self) {
        let guard = self.cold.lock().unwrap_or_else(PoisonError::into_inner);
        let guard = self
            .wake
            .wait_while(guard, |cold| !*cold && !self.stop.load(Ordering::Relaxed))
            .unwrap_or_else(PoisonError::into_inner);
        drop(guard);
        self.run();
    }

    /// The scout's (and, once woken, every helper's) loop: take the next
    /// thread, wait while it is too far ahead of the workers, hint its files.
    pub(super) fn run(&self) {
        // After a long run of cached threads, check only every SAMPLE-th
        // thread: a warm build then costs next to nothing; one cold sample
        // switches back to every thread.
        const STREAK: usize = 64;
        const SAMPLE: usize = 32;
        let mut warm_streak = 0;
        loop {
            let i = self.next.fetch_add(1, Ordering::Relaxed);
            if i >= self.list.len() {
                return;
            }
            while i > self.done.load(Ordering::Relaxed) + self.window {
                if self.stop.load(Ordering::Relaxed) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            if self.stop.load(Ordering::Relaxed) {
                return;
            }
            if warm_streak >= STREAK && !i.is_multiple_of(SAMPLE) {
                continue;
            }
            if i < self.done.load(Ordering::Relaxed) {
                continue;
            }
            if hint_thread(&self.list[i]) {
                warm_streak = 0;
                let mut cold = self.cold.lock().unwrap_or_else(PoisonError::into_inner);
                if !*cold {
                    *cold = true;
                    self.wake.notify_all();
                }
            } else {
                warm_streak += 1;
            }
        }
    }
}

fn open(path: &Path) -> Option<File> {
    use std::os::unix::fs::OpenOptionsExt;
    fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOATIME)
        .open(path)
        .or_else(|_| {
            // O_NOATIME is refused on files we do not own.
            fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(path)
        })
        .ok()
}

/// Whether the first byte of `file` is in the page cache.
fn resident(file: &File) -> bool {
    let mut byte = [0u8; 1];
    let mut bufs = [std::io::IoSliceMut::new(&mut byte)];
    rustix::io::preadv2(file, &mut bufs, 0, rustix::io::ReadWriteFlags::NOWAIT).is_ok()
}

fn will_need(file: &File) {
    let _ = rustix::fs::fadvise(file, 0, None, rustix::fs::Advice::WillNeed);
}

/// Asks the kernel to read every file of `td` the workers will read, unless
/// its source tweet shows the thread is already cached; returns whether it
/// did. Errors are ignored: the workers meet and report them.
fn hint_thread(td: &ThreadDir) -> bool {
    let Some(source_dir) = td.source_dir() else {
        return false;
    };
    let source = td.path.join(source_dir);
    let Ok(entries) = fs::read_dir(&source) else {
        return false;
    };
    let mut first = true;
    for e in entries.flatten() {
        let Some(f) = open(&e.path()) else { continue };
        if first && resident(&f) {
            return false;
        }
        first = false;
        will_need(&f);
    }
    for (dir, _) in td.reaction_dirs() {
        let Ok(entries) = fs::read_dir(td.path.join(dir)) else {
            continue;
        };
        for e in entries.flatten() {
            if let Some(f) = open(&e.path()) {
                will_need(&f);
            }
        }
    }
    for (i, name) in THREAD_FILES.iter().enumerate() {
        if td.has_file(i)
            && let Some(f) = open(&td.path.join(name))
        {
            will_need(&f);
        }
    }
    true
}
