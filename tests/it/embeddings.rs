//! Embedding stores written and read by the crate, and batches that index
//! them: stores written by the StoreWriter (from scratch, nightly as new
//! segments, compacted, interrupted and resumed), a version-2 store written
//! byte by byte, opened, gathered through a Loader's per-slot reactions,
//! and damaged.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::common::*;
use socialctx::ThreadSource;
use socialctx::internals::{Dtype, npy_header};
use socialctx::{
    Batch, Cache, EmbeddingError, EmbeddingStore, Kinds, Loader, Pad, Selection, StoreMeta,
    StoreWriter, TextField, UniqueTexts,
};

pub(crate) const DIM: usize = 3;

/// The row of an input, from its content key: distinct, exact in f32, and
/// the same in every cache (a deterministic model).
pub(crate) fn row_of_key(k: u128) -> [f32; DIM] {
    let a = (k & 0xffff) as f32;
    [a, 0.5 + ((k >> 16) & 0xffff) as f32, -a]
}

fn xxh3(bytes: &[u8]) -> String {
    format!("{:016x}", xxhash_rust::xxh3::xxh3_64(bytes))
}

fn npy(dtype: Dtype, shape: &[usize], data: &[u8]) -> Vec<u8> {
    let mut out = npy_header(dtype, shape);
    out.extend_from_slice(data);
    out
}

/// Embeds store `name` of `cache` with the StoreWriter, stopping after
/// `stop` batches (None: to the end); returns (batches written by this
/// call, resumed, the metadata when finished).
pub(crate) fn embed(
    cache: &Cache,
    name: &str,
    batch: usize,
    compact: bool,
    stop: Option<usize>,
) -> (usize, usize, Option<StoreMeta>) {
    let mut w = StoreWriter::new(name, TextField::Reply)
        .batch_size(batch)
        .model_id(Some("toy"))
        .compact(compact)
        .begin(cache)
        .unwrap();
    let (from, resumed) = (w.done(), w.resumed());
    let mut calls = 0;
    for b in from..w.batches() {
        if stop == Some(calls) {
            return (calls, resumed, None);
        }
        write_toy_batch(&mut w, b);
        calls += 1;
    }
    (calls, resumed, Some(w.finish().unwrap()))
}

/// Writes batch `b` of `w` with the toy model's rows ([`row_of_key`]).
pub(crate) fn write_toy_batch(w: &mut StoreWriter, b: usize) {
    let unique = w.unique().unwrap();
    let rows: Vec<f32> = w
        .inputs(b)
        .iter()
        .flat_map(|&u| row_of_key(unique.key(u as usize)))
        .collect();
    w.write_f32(b, &rows, DIM).unwrap();
}

/// Writes store `name` of `cache`'s reply texts; returns its directory.
fn write_store(cache: &Cache, name: &str) -> PathBuf {
    embed(cache, name, 64, false, None);
    cache.derived_dir().join("embeddings").join(name)
}

