//! Training-time batches against the reference procedure applied to the
//! oracle's features: kind and window filters, truncation, padding, masks,
//! empty threads, normalisation, split files, shuffling.

use std::collections::HashMap;
use std::time::Duration;

use crate::common::*;
use serde_json::Value;
use socialctx::FeatureStats;
use socialctx::Split;
use socialctx::ThreadSource;
use socialctx::{Batch, BatchMut, EmptyThreads, Kinds, Loader, Selection, shuffle};
use socialctx::{Cache, LoadError};

/// The oracle's reactions per source id: (kind, t_diff seconds, features as f32).
type Oracle = HashMap<u64, Vec<(String, i64, [f32; 28])>>;

fn oracle(rel: &str) -> (Vec<u64>, Oracle) {
    let lines = jsonl(&std::fs::read_to_string(repo(rel)).unwrap());
    let mut ids = Vec::new();
    let mut map = Oracle::new();
    for l in lines {
        let id: u64 = l["source_id"].as_str().unwrap().parse().unwrap();
        ids.push(id);
        let rs = l["reactions"].as_array().unwrap().iter().map(|r: &Value| {
            let f: Vec<f32> = r["features"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap() as f32)
                .collect();
            let t_diff_secs = (r["features"][25].as_f64().unwrap() * 60.0).round() as i64;
            (
                r["kind"].as_str().unwrap().to_string(),
                t_diff_secs,
                f.try_into().unwrap(),
            )
        });
        map.insert(id, rs.collect());
    }
    (ids, map)
}

/// The reference procedure, written independently of the library.
fn reference_rows(o: &Oracle, id: u64, sel: &Selection) -> Vec<[f32; 28]> {
    o[&id]
        .iter()
        .filter(|(k, _, _)| match sel.kinds {
            Kinds::Replies => k == "reply",
            Kinds::Retweets => k == "retweet",
            Kinds::Both => true,
        })
        .filter(|(_, dt, _)| {
            sel.window
                .is_none_or(|w| *dt >= 0 && *dt <= w.as_secs() as i64)
        })
        .map(|(_, _, f)| *f)
        .take(sel.max_cxt)
        .collect()
}

/// Independent statistics over the oracle's f32 features.
fn reference_stats(o: &Oracle, ids: &[u64], sel: &Selection) -> FeatureStats {
    let rows: Vec<[f32; 28]> = ids
        .iter()
        .flat_map(|&id| reference_rows(o, id, sel))
        .collect();
    let n = rows.len() as f64;
    let mut s = FeatureStats {
        feature_names: socialctx::Feature::NAMES
            .iter()
            .map(|s| s.to_string())
            .collect(),
        threads: ids.len() as u64,
        count: rows.len() as u64,
        mean: [0.0; 28],
        std: [0.0; 28],
        min: [f64::INFINITY; 28],
        max: [f64::NEG_INFINITY; 28],
        computed_over: None,
    };
    for f in 0..28 {
        let xs: Vec<f64> = rows.iter().map(|r| f64::from(r[f])).collect();
        s.mean[f] = xs.iter().sum::<f64>() / n;
        s.std[f] = (xs.iter().map(|x| (x - s.mean[f]).powi(2)).sum::<f64>() / n).sqrt();
        s.min[f] = xs.iter().cloned().fold(f64::INFINITY, f64::min);
        s.max[f] = xs.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    }
    s
}

