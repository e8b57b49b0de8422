//! The batch job: build the feature cache for a PHEME-style corpus.
//!
//! ```text
//! cargo run --release --example precache -- [CORPUS_DIR] [CACHE_DIR] [--threads N] [--strict] [--report FILE]
//! ```
//!
//! With no arguments it builds the sample corpus shipped in `data-samples/`
//! into `target/socialctx-cache`.

use std::cell::Cell;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use indicatif::{ProgressBar, ProgressStyle};
use socialctx::internals::write_jsonl;
use socialctx::{BuildOptions, Progress, build};

const SAMPLE_CORPUS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/data-samples/corpus");
const DEFAULT_CACHE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/target/socialctx-cache");

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
    #[arg(long, short = 'j', value_parser = clap::value_parser!(u16).range(1..))]
    threads: Option<u16>,
    /// Stop at the first bad input (non-zero exit, existing cache untouched)
    #[arg(long)]
    strict: bool,
    /// Also write the bad-input report to FILE as JSON Lines
    #[arg(long, value_name = "FILE")]
    report: Option<PathBuf>,
    /// Skip tweet files larger than this many bytes
    #[arg(long, value_name = "BYTES", default_value_t = socialctx::internals::parse::DEFAULT_MAX_FILE_BYTES)]
    max_file_bytes: u64,
    /// Cap on one shard file, in MiB
    #[arg(long, value_name = "MIB", default_value_t = 16, value_parser = clap::value_parser!(u64).range(1..=1024))]
    shard_mib: u64,
    /// Only the reference's 28 features: skip structure.json, annotation.json,
    /// who-follows-whom.dat and retweets.json (the extended features)
    #[arg(long)]
    no_extended: bool,
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
    fn thread_done(&self, reactions: u64) {
        let total = self.reactions.get() + reactions;
        self.reactions.set(total);
        self.bar.inc(1);
        if self.bar.position().is_multiple_of(64) {
            self.bar.set_message(format!("threads, {total} reactions"));
        }
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    let corpus = args.corpus.unwrap_or_else(|| SAMPLE_CORPUS.into());
    let cache = args.cache.unwrap_or_else(|| DEFAULT_CACHE.into());
    let mut opts = BuildOptions::default()
        .strict(args.strict)
        .max_file_bytes(args.max_file_bytes)
        .shard_bytes((args.shard_mib * 1024 * 1024) as usize)
        .extended(!args.no_extended);
    if let Some(n) = args.threads {
        opts = opts.threads(usize::from(n));
    }

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
    let result = build(&corpus, &cache, &opts, &progress);
    bar.finish_and_clear();

    let summary = match result {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let Some(path) = &args.report {
        let written = std::fs::File::create(path)
            .and_then(|f| write_jsonl(std::io::BufWriter::new(f), &summary.report));
        if let Err(e) = written {
            eprintln!("error: cannot write the report to {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
    }
    let m = &summary.manifest;
    let secs = summary.elapsed.as_secs_f64();
    println!("cache      {}", cache.display());
    println!("corpus     {}", corpus.display());
    println!(
        "threads    {} (source tweets with their context)",
        m.threads
    );
    println!("workers    {}", summary.workers);
    println!(
        "reactions  {} ({} replies, {} retweets)",
        m.reactions, m.replies, m.retweets
    );
    println!(
        "skipped    {} (files or threads; see report.jsonl in the cache)",
        m.skipped
    );
    println!("shards     {}", m.shards.len());
    let p = &summary.phases;
    println!(
        "seconds    {secs:.3} (discover {:.3}, process {:.3}, publish {:.3})",
        p.discover.as_secs_f64(),
        p.process.as_secs_f64(),
        p.publish.as_secs_f64()
    );
    println!(
        "rate       {:.0} reactions/s",
        m.reactions as f64 / secs.max(1e-9)
    );
    ExitCode::SUCCESS
}
