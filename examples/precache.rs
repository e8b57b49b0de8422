//! The batch job: build the feature cache for a PHEME-style corpus.
//!
//! ```text
//! cargo run --release --example precache -- [CORPUS_DIR] [CACHE_DIR] [--workers N] [--strict] [--report FILE]
//! ```
//!
//! With no arguments it builds the sample corpus shipped in `data-samples/`
//! into `target/socialctx-cache`.

use std::cell::Cell;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use clap::Parser;
use indicatif::{ProgressBar, ProgressStyle};
use socialctx::internals::write_jsonl;
use socialctx::summary::{build_summary, plan_summary};
use socialctx::{
    BuildError, BuildOptions, Plan, Progress, build, build_incremental, build_partition,
};

// Relative to the working directory (the repository root for `cargo run`),
// not paths fixed at compile time.
const SAMPLE_CORPUS: &str = "data-samples/corpus";
const DEFAULT_CACHE: &str = "target/socialctx-cache";

/// Set by SIGINT or SIGTERM: the build stops between threads.
static STOP: AtomicBool = AtomicBool::new(false);

/// Build the RPDNN social-context feature cache for a PHEME-style corpus.
///
/// Walks CORPUS_DIR for thread directories (an all-digit name with a
/// source-tweets/ or source-tweet/ folder; replies in reactions/ or replies/,
/// retweets in retweets/), computes the 28 numerical features of every reply
/// and retweet, and writes a memory-mappable cache to CACHE_DIR, replacing
/// any cache there atomically. Files that cannot be used are skipped and
/// listed in the report (stored in the cache as report.jsonl); the build
/// still succeeds. Unless --no-extended, the extended features are computed
/// too (structure.json depth, persistence, follow relations, user
/// reliability, annotation labels, retweets.json). Exit status: 0 on
/// success, 1 on error, 2 on bad usage.
#[derive(Parser, Debug)]
#[command(version, about, long_about)]
struct Args {
    /// Corpus root [default: the sample corpus in data-samples/corpus]
    #[arg(value_name = "CORPUS_DIR")]
    corpus: Option<PathBuf>,
    /// Cache directory to write [default: target/socialctx-cache]
    #[arg(value_name = "CACHE_DIR")]
    cache: Option<PathBuf>,
    /// Worker threads [default: available cores]
    // `--threads`, the former name, is a hidden alias: a cache's "threads"
    // are conversation threads.
    #[arg(long, short = 'j', alias = "threads", value_parser = clap::value_parser!(u16).range(1..))]
    workers: Option<u16>,
    /// Stop at the first bad input (non-zero exit, existing cache untouched)
    #[arg(long)]
    strict: bool,
    /// Also write the bad-input report to FILE as JSON Lines
    #[arg(long, value_name = "FILE")]
    report: Option<PathBuf>,
    /// Skip tweet files larger than this many bytes [default: 16777216]
    // Options, not defaults, so that --partition can tell what was given.
    #[arg(long, value_name = "BYTES")]
    max_file_bytes: Option<u64>,
    /// Cap on one shard file, in MiB [default: 16]
    #[arg(long, value_name = "MIB", value_parser = clap::value_parser!(u64).range(1..=1024))]
    shard_mib: Option<u64>,
    /// Only the reference's 28 features: skip structure.json, annotation.json,
    /// who-follows-whom.dat and retweets.json (the extended features)
    #[arg(long)]
    no_extended: bool,
    /// Prefetch threads that keep reads in flight when the corpus is not in
    /// the page cache (0 = none) [default: 32; 0 under `ulimit -v`]
    #[arg(long, value_name = "N")]
    io_depth: Option<usize>,
    /// Re-read only the threads whose files changed since the cache in
    /// CACHE_DIR was built (by metadata: size, mtime, ctime, inode), take the
    /// others from it; byte-identical to a full build. Falls back to a full
    /// build, and says why, when reuse is not safe
    #[arg(long, conflicts_with = "plan")]
    incremental: bool,
    /// With --incremental: also compare file contents (xxh3), for file
    /// systems with coarse or unreliable timestamps (reads every file)
    #[arg(long, requires = "incremental")]
    verify: bool,
    /// Partitioned builds: without --partition, walk CORPUS_DIR once and
    /// write the plan to this file (then build its partitions anywhere and
    /// join them with the merge example); with --partition, the plan to build
    /// a partition of
    #[arg(long, value_name = "PLAN_FILE")]
    plan: Option<PathBuf>,
    /// Build partition I of N of --plan into CACHE_DIR (I from 0; contiguous
    /// source-id ranges balanced by file count; reads no other partition's
    /// tweets). The corpus must be as planned: a thread added, gone, moved or
    /// edited since is refused, naming it; options that shape the cache come
    /// from the plan, and differing ones are refused.
    /// Slurm: --partition $SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT
    #[arg(long, value_name = "I/N", value_parser = parse_partition, requires = "plan")]
    partition: Option<(usize, usize)>,
    /// Do not show a progress bar
    #[arg(long, short)]
    quiet: bool,
}

/// Threads on the bar, reactions in the message.
struct Bar {
    bar: ProgressBar,
    reactions: Cell<u64>,
}

