//! A vocabulary's indices per batch: token ids per row slot and bags of
//! words per graph node, against the tokens read through the cache's views
//! and counted here with a plain map; and the buffers' checks.

use std::collections::BTreeMap;

use crate::common::*;
use socialctx::{BagOfWords, BatchMut, Cache, GraphBatch, Kinds, LoadError, Loader, ThreadSource};
use socialctx::{Pad, Selection, TextField, TokenIdsMut, Vocabulary};

fn sample() -> (tempfile::TempDir, Cache) {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("cache");
    build_cache(&repo("data-samples/corpus"), &out, 2);
    let cache = Cache::open(&out).unwrap();
    (tmp, cache)
}

/// What the loader fills: per slot its reaction, and the width.
fn fill(loader: &Loader<'_, Cache>, positions: &[usize], b: usize, t: usize) -> (Vec<u32>, usize) {
    let (mut f, mut m) = (vec![0f32; b * t * 28], vec![0u8; b * t]);
    let (mut l, mut s, mut y) = (vec![0u32; b], vec![0u64; b], vec![0i8; b]);
    let mut reactions = vec![7u32; b * t];
    let mut out = BatchMut::new(t, &mut f, &mut m, &mut l, &mut s, &mut y)
        .unwrap()
        .with_reactions(&mut reactions)
        .unwrap();
    loader.fill_into(positions, None, &mut out).unwrap();
    let width = out.width();
    reactions.truncate(b * width);
    (reactions, width)
}

/// The tokens of `field` of reaction `r` of the thread at `pos`, as strings.
fn tokens(cache: &Cache, field: TextField, pos: usize, r: u32) -> Vec<String> {
    let t = cache.thread(pos).unwrap();
    let reaction = t.reaction(r as usize).unwrap();
    field
        .tokens_of(&reaction)
        .map(|ts| ts.iter().map(str::to_owned).collect())
        .unwrap_or_default()
}

#[test]
fn token_ids_are_each_slots_tokens_indexed_cut_and_padded() {
    let (_tmp, cache) = sample();
    let n = cache.len();
    for field in [TextField::Reply, TextField::Description] {
        // A small vocabulary: many tokens are unknown.
        let vocab = Vocabulary::count(&cache, field, Kinds::Both, None, 1, Some(40)).unwrap();
        assert_eq!(vocab.field(), field);
        for (sel, pad) in [
            (Selection::default(), Pad::Max),
            (
                Selection {
                    kinds: Kinds::Both,
                    max_cxt: 5,
                    ..Selection::default()
                },
                Pad::Longest { multiple: 4 },
            ),
        ] {
            let loader = Loader::new(&cache, sel).pad(pad);
            let (b, t, l) = (8, sel.max_cxt, 6);
            let (mut known, mut unknown, mut cut) = (0, 0, 0);
            for start in (0..n).step_by(5) {
                let positions: Vec<usize> = (start..n.min(start + 5)).collect();
                let (reactions, width) = fill(&loader, &positions, b, t);
                let mut ids = vec![-7i32; b * t * l];
                let mut lengths = vec![99u32; b * t];
                let mut out = TokenIdsMut::new(l, &mut ids)
                    .unwrap()
                    .with_lengths(&mut lengths)
                    .unwrap();
                vocab
                    .token_ids(&cache, &positions, &reactions, width, &mut out)
                    .unwrap();
                let slots = b * width;
                for s in 0..slots {
                    let want: Vec<i32> = match reactions[s] {
                        BatchMut::NO_REACTION => Vec::new(),
                        r => tokens(&cache, field, positions[s / width], r)
                            .iter()
                            .map(|tok| vocab.index(tok) as i32)
                            .collect(),
                    };
                    cut += usize::from(want.len() > l);
                    let kept = want.len().min(l);
                    let row = &ids[s * l..(s + 1) * l];
                    assert_eq!(&row[..kept], &want[..kept], "slot {s}");
                    assert!(row[kept..].iter().all(|&x| x == 0), "slot {s} padding");
                    assert_eq!(lengths[s] as usize, kept);
                    known += row.iter().filter(|&&x| x >= 2).count();
                    unknown += row.iter().filter(|&&x| x == 1).count();
                }
                // Past the used slots nothing is written.
                assert!(ids[slots * l..].iter().all(|&x| x == -7));
                assert!(lengths[slots..].iter().all(|&x| x == 99));
            }
            assert!(
                known > 0 && unknown > 0 && cut > 0,
                "{known} {unknown} {cut}"
            );
        }
    }
}

