//! One call fills a whole batch: a [`Loader`] given a [`BatchSpec`]
//! (embedding stores, dense or index only, and token ids) fills features,
//! mask, lengths, ids, labels, each slot's store rows and token ids into a
//! [`Batch`], reused across fills of several widths, exactly as the
//! pieces assembled one by one (what the Python binding composed before it
//! called this one fill).

use std::sync::Arc;

use crate::common::*;
use socialctx::{
    Batch, BatchSpec, Cache, EmbeddingStore, Kinds, Loader, OutputBuf, OutputMut, Pad, Selection,
    StoreWriter, TextField, ThreadSource, TokenIdsMut, Vocabulary,
};

const DIM: usize = 4;

/// Embeds the cache's `field` texts as store `name` with a deterministic toy model.
fn embed(cache: &Cache, name: &str, field: TextField) -> EmbeddingStore {
    let mut w = StoreWriter::new(name, field)
        .batch_size(50)
        .model_id(Some("toy"))
        .begin(cache)
        .unwrap();
    for b in w.done()..w.batches() {
        let unique = w.unique().unwrap();
        let rows: Vec<f32> = w
            .inputs(b)
            .iter()
            .flat_map(|&u| {
                let k = unique.key(u as usize);
                let a = (k & 0xfff) as f32;
                [a, -a, 0.25 + ((k >> 12) & 0xff) as f32, u as f32]
            })
            .collect();
        w.write_f32(b, &rows, DIM).unwrap();
    }
    w.finish().unwrap();
    EmbeddingStore::open(cache, name).unwrap()
}

/// The batch assembled piece by piece from the public primitives: the
/// loader's fill (features and reactions), then per store its rows and
/// gather, then the token ids.
fn reference(
    cache: &Cache,
    spec: &BatchSpec,
    (sel, pad): (Selection, Pad),
    positions: &[usize],
    batch_size: usize,
) -> Batch {
    let max_cxt = sel.max_cxt;
    let mut batch = Batch::new(batch_size, max_cxt);
    let mut reactions = vec![0u32; batch_size * max_cxt];
    let width = {
        let mut out = batch.as_mut().with_reactions(&mut reactions).unwrap();
        Loader::new(cache, sel)
            .pad(pad)
            .fill_into(positions, None, &mut out)
            .unwrap();
        out.width()
    };
    batch.width = width;
    batch.len = positions.len();
    let slots = batch_size * width;
    let offsets = cache.reaction_offsets().unwrap();
    // The spec's buffers, zeroed, in its order: per store its index (and
    // rows), then the token ids.
    let mut buffers = spec.buffers(batch_size * max_cxt).into_iter();
    let mut next = || buffers.next().unwrap();
    for store in spec.stores() {
        let mut rows = vec![0i32; slots];
        store.rows_of_slots(&offsets, positions, &reactions[..slots], width, &mut rows);
        let mut index = next();
        let OutputMut::I32(i) = index.as_mut() else {
            panic!("index of int32")
        };
        i[..slots].copy_from_slice(&rows);
        batch.outputs.push(index);
        if spec.dense() {
            let mut dense = next();
            let OutputMut::F32(d) = dense.as_mut() else {
                panic!("float32 rows")
            };
            store.gather(&rows, &mut d[..slots * DIM]);
            batch.outputs.push(dense);
        }
    }
    if let Some((vocab, l)) = spec.vocabulary() {
        let mut ids = next();
        let OutputMut::I32(i) = ids.as_mut() else {
            panic!("token ids of int32")
        };
        let mut out = TokenIdsMut::new(l, &mut i[..slots * l]).unwrap();
        vocab
            .token_ids(cache, positions, &reactions[..slots], width, &mut out)
            .unwrap();
        batch.outputs.push(ids);
    }
    batch.reactions = reactions;
    batch
}

/// Compares the live part of two batches (the slots of the last fill).
fn assert_same(got: &Batch, want: &Batch, what: &str) {
    let (b, w) = (got.batch_size, got.width);
    assert_eq!((got.len, got.width), (want.len, want.width), "{what}");
    assert_eq!(
        got.features[..b * w * 28],
        want.features[..b * w * 28],
        "{what}"
    );
    assert_eq!(got.mask[..b * w], want.mask[..b * w], "{what}");
    assert_eq!(got.lengths, want.lengths, "{what}");
    assert_eq!(got.source_ids, want.source_ids, "{what}");
    assert_eq!(got.labels, want.labels, "{what}");
    assert_eq!(got.outputs.len(), want.outputs.len(), "{what}");
    for (g, e) in got.outputs.iter().zip(&want.outputs) {
        let what = format!("{what}: {} {:?}", g.name, g.key);
        let shape = |o: &OutputBuf| (o.name, o.key.clone(), o.per_slot, o.dtype());
        assert_eq!(shape(g), shape(e), "{what}");
        let n = b * w * g.per_slot.unwrap_or(1);
        match g.dtype() {
            "int32" => assert_eq!(g.as_i32()[..n], e.as_i32()[..n], "{what}"),
            "float32" => assert_eq!(g.as_f32()[..n], e.as_f32()[..n], "{what}"),
            _ => panic!("{what}: no float16 store here"),
        }
    }
}