pub(crate) fn store_bytes(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .map(|e| {
            (
                e.file_name().into_string().unwrap(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect()
}

/// Every reaction reads the row of its own input.
pub(crate) fn assert_rows_follow_inputs(cache: &Cache, store: &EmbeddingStore) {
    let unique = UniqueTexts::collect(cache, TextField::Reply, None).unwrap();
    let rows: Vec<i32> = store.index().iter().map(|&r| r as i32).collect();
    let mut got = vec![0f32; rows.len() * DIM];
    store.gather(&rows, &mut got);
    for (r, &u) in unique.index().iter().enumerate() {
        let want = if u == EmbeddingStore::NO_ROW {
            [0.0; DIM]
        } else {
            row_of_key(unique.key(u as usize))
        };
        assert_eq!(&got[r * DIM..(r + 1) * DIM], &want[..], "reaction {r}");
    }
}

fn unique_key(cache: &Cache, i: usize) -> u128 {
    let unique = UniqueTexts::collect(cache, TextField::Reply, None).unwrap();
    xxhash_rust::xxh3::xxh3_128(unique.tokens(cache, i).unwrap().joined().as_bytes())
}

fn golden(tmp: &Path) -> Cache {
    let out = tmp.join("cache");
    build_cache(&repo("tests/fixtures/golden/corpus"), &out, 2);
    Cache::open(&out).unwrap()
}

/// The golden corpus, built and embedded as store "r", then `edits` replies
/// rewritten and the cache rebuilt: (the corpus, the rebuilt cache).
fn changed_night(tmp: &Path, edits: usize, batch: usize) -> (PathBuf, Cache) {
    let corpus = tmp.join("corpus");
    copy_dir(&repo("tests/fixtures/golden/corpus"), &corpus);
    let out = tmp.join("cache");
    build_cache(&corpus, &out, 2);
    embed(&Cache::open(&out).unwrap(), "r", batch, false, None);
    rewrite_replies(&corpus, 0..edits);
    build_cache(&corpus, &out, 2);
    (corpus, Cache::open(&out).unwrap())
}

pub(crate) fn rewrite_replies(corpus: &Path, which: std::ops::Range<usize>) {
    let mut replies: Vec<PathBuf> = walk(corpus)
        .into_iter()
        .filter(|p| {
            p.parent().is_some_and(|d| d.ends_with("reactions"))
                && p.extension().is_some_and(|e| e == "json")
        })
        .collect();
    replies.sort();
    // Only replies that parse (the corpus has deliberately broken ones).
    let parsed: Vec<(PathBuf, serde_json::Value)> = replies
        .into_iter()
        .filter_map(|p| {
            let v = serde_json::from_slice::<serde_json::Value>(&std::fs::read(&p).ok()?).ok()?;
            v.get("text").is_some().then_some((p, v))
        })
        .collect();
    for (n, (p, v)) in parsed[which.clone()].iter().enumerate() {
        let mut v = v.clone();
        let text = format!("rewritten reply number {} for night {}", n, which.start);
        v["text"] = text.clone().into();
        v["full_text"] = text.into();
        std::fs::write(p, v.to_string()).unwrap();
    }
}

pub(crate) fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

pub(crate) fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let p = e.unwrap().path();
        let dest = to.join(p.file_name().unwrap());
        if p.is_dir() {
            copy_dir(&p, &dest);
        } else if p.file_name().is_some_and(|n| n != "derived") {
            std::fs::copy(&p, &dest).unwrap();
        }
    }
}

/// Store "r" as a from-scratch embed of a copy of `cache` writes it.
pub(crate) fn scratch_bytes(tmp: &Path, cache: &Cache, batch: usize) -> BTreeMap<String, Vec<u8>> {
    let fresh = tmp.join("fresh");
    let _ = std::fs::remove_dir_all(&fresh);
    std::fs::create_dir_all(&fresh).unwrap();
    for e in std::fs::read_dir(cache.dir()).unwrap() {
        let p = e.unwrap().path();
        if p.is_file() {
            std::fs::copy(&p, fresh.join(p.file_name().unwrap())).unwrap();
        }
    }
    let scratch = Cache::open(&fresh).unwrap();
    assert_eq!(scratch.content_id(), cache.content_id());
    embed(&scratch, "r", batch, false, None);
    store_bytes(&scratch.derived_dir().join("embeddings/r"))
}

#[test]
fn a_nightly_embed_links_the_old_segments_and_writes_only_the_new_rows() {
    let tmp = tempfile::tempdir().unwrap();
    let (_, cache) = changed_night(tmp.path(), 3, 4);
    let dir = cache.derived_dir().join("embeddings/r");
    let old_seg = std::fs::metadata(dir.join("seg-00000.npy")).unwrap();
    assert!(
        EmbeddingStore::open(&cache, "r")
            .unwrap_err()
            .to_string()
            .contains("rebuilt")
    );
    let unique = UniqueTexts::collect(&cache, TextField::Reply, None).unwrap();
    let (calls, _, meta) = embed(&cache, "r", 4, false, None);
    let meta = meta.unwrap();
    assert_eq!(calls, 1, "3 new inputs, one batch");
    assert_eq!(meta.segments.len(), 2);
    assert_eq!(meta.segments[1].rows, 3);
    assert_eq!(meta.unique, unique.len());
    assert_eq!(meta.rows, meta.segments[0].rows + 3);
    // The old segment is the same file, linked, not copied.
    use std::os::unix::fs::MetadataExt;
    let now = std::fs::metadata(dir.join("seg-00000.npy")).unwrap();
    assert_eq!(now.ino(), old_seg.ino());
    let store = EmbeddingStore::open(&cache, "r").unwrap();
    assert_eq!(store.segments().count(), 2);
    assert_rows_follow_inputs(&cache, &store);
    // Each segment memory-maps as an .npy of its rows.
    for (path, _, bytes) in store.segments() {
        let h =
            socialctx::internals::store_format::parse_npy(&std::fs::read(path).unwrap()).unwrap();
        assert_eq!(h.shape[1], DIM);
        assert_eq!(bytes.len(), h.shape[0] * DIM * 4);
    }
    // Compaction: byte for byte a from-scratch embed.
    let (calls, _, meta) = embed(&cache, "r", 4, true, None);
    assert_eq!((calls, meta.unwrap().segments.len()), (0, 1));
    assert_eq!(store_bytes(&dir), scratch_bytes(tmp.path(), &cache, 4));
    let mut names: Vec<String> = std::fs::read_dir(cache.derived_dir().join("embeddings"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [".r.lock", ".r.verified", "r"],
        "the store, its lock and its verified record only"
    );
}

#[test]
fn dead_rows_past_a_quarter_compact_the_store() {
    let tmp = tempfile::tempdir().unwrap();
    let (corpus, cache) = changed_night(tmp.path(), 2, 8);
    embed(&cache, "r", 8, false, None);
    let unique = UniqueTexts::collect(&cache, TextField::Reply, None)
        .unwrap()
        .len();
    // Nights that each rewrite a few replies until the dead rows pass 1/4.
    let mut night = 1;
    loop {
        rewrite_replies(&corpus, night * 2..night * 2 + 2);
        build_cache(&corpus, cache.dir(), 2);
        let cache = Cache::open(cache.dir()).unwrap();
        let (_, _, meta) = embed(&cache, "r", 8, false, None);
        let meta = meta.unwrap();
        let store = EmbeddingStore::open(&cache, "r").unwrap();
        assert_rows_follow_inputs(&cache, &store);
        if meta.segments.len() == 1 {
            assert_eq!(meta.rows, meta.unique);
            assert_eq!(
                store_bytes(store.dir()),
                scratch_bytes(tmp.path(), &cache, 8)
            );
            break;
        }
        assert!(4 * (meta.rows - meta.unique) <= meta.rows, "{meta:?}");
        night += 1;
        assert!(night * 2 < unique, "never compacted");
    }
}

#[test]
fn an_interrupted_embed_resumes_to_the_same_bytes_at_every_batch() {
    for compact in [false, true] {
        let tmp = tempfile::tempdir().unwrap();
        let (_, cache) = changed_night(tmp.path(), 5, 1);
        let want = {
            let copy = tmp.path().join("want");
            copy_dir(cache.dir(), &copy);
            let dst = copy.join("derived/embeddings");
            std::fs::create_dir_all(&dst).unwrap();
            copy_dir(&cache.derived_dir().join("embeddings/r"), &dst.join("r"));
            let c = Cache::open(&copy).unwrap();
            embed(&c, "r", 1, compact, None);
            store_bytes(&c.derived_dir().join("embeddings/r"))
        };
        for stop in 0..5 {
            let t = tempfile::tempdir().unwrap();
            let copy = t.path().join("cache");
            copy_dir(cache.dir(), &copy);
            let dst = copy.join("derived/embeddings");
            std::fs::create_dir_all(&dst).unwrap();
            copy_dir(&cache.derived_dir().join("embeddings/r"), &dst.join("r"));
            let c = Cache::open(&copy).unwrap();
            let (calls, _, meta) = embed(&c, "r", 1, compact, Some(stop));
            assert!(meta.is_none() && calls == stop);
            // The previous store is untouched meanwhile.
            assert!(EmbeddingStore::open_any_content(&c, "r").is_ok());
            let (calls, resumed, _) = embed(&c, "r", 1, compact, None);
            assert_eq!((resumed, calls), (stop, 5 - stop), "compact {compact}");
            assert_eq!(store_bytes(&c.derived_dir().join("embeddings/r")), want);
        }
    }
}

#[test]
fn a_version_2_store_reads_as_one_segment() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = golden(tmp.path());
    let unique = UniqueTexts::collect(&cache, TextField::Reply, None).unwrap();
    let dir = cache.derived_dir().join("embeddings/old");
    std::fs::create_dir_all(&dir).unwrap();
    let rows: Vec<u8> = (0..unique.len())
        .flat_map(|u| row_of_key(unique.key(u)))
        .flat_map(f32::to_le_bytes)
        .collect();
    let index: Vec<u8> = unique
        .index()
        .iter()
        .flat_map(|i| i.to_le_bytes())
        .collect();
    let keys: Vec<u8> = (0..unique.len())
        .flat_map(|i| unique.key(i).to_le_bytes())
        .collect();
    let mut files = serde_json::Map::new();
    for (f, b) in [
        ("vectors.npy", npy(Dtype::F32, &[unique.len(), DIM], &rows)),
        (
            "index.npy",
            npy(Dtype::U32, &[unique.index().len()], &index),
        ),
        ("keys.npy", npy(Dtype::U64, &[unique.len(), 2], &keys)),
    ] {
        std::fs::write(dir.join(f), &b).unwrap();
        files.insert(
            f.into(),
            serde_json::json!({"bytes": b.len(), "xxh3": xxh3(&b)}),
        );
    }
    let meta = serde_json::json!({
        "format": "socialctx-embeddings", "version": 2, "name": "old", "field": "reply",
        "dtype": "float32", "dim": DIM, "unique": unique.len(),
        "reactions": unique.index().len(), "cache_content_id": cache.content_id(),
        "model_id": "toy", "batch_size": 64, "calls": 1, "files": files,
    });
    std::fs::write(dir.join("meta.json"), meta.to_string()).unwrap();
    let store = EmbeddingStore::open(&cache, "old").unwrap();
    assert_eq!((store.rows(), store.segments().count()), (unique.len(), 1));
    assert_rows_follow_inputs(&cache, &store);
    // And a nightly embed reuses its rows (the old file linked as segment 0).
    let (calls, _, meta) = embed(&cache, "old", 64, false, None);
    assert_eq!((calls, meta.unwrap().version), (0, 3));
    assert_rows_follow_inputs(&cache, &EmbeddingStore::open(&cache, "old").unwrap());
    // A later version is refused with what to do.
    let p = dir.join("meta.json");
    let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
    v["version"] = 9.into();
    std::fs::write(&p, v.to_string()).unwrap();
    let err = EmbeddingStore::open(&cache, "old").unwrap_err().to_string();
    assert!(err.contains("embed it again"), "{err}");
}

#[test]
fn rows_that_do_not_fit_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = golden(tmp.path());
    let mut w = StoreWriter::new("bad", TextField::Reply)
        .batch_size(4)
        .begin(&cache)
        .unwrap();
    let n = w.inputs(0).len();
    let err = |r: Result<(), EmbeddingError>| r.unwrap_err().to_string();
    assert!(err(w.write_f32(1, &vec![0.0; n * DIM], DIM)).contains("next to write is batch 0"));
    assert!(err(w.write_f32(0, &vec![0.0; n * DIM + 1], DIM)).contains("values for"));
    assert!(err(w.write_f32(0, &vec![f32::NAN; n * DIM], DIM)).contains("not finite"));
    assert!(err(w.write_f16(0, &vec![0; n * DIM], DIM)).contains("float32"));
    w.write_f32(0, &vec![1.0; n * DIM], DIM).unwrap();
    assert!(err(w.write_f32(1, &vec![1.0; w.inputs(1).len() * 2], 2)).contains("dimension"));
    // A second writer of the same store is refused while this one holds it.
    let second = StoreWriter::new("bad", TextField::Reply).begin(&cache);
    assert!(matches!(second, Err(EmbeddingError::Locked { .. })));
    // Unfinished: nothing published.
    assert!(err(w.finish().map(|_| ())).contains("batches written"));
    assert!(EmbeddingStore::open(&cache, "bad").is_err());
}

#[test]
fn batches_index_the_rows_of_their_reactions() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = golden(tmp.path());
    write_store(&cache, "toy");
    let store = EmbeddingStore::open(&cache, "toy").unwrap();
    assert_eq!(store.dim(), DIM);
    let keys: Vec<u128> = store.keys().collect();
    assert_eq!(keys.len(), store.unique());
    for (i, k) in keys.iter().enumerate() {
        assert_eq!(*k, unique_key(&cache, i));
    }
    let unique = UniqueTexts::collect(&cache, TextField::Reply, None).unwrap();
    let row = |u: usize| row_of_key(unique.key(u));
    let offsets = cache.reaction_offsets().unwrap();
    for pad in [Pad::Max, Pad::Longest { multiple: 4 }] {
        let sel = Selection {
            kinds: Kinds::Both,
            max_cxt: 30,
            ..Selection::default()
        };
        let loader = Loader::new(&cache, sel).pad(pad);
        let (bs, t) = (4, 30);
        let mut batch = Batch::new(bs, t);
        let mut reactions = vec![0u32; bs * t];
        let positions: Vec<usize> = (0..cache.len()).step_by(3).take(bs).collect();
        let width = {
            let mut out = batch.as_mut().with_reactions(&mut reactions).unwrap();
            loader.fill_into(&positions, None, &mut out).unwrap();
            out.width()
        };
        if pad == Pad::Max {
            assert_eq!(width, t);
        } else {
            assert_eq!(width % 4, 0);
        }
        let mut rows = vec![0i32; bs * width];
        store.rows_of_slots(
            &offsets,
            &positions,
            &reactions[..bs * width],
            width,
            &mut rows,
        );
        let mut dense = vec![f32::NAN; bs * width * DIM];
        store.gather(&rows, &mut dense);
        for (b, &pos) in positions.iter().enumerate() {
            let picked: Vec<usize> = sel.indices(&cache.numbers(pos).unwrap()).collect();
            for s in 0..width {
                let slot = b * width + s;
                let want = picked.get(s).and_then(|&i| {
                    let u = unique.index()[offsets[pos] as usize + i];
                    (u != EmbeddingStore::NO_ROW).then_some(u as usize)
                });
                assert_eq!(rows[slot], want.map_or(-1, |u| u as i32), "slot {slot}");
                let got = &dense[slot * DIM..(slot + 1) * DIM];
                assert_eq!(got, &want.map_or([0.0; DIM], row)[..], "row of slot {slot}");
            }
        }
    }
}

