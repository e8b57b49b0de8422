//! End-to-end build, cache open and batch assembly on a small generated corpus.
//!
//! ```text
//! cargo bench --bench pipeline [-- --quick]
//! ```
//!
//! The corpus is made once by [`gen_corpus::generate`] (400 threads, seed
//! 2015: about 6,000 reply files and 17 MB) under `target/socialctx-bench/`
//! and reused by later runs. Builds use 2 worker threads (the size of the
//! benchmark machine) and 1 for comparison.

use std::fs;
use std::hint::black_box;
use std::path::{Path, PathBuf};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use socialctx::FeatureStats;
use socialctx::LazyCache;
use socialctx::ThreadSource;
use socialctx::{Batch, Loader, Selection, shuffle};
use socialctx::{BuildOptions, Cache, Feature, NoProgress, build};

const GEN_THREADS: u32 = 400;
const GEN_SEED: u64 = 2015;
const BATCH: usize = 128;
const MAX_CXT: usize = 200;

fn bench_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/socialctx-bench")
}

/// Generates the corpus unless an earlier run finished it (marked by the
/// generator's summary line, saved beside the corpus, not in it).
fn corpus() -> PathBuf {
    let dir = bench_dir().join(format!("gen-{GEN_THREADS}-s{GEN_SEED}"));
    let marker = dir.with_extension("json");
    if marker.is_file() && dir.is_dir() {
        return dir;
    }
    let tmp = bench_dir().join(format!(".gen-{GEN_THREADS}-s{GEN_SEED}.tmp"));
    let _ = fs::remove_dir_all(&tmp);
    let _ = fs::remove_dir_all(&dir);
    let _ = fs::remove_file(&marker);
    fs::create_dir_all(bench_dir()).expect("create target/socialctx-bench");
    let mut gen_opts = gen_corpus::Options::new(GEN_THREADS.into());
    gen_opts.seed = GEN_SEED;
    let stats = gen_corpus::generate(&tmp, &gen_opts).unwrap_or_else(|e| panic!("gen_corpus: {e}"));
    fs::rename(&tmp, &dir).expect("move the generated corpus into place");
    fs::write(&marker, stats.to_json()).expect("write the corpus marker");
    eprintln!(
        "pipeline bench: generated {} : {}",
        dir.display(),
        stats.to_json()
    );
    dir
}

fn corpus_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    for e in fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            total += corpus_bytes(&p);
        } else if p.extension().is_some_and(|x| x == "json") {
            total += e.metadata().map_or(0, |m| m.len());
        }
    }
    total
}

fn opts(threads: usize) -> BuildOptions {
    BuildOptions::default().threads(threads)
}

fn bench_build(c: &mut Criterion) {
    let corpus = corpus();
    let cache = bench_dir().join("bench-build-cache");
    let bytes = corpus_bytes(&corpus);
    let mut g = c.benchmark_group("build");
    g.sample_size(10);
    g.throughput(Throughput::Bytes(bytes));
    for threads in [1, 2] {
        g.bench_function(format!("gen{GEN_THREADS}/threads={threads}"), |b| {
            b.iter(|| build(&corpus, &cache, &opts(threads), &NoProgress).expect("build"));
        });
    }
    g.finish();
}

/// A cache of the generated corpus, built once for the open and loader benches.
fn built_cache() -> PathBuf {
    let cache = bench_dir().join("bench-read-cache");
    let summary = build(corpus(), &cache, &opts(2), &NoProgress).expect("build");
    eprintln!(
        "pipeline bench: cache of {} threads, {} reactions, {} shard(s)",
        summary.manifest.threads,
        summary.manifest.reactions,
        summary.manifest.shards.len()
    );
    cache
}

fn bench_open(c: &mut Criterion) {
    let cache = built_cache();
    let mut g = c.benchmark_group("open");
    g.bench_function("lazy", |b| {
        b.iter(|| LazyCache::open(black_box(&cache)).expect("open"))
    });
    g.bench_function("eager", |b| {
        b.iter(|| Cache::open(black_box(&cache)).expect("open"))
    });
    g.finish();
}

fn bench_loader(c: &mut Criterion) {
    let dir = built_cache();
    let cache = Cache::open(&dir).expect("open");
    let mut positions: Vec<usize> = (0..cache.len()).collect();
    shuffle(&mut positions, 7);
    positions.truncate(BATCH);
    let all: Vec<usize> = (0..cache.len()).collect();
    let sel = Selection::default();
    let stats = FeatureStats::compute(
        &cache,
        &all,
        &Selection {
            max_cxt: usize::MAX,
            ..sel
        },
    )
    .expect("stats");
    let plain = Loader::new(&cache, sel);
    let normalized = Loader::new(&cache, sel).normalize(&stats);
    let mut batch = Batch::new(BATCH, MAX_CXT);

    let mut g = c.benchmark_group("loader_fill");
    // The bytes of the features tensor written per batch.
    g.throughput(Throughput::Bytes(
        (BATCH * MAX_CXT * Feature::COUNT * 4) as u64,
    ));
    let name = format!("{BATCH}x{MAX_CXT}x{}", Feature::COUNT);
    g.bench_function(format!("{name}/raw"), |b| {
        b.iter(|| {
            plain.fill(&positions, &mut batch).expect("fill");
            black_box(&batch);
        })
    });
    g.bench_function(format!("{name}/normalized"), |b| {
        b.iter(|| {
            normalized.fill(&positions, &mut batch).expect("fill");
            black_box(&batch);
        })
    });
    g.finish();
}

criterion_group!(benches, bench_build, bench_open, bench_loader);
criterion_main!(benches);