#[test]
fn one_fill_composes_the_whole_batch_as_the_pieces_do() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("cache");
    build_cache(&repo("tests/fixtures/golden/corpus"), &dir, 2);
    let cache = Cache::open(&dir).unwrap();
    embed(&cache, "r", TextField::Reply);
    embed(&cache, "d", TextField::Description);
    let vocab = Arc::new(
        Vocabulary::count(&cache, TextField::Reply, Kinds::Both, None, 1, Some(50)).unwrap(),
    );
    let open = |n| EmbeddingStore::open(&cache, n).unwrap();
    let n = cache.len();
    let mut checked = 0;
    for dense in [true, false] {
        for tokens in [None, Some(6)] {
            let mut spec = BatchSpec::new()
                .embeddings(&cache, vec![open("r"), open("d")], dense)
                .unwrap();
            if let Some(l) = tokens {
                spec = spec.token_ids(vocab.clone(), l);
            }
            for pad in [Pad::Max, Pad::Longest { multiple: 4 }] {
                let sel = Selection {
                    kinds: Kinds::Both,
                    max_cxt: 24,
                    ..Selection::default()
                };
                let loader = Loader::new(&cache, sel).pad(pad).outputs(&spec);
                let mut batch = loader.new_batch(5);
                // Fills of varying widths into the same buffers: padding
                // slots left from a wider fill must read as padding.
                let fills: Vec<Vec<usize>> = vec![
                    (0..n.min(5)).collect(),
                    vec![n - 1],
                    (0..n).step_by(2).take(5).collect(),
                    vec![],
                    (1..n.min(4)).collect(),
                    (1..n.min(4)).collect(),
                ];
                for positions in &fills {
                    loader.fill(positions, &mut batch).unwrap();
                    let want = reference(&cache, &spec, (sel, pad), positions, 5);
                    assert_same(
                        &batch,
                        &want,
                        &format!("{dense} {tokens:?} {pad:?} {positions:?}"),
                    );
                    checked += 1;
                }
            }
        }
    }
    assert_eq!(checked, 2 * 2 * 2 * 6);
}

#[test]
fn buffers_missing_an_output_of_the_spec_are_refused_before_any_write() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("cache");
    build_cache(&repo("tests/fixtures/golden/corpus"), &dir, 2);
    let cache = Cache::open(&dir).unwrap();
    embed(&cache, "r", TextField::Reply);
    let spec = BatchSpec::new()
        .embeddings(
            &cache,
            vec![EmbeddingStore::open(&cache, "r").unwrap()],
            true,
        )
        .unwrap();
    let loader = Loader::new(&cache, Selection::default()).outputs(&spec);
    // A plain Batch lacks the reactions and the store's buffers.
    let mut plain = Batch::new(2, 200);
    plain.features.fill(7.0);
    let err = loader.fill(&[0, 1], &mut plain).unwrap_err().to_string();
    assert!(err.contains("reactions"), "{err}");
    assert!(plain.features.iter().all(|&x| x == 7.0));
    // A batch for the spec but without dense rows.
    let mut batch = loader.new_batch(2);
    (batch.outputs.iter_mut())
        .find(|o| o.name == "embeddings")
        .unwrap()
        .clear();
    let err = loader.fill(&[0, 1], &mut batch).unwrap_err().to_string();
    assert!(err.contains("embeddings"), "{err}");
    // And the right one fills.
    let mut batch = loader.new_batch(2);
    loader.fill(&[0, 1], &mut batch).unwrap();
    assert_eq!(batch.len, 2);
}