#[test]
fn longest_padding_lays_the_batch_out_contiguously() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = golden(tmp.path());
    let sel = Selection {
        kinds: Kinds::Both,
        ..Selection::default()
    };
    let max = Loader::new(&cache, sel);
    let longest = Loader::new(&cache, sel).pad(Pad::Longest { multiple: 8 });
    let positions: Vec<usize> = (0..cache.len().min(5)).collect();
    let (mut a, mut b) = (Batch::new(8, 200), Batch::new(8, 200));
    max.fill(&positions, &mut a).unwrap();
    longest.fill(&positions, &mut b).unwrap();
    let longest_len = *a.lengths.iter().max().unwrap() as usize;
    assert_eq!(b.width, longest_len.max(1).next_multiple_of(8).min(200));
    assert_eq!(
        longest.lengths(&positions).unwrap().iter().max(),
        Some(&longest_len)
    );
    for t in 0..positions.len() {
        let n = a.lengths[t] as usize;
        assert_eq!(a.lengths[t], b.lengths[t]);
        assert_eq!(&a.thread_rows(t)[..n * 28], &b.thread_rows(t)[..n * 28]);
        assert!(b.thread_rows(t)[n * 28..].iter().all(|&x| x == 0.0));
        assert_eq!(&b.thread_mask(t)[..n], &vec![1u8; n][..]);
    }
    // The unused tail of the batch's slots is zero too.
    assert!(
        b.features[positions.len() * b.width * 28..8 * b.width * 28]
            .iter()
            .all(|&x| x == 0.0)
    );
    // A caller's buffers of the wrong size for the reactions record are refused.
    let mut wrong = vec![0u32; 3];
    assert!(b.as_mut().with_reactions(&mut wrong).is_err());
}

