//! The cache lock: released by the build itself, whatever else shares it.
//!
//! A test binary of its own, apart from `tests/it/`: it forks the test
//! process, and a fork of the shared binary would inherit every descriptor
//! the other tests running beside it hold open (pipes to their children,
//! their caches' locks) until the child is killed.

/// A process forked while a build holds the cache's lock (a DataLoader
/// worker, a test spawning a program: between fork and exec the child
/// shares the lock's open file) must not keep the cache locked after the
/// build ends: the build releases the lock itself, not by closing its copy
/// of the descriptor, so the next build starts at once.
#[test]
fn a_child_forked_during_a_build_does_not_keep_the_cache_locked() {
    struct ForkOnce(std::cell::Cell<Option<i32>>);
    impl socialctx::Progress for ForkOnce {
        fn thread_done(&self, _reactions: u64) {
            if self.0.get().is_some() {
                return;
            }
            // SAFETY: the child only sleeps and exits (async-signal-safe
            // calls); it never returns into the test harness.
            let pid = unsafe { libc::fork() };
            if pid == 0 {
                unsafe {
                    libc::sleep(5);
                    libc::_exit(0);
                }
            }
            self.0.set(Some(pid));
        }
    }
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("cache");
    let corpus = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("data-samples/corpus");
    let opts = socialctx::BuildOptions::default();
    let forked = ForkOnce(std::cell::Cell::new(None));
    socialctx::build(&corpus, &out, &opts, &forked).unwrap();
    let pid = forked.0.get().expect("the build wrote threads");
    assert!(pid > 0, "fork failed");
    let again = socialctx::build(&corpus, &out, &opts, &socialctx::NoProgress);
    // SAFETY: plain kill and waitpid of our own child.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
        libc::waitpid(pid, std::ptr::null_mut(), 0);
    }
    again.expect("the lock was released when the first build ended");
}