/// A spec's store index is addressed by its cache's reaction order: a
/// spec made on one cache, filled by a Loader over another (or holding a
/// store of another cache's content), would gather other reactions' rows
/// without a word. Both are refused, naming the two content ids.
#[test]
fn a_spec_of_another_cache_content_is_refused_not_gathered() {
    let tmp = tempfile::tempdir().unwrap();
    let (a_dir, b_dir) = (tmp.path().join("a"), tmp.path().join("b"));
    build_cache(&repo("tests/fixtures/golden/corpus"), &a_dir, 2);
    build_cache(&repo("data-samples/corpus"), &b_dir, 2);
    let (a, b) = (Cache::open(&a_dir).unwrap(), Cache::open(&b_dir).unwrap());
    embed(&a, "r", TextField::Reply);
    embed(&b, "r", TextField::Reply);
    let open = |c: &Cache| EmbeddingStore::open(c, "r").unwrap();
    // A store of b's content in a spec for a.
    let err = BatchSpec::new()
        .embeddings(&a, vec![open(&b)], true)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(&b.content_id()) && err.contains(&a.content_id()),
        "{err}"
    );
    // A spec for a, filled by a Loader over b.
    let spec = BatchSpec::new()
        .embeddings(&a, vec![open(&a)], true)
        .unwrap();
    let loader = Loader::new(&b, Selection::default()).outputs(&spec);
    let mut batch = loader.new_batch(2);
    batch.features.fill(7.0);
    let err = loader.fill(&[0, 1], &mut batch).unwrap_err().to_string();
    assert!(
        err.contains(&a.content_id()) && err.contains(&b.content_id()),
        "{err}"
    );
    assert!(
        batch.features.iter().all(|&x| x == 7.0),
        "written before the refusal"
    );
    // A spec without stores is any cache's; one of the same content fills.
    let plain = BatchSpec::new();
    Loader::new(&b, Selection::default())
        .outputs(&plain)
        .fill(&[0], &mut Batch::new(1, 200))
        .unwrap();
    let same = Cache::open(&a_dir).unwrap();
    let loader = Loader::new(&same, Selection::default()).outputs(&spec);
    loader.fill(&[0, 1], &mut loader.new_batch(2)).unwrap();
}

/// A graph batch's outputs are the flat batch's, per node: node `k` of a
/// graph holds what row slot `k - 1` of its thread holds (the same
/// selection picks the same reactions in the same order), its root what a
/// padding slot holds. Every output of the spec reaches graphs this way,
/// through the same fill; a GraphBatch reused by a Loader of another spec
/// takes that spec's outputs.
#[test]
fn graph_nodes_get_the_outputs_of_their_reactions_row_slots() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("cache");
    build_cache(&repo("tests/fixtures/golden/corpus"), &dir, 2);
    let cache = Cache::open(&dir).unwrap();
    embed(&cache, "r", TextField::Reply);
    embed(&cache, "d", TextField::Description);
    let vocab = Arc::new(
        Vocabulary::count(&cache, TextField::Reply, Kinds::Both, None, 1, Some(50)).unwrap(),
    );
    let open = |n| EmbeddingStore::open(&cache, n).unwrap();
    let n = cache.len();
    let mut graphs = socialctx::GraphBatch::default();
    let mut nodes = 0;
    for dense in [true, false] {
        let spec = BatchSpec::new()
            .embeddings(&cache, vec![open("r"), open("d")], dense)
            .unwrap()
            .token_ids(vocab.clone(), 6);
        let sel = Selection {
            kinds: Kinds::Both,
            max_cxt: 24,
            ..Selection::default()
        };
        let loader = Loader::new(&cache, sel).outputs(&spec);
        let mut batch = loader.new_batch(5);
        let fills: Vec<Vec<usize>> = vec![
            (0..n.min(5)).collect(),
            vec![n - 1],
            vec![],
            (0..n).step_by(2).take(5).collect(),
        ];
        for positions in &fills {
            loader.fill(positions, &mut batch).unwrap();
            loader.fill_graph(positions, None, &mut graphs).unwrap();
            let what = format!("dense {dense} {positions:?}");
            assert_eq!(graphs.outputs.len(), batch.outputs.len(), "{what}");
            for (g, f) in graphs.outputs.iter().zip(&batch.outputs) {
                let what = format!("{what}: {} {:?}", g.name, g.key);
                let shape = |o: &OutputBuf| (o.name, o.key.clone(), o.per_slot, o.dtype());
                assert_eq!(shape(g), shape(f), "{what}");
                let k = g.per_slot.unwrap_or(1);
                assert_eq!(g.as_i32().len() + g.as_f32().len(), graphs.num_nodes() * k);
                for (b, w) in graphs.ptr.windows(2).enumerate() {
                    for node in w[0] as usize..w[1] as usize {
                        let local = node - w[0] as usize;
                        let slot = (local > 0).then(|| b * batch.width + local - 1);
                        let root = |pad: &[i32]| assert!(pad.iter().all(|&x| x == -1), "{what}");
                        match g.dtype() {
                            "int32" => {
                                let got = &g.as_i32()[node * k..][..k];
                                match slot {
                                    Some(s) => assert_eq!(got, &f.as_i32()[s * k..][..k], "{what}"),
                                    None if g.name == "embedding_index" => root(got),
                                    None => assert!(got.iter().all(|&x| x == 0), "{what}"),
                                }
                            }
                            _ => {
                                let got = &g.as_f32()[node * k..][..k];
                                match slot {
                                    Some(s) => assert_eq!(got, &f.as_f32()[s * k..][..k], "{what}"),
                                    None => assert!(got.iter().all(|&x| x == 0.0), "{what}"),
                                }
                            }
                        }
                        if let Some(s) = slot {
                            assert_eq!(graphs.reactions[node], batch.reactions[s], "{what}");
                        }
                    }
                }
                nodes += graphs.num_nodes();
            }
        }
    }
    assert!(nodes > 100, "{nodes}");
    // A Loader without outputs: the graph batch has none after its fill.
    Loader::new(&cache, Selection::default())
        .fill_graph(&[0], None, &mut graphs)
        .unwrap();
    assert!(graphs.outputs.is_empty());
    assert!(graphs.output("embedding_index", Some("r")).is_none());
}

