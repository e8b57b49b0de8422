//! The I/O floor of a corpus: walk it, open and read every file, nothing else.
//!
//! ```text
//! cargo run --release --example floor -- CORPUS_DIR [--threads N] [--cold] [--evict-only]
//! cargo run --release --example floor -- CORPUS_DIR --stat [--read LIST]
//! ```
//!
//! A build can never be faster than this, so precache is reported as a ratio
//! to it, measured in the same run on the same machine. `--cold` first evicts
//! every file from the page cache (`posix_fadvise(POSIX_FADV_DONTNEED)`);
//! `--evict-only` just evicts (run it before a cold precache).
//! Prints one JSON line: `{"threads", "files", "bytes", "walk_ms", "read_ms", "total_ms", "cold"}`.
//!
//! `--stat` is the floor of an incremental build instead: walk and `stat`
//! every file (how a build that trusts no change list learns what changed),
//! then open and read only the files of `--read LIST` (one path per line,
//! relative to CORPUS_DIR or absolute; a directory stands for every file
//! under it), what changed. `read_ms` is then the stats and the reads.

use std::fs::File;
use std::io::Read;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;
use jwalk::{Parallelism, WalkDir};
use rayon::prelude::*;

/// Measure the I/O floor of a corpus: a parallel walk plus open and read of
/// every (non-hidden) file with the given number of threads, doing nothing
/// else. Compare precache's time with this one, measured in the same run.
#[derive(Parser, Debug)]
#[command(about, long_about)]
struct Args {
    /// Corpus root
    corpus: PathBuf,
    /// Threads for the walk and the reads [default: available cores]
    #[arg(long, short = 'j', value_parser = clap::value_parser!(u16).range(1..))]
    threads: Option<u16>,
    /// Evict the corpus from the page cache before measuring
    #[arg(long)]
    cold: bool,
    /// Only evict the corpus from the page cache, then exit
    #[arg(long)]
    evict_only: bool,
    /// The incremental floor: stat every file, read only those of --read
    #[arg(long, conflicts_with = "evict_only")]
    stat: bool,
    /// With --stat: the changed files (or thread folders) to read
    #[arg(long, value_name = "LIST", requires = "stat")]
    read: Option<PathBuf>,
}

/// `--stat`: stats every file of `files`, then reads those `list` names
/// (directories walked); returns the bytes read.
fn stat_floor(root: &Path, files: &[PathBuf], list: Option<&Path>, threads: usize) -> u64 {
    let stated = files
        .par_iter()
        .filter(|p| std::fs::metadata(p).is_ok())
        .count();
    std::hint::black_box(stated);
    let Some(list) = list else { return 0 };
    let text = std::fs::read_to_string(list).unwrap_or_default();
    let mut changed = Vec::new();
    for line in text.lines().filter(|l| !l.is_empty()) {
        let p = root.join(line);
        if p.is_dir() {
            changed.extend(walk(&p, threads));
        } else {
            changed.push(p);
        }
    }
    read_all(&changed)
}

/// Opens and reads every file of `paths` (one reused buffer per worker);
/// the bytes read.
fn read_all(paths: &[PathBuf]) -> u64 {
    paths
        .par_iter()
        .map_init(Vec::new, |buf, p| {
            buf.clear();
            File::open(p)
                .and_then(|mut f| f.read_to_end(buf))
                .map_or(0, |n| n as u64)
        })
        .sum()
}

fn walk(root: &Path, threads: usize) -> Vec<PathBuf> {
    WalkDir::new(root)
        .skip_hidden(true)
        .parallelism(Parallelism::RayonNewPool(threads))
        .into_iter()
        .flatten()
        .filter(|e| e.file_type.is_file())
        .map(|e| e.path())
        .collect()
}

/// Drops `path` from the page cache.
pub fn evict(path: &Path) -> std::io::Result<()> {
    let f = File::open(path)?;
    // SAFETY: a valid open descriptor; offset 0, length 0 = the whole file.
    let rc = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::from_raw_os_error(rc))
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    let threads = args
        .threads
        .map(usize::from)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
    if !args.corpus.is_dir() {
        eprintln!(
            "error: corpus directory {} does not exist",
            args.corpus.display()
        );
        return ExitCode::FAILURE;
    }
    let pool = match rayon::ThreadPoolBuilder::new().num_threads(threads).build() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: cannot start {threads} threads: {e}");
            return ExitCode::FAILURE;
        }
    };
    if args.cold || args.evict_only {
        let files = walk(&args.corpus, threads);
        let failed = pool.install(|| files.par_iter().filter(|p| evict(p).is_err()).count());
        if failed > 0 {
            eprintln!("warning: {failed} files could not be evicted");
        }
        if args.evict_only {
            return ExitCode::SUCCESS;
        }
    }

    let start = Instant::now();
    let files = walk(&args.corpus, threads);
    let walked = start.elapsed();
    let bytes: u64 = pool.install(|| {
        if args.stat {
            return stat_floor(&args.corpus, &files, args.read.as_deref(), threads);
        }
        read_all(&files)
    });
    let total = start.elapsed();
    println!(
        "{{\"threads\": {threads}, \"files\": {}, \"bytes\": {bytes}, \"walk_ms\": {:.1}, \"read_ms\": {:.1}, \"total_ms\": {:.1}, \"cold\": {}, \"stat\": {}}}",
        files.len(),
        walked.as_secs_f64() * 1e3,
        (total - walked).as_secs_f64() * 1e3,
        total.as_secs_f64() * 1e3,
        args.cold,
        args.stat
    );
    ExitCode::SUCCESS
}