/// A way to damage a store's directory.
type Damage = Box<dyn Fn(&Path)>;

fn damage_then_open(tmp: &Path, damage: impl Fn(&Path)) -> EmbeddingError {
    let cache = golden(tmp);
    let dir = write_store(&cache, "toy");
    damage(&dir);
    EmbeddingStore::open(&cache, "toy").unwrap_err()
}

/// Rewrites meta.json's sizes and checksums to match the files, so that
/// only the deeper checks can catch a damage.
fn refresh_meta(dir: &Path) {
    let mut meta: StoreMeta =
        serde_json::from_slice(&std::fs::read(dir.join("meta.json")).unwrap()).unwrap();
    for f in ["index.npy", "keys.npy"] {
        let b = std::fs::read(dir.join(f)).unwrap();
        let e = meta.files.get_mut(f).unwrap();
        e.bytes = b.len() as u64;
        e.xxh3 = xxh3(&b);
    }
    for s in &mut meta.segments {
        let b = std::fs::read(dir.join(&s.file)).unwrap();
        s.bytes = b.len() as u64;
        s.xxh3 = xxh3(&b);
    }
    std::fs::write(dir.join("meta.json"), serde_json::to_vec(&meta).unwrap()).unwrap();
}

#[test]
fn damaged_stores_are_refused_with_the_file_and_the_reason() {
    let cases: Vec<(&str, Damage)> = vec![
        (
            "checksum",
            Box::new(|d| {
                let mut b = std::fs::read(d.join("seg-00000.npy")).unwrap();
                *b.last_mut().unwrap() ^= 1;
                std::fs::write(d.join("seg-00000.npy"), b).unwrap();
            }),
        ),
        (
            "non-finite",
            Box::new(|d| {
                let mut b = std::fs::read(d.join("seg-00000.npy")).unwrap();
                let n = b.len();
                b[n - 4..].copy_from_slice(&f32::NAN.to_le_bytes());
                std::fs::write(d.join("seg-00000.npy"), b).unwrap();
                refresh_meta(d);
            }),
        ),
        (
            "Fortran",
            Box::new(|d| {
                let mut b = std::fs::read(d.join("seg-00000.npy")).unwrap();
                let at = b.windows(5).position(|w| w == b"False").unwrap();
                b[at..at + 5].copy_from_slice(b"True ");
                std::fs::write(d.join("seg-00000.npy"), b).unwrap();
                refresh_meta(d);
            }),
        ),
        (
            "points past",
            Box::new(|d| {
                let mut b = std::fs::read(d.join("index.npy")).unwrap();
                let n = b.len();
                b[n - 4..].copy_from_slice(&(u32::MAX - 1).to_le_bytes());
                std::fs::write(d.join("index.npy"), b).unwrap();
                refresh_meta(d);
            }),
        ),
        (
            "unreadable store metadata",
            Box::new(|d| std::fs::write(d.join("meta.json"), "{\"format\": 1").unwrap()),
        ),
        (
            "rebuilt since",
            Box::new(|d| {
                let p = d.join("meta.json");
                let t = std::fs::read_to_string(&p).unwrap();
                let mut v: serde_json::Value = serde_json::from_str(&t).unwrap();
                v["cache_content_id"] = "0123456789abcdef".into();
                std::fs::write(&p, v.to_string()).unwrap();
            }),
        ),
    ];
    for (want, damage) in cases {
        let tmp = tempfile::tempdir().unwrap();
        let err = damage_then_open(tmp.path(), damage).to_string();
        assert!(err.contains(want), "{want}: {err}");
        assert!(err.contains(&tmp.path().display().to_string()), "{err}");
    }
    let tmp = tempfile::tempdir().unwrap();
    let cache = golden(tmp.path());
    let err = EmbeddingStore::open(&cache, "absent")
        .unwrap_err()
        .to_string();
    assert!(err.contains("no embedding store"), "{err}");
}

