//! Print a cache as JSON Lines in the RPDNN oracle's format.
//!
//! ```text
//! cargo run --release --example dump -- CACHE_DIR [--retweets] [--extended] [--graph] [--tokens]
//! ```

use std::io::{BufWriter, ErrorKind, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use socialctx::Cache;
use socialctx::dump::{DumpOptions, write_cache};

/// Print a socialctx cache as JSON Lines, in the format of rpdnn_oracle.py:
/// one line per thread in source-id order,
/// {"source_id", "label", "reactions": [{"id", "kind", "created_at", "features"}]}.
/// Replies only unless --retweets. Exit status: 0 on success, 1 if the cache
/// is missing or damaged, 2 on bad usage.
#[derive(Parser, Debug)]
#[command(version, about, long_about)]
struct Args {
    /// The cache directory (as written by the precache example)
    cache: PathBuf,
    /// Include retweets (the oracle's --retweets; a cache built with the
    /// extended features also holds the retweets of retweets.json files,
    /// which the oracle does not read)
    #[arg(long)]
    retweets: bool,
    /// Add the extended features as extra keys (per thread: event, veracity,
    /// annotated_rumour; per reaction: depth, persistence, follows_source,
    /// followed_by_source, reciprocal_follow, user_reliability; null = unknown)
    #[arg(long)]
    extended: bool,
    /// Print the texts for embedding instead of the features, as
    /// rpdnn_tokens.py does: {"source_id", "reactions": [{"id",
    /// "reply_tokens", "description_tokens"}]} (RPDNN's
    /// preprocessing_tweet_text tokens of each reply, null for retweets; the
    /// author's description split on ' ', null without one)
    #[arg(long, conflicts_with_all = ["extended", "graph"])]
    tokens: bool,
    /// Add each reaction's parent in the propagation tree (FEATURES.md,
    /// "Propagation tree"): "parent" (a tweet id; the source's for the
    /// root's children) and "parent_how" (in_reply_to, structure or defaulted)
    #[arg(long)]
    graph: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let cache = match Cache::open(&args.cache) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut out = BufWriter::new(std::io::stdout().lock());
    let opts = DumpOptions::default()
        .retweets(args.retweets)
        .extended(args.extended)
        .graph(args.graph)
        .tokens(args.tokens);
    match write_cache(&mut out, &cache, &opts).and_then(|()| out.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        // `dump | head` is fine.
        Err(e) if e.kind() == ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: writing output: {e}");
            ExitCode::FAILURE
        }
    }
}
