//! Per-reaction CPU cost: parse + fields + the 28 features, and the timestamp parser.
//!
//! ```text
//! cargo bench --bench features [-- --quick]
//! ```
//!
//! The reaction benches run on a few hundred real reply files of the PHEME
//! veracity fixtures (`tests/fixtures/real/pheme-veracity/corpus`), loaded
//! into memory first, so no I/O is measured. One iteration handles every
//! loaded reaction; criterion reports bytes/s, and the setup line on stderr
//! gives the reaction count to turn an iteration's time into time per reaction.

use std::fs;
use std::hint::black_box;
use std::path::{Path, PathBuf};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use pycompat::{Timestamp, parse_created_at};
use rayon::prelude::*;
use socialctx::ReactionKind;
use socialctx::internals::features;
use socialctx::internals::layout::SourceFields;
use socialctx::internals::layout::pheme::{reaction_fields, source_fields};
use socialctx::internals::parse::TweetReader;

/// How many reaction files to load, and at most how many per thread (for variety).
const MAX_REACTIONS: usize = 400;
const MAX_PER_THREAD: usize = 25;

/// A source tweet's fields, owned (`SourceFields` borrows from a reader's buffer).
struct OwnedSource {
    created_at: Timestamp,
    text: String,
    user_id_str: String,
    screen_name: String,
}

impl OwnedSource {
    fn fields(&self) -> SourceFields<'_> {
        SourceFields {
            created_at: self.created_at,
            text: &self.text,
            user_id_str: &self.user_id_str,
            screen_name: &self.screen_name,
        }
    }
}

/// One thread: its source and the raw bytes of some of its reply files.
struct Sample {
    source: OwnedSource,
    reactions: Vec<Vec<u8>>,
}

fn sorted_entries(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir)
        .map(|rd| rd.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    v.retain(|p| {
        !p.file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with('.'))
    });
    v.sort();
    v
}

fn json_files(dir: &Path) -> Vec<PathBuf> {
    sorted_entries(dir)
        .into_iter()
        .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "json"))
        .collect()
}

/// Thread directories (with a source folder and `reactions/`) below `root`, sorted.
fn thread_dirs(root: &Path, out: &mut Vec<PathBuf>) {
    for p in sorted_entries(root).into_iter().filter(|p| p.is_dir()) {
        if p.join("reactions").is_dir()
            && (p.join("source-tweets").is_dir() || p.join("source-tweet").is_dir())
        {
            out.push(p);
        } else {
            thread_dirs(&p, out);
        }
    }
}

fn parse_source(reader: &mut TweetReader, bytes: &[u8]) -> Option<OwnedSource> {
    reader
        .parse_bytes(bytes, |v| {
            source_fields(v).map(|s| OwnedSource {
                created_at: s.created_at,
                text: s.text.to_owned(),
                user_id_str: s.user_id_str.to_owned(),
                screen_name: s.screen_name.to_owned(),
            })
        })
        .ok()?
        .ok()
}

/// Loads up to `MAX_REACTIONS` reply files (that parse and compute cleanly) with their sources.
fn load_samples() -> Vec<Sample> {
    let root =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/real/pheme-veracity/corpus");
    let mut dirs = Vec::new();
    thread_dirs(&root, &mut dirs);
    let mut reader = TweetReader::new();
    let mut samples = Vec::new();
    let mut total = 0;
    for dir in dirs {
        if total >= MAX_REACTIONS {
            break;
        }
        let src_dir = ["source-tweets", "source-tweet"]
            .iter()
            .map(|d| dir.join(d))
            .find(|d| d.is_dir());
        let Some(src_file) = src_dir.and_then(|d| json_files(&d).into_iter().next()) else {
            continue;
        };
        let Some(source) = fs::read(&src_file)
            .ok()
            .and_then(|b| parse_source(&mut reader, &b))
        else {
            continue;
        };
        let mut reactions = Vec::new();
        for f in json_files(&dir.join("reactions")) {
            if reactions.len() >= MAX_PER_THREAD || total + reactions.len() >= MAX_REACTIONS {
                break;
            }
            let Ok(bytes) = fs::read(&f) else { continue };
            // Keep only files on the success path: that is what we time.
            let ok = reader
                .parse_bytes(&bytes, |v| {
                    reaction_fields(v)
                        .and_then(|r| features::compute(&r, &source.fields(), ReactionKind::Reply))
                        .is_ok()
                })
                .unwrap_or(false);
            if ok {
                reactions.push(bytes);
            }
        }
        total += reactions.len();
        if !reactions.is_empty() {
            samples.push(Sample { source, reactions });
        }
    }
    assert!(
        total > 0,
        "no usable reaction files under {}",
        root.display()
    );
    samples
}

