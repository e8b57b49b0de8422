//! Corpus statistics per event and label, from a cache.
//!
//! ```text
//! cargo run --release --example corpus_stats -- CACHE_DIR [--json]
//! ```
//!
//! As the reference's `social_context_dataset_statistics`: per event and
//! label (`rumour`, `non-rumour`, `unknown`: the label code, as the build
//! summary names it), the number of threads (`socialctx::summary::Tally`,
//! the build summary's count), and the replies and retweets per thread:
//! total, min, max, mean, sample standard deviation, median, and how many
//! threads have none.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use serde::Serialize;
use socialctx::summary::{Tally, label_name};
use socialctx::{Cache, ReactionKind};

/// Print per-event, per-label corpus statistics of a cache: threads, and
/// replies and retweets per thread (total, min, max, mean, sample std,
/// median, threads with none). Rows "(all)" aggregate over labels and events.
#[derive(Parser, Debug)]
#[command(about, long_about)]
struct Args {
    /// The cache directory
    cache: PathBuf,
    /// Print JSON instead of a table
    #[arg(long)]
    json: bool,
}

/// Distribution of a per-thread count.
#[derive(Serialize, Debug, PartialEq)]
struct Dist {
    total: u64,
    min: u64,
    max: u64,
    mean: f64,
    /// Sample standard deviation (ddof 1); 0 for fewer than two threads.
    std: f64,
    median: f64,
    none: u64,
}

impl Dist {
    fn of(mut v: Vec<u64>) -> Dist {
        v.sort_unstable();
        let n = v.len();
        let total: u64 = v.iter().sum();
        let mean = if n > 0 { total as f64 / n as f64 } else { 0.0 };
        let var = if n > 1 {
            v.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / (n - 1) as f64
        } else {
            0.0
        };
        let median = match n {
            0 => 0.0,
            _ if n % 2 == 1 => v[n / 2] as f64,
            _ => (v[n / 2 - 1] + v[n / 2]) as f64 / 2.0,
        };
        Dist {
            total,
            min: v.first().copied().unwrap_or(0),
            max: v.last().copied().unwrap_or(0),
            mean,
            std: var.sqrt(),
            median,
            none: v.iter().filter(|&&x| x == 0).count() as u64,
        }
    }
}

#[derive(Serialize, Debug)]
struct Row {
    event: String,
    label: String,
    threads: u64,
    replies: Dist,
    retweets: Dist,
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
    // The thread counts are the crate's (the build summary's count); the
    // replies and retweets per thread are this table's own.
    let tally = match Tally::of(&cache) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    // (event, label code) -> per-thread (replies, retweets); None aggregates.
    type Key = (Option<String>, Option<i8>);
    let mut groups: BTreeMap<Key, Vec<(u64, u64)>> = BTreeMap::new();
    for t in cache.iter() {
        let (mut replies, mut retweets) = (0, 0);
        for r in t.reaction_records() {
            match r.kind {
                ReactionKind::Reply => replies += 1,
                ReactionKind::Retweet => retweets += 1,
            }
        }
        let (event, label) = (Some(t.event().to_string()), Some(t.label_code()));
        for key in [
            (event.clone(), label),
            (event, None),
            (None, label),
            (None, None),
        ] {
            groups.entry(key).or_default().push((replies, retweets));
        }
    }
    let threads = |(event, label): &Key| -> u64 {
        match (event, label) {
            (Some(e), Some(l)) => tally.event_labels[e][(i16::from(*l) + 1) as usize],
            (Some(e), None) => tally.events[e],
            (None, Some(l)) => tally.labels[l],
            (None, None) => tally.labels.values().sum(),
        }
    };
    let rows: Vec<Row> = groups
        .into_iter()
        .map(|(key, v)| Row {
            threads: threads(&key),
            event: key.0.unwrap_or_else(|| "(all)".into()),
            label: key.1.map_or("(all)", label_name).into(),
            replies: Dist::of(v.iter().map(|x| x.0).collect()),
            retweets: Dist::of(v.iter().map(|x| x.1).collect()),
        })
        .collect();

    let mut out = String::new();
    if args.json {
        match serde_json::to_string_pretty(&rows) {
            Ok(s) => out = s + "\n",
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::FAILURE;
            }
        }
    } else {
        let ew = rows
            .iter()
            .map(|r| r.event.chars().count())
            .max()
            .unwrap_or(0)
            .max(5);
        let lw = rows
            .iter()
            .map(|r| r.label.chars().count())
            .max()
            .unwrap_or(0)
            .max(5);
        out += &format!(
            "{:<ew$} {:<lw$} {:>7} | {:>8} {:>5} {:>5} {:>8} {:>8} {:>7} {:>5} | {:>8} {:>5} {:>5} {:>8} {:>8} {:>7} {:>5}\n",
            "event",
            "label",
            "threads",
            "replies",
            "min",
            "max",
            "mean",
            "std",
            "median",
            "none",
            "retweets",
            "min",
            "max",
            "mean",
            "std",
            "median",
            "none"
        );
        for r in &rows {
            let d = |d: &Dist| {
                format!(
                    "{:>8} {:>5} {:>5} {:>8.2} {:>8.2} {:>7.1} {:>5}",
                    d.total, d.min, d.max, d.mean, d.std, d.median, d.none
                )
            };
            out += &format!(
                "{:<ew$} {:<lw$} {:>7} | {} | {}\n",
                r.event,
                r.label,
                r.threads,
                d(&r.replies),
                d(&r.retweets)
            );
        }
    }
    // `corpus_stats | head` is fine: ignore a closed pipe.
    let _ = std::io::stdout().write_all(out.as_bytes());
    ExitCode::SUCCESS
}