fn check_batches(
    cache: &Cache,
    o: &Oracle,
    ids: &[u64],
    sel: Selection,
    stats: Option<&FeatureStats>,
    empty: EmptyThreads,
) {
    let mut loader = Loader::new(cache, sel).empty_threads(empty);
    if let Some(s) = stats {
        loader = loader.normalize(s);
    }
    let (bs, max_cxt) = (7, sel.max_cxt.min(40));
    let mut batch = Batch::new(bs, max_cxt);
    let mut scratch = Vec::new();
    for chunk in ids.chunks(bs) {
        loader.fill_ids(chunk, &mut batch, &mut scratch).unwrap();
        assert_eq!(batch.len, chunk.len());
        for (b, &id) in chunk.iter().enumerate() {
            assert_eq!(batch.source_ids[b], id);
            let mut want = reference_rows(o, id, &Selection { max_cxt, ..sel });
            if let Some(s) = stats {
                for row in &mut want {
                    for (f, x) in row.iter_mut().enumerate() {
                        *x = ((f64::from(*x) - s.mean[f]) / (s.std[f] + 1e-6)) as f32;
                    }
                }
            }
            let len = if want.is_empty() && empty == EmptyThreads::ZeroRow {
                1
            } else {
                want.len()
            };
            if want.is_empty() && empty == EmptyThreads::ZeroRow {
                want.push([0.0; 28]);
            }
            assert_eq!(batch.lengths[b] as usize, len, "length of {id}");
            let rows = batch.thread_rows(b);
            for t in 0..max_cxt {
                let mask = batch.mask[b * max_cxt + t];
                let row = &rows[t * 28..(t + 1) * 28];
                if t < want.len() {
                    assert_eq!(mask, 1, "mask of {id} row {t}");
                    let same = row
                        .iter()
                        .zip(&want[t])
                        .all(|(a, w)| a.to_bits() == w.to_bits());
                    assert!(same, "thread {id} row {t}: {row:?} vs {:?}", want[t]);
                } else {
                    assert_eq!(mask, 0, "padding mask of {id} row {t}");
                    assert!(
                        row.iter().all(|x| x.to_bits() == 0),
                        "zero padding of {id} row {t}"
                    );
                }
            }
        }
        for b in chunk.len()..bs {
            assert_eq!(batch.lengths[b], 0);
            assert!(batch.thread_rows(b).iter().all(|x| *x == 0.0));
        }
    }
}

fn settings() -> Vec<Selection> {
    let mut v = Vec::new();
    for kinds in [Kinds::Replies, Kinds::Retweets, Kinds::Both] {
        for window in [
            None,
            Some(Duration::from_secs(0)),
            Some(Duration::from_secs(600)),
            Some(Duration::from_secs(3 * 3600)),
        ] {
            for max_cxt in [1, 3, 200] {
                v.push(Selection {
                    kinds,
                    window,
                    max_cxt,
                });
            }
        }
    }
    v
}

fn run_corpus(corpus: &str, expected_all: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("c");
    build_cache(&repo(corpus), &out, 2);
    let cache = Cache::open(&out).unwrap();
    let (ids, o) = oracle(expected_all);
    let mut rev = ids.clone();
    rev.reverse();
    for sel in settings() {
        for empty in [EmptyThreads::ZeroRow, EmptyThreads::Masked] {
            check_batches(&cache, &o, &rev, sel, None, empty);
        }
        let stats = reference_stats(&o, &ids, &sel);
        let positions: Vec<usize> = ids.iter().map(|&id| cache.position(id).unwrap()).collect();
        let ours = FeatureStats::compute(&cache, &positions, &sel).unwrap();
        assert_eq!(ours.count, stats.count);
        for f in (0..28).filter(|_| stats.count > 0) {
            let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1e-300);
            assert!(
                close(ours.mean[f], stats.mean[f]),
                "mean {f}: {} vs {}",
                ours.mean[f],
                stats.mean[f]
            );
            assert!(
                close(ours.std[f], stats.std[f]),
                "std {f}: {} vs {}",
                ours.std[f],
                stats.std[f]
            );
            assert_eq!(ours.min[f], stats.min[f]);
            assert_eq!(ours.max[f], stats.max[f]);
        }
        if stats.count > 0 {
            check_batches(&cache, &o, &ids, sel, Some(&stats), EmptyThreads::ZeroRow);
        }
    }
}

#[test]
fn golden_batches_match_the_reference_procedure() {
    run_corpus(
        "tests/fixtures/golden/corpus",
        "tests/fixtures/golden/features.jsonl",
    );
}

#[test]
fn real_sample_batches_match_the_reference_procedure() {
    run_corpus(
        "tests/fixtures/real/pheme-veracity/corpus",
        "tests/fixtures/real/pheme-veracity/expected.jsonl",
    );
}