/// Parses every reply of `s` and computes its features (the per-reaction work of a build).
fn parse_and_compute(reader: &mut TweetReader, s: &Sample) {
    let source = s.source.fields();
    for r in &s.reactions {
        let out = reader.parse_bytes(r, |v| {
            let f = reaction_fields(v)?;
            features::compute(&f, &source, ReactionKind::Reply)
        });
        black_box(out.ok());
    }
}

fn bench_reactions(c: &mut Criterion) {
    let samples = load_samples();
    let count: usize = samples.iter().map(|s| s.reactions.len()).sum();
    let bytes: usize = samples
        .iter()
        .flat_map(|s| &s.reactions)
        .map(Vec::len)
        .sum();
    eprintln!(
        "features bench: {count} real reply files from {} threads, {bytes} bytes (one iteration = all of them)",
        samples.len()
    );

    let mut g = c.benchmark_group("reaction");
    g.throughput(Throughput::Bytes(bytes as u64));
    g.bench_function("parse_fields", |b| {
        let mut reader = TweetReader::new();
        b.iter(|| {
            for s in &samples {
                for r in &s.reactions {
                    let out = reader.parse_bytes(r, |v| reaction_fields(v).map(|f| f.id));
                    black_box(out.ok());
                }
            }
        });
    });
    g.bench_function("parse_fields_features", |b| {
        let mut reader = TweetReader::new();
        b.iter(|| {
            for s in &samples {
                parse_and_compute(&mut reader, s);
            }
        });
    });
    g.finish();

    // The CPU-bound part of a build (parse + features, no I/O) on 1 and 2
    // threads: the ratio of the two throughputs is the scaling figure.
    let mut g = c.benchmark_group("reaction_threads");
    g.throughput(Throughput::Bytes(bytes as u64 * 8));
    for threads in [1usize, 2] {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        g.bench_function(format!("parse_fields_features/{threads}"), |b| {
            b.iter(|| {
                pool.install(|| {
                    // Eight copies of the sample so that each thread has enough work.
                    (0..8 * samples.len())
                        .into_par_iter()
                        .for_each_init(TweetReader::new, |reader, i| {
                            parse_and_compute(reader, &samples[i % samples.len()])
                        })
                })
            });
        });
    }
    g.finish();
}

fn bench_timestamp(c: &mut Criterion) {
    const FAST: &str = "Wed Jan 07 11:06:08 +0000 2015";
    const GENERAL: &str = "wed  jan 7 11:06:08 +05:30 2015";
    assert!(parse_created_at(FAST).is_ok());
    assert!(
        parse_created_at(GENERAL).is_ok(),
        "the general-path sample must parse"
    );
    let mut g = c.benchmark_group("timestamp");
    g.throughput(Throughput::Elements(1));
    g.bench_function("fast_path", |b| {
        b.iter(|| parse_created_at(black_box(FAST)))
    });
    g.bench_function("general_path", |b| {
        b.iter(|| parse_created_at(black_box(GENERAL)))
    });
    g.finish();
}

criterion_group!(benches, bench_reactions, bench_timestamp);
criterion_main!(benches);
