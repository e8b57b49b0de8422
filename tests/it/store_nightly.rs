//! Nightly embeds over many nights and over damaged stores: a store past
//! 32 segments is compacted and reads stay a from-scratch embed's, and a
//! damaged previous store is named and recomputed, never linked into the
//! new one (where the nightly exited 0 and only a later open failed).

use std::path::{Path, PathBuf};

use crate::common::*;
use crate::embeddings::{
    assert_rows_follow_inputs, copy_dir, embed, scratch_bytes, store_bytes, walk, write_toy_batch,
};
use socialctx::{Cache, EmbeddingStore, StoreMeta, StoreWriter, TextField};

/// `store::write::MAX_SEGMENTS` (not exported): past it a nightly embed
/// compacts.
const MAX_SEGMENTS: usize = 32;

/// What a nightly embed of store "r" (model "toy") did.
struct Night {
    not_reused: Option<String>,
    new_inputs: usize,
    compacting: bool,
    meta: StoreMeta,
}

fn nightly(cache: &Cache, batch: usize) -> Night {
    let mut w = StoreWriter::new("r", TextField::Reply)
        .batch_size(batch)
        .model_id(Some("toy"))
        .begin(cache)
        .unwrap();
    let not_reused = w.not_reused().map(str::to_owned);
    let (new_inputs, compacting) = (w.new_inputs(), w.compacting());
    for b in w.done()..w.batches() {
        write_toy_batch(&mut w, b);
    }
    Night {
        not_reused,
        new_inputs,
        compacting,
        meta: w.finish().unwrap(),
    }
}

/// data-samples built and embedded as store "r": (the corpus, the cache dir).
fn embedded_sample(tmp: &Path) -> (PathBuf, PathBuf) {
    let corpus = tmp.join("corpus");
    copy_dir(&repo("data-samples/corpus"), &corpus);
    let out = tmp.join("cache");
    build_cache(&corpus, &out, 2);
    embed(&Cache::open(&out).unwrap(), "r", 16, false, None);
    (corpus, out)
}

/// The replies of `corpus` that parse, sorted.
fn replies(corpus: &Path) -> Vec<PathBuf> {
    let mut replies: Vec<PathBuf> = walk(corpus)
        .into_iter()
        .filter(|p| {
            p.parent().is_some_and(|d| d.ends_with("reactions"))
                && p.extension().is_some_and(|e| e == "json")
                && std::fs::read(p).is_ok_and(|b| {
                    serde_json::from_slice::<serde_json::Value>(&b)
                        .is_ok_and(|v| v.get("text").is_some())
                })
        })
        .collect();
    replies.sort();
    replies
}

#[test]
fn a_nightly_embed_over_a_damaged_store_names_the_file_and_recomputes() {
    type Damage = fn(&Path);
    let flip: Damage = |seg| {
        let mut b = std::fs::read(seg).unwrap();
        *b.last_mut().unwrap() ^= 1;
        std::fs::write(seg, b).unwrap();
    };
    let truncate: Damage = |seg| {
        let b = std::fs::read(seg).unwrap();
        std::fs::write(seg, &b[..b.len() - 4]).unwrap();
    };
    for (damage, want, rebuilt) in [
        (flip, "checksum mismatch", true),
        (flip, "checksum mismatch", false),
        (truncate, "bytes, the metadata says", true),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let (corpus, out) = embedded_sample(tmp.path());
        let dir = out.join("derived/embeddings/r");
        damage(&dir.join("seg-00000.npy"));
        if rebuilt {
            let reply = &replies(&corpus)[0];
            let mut v: serde_json::Value =
                serde_json::from_slice(&std::fs::read(reply).unwrap()).unwrap();
            v["text"] = "a reply rewritten for the night".into();
            v["full_text"] = v["text"].clone();
            std::fs::write(reply, v.to_string()).unwrap();
            build_cache(&corpus, &out, 2);
        }
        let cache = Cache::open(&out).unwrap();
        let night = nightly(&cache, 16);
        let why = night.not_reused.expect("a damaged store is not reused");
        assert!(
            why.contains(&dir.join("seg-00000.npy").display().to_string()) && why.contains(want),
            "{want}: {why}"
        );
        assert_eq!(night.new_inputs, night.meta.unique, "every row recomputed");
        let store = EmbeddingStore::open(&cache, "r").unwrap();
        assert_rows_follow_inputs(&cache, &store);
        assert_eq!(store_bytes(&dir), scratch_bytes(tmp.path(), &cache, 16));
    }
}

