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
//! its first reaction file is already in the page cache (`mincore`; see
//! [`resident`] and [`hint_thread`]), the thread is skipped. And only one
//! prefetcher (the scout) runs until a thread is found cold; the others
//! sleep on a condition variable, each thread found cold wakes one more of
//! them, and a helper sleeps again after a long run of cached threads (a
//! mostly warm corpus with a few evicted threads, as memory reclaim leaves
//! it, wakes a few helpers, not all). A warm build thus pays one listing, one open
//! and one mincore per sampled thread, on one extra thread. The scout, a
//! window ahead of the writer, waits on a second condition variable that the
//! writer signals as it advances (it is not polled); a helper a window
//! ahead goes back to sleep until a cold thread is found. The cache's bytes
//! do not depend on any of this.

use std::fs::{self, File};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, PoisonError};
use std::time::Duration;

use super::discover::ThreadDir;

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
    /// Threads the writer has consumed ([`Prefetch::advance`]).
    done: AtomicUsize,
    stop: AtomicBool,
    /// Helpers asleep, and wake-ups granted to them: each thread found
    /// not cached grants one (see [`Prefetch::set_cold`]).
    cold: Mutex<Sleepers>,
    /// Wakes a helper when a wake-up is granted, and everyone at the stop.
    cold_set: Condvar,
    /// Wakes prefetchers waiting for the workers to catch up.
    advanced: Condvar,
    /// Prefetchers waiting on `advanced`.
    waiting: AtomicUsize,
    window: usize,
}

/// The helpers' sleep state, under [`Prefetch::cold`].
#[derive(Default)]
struct Sleepers {
    asleep: usize,
    wakeups: usize,
}

/// [`Prefetch::advance`] wakes waiting prefetchers once per this many
/// threads (not per thread: 32 waiters woken 6,425 times would cost more
/// than the prefetching), far less than the window.
const WAKE_EVERY: usize = 64;

impl<'a> Prefetch<'a> {
    pub(super) fn new(list: &'a [ThreadDir], depth: usize) -> Self {
        Prefetch {
            list,
            next: AtomicUsize::new(0),
            done: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
            cold: Mutex::new(Sleepers::default()),
            cold_set: Condvar::new(),
            advanced: Condvar::new(),
            waiting: AtomicUsize::new(0),
            window: window(depth),
        }
    }

    /// Records that the writer has consumed the first `done` threads.
    pub(super) fn advance(&self, done: usize) {
        self.done.store(done, Ordering::SeqCst);
        if (done.is_multiple_of(WAKE_EVERY) || done == self.list.len())
            && self.waiting.load(Ordering::SeqCst) > 0
        {
            let _guard = self.cold.lock().unwrap_or_else(PoisonError::into_inner);
            self.advanced.notify_all();
        }
    }

    /// Stops every prefetcher (the build is done or failed).
    pub(super) fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        let _guard = self.cold.lock().unwrap_or_else(PoisonError::into_inner);
        self.cold_set.notify_all();
        self.advanced.notify_all();
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// Whether thread `i` is more than a window ahead of the writer.
    fn ahead(&self, i: usize) -> bool {
        i > self.done.load(Ordering::SeqCst) + self.window
    }

