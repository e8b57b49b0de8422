//! Join partition caches into one cache, byte-identical to a single build.
//!
//! ```text
//! cargo run --release --example precache -- CORPUS --plan plan.json
//! cargo run --release --example precache -- CORPUS part-0 --plan plan.json --partition 0/2   # anywhere
//! cargo run --release --example precache -- CORPUS part-1 --plan plan.json --partition 1/2
//! cargo run --release --example merge -- CACHE_DIR part-0 part-1
//! ```

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

/// Merge the partition caches of one plan (every partition, each once, in
/// any order; built with `precache --plan PLAN --partition I/N`) into
/// OUT_CACHE, published atomically. The result is byte-identical to a single
/// `precache` of the whole corpus. A missing, repeated, damaged or foreign
/// partition is an error and nothing is published. Exit status: 0 on
/// success, 1 on error, 2 on bad usage.
#[derive(Parser, Debug)]
#[command(about, long_about)]
struct Args {
    /// The cache directory to write
    out: PathBuf,
    /// The partition caches
    #[arg(required = true)]
    parts: Vec<PathBuf>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match socialctx::merge(&args.out, &args.parts) {
        Ok(s) => {
            print!("{}", socialctx::summary::merge_summary(&s, &args.out));
            for w in &s.warnings {
                eprintln!("warning: {w}");
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