#[test]
fn stats_save_and_load_round_trip() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("c");
    build_cache(&repo("tests/fixtures/real/pheme-rnr/corpus"), &out, 2);
    let cache = Cache::open(&out).unwrap();
    let all: Vec<usize> = (0..cache.len()).collect();
    let s = FeatureStats::compute(&cache, &all, &Selection::default()).unwrap();
    assert!(s.count > 0);
    let path = tmp.path().join("stats.json");
    s.save(&path).unwrap();
    assert_eq!(FeatureStats::load(&path).unwrap(), s);
    std::fs::write(&path, b"{\"feature_names\": []}").unwrap();
    let err = FeatureStats::load(&path).unwrap_err().to_string();
    assert!(err.contains("stats.json"), "{err}");
    // Statistics no computation gives are refused, not turned into
    // batches of infinities or flipped signs (red team of issue 46: a std
    // of -EPSILON gave -inf features, -5 flipped them; a mean of 1e308
    // gave -inf).
    let name = socialctx::Feature::NAMES[3];
    for (field, value) in [
        ("std", -FeatureStats::EPSILON),
        ("std", -5.0),
        ("std", 1e300),
        ("mean", 1e308),
        ("mean", -1e308),
    ] {
        let mut bad = s.clone();
        match field {
            "std" => bad.std[3] = value,
            _ => bad.mean[3] = value,
        }
        bad.save(&path).unwrap();
        let err = FeatureStats::load(&path).unwrap_err().to_string();
        assert!(
            err.contains("stats.json") && err.contains(name) && err.contains("float32"),
            "{field} {value}: {err}"
        );
    }
}

/// `FeatureStats::normalize` (what the public API says a value becomes)
/// is, bit for bit, what a normalising Loader writes.
#[test]
fn stats_normalize_is_the_loaders_normalisation() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("c");
    build_cache(&repo("tests/fixtures/real/pheme-rnr/corpus"), &out, 2);
    let cache = Cache::open(&out).unwrap();
    let all: Vec<usize> = (0..cache.len()).collect();
    let s = FeatureStats::compute(&cache, &all, &Selection::default()).unwrap();
    let (raw, norm) = (
        Loader::new(&cache, Selection::default()),
        Loader::new(&cache, Selection::default()).normalize(&s),
    );
    let (mut a, mut b) = (raw.new_batch(all.len()), norm.new_batch(all.len()));
    raw.fill(&all, &mut a).unwrap();
    norm.fill(&all, &mut b).unwrap();
    let mut checked = 0;
    for (slot, &m) in a.mask.iter().enumerate() {
        if m == 0
            || a.lengths[slot / a.width] == 1
                && a.features[slot * 28..][..28].iter().all(|&x| x == 0.0)
        {
            continue;
        }
        for (f, &feature) in socialctx::Feature::ALL.iter().enumerate() {
            let (x, y) = (a.features[slot * 28 + f], b.features[slot * 28 + f]);
            assert_eq!(
                s.normalize(feature, x).to_bits(),
                y.to_bits(),
                "slot {slot} feature {f}"
            );
            checked += 1;
        }
    }
    assert!(checked > 28 * 50, "{checked}");
}

/// Statistics record what they were computed over and refuse values of
/// another definition (red team of issue 42, D3).
#[test]
fn stats_refuse_values_of_another_definition() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("c");
    build_cache(&repo("tests/fixtures/real/pheme-rnr/corpus"), &out, 2);
    let cache = Cache::open(&out).unwrap();
    let all: Vec<usize> = (0..cache.len()).collect();
    let s = FeatureStats::compute(&cache, &all, &Selection::default()).unwrap();
    let over = s.computed_over.clone().unwrap();
    assert_eq!(over.definition, cache.manifest().definition);
    assert_eq!(over.content_id, cache.content_id());
    assert_eq!((over.kinds.as_str(), over.window_s), ("replies", None));
    assert_eq!(s.check_for(&cache).unwrap(), None);
    let mut other = s.clone();
    other.computed_over.as_mut().unwrap().definition = "0123456789abcdef".into();
    let err = other.check_for(&cache).unwrap_err().to_string();
    assert!(
        err.contains("0123456789abcdef") && err.contains(&cache.manifest().definition),
        "{err}"
    );
    let mut old = s.clone();
    old.computed_over = None;
    let warning = old.check_for(&cache).unwrap().unwrap();
    assert!(warning.contains("saved before"), "{warning}");
    // Another generation of the same definition: accepted.
    let mut nightly = s;
    nightly.computed_over.as_mut().unwrap().content_id = "ffffffffffffffff".into();
    assert_eq!(nightly.check_for(&cache).unwrap(), None);
}

