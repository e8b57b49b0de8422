//! Print (and save) the 28 features' global statistics.
//!
//! ```text
//! cargo run --release --example stats -- CACHE_DIR [--split CSV ...] [--retweets] [--save FILE]
//! ```

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use socialctx::Cache;

/// Per-feature count, mean, population std (ddof 0), min and max over the
/// cache's replies (or replies and retweets), optionally restricted to the
/// threads of one or more RPDNN split CSVs; what `--normalize` training uses.
#[derive(Parser, Debug)]
#[command(about, long_about)]
struct Args {
    /// The cache directory
    cache: PathBuf,
    /// Only threads listed in these split CSVs (repeatable)
    #[arg(long, value_name = "CSV")]
    split: Vec<PathBuf>,
    /// Include retweets (default: replies only, as the reference)
    #[arg(long)]
    retweets: bool,
    /// Save the statistics as JSON (for `Loader::normalize` / loadbench)
    #[arg(long, value_name = "FILE")]
    save: Option<PathBuf>,
}

fn run(args: &Args) -> socialctx::Result<()> {
    let cache = Cache::open(&args.cache)?;
    let (s, notes) = socialctx::summary::split_stats(&cache, &args.split, args.retweets)?;
    for note in notes {
        eprintln!("{note}");
    }
    let table = socialctx::summary::stats_table(&s);
    // `stats | head` is fine: ignore a closed pipe.
    let _ = std::io::stdout().write_all(table.as_bytes());
    if let Some(path) = &args.save {
        s.save(path)?;
        eprintln!("saved {}", path.display());
    }
    Ok(())
}

fn main() -> ExitCode {
    match run(&Args::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
