//! A whole batch (features, two embedding stores' index and dense rows,
//! token ids) filled by the one call (`Loader::outputs` + `fill`) against
//! the same batch composed piece by piece, as the Python binding did before
//! the crate composed it (`fill_into` with reactions, then per store
//! `rows_of_slots` and `gather_over`, then `token_ids`), in the same run;
//! and the allocations one fill makes (counted on the filling thread).
//!
//! ```text
//! cargo bench --bench compose [-- --quick]
//! ```
//!
//! The cache is the pipeline bench's generated corpus (400 threads),
//! built under `target/socialctx-bench/` and reused.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::fs;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use socialctx::{
    Batch, BatchMut, BatchSpec, BuildOptions, Cache, EmbeddingStore, Kinds, Loader, NoProgress,
    Selection, StoreWriter, TextField, ThreadSource, TokenIdsMut, Vocabulary, build, shuffle,
};

const BATCH: usize = 64;
const MAX_CXT: usize = 200;
const DIM: usize = 64;
const TOKENS: usize = 32;

/// Counts allocations per thread, so that only the filling thread's count.
struct Counting;

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: forwards every call to the system allocator unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new: usize) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: the caller's contract, passed on.
        unsafe { System.realloc(ptr, layout, new) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations() -> u64 {
    ALLOCS.with(Cell::get)
}

fn bench_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/socialctx-bench")
}

/// The cache of the generated corpus (the pipeline bench's, made if absent).
fn cache_dir() -> PathBuf {
    let corpus = bench_dir().join("gen-400-s2015");
    if !corpus.with_extension("json").is_file() {
        let tmp = bench_dir().join(".compose-gen.tmp");
        let _ = fs::remove_dir_all(&tmp);
        let mut o = gen_corpus::Options::new(400u32.into());
        o.seed = 2015;
        let stats = gen_corpus::generate(&tmp, &o).expect("gen_corpus");
        let _ = fs::remove_dir_all(&corpus);
        fs::rename(&tmp, &corpus).expect("move the corpus into place");
        fs::write(corpus.with_extension("json"), stats.to_json()).expect("marker");
    }
    let cache = bench_dir().join("compose-cache");
    let opts = BuildOptions::default().threads(2);
    build(&corpus, &cache, &opts, &NoProgress).expect("build");
    cache
}

/// A toy store of `field` (rows from the input's content key).
fn store(cache: &Cache, name: &str, field: TextField) -> EmbeddingStore {
    let mut w = StoreWriter::new(name, field)
        .batch_size(4096)
        .model_id(Some("toy"))
        .begin(cache)
        .expect("begin");
    for b in w.done()..w.batches() {
        let unique = w.unique().expect("unique");
        let rows: Vec<f32> = (w.inputs(b).iter())
            .flat_map(|&u| {
                let k = unique.key(u as usize);
                (0..DIM).map(move |d| ((k >> (d % 64)) & 0xff) as f32)
            })
            .collect();
        w.write_f32(b, &rows, DIM).expect("write");
    }
    w.finish().expect("finish");
    EmbeddingStore::open(cache, name).expect("open store")
}

/// The buffers of the piece-by-piece composition.
struct Pieces {
    batch: Batch,
    reactions: Vec<u32>,
    offsets: Vec<u64>,
    index: Vec<Vec<i32>>,
    dense: Vec<Vec<f32>>,
    rows: Vec<i32>,
    ids: Vec<i32>,
}