#[test]
fn token_id_buffers_are_checked() {
    let (_tmp, cache) = sample();
    let vocab = Vocabulary::count(&cache, TextField::Reply, Kinds::Replies, None, 1, None).unwrap();
    let loader = Loader::new(&cache, Selection::default());
    let (reactions, width) = fill(&loader, &[0, 1], 2, 200);
    let mut ids = vec![0i32; 2 * 200 * 3];
    let size = |e: LoadError| match e {
        LoadError::BufferSize { buffer, .. } => buffer,
        other => panic!("{other}"),
    };
    assert_eq!(
        size(TokenIdsMut::new(0, &mut ids).unwrap_err()),
        "token ids"
    );
    assert_eq!(
        size(TokenIdsMut::new(7, &mut ids).unwrap_err()),
        "token ids"
    );
    let mut short = vec![0u32; 5];
    let out = TokenIdsMut::new(3, &mut ids).unwrap();
    assert_eq!(out.slots(), 400);
    assert_eq!(
        size(out.with_lengths(&mut short).unwrap_err()),
        "token lengths"
    );
    let mut out = TokenIdsMut::new(3, &mut ids).unwrap();
    let err = vocab.token_ids(&cache, &[0, 1], &reactions[..399], width, &mut out);
    assert_eq!(size(err.unwrap_err()), "reactions");
    let err = vocab.token_ids(&cache, &[0, 1, 2], &reactions, width, &mut out);
    assert!(matches!(
        err,
        Err(LoadError::BatchTooSmall {
            needed: 3,
            capacity: 2
        })
    ));
    // A thread's slots without its position.
    let err = vocab.token_ids(&cache, &[0], &reactions, width, &mut out);
    assert_eq!(size(err.unwrap_err()), "positions");
    let mut small = vec![0i32; 3 * 100];
    let mut out_small = TokenIdsMut::new(3, &mut small).unwrap();
    let err = vocab.token_ids(&cache, &[0, 1], &reactions, width, &mut out_small);
    assert_eq!(size(err.unwrap_err()), "token ids");
    // A reaction the thread does not have: another cache's batch.
    let mut bad = reactions.clone();
    bad[0] = 1_000_000;
    let err = vocab.token_ids(&cache, &[0, 1], &bad, width, &mut out);
    assert!(matches!(err, Err(LoadError::OtherCache { position: 0 })));
    // Width 0: nothing to fill.
    vocab.token_ids(&cache, &[], &[], 0, &mut out).unwrap();
}

#[test]
fn bags_of_words_count_each_nodes_tokens() {
    let (_tmp, cache) = sample();
    let vocab = Vocabulary::count(&cache, TextField::Reply, Kinds::Replies, None, 2, None).unwrap();
    let sel = Selection {
        kinds: Kinds::Both,
        max_cxt: 30,
        ..Selection::default()
    };
    let loader = Loader::new(&cache, sel);
    let mut graphs = GraphBatch::default();
    let mut bow = BagOfWords::default();
    let (mut saw_unknown, mut repeated) = (false, false);
    // Big batches then small ones: the reused vectors hold only the last.
    for size in [cache.len(), 3, 1] {
        let positions: Vec<usize> = (0..size).collect();
        loader.fill_graph(&positions, None, &mut graphs).unwrap();
        for unknown in [true, false] {
            vocab
                .bag_of_words(&cache, &graphs, unknown, &mut bow)
                .unwrap();
            assert_eq!(bow.num_nodes(), graphs.num_nodes());
            assert_eq!(bow.indptr.len(), graphs.num_nodes() + 1);
            assert_eq!(bow.indices.len(), bow.counts.len());
            assert_eq!(*bow.indptr.last().unwrap() as usize, bow.nnz());
            for node in 0..graphs.num_nodes() {
                let row = bow.indptr[node] as usize..bow.indptr[node + 1] as usize;
                let r = graphs.reactions[node];
                let mut want = BTreeMap::<i64, f32>::new();
                if r != BatchMut::NO_REACTION {
                    let pos = graphs.positions[graphs.batch[node] as usize];
                    for tok in tokens(&cache, TextField::Reply, pos, r) {
                        let id = vocab.index(&tok);
                        if unknown || id != Vocabulary::UNKNOWN_ID {
                            *want.entry(i64::from(id)).or_default() += 1.0;
                        }
                    }
                } else {
                    assert_eq!(row.len(), 0, "a root row is empty");
                }
                let got: BTreeMap<i64, f32> = bow.indices[row.clone()]
                    .iter()
                    .copied()
                    .zip(bow.counts[row.clone()].iter().copied())
                    .collect();
                assert_eq!(got, want, "node {node}");
                assert!(bow.indices[row.clone()].windows(2).all(|w| w[0] < w[1]));
                saw_unknown |= bow.indices[row.clone()].contains(&1);
                repeated |= bow.counts[row].iter().any(|&c| c > 1.0);
            }
            if !unknown {
                assert!(!bow.indices.contains(&1));
            }
        }
    }
    assert!(saw_unknown && repeated);
}
