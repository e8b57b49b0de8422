//! Embedding stores read by the crate, and batches that index them: stores
//! written here byte by byte (as `socialctx.embed` writes them), opened,
//! gathered through a Loader's per-slot reactions, and damaged.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::common::*;
use socialctx::ThreadSource;
use socialctx::internals::{Dtype, npy_header};
use socialctx::{
    Batch, Cache, EmbeddingError, EmbeddingStore, Kinds, Loader, Pad, Selection, StoreMeta,
    TextField, UniqueTexts,
};

const DIM: usize = 3;

/// The row of input `u`: distinct and exact in f32.
fn row(u: usize) -> [f32; DIM] {
    [u as f32, 0.5 + u as f32, -(u as f32)]
}

fn xxh3(bytes: &[u8]) -> String {
    format!("{:016x}", xxhash_rust::xxh3::xxh3_64(bytes))
}

fn npy(dtype: Dtype, shape: &[usize], data: &[u8]) -> Vec<u8> {
    let mut out = npy_header(dtype, shape);
    out.extend_from_slice(data);
    out
}

/// Writes store `name` of `cache`'s reply texts; returns its directory.
fn write_store(cache: &Cache, name: &str) -> PathBuf {
    let unique = UniqueTexts::collect(cache, TextField::Reply, None).unwrap();
    let dir = cache.derived_dir().join("embeddings").join(name);
    std::fs::create_dir_all(&dir).unwrap();
    let rows: Vec<u8> = (0..unique.len())
        .flat_map(row)
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
    let vectors = npy(Dtype::F32, &[unique.len(), DIM], &rows);
    let index = npy(Dtype::U32, &[unique.index().len()], &index);
    let keys = npy(Dtype::U64, &[unique.len(), 2], &keys);
    std::fs::write(dir.join("vectors.npy"), &vectors).unwrap();
    std::fs::write(dir.join("index.npy"), &index).unwrap();
    std::fs::write(dir.join("keys.npy"), &keys).unwrap();
    let mut files = BTreeMap::new();
    for (f, b) in [
        ("vectors.npy", &vectors),
        ("index.npy", &index),
        ("keys.npy", &keys),
    ] {
        files.insert(
            f.to_string(),
            socialctx::internals::store_format::StoreFile {
                bytes: b.len() as u64,
                xxh3: xxh3(b),
            },
        );
    }
    let meta = StoreMeta {
        format: "socialctx-embeddings".into(),
        version: 2,
        name: name.into(),
        field: "reply".into(),
        dtype: "float32".into(),
        dim: DIM,
        unique: unique.len(),
        reactions: unique.index().len(),
        cache_content_id: cache.content_id(),
        model_id: Some("toy".into()),
        batch_size: 64,
        calls: 1,
        files,
    };
    std::fs::write(dir.join("meta.json"), serde_json::to_vec(&meta).unwrap()).unwrap();
    dir
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

#[test]
fn batches_index_the_rows_of_their_reactions() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = golden(tmp.path());
    write_store(&cache, "toy");
    let store = cache.embeddings("toy").unwrap();
    assert_eq!(store.dim(), DIM);
    let keys: Vec<u128> = store.keys().collect();
    assert_eq!(keys.len(), store.unique());
    for (i, k) in keys.iter().enumerate() {
        assert_eq!(*k, unique_key(&cache, i));
    }
    let unique = UniqueTexts::collect(&cache, TextField::Reply, None).unwrap();
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
    cache.embeddings("toy").unwrap_err()
}

/// Rewrites meta.json's sizes and checksums to match the files, so that
/// only the deeper checks can catch a damage.
fn refresh_meta(dir: &Path) {
    let mut meta: StoreMeta =
        serde_json::from_slice(&std::fs::read(dir.join("meta.json")).unwrap()).unwrap();
    for f in ["vectors.npy", "index.npy", "keys.npy"] {
        let b = std::fs::read(dir.join(f)).unwrap();
        let e = meta.files.get_mut(f).unwrap();
        e.bytes = b.len() as u64;
        e.xxh3 = xxh3(&b);
    }
    std::fs::write(dir.join("meta.json"), serde_json::to_vec(&meta).unwrap()).unwrap();
}

#[test]
fn damaged_stores_are_refused_with_the_file_and_the_reason() {
    let cases: Vec<(&str, Damage)> = vec![
        (
            "checksum",
            Box::new(|d| {
                let mut b = std::fs::read(d.join("vectors.npy")).unwrap();
                *b.last_mut().unwrap() ^= 1;
                std::fs::write(d.join("vectors.npy"), b).unwrap();
            }),
        ),
        (
            "non-finite",
            Box::new(|d| {
                let mut b = std::fs::read(d.join("vectors.npy")).unwrap();
                let n = b.len();
                b[n - 4..].copy_from_slice(&f32::NAN.to_le_bytes());
                std::fs::write(d.join("vectors.npy"), b).unwrap();
                refresh_meta(d);
            }),
        ),
        (
            "Fortran",
            Box::new(|d| {
                let mut b = std::fs::read(d.join("vectors.npy")).unwrap();
                let at = b.windows(5).position(|w| w == b"False").unwrap();
                b[at..at + 5].copy_from_slice(b"True ");
                std::fs::write(d.join("vectors.npy"), b).unwrap();
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
    let err = cache.embeddings("absent").unwrap_err().to_string();
    assert!(err.contains("no embedding store"), "{err}");
}