#[test]
fn a_resume_keeps_only_the_batches_whose_rows_read_back_as_written() {
    // Rows are synced about once a second, so after a power loss the
    // progress file may claim rows the disk never got: here batch 2 of 4
    // written reads back as zeros, and the resumed embed redoes it and all
    // after it, to the bytes of an uninterrupted embed.
    let tmp = tempfile::tempdir().unwrap();
    let cache = golden(tmp.path());
    let want = {
        let t = tempfile::tempdir().unwrap();
        let copy = t.path().join("cache");
        copy_dir(cache.dir(), &copy);
        let c = Cache::open(&copy).unwrap();
        embed(&c, "s", 8, false, None);
        store_bytes(&c.derived_dir().join("embeddings/s"))
    };
    let (calls, _, _) = embed(&cache, "s", 8, false, Some(4));
    assert_eq!(calls, 4);
    let seg = cache
        .derived_dir()
        .join("embeddings/.s.partial/seg-00000.npy");
    let bytes = std::fs::read(&seg).unwrap();
    let at = npy_header(Dtype::F32, &[0, 0]).len().next_multiple_of(64);
    let h = socialctx::internals::store_format::parse_npy(&bytes).unwrap();
    assert_eq!(h.data_offset, at);
    let row = DIM * 4;
    let f = std::fs::OpenOptions::new().write(true).open(&seg).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&f, &vec![0u8; 8 * row], (at + 2 * 8 * row) as u64)
        .unwrap();
    let (calls, resumed, meta) = embed(&cache, "s", 8, false, None);
    assert_eq!(resumed, 2);
    let total = meta.unwrap().unique.div_ceil(8);
    assert_eq!(calls, total - 2);
    assert_eq!(store_bytes(&cache.derived_dir().join("embeddings/s")), want);
}

#[test]
fn a_resume_starts_over_when_the_index_or_keys_are_not_as_written() {
    // Index and keys are synced only at publication: after a power loss
    // they may be short or stale, and the progress file must not be
    // trusted with them.
    for file in ["index.npy", "keys.npy"] {
        let tmp = tempfile::tempdir().unwrap();
        let cache = golden(tmp.path());
        let (calls, _, _) = embed(&cache, "s", 8, false, Some(3));
        assert_eq!(calls, 3);
        let p = cache.derived_dir().join("embeddings/.s.partial").join(file);
        let mut b = std::fs::read(&p).unwrap();
        b.truncate(b.len() - 16);
        std::fs::write(&p, b).unwrap();
        let (_, resumed, meta) = embed(&cache, "s", 8, false, None);
        assert_eq!(resumed, 0, "{file}");
        let store = EmbeddingStore::open(&cache, "s").unwrap();
        assert_eq!(store.unique(), meta.unwrap().unique);
        assert_rows_follow_inputs(&cache, &store);
    }
}
