//! Time training-time batch assembly from a cache.
//!
//! ```text
//! cargo run --release --example loadbench -- CACHE_DIR [--batch 128] [--max-cxt 200] [--split CSV] [--normalize]
//! ```
//!
//! Prints one JSON line:
//! `{"open_us", "first_batch_us", "epoch_ms", "fill_floor_ms", "batches", "threads", "reactions"}`.
//! `open_us` is `LazyCache::open` (manifest only; shards are validated on
//! first use), `first_batch_us` is open + the first batch ready (that shard's
//! validation included), `fill_floor_ms` the time to merely zero-fill the same
//! buffers for the same number of batches (the memory-bandwidth floor).

use std::hint::black_box;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;
use socialctx::FeatureStats;
use socialctx::LazyCache;
use socialctx::Split;
use socialctx::ThreadSource;
use socialctx::{Batch, Kinds, Loader, Selection};

/// Time one epoch of padded, masked (optionally normalised) batches from a
/// cache, against the time to merely zero-fill the same buffers.
/// With --normalize, statistics are read from
/// CACHE_DIR/derived/stats-<content id>[-<split>][-both].json, or computed
/// over the selected threads first (not timed) and saved there; rebuilds
/// keep derived/, and the content id keeps a stale file from being used.
#[derive(Parser, Debug)]
#[command(about, long_about)]
struct Args {
    /// The cache directory
    cache: PathBuf,
    /// Threads per batch
    #[arg(long, default_value_t = 128, value_parser = clap::value_parser!(u32).range(1..))]
    batch: u32,
    /// Reactions per thread (the earliest)
    #[arg(long, default_value_t = 200, value_parser = parse_max_cxt)]
    max_cxt: usize,
    /// Only the threads of this RPDNN split CSV, in its order
    #[arg(long, value_name = "CSV")]
    split: Option<PathBuf>,
    /// Standardise features with global statistics
    #[arg(long)]
    normalize: bool,
    /// Use replies and retweets (default: replies only)
    #[arg(long)]
    retweets: bool,
}

fn run(args: &Args) -> socialctx::Result<String> {
    let selection = Selection {
        kinds: if args.retweets {
            Kinds::Both
        } else {
            Kinds::Replies
        },
        window: None,
        max_cxt: args.max_cxt,
    };
    // Derived files live in the cache's derived/ directory, named after its
    // content id, so a rebuild keeps them and never reuses a stale one.
    let stats_path = {
        let cache = LazyCache::open(&args.cache)?;
        // The selection is part of the name: other threads or kinds, other stats.
        let split = args.split.as_ref().map_or(String::new(), |p| {
            format!("-{}", p.file_stem().unwrap_or_default().to_string_lossy())
        });
        let kinds = if args.retweets { "-both" } else { "" };
        cache
            .derived_dir()
            .join(format!("stats-{}{split}{kinds}.json", cache.content_id()))
    };
    let positions_of = |cache: &LazyCache| -> socialctx::Result<Vec<usize>> {
        match &args.split {
            Some(csv) => {
                let resolved = Split::read(csv)?.resolve(cache)?;
                if !resolved.missing.is_empty() {
                    eprintln!(
                        "note: {} split ids are not in the cache",
                        resolved.missing.len()
                    );
                }
                Ok(resolved.positions)
            }
            None => Ok((0..cache.len()).collect()),
        }
    };
    if args.normalize && !stats_path.exists() {
        let cache = LazyCache::open(&args.cache)?;
        let all = positions_of(&cache)?;
        let sel = Selection {
            max_cxt: usize::MAX,
            ..selection
        };
        if let Some(dir) = stats_path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| socialctx::LoadError::io(dir, e))?;
        }
        FeatureStats::compute(&cache, &all, &sel)?.save(&stats_path)?;
    }

    let start = Instant::now();
    let cache = LazyCache::open(&args.cache)?;
    let open = start.elapsed();
    let stats = if args.normalize {
        Some(FeatureStats::load(&stats_path)?)
    } else {
        None
    };
    let positions = positions_of(&cache)?;
    let mut loader = Loader::new(&cache, selection);
    if let Some(s) = &stats {
        loader = loader.normalize(s);
    }
    let mut batch = Batch::new(args.batch as usize, args.max_cxt);
    let mut chunks = positions.chunks(args.batch as usize);
    let mut rows = 0u64;
    let mut batches = 0u64;
    if let Some(first) = chunks.next() {
        loader.fill(first, &mut batch)?;
        rows += batch.lengths.iter().map(|&l| u64::from(l)).sum::<u64>();
        batches += 1;
    }
    let first_batch = start.elapsed();
    for chunk in chunks {
        loader.fill(chunk, &mut batch)?;
        black_box(&batch);
        rows += batch.lengths.iter().map(|&l| u64::from(l)).sum::<u64>();
        batches += 1;
    }
    let epoch = start.elapsed() - open;

    let floor_start = Instant::now();
    for _ in 0..batches {
        batch.features.fill(0.0);
        batch.mask.fill(0);
        batch.lengths.fill(0);
        black_box(&batch);
    }
    let floor = floor_start.elapsed();
    Ok(format!(
        "{{\"open_us\": {:.1}, \"first_batch_us\": {:.1}, \"epoch_ms\": {:.3}, \"fill_floor_ms\": {:.3}, \"batches\": {batches}, \"threads\": {}, \"reactions\": {rows}}}",
        open.as_secs_f64() * 1e6,
        first_batch.as_secs_f64() * 1e6,
        epoch.as_secs_f64() * 1e3,
        floor.as_secs_f64() * 1e3,
        positions.len()
    ))
}

/// At least one row per thread: 0 would give empty tensors.
fn parse_max_cxt(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