/// A small deterministic generator (xorshift64*) for the nights' changes.
fn next(state: &mut u64) -> u64 {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    state.wrapping_mul(0x2545_f491_4f6c_dd1d)
}

/// Property-style, over a seeded sequence of nights that each add one or two
/// new replies and sometimes delete one: every night the store reads as its
/// inputs' rows, it never has more than 32 segments, it compacts exactly when
/// a new segment would pass 32 (or dead rows pass a quarter), and a compacted
/// store is a from-scratch embed byte for byte.
#[test]
fn past_32_segments_a_nightly_embed_compacts_and_reads_stay_the_same() {
    let tmp = tempfile::tempdir().unwrap();
    let (corpus, out) = embedded_sample(tmp.path());
    let template: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&replies(&corpus)[0]).unwrap()).unwrap();
    let folder = replies(&corpus)[0].parent().unwrap().to_owned();
    let (mut state, mut by_cap, mut max_segments) = (0x5eed_2026_u64, 0, 0);
    for night in 0..36u64 {
        let r = next(&mut state);
        for k in 0..1 + r % 2 {
            let id = 990_000_000_000_000_000 + night * 10 + k;
            let mut v = template.clone();
            v["id"] = id.into();
            v["id_str"] = id.to_string().into();
            v["text"] = format!("night {night}: brand new reply {k}").into();
            v["full_text"] = v["text"].clone();
            std::fs::write(folder.join(format!("{id}.json")), v.to_string()).unwrap();
        }
        if r.is_multiple_of(5) {
            let all = replies(&corpus);
            std::fs::remove_file(&all[(r >> 8) as usize % all.len()]).unwrap();
        }
        let before: StoreMeta = serde_json::from_slice(
            &std::fs::read(out.join("derived/embeddings/r/meta.json")).unwrap(),
        )
        .unwrap();
        build_cache(&corpus, &out, 2);
        let cache = Cache::open(&out).unwrap();
        let n = nightly(&cache, 16);
        assert_eq!(n.not_reused, None, "night {night}");
        let store = EmbeddingStore::open(&cache, "r").unwrap();
        assert_rows_follow_inputs(&cache, &store);
        let rows = before.rows + n.new_inputs;
        let would = before.segments.len() + usize::from(n.new_inputs > 0);
        let dead_past_a_quarter = 4 * (rows - n.meta.unique) > rows;
        assert_eq!(
            n.compacting,
            would > MAX_SEGMENTS || dead_past_a_quarter,
            "night {night}: {would} segments, {rows} rows, {} used",
            n.meta.unique
        );
        if n.compacting {
            assert_eq!(n.meta.segments.len(), 1, "night {night}");
            assert_eq!(
                store_bytes(store.dir()),
                scratch_bytes(tmp.path(), &cache, 16),
                "night {night}"
            );
            by_cap += usize::from(!dead_past_a_quarter);
        } else {
            assert_eq!(n.meta.segments.len(), would, "night {night}");
        }
        max_segments = max_segments.max(n.meta.segments.len());
    }
    assert_eq!(max_segments, MAX_SEGMENTS);
    assert!(by_cap >= 1, "the cap never compacted the store");
}

/// Red team, the store's twin of the cache reader's race: a build
/// publishing the cache moves `derived/` (the stores) into its staging
/// directory just before its swap, and an open in that moment said "no
/// embedding store". It now waits for the swap, and a build killed there,
/// which leaves `derived/` parked, is named.
#[test]
fn an_open_while_a_build_holds_derived_waits_for_it_or_names_it() {
    let tmp = tempfile::tempdir().unwrap();
    let (_, out) = embedded_sample(tmp.path());
    let cache = Cache::open(&out).unwrap();
    let staging = tmp.path().join(".cache.tmp-999999");
    std::fs::create_dir(&staging).unwrap();
    let park = || std::fs::rename(out.join("derived"), staging.join("derived")).unwrap();
    park();
    let back = {
        let (from, to) = (staging.join("derived"), out.join("derived"));
        std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(50));
            std::fs::rename(from, to).unwrap();
        })
    };
    let store = EmbeddingStore::open(&cache, "r");
    back.join().unwrap();
    assert_rows_follow_inputs(&cache, &store.unwrap());
    park();
    let err = EmbeddingStore::open(&cache, "r").unwrap_err().to_string();
    assert!(
        err.contains(&staging.join("derived").display().to_string()) && err.contains("build"),
        "{err}"
    );
}