#[test]
fn split_files_parse_with_tricky_quoting_and_report_missing_ids() {
    let tmp = tempfile::tempdir().unwrap();
    let csv = tmp.path().join("split.csv");
    std::fs::write(
        &csv,
        "tweet_id,created_at,text,label,user_id,user_name\n\
         552783238415265792,2015-01-07 11:06:08+00:00,\"comma, \"\"quoted\"\"\nand a newline\",1,1,a\n\
         999,2015-01-07 11:06:08+00:00,plain,0,2,b\n\
         552790082533752832,2015-01-07,\"\",0,3,\"c,d\"\n",
    )
    .unwrap();
    let split = Split::read(&csv).unwrap();
    assert_eq!(split.ids, vec![552783238415265792, 999, 552790082533752832]);
    assert_eq!(split.labels, vec![1, 0, 0]);

    let out = tmp.path().join("c");
    build_cache(&repo("tests/fixtures/real/pheme-rnr/corpus"), &out, 2);
    let cache = Cache::open(&out).unwrap();
    let r = split.resolve(&cache).unwrap();
    assert_eq!(r.missing, vec![999]);
    assert_eq!(r.positions.len(), 2);
    // The split's labels follow its positions (the 0-labelled missing id dropped).
    assert_eq!(r.labels, vec![1, 0]);
    assert_eq!(
        cache.thread(r.positions[0]).unwrap().source_id(),
        552783238415265792
    );

    std::fs::write(&csv, "tweet_id,label\nabc,1\n").unwrap();
    let err = Split::read(&csv).unwrap_err().to_string();
    assert!(err.contains("line 2") && err.contains("abc"), "{err}");
    std::fs::write(&csv, "id,label\n1,1\n").unwrap();
    assert!(
        Split::read(&csv)
            .unwrap_err()
            .to_string()
            .contains("tweet_id")
    );
}

#[test]
fn real_rpdnn_split_files_parse() {
    let split = Split::read(repo(
        "tests/fixtures/splits/charliehebdo/all_rnr_test_set_combined.csv",
    ))
    .unwrap();
    assert_eq!(split.ids.len(), 680);
    assert!(split.labels.iter().all(|&l| l == 0 || l == 1));
    let train = Split::read(repo(
        "tests/fixtures/splits/charliehebdo/all_rnr_train_set_combined.csv",
    ))
    .unwrap();
    assert_eq!(train.ids.len(), 4674);
}

/// `0..n` shuffled with `seed`: an epoch's order.
fn shuffled(n: usize, seed: u64) -> Vec<usize> {
    let mut v: Vec<usize> = (0..n).collect();
    shuffle(&mut v, seed);
    v
}

#[test]
fn shuffle_is_deterministic_and_a_permutation() {
    let a = shuffled(1000, 7);
    assert_eq!(a, shuffled(1000, 7));
    assert_ne!(a, shuffled(1000, 8));
    assert_ne!(a, (0..1000).collect::<Vec<_>>());
    let mut s = a.clone();
    s.sort();
    assert_eq!(s, (0..1000).collect::<Vec<_>>());
    // Fixed output for a fixed seed, whatever the machine or thread count.
    // (computed independently by a Python port of splitmix64 + Fisher-Yates)
    assert_eq!(shuffled(5, 1), vec![1, 0, 3, 4, 2]);
    assert_eq!(shuffled(10, 42), vec![8, 3, 6, 5, 4, 0, 9, 2, 1, 7]);
    // Any element type moves the same way: the order depends on the length
    // and the seed only.
    let mut words = ["a", "b", "c", "d", "e"];
    shuffle(&mut words, 1);
    assert_eq!(words, ["b", "a", "d", "e", "c"]);
}