/// A spec whose stores are of another cache content is refused by a graph
/// fill too, before anything is written.
#[test]
fn a_graph_fill_refuses_a_spec_of_another_content() {
    let tmp = tempfile::tempdir().unwrap();
    let (a_dir, b_dir) = (tmp.path().join("a"), tmp.path().join("b"));
    build_cache(&repo("tests/fixtures/golden/corpus"), &a_dir, 2);
    build_cache(&repo("data-samples/corpus"), &b_dir, 2);
    let (a, b) = (Cache::open(&a_dir).unwrap(), Cache::open(&b_dir).unwrap());
    embed(&a, "r", TextField::Reply);
    let spec = BatchSpec::new()
        .embeddings(&a, vec![EmbeddingStore::open(&a, "r").unwrap()], true)
        .unwrap();
    let mut graphs = socialctx::GraphBatch::default();
    Loader::new(&b, Selection::default())
        .fill_graph(&[0, 1], None, &mut graphs)
        .unwrap();
    let before = graphs.clone();
    let err = Loader::new(&b, Selection::default())
        .outputs(&spec)
        .fill_graph(&[2], None, &mut graphs)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(&a.content_id()) && err.contains(&b.content_id()),
        "{err}"
    );
    assert_eq!(
        graphs.features, before.features,
        "written before the refusal"
    );
    assert_eq!(graphs.positions, before.positions);
    // On its own cache it fills, one index per node.
    Loader::new(&a, Selection::default())
        .outputs(&spec)
        .fill_graph(&[0, 1], None, &mut graphs)
        .unwrap();
    let index = graphs.output("embedding_index", Some("r")).unwrap();
    assert_eq!(index.as_i32().len(), graphs.num_nodes());
}

/// A graph batch's outputs grow with its nodes, in the fill: a size that
/// overflows or cannot be allocated aborted the process (Vec::resize) or
/// panicked ("capacity overflow"). It is an error, and the batch is left
/// empty rather than half filled.
#[test]
fn a_graph_output_too_large_to_allocate_is_an_error_not_an_abort() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("cache");
    build_cache(&repo("tests/fixtures/golden/corpus"), &dir, 2);
    let cache = Cache::open(&dir).unwrap();
    let vocab = Arc::new(
        Vocabulary::count(&cache, TextField::Reply, Kinds::Both, None, 1, Some(50)).unwrap(),
    );
    let mut graphs = socialctx::GraphBatch::default();
    let sel = Selection {
        kinds: Kinds::Both,
        ..Selection::default()
    };
    Loader::new(&cache, sel)
        .fill_graph(&[0, 1], None, &mut graphs)
        .unwrap();
    for max_tokens in [usize::MAX / 4, usize::MAX / 2 + 1] {
        let spec = BatchSpec::new().token_ids(vocab.clone(), max_tokens);
        let loader = Loader::new(&cache, sel).outputs(&spec);
        let err = loader.fill_graph(&[0, 1], None, &mut graphs).unwrap_err();
        assert!(
            matches!(
                err,
                socialctx::LoadError::TooLarge {
                    buffer: "token_ids",
                    ..
                }
            ),
            "{err}"
        );
        assert_eq!((graphs.num_graphs(), graphs.num_nodes()), (0, 0));
        assert!(graphs.features.is_empty() && graphs.ptr.is_empty());
    }
}
