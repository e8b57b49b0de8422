//! The store's verified record ([`VerifiedRecord`]), written after a
//! publish: each segment's checksum and stat, and the file system's clock.

use std::fs::{self, File};
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Duration;

use super::super::format::{StoreMeta, VERIFIED_FORMAT, VerifiedRecord, VerifiedSegment, stat_ns};

/// The environment variable of the store's fault-injection hook, for this
/// repository's tests (as `ingest::publish::FAULT_ENV` is for the build's):
/// `kill-before-record` kills the process with `SIGKILL` after a store is
/// published and before its verified record is written.
pub(super) const FAULT_ENV: &str = "SOCIALCTX_TEST_STORE_FAULT";

/// How long [`write`] waits, at most, for the file system's clock to pass
/// the segments' last change (a clock tick: 1 to 10 ms where timestamps
/// follow the kernel's coarse clock). On a file system of coarser
/// timestamps the record is written anyway; the segments it cannot vouch
/// for (racy) are read again by the next nightly, as without a record.
const CLOCK_WAIT: Duration = Duration::from_millis(25);

/// Runs the fault hook ([`FAULT_ENV`]).
pub(super) fn fault_before_record() {
    if std::env::var(FAULT_ENV).is_ok_and(|v| v == "kill-before-record") {
        let _ =
            rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::KILL);
    }
}

/// Records the segments of the store just published at `target` (its
/// metadata `meta`) into `record`. Best effort: without a record the next
/// nightly verifies every segment, which is what any failure here costs;
/// a failure removes the previous record (whose entries could only match
/// nothing, but a stale file helps no one).
pub(super) fn write(record: &Path, target: &Path, meta: &StoreMeta) {
    if try_write(record, target, meta).is_err() {
        let _ = fs::remove_file(record);
        let _ = fs::remove_file(tmp_path(record));
    }
}

fn tmp_path(record: &Path) -> std::path::PathBuf {
    record.with_extension("verified.tmp")
}

fn try_write(record: &Path, target: &Path, meta: &StoreMeta) -> std::io::Result<()> {
    // The stat first, then the clock: a change after the stat either
    // moves the stat or falls in the tick the record's `at_ns` shares
    // with it, which the racy-clean rule refuses to vouch for.
    let mut segments = Vec::with_capacity(meta.segments.len());
    let mut newest = i64::MIN;
    for s in &meta.segments {
        let m = fs::metadata(target.join(&s.file))?;
        let (mtime_ns, ctime_ns) = (
            stat_ns(m.mtime(), m.mtime_nsec()),
            stat_ns(m.ctime(), m.ctime_nsec()),
        );
        newest = newest.max(mtime_ns).max(ctime_ns);
        segments.push(VerifiedSegment {
            file: s.file.clone(),
            bytes: s.bytes,
            xxh3: s.xxh3.clone(),
            dev: m.dev(),
            ino: m.ino(),
            mtime_ns,
            ctime_ns,
        });
    }
    // The file system's clock, not the machine's (a network file system's
    // server stamps the times): the mtime of the record's own temporary
    // file, touched until it passes the segments' last change, so that
    // they are vouched for at once rather than one night later.
    let tmp = tmp_path(record);
    // Made afresh (a kill may have left one): never written through
    // whatever link stands there.
    let _ = fs::remove_file(&tmp);
    let mut f = File::options().write(true).create_new(true).open(&tmp)?;
    let started = std::time::Instant::now();
    let at_ns = loop {
        let m = crate::output::touch_now(&f)?;
        let now = stat_ns(m.mtime(), m.mtime_nsec());
        if now > newest || started.elapsed() >= CLOCK_WAIT {
            break now;
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    let rec = VerifiedRecord {
        format: VERIFIED_FORMAT.into(),
        name: meta.name.clone(),
        at_ns,
        segments,
    };
    let mut text = serde_json::to_vec_pretty(&rec).map_err(std::io::Error::other)?;
    text.push(b'\n');
    f.write_all(&text)?;
    drop(f);
    fs::rename(&tmp, record)
}
