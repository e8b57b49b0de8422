//! A small valid cache damaged by fuzz-chosen edits (overwrite, truncate,
//! insert, flip, replace or delete any of its files, set integers inside the
//! archives, set numbers in the manifest), optionally with every checksum
//! recomputed afterwards so that the damage reaches rkyv's bytecheck and the
//! reader's invariant checks. Opening it must give a typed error or a cache
//! whose every accessor works: never a panic, never undefined behaviour.

#![no_main]

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use socialctx::{BuildOptions, NoProgress, build};
use socialctx::{Cache, LazyCache, Manifest, NumView, ThreadSource};
use xxhash_rust::xxh3::xxh3_64;

const FOOTER_LEN: usize = 32;
const THREADS_DIR: &str = "../tests/fixtures/real/pheme-rnr/corpus/charliehebdo";

/// File name -> bytes.
type Files = BTreeMap<String, Vec<u8>>;

/// The base cache: three small threads (a shard and a text file each), one
/// bad file in the report. Built once per process from the real samples.
fn base() -> &'static Files {
    static BASE: OnceLock<Files> = OnceLock::new();
    BASE.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(THREADS_DIR);
        let tmp = scratch("base");
        let corpus = tmp.join("corpus");
        let mut n = 0;
        for label in ["non-rumours", "rumours"] {
            let mut threads: Vec<_> = fs::read_dir(root.join(label))
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect();
            threads.sort();
            for t in threads.iter().take(if label == "rumours" { 1 } else { 2 }) {
                let dst = corpus
                    .join("charliehebdo")
                    .join(label)
                    .join(t.file_name().unwrap());
                for sub in ["source-tweets", "source-tweet", "reactions"] {
                    if !t.join(sub).is_dir() {
                        continue;
                    }
                    fs::create_dir_all(dst.join(sub)).unwrap();
                    let mut files: Vec<_> = fs::read_dir(t.join(sub))
                        .unwrap()
                        .map(|e| e.unwrap().path())
                        .collect();
                    files.sort();
                    for f in files.iter().take(2) {
                        fs::copy(f, dst.join(sub).join(f.file_name().unwrap())).unwrap();
                    }
                }
                if n == 0 {
                    fs::write(dst.join("reactions").join("1.json"), b"{\"id_str\": ").unwrap();
                }
                n += 1;
            }
        }
        let out = tmp.join("cache");
        let opts = BuildOptions::default().threads(1).shard_bytes(1);
        build(&corpus, &out, &opts, &NoProgress).expect("base cache builds");
        let files = read_files(&out);
        assert!(files.len() >= 8, "three shards: {:?}", files.keys());
        let _ = fs::remove_dir_all(&tmp);
        files
    })
}

fn read_files(dir: &Path) -> Files {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                fs::read(e.path()).unwrap(),
            )
        })
        .collect()
}

/// A fresh directory of this process under the temporary directory. The
/// first call also removes those of processes that are gone.
fn scratch(what: &str) -> PathBuf {
    static SWEPT: OnceLock<()> = OnceLock::new();
    let tmp = std::env::temp_dir();
    SWEPT.get_or_init(|| {
        for e in fs::read_dir(&tmp).into_iter().flatten().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let pid = name
                .strip_prefix("socialctx-fuzz-")
                .and_then(|r| r.split('-').next());
            if let Some(pid) = pid
                && !Path::new("/proc").join(pid).exists()
            {
                let _ = fs::remove_dir_all(e.path());
            }
        }
    });
    let d = tmp.join(format!("socialctx-fuzz-{}-{what}", std::process::id()));
    let _ = fs::remove_dir_all(&d);
    fs::create_dir_all(&d).unwrap();
    d
}

#[derive(Arbitrary, Debug)]
enum Op {
    Overwrite {
        file: u8,
        at: u32,
        bytes: Vec<u8>,
    },
    Truncate {
        file: u8,
        at: u32,
    },
    Insert {
        file: u8,
        at: u32,
        bytes: Vec<u8>,
    },
    Flip {
        file: u8,
        at: u32,
        mask: u8,
    },
    Replace {
        file: u8,
        bytes: Vec<u8>,
    },
    Delete {
        file: u8,
    },
    /// A little-endian integer inside a file (rkyv lengths and relative
    /// pointers are 32-bit; ids and times 64-bit).
    SetU32 {
        file: u8,
        at: u32,
        value: u32,
    },
    SetU64 {
        file: u8,
        at: u32,
        value: u64,
    },
    /// A number in the manifest: `field` picks a top-level count or a shard's.
    SetManifest {
        shard: u8,
        field: u8,
        value: u64,
    },
    /// Keeps the first `reaction` and `thread` extra column names of the
    /// manifest, or adds names up to that many.
    SetColumns {
        reaction: u8,
        thread: u8,
    },
}

#[derive(Arbitrary, Debug)]
struct Input {
    ops: Vec<Op>,
    /// Recompute footers and manifest sizes and checksums after the edits.
    fix_checksums: bool,
}