impl Progress for Bar {
    fn discovered(&self, threads: u64) {
        self.bar.set_length(threads);
        self.bar.set_message("threads");
        self.bar.set_style(
            ProgressStyle::with_template(
                "{spinner} {elapsed_precise} {wide_bar} {pos}/{len} {msg}, eta {eta}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
    }
    fn cancelled(&self) -> bool {
        STOP.load(Ordering::Relaxed)
    }
    fn thread_done(&self, reactions: u64) {
        let total = self.reactions.get() + reactions;
        self.reactions.set(total);
        self.bar.inc(1);
        if self.bar.position().is_multiple_of(64) {
            self.bar.set_message(format!("threads, {total} reactions"));
        }
    }
}

fn parse_partition(s: &str) -> Result<(usize, usize), String> {
    let (i, n) = s
        .split_once('/')
        .ok_or_else(|| format!("{s:?} is not I/N (e.g. 0/4)"))?;
    let (i, n): (usize, usize) = (
        i.trim()
            .parse()
            .map_err(|_| format!("{i:?} is not a number"))?,
        n.trim()
            .parse()
            .map_err(|_| format!("{n:?} is not a number"))?,
    );
    if n == 0 || i >= n {
        return Err(format!("partition {i}/{n}: need 0 <= I < N"));
    }
    Ok((i, n))
}

fn main() -> ExitCode {
    let args = Args::parse();
    let corpus = args.corpus.unwrap_or_else(|| SAMPLE_CORPUS.into());
    let cache = args.cache.unwrap_or_else(|| DEFAULT_CACHE.into());
    let max_file_bytes = args
        .max_file_bytes
        .unwrap_or(socialctx::internals::parse::DEFAULT_MAX_FILE_BYTES);
    let shard_mib = args.shard_mib.unwrap_or(16);
    let mut opts = BuildOptions::default()
        .strict(args.strict)
        .max_file_bytes(max_file_bytes)
        .shard_bytes((shard_mib * 1024 * 1024) as usize)
        .extended(!args.no_extended);
    if let Some(n) = args.workers {
        opts = opts.threads(usize::from(n));
    }
    if let Some(d) = args.io_depth {
        opts = opts.io_depth(d);
    }
    opts = opts.verify(args.verify);

    let bar = if args.quiet {
        ProgressBar::hidden()
    } else {
        // indicatif draws nothing when stderr is not a terminal.
        ProgressBar::new_spinner().with_message("discovering threads")
    };
    // A spinner while the corpus is walked; `discovered` switches to a bar.
    bar.set_style(
        ProgressStyle::with_template("{spinner} {elapsed_precise} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    bar.enable_steady_tick(Duration::from_millis(120));
    let progress = Bar {
        bar: bar.clone(),
        reactions: Cell::new(0),
    };
    // Outputs are checked before anything is replaced: an unwritable
    // --report fails now, not after the cache was swapped.
    let report_file = match &args.report {
        Some(path) => match std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            Ok(f) => Some(f),
            Err(e) => {
                eprintln!("error: cannot write the report to {}: {e}", path.display());
                return ExitCode::FAILURE;
            }
        },
        None => None,
    };
    // SIGINT/SIGTERM: stop between threads, remove the staging directory,
    // keep any existing cache (without a handler, the next build cleans up).
    let _ = ctrlc::set_handler(|| STOP.store(true, Ordering::Relaxed));
    let result = match (&args.plan, args.partition) {
        (Some(plan_file), None) => {
            bar.finish_and_clear();
            let written = Plan::create(&corpus, &opts).and_then(|plan| {
                plan.save(plan_file)?;
                Ok(plan)
            });
            return match written {
                Ok(plan) => {
                    print!("{}", plan_summary(&plan, plan_file));
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::FAILURE
                }
            };
        }
        (Some(plan_file), Some(part)) => match Plan::load(plan_file) {
            Ok(plan) => {
                // A partition is built with its plan's options: refuse
                // others rather than ignore them.
                let differ = plan.differing_options(
                    args.strict.then_some(true),
                    args.max_file_bytes,
                    args.shard_mib.map(|m| m * 1024 * 1024),
                    args.no_extended.then_some(false),
                );
                if !differ.is_empty() {
                    bar.finish_and_clear();
                    eprintln!(
                        "error: {} differ{} from the plan {}: a partition is built with its plan's options; leave {} out, or make the plan again with {}",
                        differ.join(", "),
                        if differ.len() == 1 { "s" } else { "" },
                        plan_file.display(),
                        if differ.len() == 1 { "it" } else { "them" },
                        if differ.len() == 1 { "it" } else { "them" },
                    );
                    return ExitCode::FAILURE;
                }
                build_partition(&corpus, &plan, part, &cache, opts.threads, &progress)
            }
            Err(e) => Err(e),
        },
        (None, _) if args.incremental => build_incremental(&corpus, &cache, &opts, &progress),
        (None, _) => build(&corpus, &cache, &opts, &progress),
    };
    bar.finish_and_clear();

    let summary = match result {
        Ok(s) => s,
        Err(BuildError::Cancelled) => {
            eprintln!(
                "interrupted: nothing was published; {} is as it was",
                cache.display()
            );
            return ExitCode::from(130);
        }
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let (Some(path), Some(file)) = (&args.report, report_file) {
        let written = file
            .set_len(0)
            .and_then(|()| write_jsonl(std::io::BufWriter::new(file), &summary.report));
        if let Err(e) = written {
            eprintln!("error: cannot write the report to {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
    }
    print!("{}", build_summary(&summary, &corpus, &cache));
    // Published: success, whatever failed after the swap.
    for w in &summary.warnings {
        eprintln!("warning: {w}");
    }
    ExitCode::SUCCESS
}
