//! `gen-corpus`: the command-line front end of the [`gen_corpus`] library.
//!
//! ```text
//! gen-corpus OUT_DIR --threads N [--seed S] [--retweets FRACTION] [--force]
//! ```
//!
//! Prints the [`Stats::to_json`](gen_corpus::Stats::to_json) line on success
//! (exit status 0), `gen-corpus: error: ...` on stderr on failure (1), and
//! clap's usage error for bad arguments (2).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use gen_corpus::{MAX_RETWEETS, MAX_THREADS, Options, generate};

/// Generate a deterministic PHEME-shaped Twitter corpus for benchmarks.
///
/// Writes N conversation threads (a source tweet and its replies) under
/// OUT_DIR/<event>-all-rnr-threads/<rumours|non-rumours>/<source_id>/, with the
/// source tweet in source-tweets/ (or source-tweet/), replies in reactions/ and,
/// with --retweets, retweets in retweets/. Each file is a compact Twitter v1.1
/// status object with a full user object, like the real PHEME files. The 9
/// PHEME events and their rumour/non-rumour mix are scaled to N; replies per
/// thread are heavy-tailed with a mean of about 15. --threads 6425 gives a
/// PHEME-sized corpus (about 99k replies, 280 MB).
///
/// The output is byte-identical for the same arguments on any machine and any
/// number of worker threads (set RAYON_NUM_THREADS to choose the workers). On
/// success one JSON line is printed: {"threads", "replies", "retweets",
/// "files", "bytes"}. On error a message naming the path goes to stderr and the
/// exit status is 1 (2 for bad usage).
#[derive(Parser, Debug)]
#[command(name = "gen-corpus")]
struct Args {
    /// Directory to write the corpus into; created if absent, must be empty unless --force
    out_dir: PathBuf,
    /// Conversation threads (source tweets) to generate, 1 to 4194304; 6425 is PHEME-sized (not worker threads: see RAYON_NUM_THREADS)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=MAX_THREADS as i64))]
    threads: u32,
    /// Seed of the generator; the same seed and N give the same bytes
    #[arg(long, value_name = "S", default_value_t = Options::DEFAULT_SEED)]
    seed: u64,
    /// Also write about FRACTION x (replies of the thread) retweets into each thread's retweets/ folder
    #[arg(long, value_name = "FRACTION", default_value_t = 0.0, value_parser = parse_fraction)]
    retweets: f64,
    /// Write into a non-empty OUT_DIR (files with the same names are overwritten, others are left alone)
    #[arg(long)]
    force: bool,
}

fn parse_fraction(s: &str) -> Result<f64, String> {
    let f: f64 = s.parse().map_err(|_| format!("`{s}` is not a number"))?;
    if f.is_finite() && (0.0..=MAX_RETWEETS).contains(&f) {
        Ok(f)
    } else {
        Err(format!("`{s}` is not between 0 and {MAX_RETWEETS}"))
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    let mut opts = Options::new(u64::from(args.threads));
    opts.seed = args.seed;
    opts.retweets = args.retweets;
    opts.force = args.force;
    match generate(&args.out_dir, &opts) {
        Ok(stats) => {
            println!("{}", stats.to_json());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("gen-corpus: error: {e}");
            ExitCode::FAILURE
        }
    }
}