fn pick(files: &Files, i: u8) -> Option<String> {
    let n = files.len();
    (n > 0).then(|| files.keys().nth(usize::from(i) % n).unwrap().clone())
}

fn at(len: usize, at: u32) -> usize {
    at as usize % (len + 1)
}

fn overwrite(f: &mut [u8], pos: usize, bytes: &[u8]) {
    let end = (pos + bytes.len()).min(f.len());
    f[pos..end].copy_from_slice(&bytes[..end - pos]);
}

const TOP: [&str; 6] = [
    "threads",
    "reactions",
    "replies",
    "retweets",
    "skipped",
    "format_version",
];
const SHARD: [&str; 5] = [
    "bytes",
    "threads",
    "reactions",
    "first_source_id",
    "last_source_id",
];

/// Sets `v[key]` if `v` is an object (indexing a non-object would panic).
fn set(v: &mut Value, key: &str, value: impl Into<Value>) {
    if let Some(o) = v.as_object_mut() {
        o.insert(key.to_string(), value.into());
    }
}

fn apply(files: &mut Files, op: &Op) {
    match op {
        Op::SetManifest {
            shard,
            field,
            value,
        } => {
            let Some(m) = files.get_mut("manifest.json") else {
                return;
            };
            let Ok(mut v) = serde_json::from_slice::<Value>(m) else {
                return;
            };
            let field = usize::from(*field);
            if field < TOP.len() {
                set(&mut v, TOP[field], *value);
            } else if let Some(shards) = v.get_mut("shards").and_then(Value::as_array_mut)
                && !shards.is_empty()
            {
                let n = shards.len();
                let s = &mut shards[usize::from(*shard) % n];
                let f = (field - TOP.len()) % (SHARD.len() + 1);
                if f == SHARD.len() {
                    if let Some(text) = s.get_mut("text") {
                        set(text, "bytes", *value);
                    }
                } else {
                    set(s, SHARD[f], *value);
                }
            }
            *m = serde_json::to_vec_pretty(&v).unwrap();
        }
        Op::SetColumns { reaction, thread } => {
            let Some(m) = files.get_mut("manifest.json") else {
                return;
            };
            let Ok(mut v) = serde_json::from_slice::<Value>(m) else {
                return;
            };
            for (key, n) in [("reaction_columns", reaction), ("thread_columns", thread)] {
                if let Some(cols) = v.get_mut(key).and_then(Value::as_array_mut) {
                    let n = usize::from(*n % 16);
                    cols.truncate(n);
                    while cols.len() < n {
                        cols.push(format!("extra{}", cols.len()).into());
                    }
                }
            }
            *m = serde_json::to_vec_pretty(&v).unwrap();
        }
        Op::Overwrite { file, at: a, bytes } | Op::Insert { file, at: a, bytes } => {
            let Some(name) = pick(files, *file) else {
                return;
            };
            let f = files.get_mut(&name).unwrap();
            let pos = at(f.len(), *a);
            if matches!(op, Op::Insert { .. }) {
                f.splice(pos..pos, bytes.iter().copied());
            } else {
                overwrite(f, pos, bytes);
            }
        }
        Op::Truncate { file, at: a } => {
            let Some(name) = pick(files, *file) else {
                return;
            };
            let f = files.get_mut(&name).unwrap();
            f.truncate(at(f.len(), *a));
        }
        Op::Flip { file, at: a, mask } => {
            let Some(name) = pick(files, *file) else {
                return;
            };
            let f = files.get_mut(&name).unwrap();
            if !f.is_empty() {
                let pos = at(f.len() - 1, *a);
                f[pos] ^= mask;
            }
        }
        Op::Replace { file, bytes } => {
            let Some(name) = pick(files, *file) else {
                return;
            };
            files.insert(name, bytes.clone());
        }
        Op::Delete { file } => {
            if let Some(name) = pick(files, *file) {
                files.remove(&name);
            }
        }
        Op::SetU32 { file, at: a, value } => {
            let Some(name) = pick(files, *file) else {
                return;
            };
            let f = files.get_mut(&name).unwrap();
            let pos = at(f.len(), *a);
            overwrite(f, pos, &value.to_le_bytes());
        }
        Op::SetU64 { file, at: a, value } => {
            let Some(name) = pick(files, *file) else {
                return;
            };
            let f = files.get_mut(&name).unwrap();
            let pos = at(f.len(), *a);
            overwrite(f, pos, &value.to_le_bytes());
        }
    }
}