    /// Blocks while thread `i` is more than a window ahead of the writer;
    /// false once stopped.
    fn wait_for_workers(&self, i: usize) -> bool {
        if !self.ahead(i) {
            return !self.stopped();
        }
        let mut guard = self.cold.lock().unwrap_or_else(PoisonError::into_inner);
        self.waiting.fetch_add(1, Ordering::SeqCst);
        while self.ahead(i) && !self.stopped() {
            // The timeout only bounds the cost of a wake-up skipped by the
            // every-WAKE_EVERY rule at the very end of the list.
            guard = self
                .advanced
                .wait_timeout(guard, Duration::from_millis(20))
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        self.waiting.fetch_sub(1, Ordering::SeqCst);
        !self.stopped()
    }

    /// A helper that saw a long run of cached threads sleeps until it is
    /// granted a wake-up; false once stopped.
    fn sleep_until_cold(&self) -> bool {
        let mut sleepers = self.cold.lock().unwrap_or_else(PoisonError::into_inner);
        sleepers.asleep += 1;
        let mut sleepers = self
            .cold_set
            .wait_while(sleepers, |s| s.wakeups == 0 && !self.stopped())
            .unwrap_or_else(PoisonError::into_inner);
        sleepers.asleep -= 1;
        sleepers.wakeups = sleepers.wakeups.saturating_sub(1);
        !self.stopped()
    }

    /// A thread was found not cached: wakes one more sleeping helper. One
    /// per cold thread, not all of them: a warm corpus with a few evicted
    /// threads (memory reclaim leaves such) wakes a few helpers, each of
    /// which costs a run of residency checks before it sleeps again, while
    /// on a cold corpus every prefetcher finds cold threads and the helpers
    /// are all awake within a few dozen threads.
    fn set_cold(&self) {
        let mut sleepers = self.cold.lock().unwrap_or_else(PoisonError::into_inner);
        if sleepers.wakeups < sleepers.asleep {
            sleepers.wakeups += 1;
            self.cold_set.notify_one();
        }
    }

    /// A prefetcher's loop: take the next thread, wait while it is too far
    /// ahead of the workers, hint its files. The scout never sleeps on a warm
    /// corpus; a helper starts asleep and goes back to sleep after a long
    /// run of cached threads, so a mostly warm corpus with a few evicted
    /// threads wakes the helpers only while they are useful.
    pub(super) fn run(&self, scout: bool) {
        // After a long run of cached threads the scout checks only every
        // SAMPLE-th thread: a warm build then costs next to nothing; one
        // cold sample switches back to every thread.
        const STREAK: usize = 64;
        const SAMPLE: usize = 32;
        super::pool::private_fd_table();
        let mut warm_streak = if scout { 0 } else { STREAK };
        loop {
            if !scout && warm_streak >= STREAK {
                if !self.sleep_until_cold() {
                    return;
                }
                warm_streak = 0;
            }
            // A helper a window ahead of the workers has nothing to do: it
            // sleeps until a cold thread is found, not on `advanced`, where
            // all the helpers would wake at every advance to find most of
            // them still ahead (31 helpers, 100 advances: 3,000 futile
            // wake-ups, each fighting for the lock). The scout waits there.
            if !scout && self.ahead(self.next.load(Ordering::Relaxed)) {
                warm_streak = STREAK;
                continue;
            }
            let i = self.next.fetch_add(1, Ordering::Relaxed);
            if i >= self.list.len() || !self.wait_for_workers(i) {
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
                self.set_cold();
            } else {
                warm_streak += 1;
            }
        }
    }
}

fn open(path: &Path) -> Option<File> {
    use rustix::fs::OFlags;
    use std::os::unix::fs::OpenOptionsExt;
    let flags = |f: OFlags| f.bits() as i32;
    fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags(OFlags::NONBLOCK | OFlags::NOATIME))
        .open(path)
        .or_else(|_| {
            // O_NOATIME is refused on files we do not own.
            fs::OpenOptions::new()
                .read(true)
                .custom_flags(flags(OFlags::NONBLOCK))
                .open(path)
        })
        .ok()
}

/// Whether the first page of `file` is in the page cache, asked with
/// mincore(2) on a one-page mapping. A one-byte `preadv2(RWF_NOWAIT)` is not
/// a clean test: on a miss it starts readahead, and when that I/O completes
/// before the call returns, a cold file reads as cached. mincore starts no
/// I/O.
fn resident(file: &File) -> bool {
    // SAFETY: a read-only mapping that is never dereferenced: only the
    // residency of its page is asked. A page past the end of an empty file
    // reads as not resident, which costs one needless hint at worst.
    let Ok(map) = (unsafe { memmap2::MmapOptions::new().len(1).map(file) }) else {
        return false;
    };
    let mut page = 0u8;
    // libc, not rustix: rustix 1.1 has no mincore.
    // SAFETY: `map` is a live, page-aligned mapping of one page, and `page`
    // has room for that page's status byte.
    let rc = unsafe { libc::mincore(map.as_ptr() as *mut libc::c_void, 1, &mut page) };
    rc == 0 && page & 1 == 1
}