/// Opens racing builds that park derived/ and put it back, a build after
/// a build: every open waits or retries and gets the store. An
/// open that failed while derived/ was parked, then looked for it parked
/// after it was back, said "no embedding store" (CI, once).
#[test]
fn opens_racing_parks_and_swaps_always_find_the_store() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let tmp = tempfile::tempdir().unwrap();
    let (_, out) = embedded_sample(tmp.path());
    let cache = Cache::open(&out).unwrap();
    let staging = tmp.path().join(".cache.tmp-999998");
    std::fs::create_dir(&staging).unwrap();
    let done = std::sync::Arc::new(AtomicBool::new(false));
    let toggler = {
        let (home, parked, done) = (out.join("derived"), staging.join("derived"), done.clone());
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !done.load(Ordering::Relaxed) {
                std::fs::rename(&home, &parked).unwrap();
                std::thread::sleep(std::time::Duration::from_micros(n % 7 * 50));
                std::fs::rename(&parked, &home).unwrap();
                // The next build's publish, a build later.
                std::thread::sleep(std::time::Duration::from_micros(2000 + n % 5 * 400));
                n += 1;
            }
            n
        })
    };
    let mut failed = Vec::new();
    for _ in 0..2000 {
        if let Err(e) = EmbeddingStore::open(&cache, "r") {
            failed.push(e.to_string());
        }
    }
    done.store(true, Ordering::Relaxed);
    let swaps = toggler.join().unwrap();
    assert!(swaps > 50, "{swaps} swaps");
    assert!(
        failed.is_empty(),
        "{} of 2000 opens failed: {:?}",
        failed.len(),
        &failed[..1]
    );
}

/// Begins store `name` of `cache` under `model`, writes `batches` batches of
/// toy rows and stops (an interrupted embed); returns (batches resumed, why
/// an interrupted embed was started over).
fn interrupted(cache: &Cache, name: &str, model: Option<&str>, batches: usize) -> (usize, String) {
    let mut w = StoreWriter::new(name, TextField::Reply)
        .batch_size(16)
        .model_id(model)
        .begin(cache)
        .unwrap();
    let out = (w.done(), w.restarted().unwrap_or_default().to_owned());
    for b in w.done()..w.done() + batches {
        write_toy_batch(&mut w, b);
    }
    out
}

/// Rows of two models look alike: an interrupted embed resumes only under
/// the same model id (never without one), a nightly embed never appends to
/// a store of another model or of none, and a reader requiring a model
/// refuses another, naming both.
#[test]
fn rows_of_two_models_never_mix() {
    let tmp = tempfile::tempdir().unwrap();
    let (_, out) = embedded_sample(tmp.path());
    let cache = Cache::open(&out).unwrap();
    // No model id: whether the next model is the same cannot be known.
    assert_eq!(interrupted(&cache, "m", None, 2), (0, String::new()));
    let (done, why) = interrupted(&cache, "m", None, 2);
    assert!(
        done == 0 && why.contains("no model id") && why.contains(".m.partial"),
        "{why}"
    );
    // An id: the same resumes, another starts over.
    assert_eq!(interrupted(&cache, "n", Some("a"), 2), (0, String::new()));
    assert_eq!(interrupted(&cache, "n", Some("a"), 1), (2, String::new()));
    let (done, why) = interrupted(&cache, "n", Some("b"), 0);
    assert_eq!(done, 0);
    assert!(
        why.contains(r#"made by model "a", not by model "b""#),
        "{why}"
    );
    let (done, why) = interrupted(&cache, "n", None, 0);
    assert!(done == 0 && why.contains("no model id"), "{why}");
    // A nightly embed under another id: the previous store ("toy") is not
    // appended to, and the meta.json check says why.
    let w = StoreWriter::new("r", TextField::Reply)
        .model_id(Some("other"))
        .begin(&cache)
        .unwrap();
    let why = w.not_reused().unwrap_or_default();
    assert!(
        why.contains(r#"made by model "toy", not by model "other""#),
        "{why}"
    );
    assert_eq!((w.reused(), w.new_inputs()), (0, w.unique().unwrap().len()));
    drop(w);
    // A reader requiring a model.
    let store = EmbeddingStore::open(&cache, "r").unwrap();
    assert_eq!(store.model_id(), Some("toy"));
    store.require_model("toy").unwrap();
    let err = store.require_model("elmo").unwrap_err().to_string();
    assert!(
        err.contains(&store.dir().display().to_string())
            && err.contains(r#"made by model "toy""#)
            && err.contains(r#"model "elmo" is required"#),
        "{err}"
    );
}