impl Pieces {
    fn fill(
        &mut self,
        plain: &Loader<'_, Cache>,
        spec: &BatchSpec,
        cache: &Cache,
        positions: &[usize],
    ) {
        let width = {
            let mut out = (self.batch.as_mut())
                .with_reactions(&mut self.reactions)
                .expect("out");
            plain.fill_into(positions, None, &mut out).expect("fill");
            out.width()
        };
        let slots = BATCH * width;
        let reactions = &self.reactions[..slots];
        for (i, s) in spec.stores().iter().enumerate() {
            self.rows.clear();
            self.rows.resize(slots, -1);
            s.rows_of_slots(&self.offsets, positions, reactions, width, &mut self.rows);
            let idx = &mut self.index[i][..slots];
            s.gather_over(&self.rows, Some(idx), &mut self.dense[i][..slots * DIM]);
            idx.copy_from_slice(&self.rows);
        }
        let (vocab, l) = spec.vocabulary().expect("token ids");
        let mut out = TokenIdsMut::new(l, &mut self.ids[..slots * l]).expect("ids");
        vocab
            .token_ids(cache, positions, reactions, width, &mut out)
            .expect("token ids");
    }
}

fn bench_compose(c: &mut Criterion) {
    let cache = Cache::open(cache_dir()).expect("open");
    let vocab = Arc::new(
        Vocabulary::count(
            &cache,
            TextField::Reply,
            Kinds::Replies,
            None,
            1,
            Some(20_000),
        )
        .expect("vocabulary"),
    );
    let stores = || {
        vec![
            store(&cache, "reply", TextField::Reply),
            store(&cache, "description", TextField::Description),
        ]
    };
    let spec = BatchSpec::new()
        .embeddings(&cache, stores(), true)
        .expect("spec")
        .token_ids(vocab.clone(), TOKENS);
    let sel = Selection::default();
    let mut positions: Vec<usize> = (0..cache.len()).collect();
    shuffle(&mut positions, 7);
    positions.truncate(BATCH);

    // One call.
    let loader = Loader::new(&cache, sel).outputs(&spec);
    let mut batch = loader.new_batch(BATCH);
    loader.fill(&positions, &mut batch).expect("fill");
    let before = allocations();
    for _ in 0..100 {
        loader.fill(&positions, &mut batch).expect("fill");
    }
    let per_fill = (allocations() - before) as f64 / 100.0;
    eprintln!("compose bench: allocations per one-call fill: {per_fill}");
    assert_eq!(per_fill, 0.0, "the one-call fill allocates");

    // Piece by piece, as the binding composed it (its scratch reused).
    let plain = Loader::new(&cache, sel);
    let mut pieces = Pieces {
        batch: Batch::new(BATCH, MAX_CXT),
        reactions: vec![BatchMut::NO_REACTION; BATCH * MAX_CXT],
        offsets: cache.reaction_offsets().expect("offsets"),
        index: vec![vec![0; BATCH * MAX_CXT]; 2],
        dense: vec![vec![0.0; BATCH * MAX_CXT * DIM]; 2],
        rows: Vec::new(),
        ids: vec![0; BATCH * MAX_CXT * TOKENS],
    };
    pieces.fill(&plain, &spec, &cache, &positions);
    // The same batch both ways.
    assert_eq!(pieces.batch.features, batch.features);
    for (i, name) in ["reply", "description"].into_iter().enumerate() {
        let index = batch.output("embedding_index", Some(name)).expect("index");
        assert_eq!(pieces.index[i], index.as_i32());
        let rows = batch.output("embeddings", Some(name)).expect("rows");
        assert_eq!(pieces.dense[i], rows.as_f32());
    }
    let ids = batch.output("token_ids", None).expect("token ids");
    assert_eq!(pieces.ids, ids.as_i32());

    let mut g = c.benchmark_group("compose");
    g.bench_function(format!("{BATCH}x{MAX_CXT}/pieces"), |b| {
        b.iter(|| {
            pieces.fill(&plain, &spec, &cache, &positions);
            black_box(&pieces.ids);
        })
    });
    g.bench_function(format!("{BATCH}x{MAX_CXT}/one_call"), |b| {
        b.iter(|| {
            loader.fill(&positions, &mut batch).expect("fill");
            black_box(&batch);
        })
    });
    g.finish();
}

criterion_group!(benches, bench_compose);
criterion_main!(benches);