#[test]
fn batch_errors_are_typed() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("c");
    build_cache(&repo("tests/fixtures/real/pheme-rnr/corpus"), &out, 2);
    let cache = Cache::open(&out).unwrap();
    let loader = Loader::new(&cache, Selection::default());
    let mut small = Batch::new(1, 10);
    assert!(matches!(
        loader.fill(&[0, 1], &mut small),
        Err(LoadError::BatchTooSmall {
            needed: 2,
            capacity: 1
        })
    ));
    let past = cache.len();
    assert!(matches!(
        loader.fill(&[past], &mut small),
        Err(LoadError::NoSuchThread { position }) if position == past
    ));
    assert!(matches!(
        loader.fill_ids(&[42], &mut small, &mut Vec::new()),
        Err(LoadError::NoSuchSource { source_id: 42 })
    ));
}

/// Filling caller-owned buffers gives exactly what `fill` gives, clears
/// whatever the buffers held before, and labels threads from the cache or
/// from the caller.
#[test]
fn fill_into_caller_memory_matches_fill_and_labels() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("c");
    build_cache(&repo("tests/fixtures/golden/corpus"), &out, 2);
    let cache = Cache::open(&out).unwrap();
    let sel = Selection {
        kinds: Kinds::Both,
        ..Selection::default()
    };
    let loader = Loader::new(&cache, sel);
    let (bs, t) = (4, 30);
    let positions: Vec<usize> = (0..cache.len().min(3)).collect();
    let mut batch = Batch::new(bs, t);
    loader.fill(&positions, &mut batch).unwrap();
    for (b, &p) in positions.iter().enumerate() {
        assert_eq!(batch.labels[b], cache.thread(p).unwrap().label_code());
    }

    // Caller memory full of garbage: after the fill it holds the same batch.
    let mut features = vec![f32::NAN; bs * t * 28];
    let mut mask = vec![7u8; bs * t];
    let mut lengths = vec![99u32; bs];
    let mut ids = vec![5u64; bs];
    let mut labels = vec![9i8; bs];
    let mut view = BatchMut::new(
        t,
        &mut features,
        &mut mask,
        &mut lengths,
        &mut ids,
        &mut labels,
    )
    .unwrap();
    loader.fill_into(&positions, None, &mut view).unwrap();
    assert_eq!(
        features.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
        batch
            .features
            .iter()
            .map(|x| x.to_bits())
            .collect::<Vec<_>>()
    );
    assert_eq!(mask, batch.mask);
    assert_eq!(lengths, batch.lengths);
    assert_eq!(ids, batch.source_ids);
    assert_eq!(labels, batch.labels);
    assert_eq!(labels[positions.len()..], vec![0; bs - positions.len()]);

    // Labels from the caller (a split's) replace the cache's.
    let given: Vec<i8> = positions.iter().map(|&p| 1 - (p % 2) as i8).collect();
    loader.fill_labeled(&positions, &given, &mut batch).unwrap();
    assert_eq!(batch.labels[..positions.len()], given[..]);
    assert!(matches!(
        loader.fill_labeled(&positions, &given[..1], &mut batch),
        Err(LoadError::BufferSize { buffer: "labels argument", expected, found: 1 })
            if expected == positions.len()
    ));

    // A buffer of the wrong length is named.
    let mut short_mask = vec![0u8; bs * t - 1];
    let mut f = vec![0f32; bs * t * 28];
    let (mut l, mut i, mut y) = (vec![0u32; bs], vec![0u64; bs], vec![0i8; bs]);
    let err = BatchMut::new(t, &mut f, &mut short_mask, &mut l, &mut i, &mut y).unwrap_err();
    assert!(
        matches!(err, LoadError::BufferSize { buffer: "mask", found, .. } if found == bs * t - 1),
        "{err}"
    );
}
