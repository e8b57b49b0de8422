//! UniqueTexts: the distinct inputs of a text field, their counts, and the
//! per-reaction index, checked against a direct per-reaction computation.

use std::collections::{BTreeMap, BTreeSet};

use crate::common::*;
use socialctx::ThreadSource;
use socialctx::{Cache, LazyCache, TextField, UniqueTexts};

/// The fields with stored inputs.
fn fields() -> Vec<TextField> {
    vec![TextField::Description, TextField::Reply]
}

fn golden() -> (tempfile::TempDir, Cache) {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("cache");
    build_cache(&repo("tests/fixtures/golden/corpus"), &out, 2);
    let cache = Cache::open(&out).unwrap();
    (tmp, cache)
}

/// Per reaction of `positions`, the field's token list (None when empty).
fn direct(cache: &Cache, field: TextField, positions: &[usize]) -> Vec<Option<Vec<String>>> {
    let mut out = Vec::new();
    for &p in positions {
        for r in cache.thread(p).unwrap().reactions() {
            let tokens = match field {
                TextField::Reply => r.reply_tokens(),
                TextField::Description => r.description_tokens(),
            };
            let list: Option<Vec<String>> = tokens.map(|t| t.iter().map(str::to_owned).collect());
            out.push(list.filter(|l| !l.is_empty()));
        }
    }
    out
}

fn check(cache: &Cache, field: TextField, positions: &[usize]) -> UniqueTexts {
    let unique = UniqueTexts::collect(cache, field, Some(positions)).unwrap();
    let want = direct(cache, field, positions);
    assert_eq!(unique.index().len(), want.len());
    assert_eq!(*unique.offsets().last().unwrap() as usize, want.len());
    let inputs: Vec<Vec<String>> = (0..unique.len())
        .map(|i| {
            let t = unique.tokens(cache, i).unwrap();
            assert_eq!(t.len() as u32, unique.token_count(i));
            t.iter().map(str::to_owned).collect()
        })
        .collect();
    // Distinct, non-empty, ordered by length.
    assert_eq!(inputs.iter().collect::<BTreeSet<_>>().len(), inputs.len());
    assert!(inputs.iter().all(|t| !t.is_empty()));
    assert!(inputs.windows(2).all(|w| w[0].len() <= w[1].len()));
    // Every reaction maps to its own tokens, and the counts add up.
    let mut counts: BTreeMap<u32, u32> = BTreeMap::new();
    for (id, want) in unique.index().iter().zip(&want) {
        match want {
            None => assert_eq!(*id, UniqueTexts::NONE),
            Some(tokens) => {
                assert_eq!(&inputs[*id as usize], tokens);
                *counts.entry(*id).or_default() += 1;
            }
        }
    }
    for i in 0..unique.len() {
        assert_eq!(counts.get(&(i as u32)).copied(), Some(unique.count(i)));
    }
    // Each key is xxh3-128 of the input's tokens as stored, computed here
    // independently from the tokens.
    let sep = if field == TextField::Reply { "\n" } else { " " };
    for (i, tokens) in inputs.iter().enumerate() {
        let want = xxhash_rust::xxh3::xxh3_128(tokens.join(sep).as_bytes());
        assert_eq!(unique.key(i), want, "input {i}");
    }
    unique
}

/// The keys stored by the build (what `collect` reads instead of the
/// texts) agree with the texts on every corpus of the fixtures, the
/// adversarial ones included: each check above recomputes the inputs and
/// their keys from the texts.
#[test]
fn stored_keys_agree_with_the_texts_on_every_fixture() {
    for corpus in [
        "tests/fixtures/golden/corpus",
        "tests/fixtures/adversarial-text/corpus",
        "tests/fixtures/edge/corpus",
        "tests/fixtures/edge/disputed",
        "tests/fixtures/edge/quirks",
        "tests/fixtures/real/pheme-rnr/corpus",
        "tests/fixtures/real/pheme-journalism/corpus",
        "tests/fixtures/real/pheme-veracity/corpus",
        "tests/fixtures/real/rumoureval2017/corpus",
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("cache");
        build_cache(&repo(corpus), &out, 2);
        let cache = Cache::open(&out).unwrap();
        let all: Vec<usize> = (0..cache.len()).collect();
        for field in fields() {
            check(&cache, field, &all);
        }
    }
}

#[test]
fn positions_in_finds_each_key_or_none() {
    let (_tmp, cache) = golden();
    let unique = UniqueTexts::collect(&cache, TextField::Reply, None).unwrap();
    // Another store's keys: every third input missing, the rest reversed,
    // one key twice (the first position wins), one key no input has.
    let mut keys: Vec<u128> = (0..unique.len())
        .filter(|i| i % 3 != 0)
        .map(|i| unique.key(i))
        .rev()
        .collect();
    keys.push(keys[0]);
    keys.push(0xdead_beef);
    let at = unique.positions_in(&keys);
    assert_eq!(at.len(), unique.len());
    for (i, p) in at.iter().enumerate() {
        match p {
            None => assert_eq!(i % 3, 0, "input {i} is in keys"),
            Some(p) => {
                assert_ne!(i % 3, 0);
                assert_eq!(keys[*p as usize], unique.key(i));
                assert!((*p as usize) < keys.len() - 2, "first position taken");
            }
        }
    }
}

#[test]
fn descriptions_are_deduplicated() {
    let (_tmp, cache) = golden();
    let all: Vec<usize> = (0..cache.len()).collect();
    let unique = check(&cache, TextField::Description, &all);
    let with_input = unique
        .index()
        .iter()
        .filter(|&&i| i != UniqueTexts::NONE)
        .count();
    assert!(unique.len() > 10, "{}", unique.len());
    assert!(
        unique.len() < with_input,
        "{} distinct of {with_input}",
        unique.len()
    );
}

#[test]
fn replies_map_to_their_tokens() {
    let (_tmp, cache) = golden();
    let all: Vec<usize> = (0..cache.len()).collect();
    let unique = check(&cache, TextField::Reply, &all);
    assert!(unique.len() > 100, "{}", unique.len());
    // Retweets and [] replies have no input.
    assert!(unique.index().contains(&UniqueTexts::NONE));
}

#[test]
fn a_subset_of_threads_sees_only_its_texts() {
    let (_tmp, cache) = golden();
    let some: Vec<usize> = (0..cache.len()).rev().step_by(3).collect();
    for field in fields() {
        let part = check(&cache, field, &some);
        let all = UniqueTexts::collect(&cache, field, None).unwrap();
        assert!(part.len() < all.len());
        assert_eq!(part.positions(), &some[..]);
    }
}

#[test]
fn a_lazy_cache_gives_the_same_inputs() {
    let (tmp, cache) = golden();
    let lazy = LazyCache::open(tmp.path().join("cache")).unwrap();
    for field in fields() {
        let a = UniqueTexts::collect(&cache, field, None).unwrap();
        let b = UniqueTexts::collect(&lazy, field, None).unwrap();
        assert_eq!(a, b);
        assert!(matches!(
            a.tokens(&lazy, 0).map(|t| t.joined().to_owned()),
            Ok(s) if s == a.tokens(&cache, 0).unwrap().joined()
        ));
    }
    assert!(matches!(
        UniqueTexts::collect(&cache, TextField::Reply, Some(&[cache.len()])),
        Err(socialctx::LoadError::NoSuchThread { .. })
    ));
}