/// Makes every footer, size and checksum agree with the (damaged) contents.
fn fix_checksums(files: &mut Files) {
    let Some(Ok(mut m)) = files
        .get("manifest.json")
        .map(|b| serde_json::from_slice::<Value>(b))
    else {
        return;
    };
    let mut fix_file = |info: &mut Value, footer: bool| {
        let Some(name) = info.get("file").and_then(Value::as_str) else {
            return;
        };
        let Some(f) = files.get_mut(name) else { return };
        if footer && f.len() >= FOOTER_LEN {
            let n = f.len() - FOOTER_LEN;
            let sum = xxh3_64(&f[..n]);
            f[n + 16..n + 24].copy_from_slice(&(n as u64).to_le_bytes());
            f[n + 24..n + 32].copy_from_slice(&sum.to_le_bytes());
        }
        let n = if footer {
            f.len().saturating_sub(FOOTER_LEN)
        } else {
            f.len()
        };
        set(info, "bytes", f.len() as u64);
        set(info, "xxh3", format!("{:016x}", xxh3_64(&f[..n])));
    };
    if let Some(shards) = m.get_mut("shards").and_then(Value::as_array_mut) {
        for s in shards {
            fix_file(s, true);
            if let Some(text) = s.get_mut("text") {
                fix_file(text, true);
            }
        }
    }
    if let Some(report) = m.get_mut("report") {
        fix_file(report, false);
    }
    files.insert(
        "manifest.json".into(),
        serde_json::to_vec_pretty(&m).unwrap(),
    );
}

/// Writes `files` as the only files of `dir`.
fn write_dir(dir: &Path, files: &Files) {
    for e in fs::read_dir(dir).unwrap() {
        fs::remove_file(e.unwrap().path()).unwrap();
    }
    for (name, bytes) in files {
        fs::write(dir.join(name), bytes).unwrap();
    }
}

/// Every accessor of an opened cache.
fn read_all(cache: &Cache) {
    let mut out = Vec::new();
    for retweets in [true, false] {
        let opts = socialctx::dump::DumpOptions::default().retweets(retweets);
        socialctx::dump::write_cache(&mut out, cache, &opts).unwrap();
    }
    let _ = (
        cache.manifest(),
        cache.report(),
        cache.dir(),
        cache.is_empty(),
    );
    for name in cache
        .manifest()
        .reaction_columns
        .iter()
        .chain(&cache.manifest().thread_columns)
    {
        let _ = (cache.reaction_column(name), cache.thread_column(name));
    }
    let mut n = 0;
    for t in cache.iter() {
        let id = t.source_id();
        assert_eq!(cache.get(id).map(|x| x.source_id()), Some(id));
        assert_eq!(cache.position(id), Some(n));
        assert_eq!(t.features().len(), t.reaction_count());
        assert_eq!(t.reaction_records().len(), t.reaction_count());
        let _ = (t.event(), t.label(), t.source_user_id(), t.source_text());
        let _ = (t.label_code(), t.source_created_at());
        read_columns(&t.numbers(), cache.manifest());
        for (i, r) in t.reactions().enumerate() {
            let same = t.reaction(i).unwrap();
            assert_eq!(same.id(), r.id());
            let _ = (
                r.kind(),
                r.created_at(),
                r.text(),
                r.user_description(),
                r.features(),
            );
        }
        assert!(t.reaction(t.reaction_count()).is_none());
        n += 1;
    }
    assert_eq!(n, cache.len());
    assert!(cache.thread(n).is_none());
    let _ = cache.get(0);
    let _ = cache.get(u64::MAX);
}

/// The extra columns named in the manifest, and a few beyond.
fn read_columns(num: &NumView<'_>, m: &Manifest) {
    for c in 0..m.reaction_columns.len() + 2 {
        let col = num.column(c);
        assert!(col.is_empty() || col.len() == num.reaction_count());
    }
    for c in 0..m.thread_columns.len() + 2 {
        let _ = num.thread_value(c);
    }
}

/// Every accessor of a lazily opened cache (errors allowed anywhere).
fn read_lazy(cache: &LazyCache) {
    let len = cache.len();
    let _ = (cache.manifest(), cache.is_empty());
    let idx = (0..len.min(16) + 2).chain(len.saturating_sub(2)..len.saturating_add(2));
    for i in idx {
        if let Ok(Some(num)) = cache.numbers(i) {
            let _ = (num.source_id(), num.label_code(), num.source_created_at());
            let _ = num.features().len();
            read_columns(&num, cache.manifest());
            for r in num.reaction_records() {
                let _ = (r.id, r.kind, r.created_at);
            }
            let _ = cache.position(num.source_id());
            let _ = cache.get(num.source_id());
        }
        if let Ok(Some(t)) = cache.thread(i) {
            let _ = (t.event(), t.label(), t.source_text(), t.features().len());
            for r in t.reactions() {
                let _ = (
                    r.id(),
                    r.kind(),
                    r.text(),
                    r.user_description(),
                    r.features()[27],
                );
            }
        }
    }
    let _ = cache.get(0);
    let _ = cache.position(u64::MAX);
}

fuzz_target!(|input: Input| {
    let mut files = base().clone();
    for op in input.ops.iter().take(16) {
        apply(&mut files, op);
    }
    if input.fix_checksums {
        fix_checksums(&mut files);
    }
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    let dir = DIR.get_or_init(|| scratch("cache"));
    write_dir(dir, &files);
    if let Ok(cache) = Cache::open(dir) {
        read_all(&cache);
    }
    if let Ok(lazy) = LazyCache::open(dir) {
        read_lazy(&lazy);
    }
});