fn will_need(file: &File) {
    let _ = rustix::fs::fadvise(file, 0, None, rustix::fs::Advice::WillNeed);
}

/// Asks the kernel to read every file of `td` the workers will read, unless
/// its first reaction file (or, without reactions, its source tweet) shows
/// the thread is already cached; returns whether it did. Errors are
/// ignored: the workers meet and report them.
///
/// The test is not the source tweet: the rumour index reads the source
/// tweets of every rumour thread before the main pass, so a cached source
/// says nothing of the thread's reactions (testing it left a third of an
/// evicted PHEME-sized corpus to be read one file at a time by the workers).
fn hint_thread(td: &ThreadDir) -> bool {
    let mut tested = false;
    // Hints one file; false if it is the tested one and is cached.
    let mut hint = |path: &Path| {
        let Some(f) = open(path) else { return true };
        if !tested {
            tested = true;
            if resident(&f) {
                return false;
            }
        }
        will_need(&f);
        true
    };
    for (dir, _) in td.reaction_dirs() {
        let Ok(entries) = fs::read_dir(td.path.join(dir)) else {
            continue;
        };
        for e in entries.flatten() {
            if !hint(&e.path()) {
                return false;
            }
        }
    }
    if let Some(source_dir) = td.source_dir()
        && let Ok(entries) = fs::read_dir(td.path.join(source_dir))
    {
        for e in entries.flatten() {
            if !hint(&e.path()) {
                return false;
            }
        }
    }
    for name in td.side_files() {
        if !hint(&td.path.join(name)) {
            return false;
        }
    }
    tested
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::path::PathBuf;

    /// Writes `path` durably, then drops it from the page cache.
    fn write_evicted(path: &Path, bytes: &[u8]) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, bytes).unwrap();
        let f = File::open(path).unwrap();
        f.sync_all().unwrap();
        rustix::fs::fadvise(&f, 0, None, rustix::fs::Advice::DontNeed).unwrap();
    }

    fn read(path: &Path) {
        let mut s = Vec::new();
        File::open(path).unwrap().read_to_end(&mut s).unwrap();
    }

    /// A directory on the repository's file system (not a tmpfs /tmp, where
    /// nothing can be evicted).
    fn scratch() -> tempfile::TempDir {
        let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("target");
        fs::create_dir_all(&target).unwrap();
        tempfile::tempdir_in(target).unwrap()
    }

    #[test]
    fn resident_follows_the_page_cache_and_starts_no_io() {
        let tmp = scratch();
        let p = tmp.path().join("f.json");
        write_evicted(&p, &[b'x'; 10_000]);
        let f = File::open(&p).unwrap();
        assert!(!resident(&f), "an evicted file is not resident");
        // Asking twice must not have read it in (a RWF_NOWAIT read would).
        assert!(!resident(&f), "asking started no read");
        read(&p);
        assert!(resident(&f), "a file just read is resident");
        let empty = tmp.path().join("empty.json");
        fs::write(&empty, b"").unwrap();
        assert!(!resident(&File::open(&empty).unwrap()));
    }

    /// The rumour index reads rumour threads' source tweets before the main
    /// pass: a cached source must not make the thread count as warm.
    #[test]
    fn a_cached_source_tweet_does_not_make_a_thread_warm() {
        let tmp = scratch();
        let thread = tmp.path().join("ev/rumours/100");
        let source = thread.join("source-tweets/100.json");
        let replies: Vec<PathBuf> = (0..3)
            .map(|i| thread.join(format!("reactions/10{i}.json")))
            .collect();
        write_evicted(&source, b"{}");
        for r in &replies {
            write_evicted(r, b"{}");
        }
        read(&source);
        let found = super::super::discover::discover(tmp.path(), 1).unwrap();
        let td = &found.threads[0];
        assert!(hint_thread(td), "a thread with cold reactions is hinted");
        // WILLNEED readahead is asynchronous: wait for it, boundedly.
        let cached = |p: &PathBuf| resident(&File::open(p).unwrap());
        for _ in 0..200 {
            if replies.iter().all(cached) {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(
            replies.iter().all(cached),
            "the hinted reactions were read in"
        );
        assert!(!hint_thread(td), "a cached thread is skipped");
    }
}
