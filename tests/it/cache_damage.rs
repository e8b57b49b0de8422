//! Reader errors on damaged caches: flipped, truncated or missing files,
//! edited manifests, crafted shards whose checksums all agree, and files
//! that are not regular files.

use std::fs;
use std::path::Path;

use crate::common::cache_files::*;
use crate::common::*;
use socialctx::ThreadSource;
use socialctx::internals::MANIFEST_FILE;
use socialctx::{Cache, OpenError};

fn expect_corrupt(dir: &Path, file: &str) {
    match Cache::open(dir) {
        Err(OpenError::Corrupt { path, reason }) => {
            assert!(
                path.ends_with(file),
                "error names {file}: got {} ({reason})",
                path.display()
            )
        }
        Err(OpenError::UnsupportedVersion { path, .. }) => assert!(path.ends_with(file)),
        Err(e) => panic!("expected a corrupt-cache error for {file}, got {e}"),
        Ok(_) => panic!("damaged {file} was accepted"),
    }
}

#[test]
fn flipped_bytes_anywhere_in_a_shard_are_detected() {
    let tmp = tempfile::tempdir().unwrap();
    let out = small_cache(tmp.path());
    for name in ["shard-00000.rkyv", "text-00000.rkyv"] {
        let shard = out.join(name);
        let pristine = fs::read(&shard).unwrap();
        let n = pristine.len();
        for pos in [
            0,
            1,
            n / 3,
            n / 2,
            n - 40,
            n - 33,
            n - 32,
            n - 20,
            n - 9,
            n - 1,
        ] {
            let mut bytes = pristine.clone();
            bytes[pos] ^= 0x5a;
            fs::write(&shard, &bytes).unwrap();
            expect_corrupt(&out, name);
        }
        fs::write(&shard, &pristine).unwrap();
        assert!(Cache::open(&out).is_ok(), "restored {name} opens again");
    }
}

#[test]
fn truncated_or_missing_shards_are_detected() {
    let tmp = tempfile::tempdir().unwrap();
    let out = small_cache(tmp.path());
    for name in ["text-00000.rkyv", "shard-00000.rkyv"] {
        let shard = out.join(name);
        let pristine = fs::read(&shard).unwrap();
        for len in [0, 10, 31, 32, pristine.len() / 2, pristine.len() - 1] {
            fs::write(&shard, &pristine[..len]).unwrap();
            expect_corrupt(&out, name);
        }
        fs::write(&shard, &pristine).unwrap();
    }
    let shard = out.join("shard-00000.rkyv");
    fs::remove_file(&shard).unwrap();
    match Cache::open(&out) {
        Err(OpenError::Io { path, .. }) => assert!(path.ends_with("shard-00000.rkyv")),
        other => panic!("expected an I/O error naming the shard, got {other:?}"),
    }
}

fn edit_manifest(out: &Path, f: impl FnOnce(&mut serde_json::Value)) {
    let path = out.join(MANIFEST_FILE);
    let mut v: serde_json::Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
    f(&mut v);
    write_manifest(&path, v);
}

#[test]
fn manifest_damage_and_mismatches_are_detected() {
    let tmp = tempfile::tempdir().unwrap();
    let out = small_cache(tmp.path());
    let pristine = fs::read(out.join(MANIFEST_FILE)).unwrap();
    let restore = || fs::write(out.join(MANIFEST_FILE), &pristine).unwrap();

    edit_manifest(&out, |v| v["format_version"] = 99.into());
    assert!(matches!(
        Cache::open(&out),
        Err(OpenError::UnsupportedVersion { found: 99, .. })
    ));
    restore();

    edit_manifest(&out, |v| v["threads"] = 1.into());
    expect_corrupt(&out, MANIFEST_FILE);
    restore();

    // A manifest that is self-consistent but disagrees with the shard, whose
    // checksum it still matches: the manifest's entry is what is wrong.
    edit_manifest(&out, |v| {
        let n = v["shards"][0]["threads"].as_u64().unwrap();
        v["shards"][0]["threads"] = 3.into();
        v["threads"] = (v["threads"].as_u64().unwrap() - n + 3).into();
    });
    expect_corrupt(&out, MANIFEST_FILE);
    // The same bytes with a space added: not what a writer writes.
    let mut spaced = pristine.clone();
    spaced.insert(1, b' ');
    fs::write(out.join(MANIFEST_FILE), &spaced).unwrap();
    expect_corrupt(&out, MANIFEST_FILE);
    restore();

    edit_manifest(&out, |v| v["shards"][0]["xxh3"] = "0000000000000000".into());
    expect_corrupt(&out, "shard-00000.rkyv");
    restore();

    edit_manifest(&out, |v| v["feature_names"][3] = "friends".into());
    expect_corrupt(&out, MANIFEST_FILE);
    restore();

    fs::write(out.join(MANIFEST_FILE), b"{\"format\": ").unwrap();
    expect_corrupt(&out, MANIFEST_FILE);
    restore();

    fs::write(out.join("report.jsonl"), b"{}\n").unwrap();
    expect_corrupt(&out, "report.jsonl");

    assert!(matches!(
        Cache::open(tmp.path().join("nope")),
        Err(OpenError::CacheMissing(_))
    ));
}

#[test]
fn lazy_open_validates_each_shard_on_first_use() {
    use socialctx::LazyCache;
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("c");
    build_cache(&golden(), &out, 2);
    let eager = Cache::open(&out).unwrap();
    let n = eager.manifest().shards.len();
    assert!(n >= 3);
    // Damage the last shard only.
    let last = out.join(&eager.manifest().shards[n - 1].numbers.file);
    let first_of_last = eager.manifest().shards[n - 1].first_source_id;
    let first_id = eager.thread(0).unwrap().source_id();
    drop(eager);
    let mut bytes = fs::read(&last).unwrap();
    bytes[7] ^= 0xff;
    fs::write(&last, bytes).unwrap();

    let lazy = LazyCache::open(&out).expect("opening reads only the manifest");
    let t = lazy
        .get(first_id)
        .unwrap()
        .expect("undamaged shard readable");
    assert_eq!(t.source_id(), first_id);
    for _ in 0..2 {
        match lazy.get(first_of_last) {
            Err(OpenError::Corrupt { path, .. }) => assert_eq!(path, last),
            other => panic!(
                "damaged shard must fail on use, got {:?}",
                other.map(|o| o.is_some())
            ),
        }
    }
    assert!(lazy.validate_all().is_err());
    assert!(matches!(Cache::open(&out), Err(OpenError::Corrupt { .. })));
}

/// A FIFO or a directory where a cache file should be is a clear error, and
/// `open` returns instead of blocking on it; the manifest's report name must
/// be a plain name inside the cache (not `/dev/zero`).
#[test]
fn only_regular_files_inside_the_cache_are_opened() {
    use socialctx::LazyCache;
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("c");
    build_cache(&golden(), &out, 2);
    let original = Cache::open(&out).unwrap();
    let shard = original.manifest().shards[0].numbers.file.clone();
    let first_id = original.thread(0).unwrap().source_id();
    drop(original);

    let mkfifo = |p: &Path| {
        let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    };
    let (tx, rx) = std::sync::mpsc::channel();
    let work = tmp.path().to_path_buf();
    let (out2, shard2) = (out.clone(), shard.clone());
    std::thread::spawn(move || {
        let mut outcomes = Vec::new();
        for name in [shard2.as_str(), "report.jsonl", MANIFEST_FILE] {
            let copy = work.join(format!("fifo-{name}"));
            copy_tree(&out2, &copy, false);
            fs::remove_file(copy.join(name)).unwrap();
            mkfifo(&copy.join(name));
            let eager = Cache::open(&copy).map(|_| ());
            let lazy = LazyCache::open(&copy)
                .and_then(|c| c.get(first_id).map(|t| t.is_some()))
                .map(|_| ());
            outcomes.push((name.to_string(), copy.join(name), eager, lazy));
        }
        tx.send(outcomes).unwrap();
    });
    let outcomes = rx
        .recv_timeout(std::time::Duration::from_secs(20))
        .expect("opening a cache with a FIFO in it must not block");
    for (name, path, eager, lazy) in outcomes {
        match eager {
            Err(OpenError::Corrupt { path: p, reason }) => {
                assert_eq!(p, path);
                assert!(reason.contains("not a regular file"), "{name}: {reason}");
            }
            other => panic!("{name}: expected Corrupt, got {other:?}"),
        }
        if name != "report.jsonl" {
            assert!(lazy.is_err(), "{name}: lazy use of a FIFO must fail");
        }
    }

    // A report name that leaves the cache directory is refused.
    let m = out.join(MANIFEST_FILE);
    let text = fs::read_to_string(&m).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["report"]["file"] = "/dev/zero".into();
    write_manifest(&m, v);
    match Cache::open(&out) {
        Err(OpenError::Corrupt { reason, .. }) => {
            assert!(reason.contains("not a plain file name"), "{reason}")
        }
        other => panic!("expected Corrupt, got {:?}", other.map(|_| ())),
    }
}

/// Re-serialises shard 0's numbers after `edit`, with a valid footer and
/// manifest entry: a crafted cache whose checksums all agree.
fn rewrite_numbers(out: &Path, edit: impl FnOnce(&mut socialctx::internals::Shard)) {
    use socialctx::FORMAT_VERSION;
    use socialctx::internals::{Shard, footer};
    let m_path = out.join(MANIFEST_FILE);
    let mut m: serde_json::Value = serde_json::from_slice(&fs::read(&m_path).unwrap()).unwrap();
    let file = out.join(m["shards"][0]["file"].as_str().unwrap());
    let bytes = fs::read(&file).unwrap();
    let mut archive = rkyv::util::AlignedVec::<16>::new();
    archive.extend_from_slice(&bytes[..bytes.len() - footer::LEN]);
    let mut shard: Shard = rkyv::from_bytes::<Shard, rkyv::rancor::Error>(&archive).unwrap();
    edit(&mut shard);
    let mut new = rkyv::to_bytes::<rkyv::rancor::Error>(&shard)
        .unwrap()
        .to_vec();
    let sum = xxhash_rust::xxh3::xxh3_64(&new);
    let mut footer = [0u8; footer::LEN];
    footer[..8].copy_from_slice(&footer::MAGIC);
    footer[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
    footer[16..24].copy_from_slice(&(new.len() as u64).to_le_bytes());
    footer[24..32].copy_from_slice(&sum.to_le_bytes());
    new.extend_from_slice(&footer);
    m["shards"][0]["bytes"] = (new.len() as u64).into();
    m["shards"][0]["xxh3"] = format!("{sum:016x}").into();
    fs::write(&file, new).unwrap();
    write_manifest(&m_path, m);
}

/// Invariants the readers rely on are checked when a shard is validated,
/// even when every checksum agrees (a crafted cache).
#[test]
fn crafted_shards_that_break_reader_invariants_are_refused() {
    use socialctx::LazyCache;
    let tmp = tempfile::tempdir().unwrap();
    let clean = tmp.path().join("clean");
    build_cache(&golden(), &clean, 2);
    // The first thread with at least two reactions in shard 0.
    let cache = Cache::open(&clean).unwrap();
    let pos = cache
        .iter()
        .enumerate()
        .take_while(|(_, t)| cache.manifest().shards[0].last_source_id >= t.source_id())
        .find(|(_, t)| t.reaction_count() >= 2)
        .map(|(i, _)| i)
        .expect("a thread with two reactions in shard 0");
    let first = {
        let mut n = 0;
        for i in 0..pos {
            n += cache.thread(i).unwrap().reaction_count();
        }
        n
    };
    drop(cache);

    type Edit = Box<dyn FnOnce(&mut socialctx::internals::Shard)>;
    let cases: Vec<(&str, Edit, &str)> = vec![
        ("unedited", Box::new(|_| {}), ""),
        (
            "order",
            Box::new(move |s| s.reactions.swap(first, first + 1)),
            "out of (created_at, id) order",
        ),
        (
            "label",
            Box::new(move |s| s.threads[pos].label_code = 7),
            "label code 7",
        ),
        (
            "kind",
            Box::new(move |s| s.reactions[first].kind ^= 1),
            "contradicts its c_type",
        ),
        (
            "nan",
            Box::new(move |s| s.features[first][3] = f32::NAN),
            "not finite",
        ),
        (
            "inf",
            Box::new(move |s| s.features[first + 1][25] = f32::INFINITY),
            "not finite",
        ),
        (
            "inputs",
            Box::new(move |s| {
                s.inputs.pop();
            }),
            "input keys for",
        ),
    ];
    for (name, edit, expected) in cases {
        let out = tmp.path().join(name);
        copy_tree(&clean, &out, false);
        rewrite_numbers(&out, edit);
        if expected.is_empty() {
            // The rewrite itself is faithful: an unedited shard still opens.
            assert!(Cache::open(&out).is_ok(), "re-serialised shard opens");
            continue;
        }
        for result in [
            Cache::open(&out).map(|_| ()),
            LazyCache::open(&out).and_then(|c| c.numbers(pos).map(|_| ())),
        ] {
            match result {
                Err(OpenError::Corrupt { reason, .. }) => {
                    assert!(reason.contains(expected), "{name}: {reason}")
                }
                other => panic!("{name}: expected Corrupt, got {other:?}"),
            }
        }
    }
}

/// Two different texts under one content key (a crafted shard: xxh3-128
/// collisions do not happen by chance) are a `KeyCollision`, never one
/// input embedded for the other.
#[test]
fn a_key_shared_by_two_texts_is_an_error() {
    use socialctx::{LoadError, TextField, UniqueTexts};
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("cache");
    build_cache(&golden(), &out, 2);
    let cache = Cache::open(&out).unwrap();
    // Two reactions of shard 0 with different reply texts.
    let shard0 = cache.manifest().shards[0].reactions as usize;
    let mut texts = Vec::new();
    for t in cache.iter() {
        for r in t.reactions() {
            texts.push(r.reply_tokens().map(|k| k.joined().to_owned()));
        }
    }
    let a = (0..shard0)
        .find(|&i| texts[i].as_deref().is_some_and(|t| !t.is_empty()))
        .unwrap();
    let b = (a + 1..shard0)
        .find(|&i| {
            texts[i]
                .as_deref()
                .is_some_and(|t| !t.is_empty() && Some(t) != texts[a].as_deref())
        })
        .unwrap();
    let before = UniqueTexts::collect(&cache, TextField::Reply, None).unwrap();
    drop(cache);
    rewrite_numbers(&out, |s| s.inputs[b].reply = s.inputs[a].reply);
    let cache = Cache::open(&out).expect("every checksum agrees");
    match UniqueTexts::collect(&cache, TextField::Reply, None) {
        Err(LoadError::KeyCollision { key }) => {
            assert!((0..before.len()).any(|i| before.key(i) == key))
        }
        other => panic!("expected KeyCollision, got {other:?}"),
    }
}

/// An archive that fails rkyv's bytecheck says why, in release builds too.
#[test]
fn a_malformed_archive_with_valid_checksums_says_what_is_wrong() {
    let tmp = tempfile::tempdir().unwrap();
    let out = small_cache(tmp.path());
    let m_path = out.join(MANIFEST_FILE);
    let mut m: serde_json::Value = serde_json::from_slice(&fs::read(&m_path).unwrap()).unwrap();
    let file = out.join(m["shards"][0]["file"].as_str().unwrap());
    let mut bytes = fs::read(&file).unwrap();
    let archive_len = bytes.len() - socialctx::internals::footer::LEN;
    // Point the root's relative pointers far outside the archive.
    for b in &mut bytes[archive_len - 16..archive_len] {
        *b = 0x7f;
    }
    let sum = xxhash_rust::xxh3::xxh3_64(&bytes[..archive_len]);
    bytes[archive_len + 24..].copy_from_slice(&sum.to_le_bytes());
    m["shards"][0]["xxh3"] = format!("{sum:016x}").into();
    fs::write(&file, &bytes).unwrap();
    write_manifest(&m_path, m);
    match Cache::open(&out) {
        Err(OpenError::Corrupt { reason, .. }) => {
            assert!(reason.starts_with("archive does not validate"), "{reason}");
            assert!(!reason.contains("without error information"), "{reason}");
            assert!(
                reason.len() > "archive does not validate: ".len() + 10,
                "{reason}"
            );
        }
        other => panic!("expected a corrupt-archive error, got {other:?}"),
    }
}

/// Issue 25, defect 12: the manifest's extra column names are this
/// library's, in its order, and its reply and retweet counts are the
/// shards'; a manifest edited otherwise is refused, never read with
/// another column's values under a name.
#[test]
fn manifest_column_names_and_kind_counts_are_checked() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("cache");
    build_cache(&repo("data-samples/corpus"), &out, 2);
    let pristine = fs::read(out.join(MANIFEST_FILE)).unwrap();
    let restore = || fs::write(out.join(MANIFEST_FILE), &pristine).unwrap();
    let m = Cache::open(&out).unwrap().manifest().clone();
    assert!(m.retweets > 0 && m.replies > 0, "the corpus has both kinds");

    // depth and persistence swapped.
    edit_manifest(&out, |v| {
        let cols = v["reaction_columns"].as_array_mut().unwrap();
        let depth = cols.iter().position(|c| c == "depth").unwrap();
        let persistence = cols.iter().position(|c| c == "persistence").unwrap();
        cols.swap(depth, persistence);
    });
    expect_corrupt(&out, MANIFEST_FILE);
    assert!(socialctx::LazyCache::open(&out).is_err(), "lazy open too");
    restore();
    // A name that is not one of ours; thread columns swapped.
    edit_manifest(&out, |v| v["reaction_columns"][0] = "deep".into());
    expect_corrupt(&out, MANIFEST_FILE);
    restore();
    edit_manifest(&out, |v| {
        v["thread_columns"].as_array_mut().unwrap().reverse()
    });
    expect_corrupt(&out, MANIFEST_FILE);
    restore();
    // Counts moved between the kinds (the total unchanged), or not adding up.
    edit_manifest(&out, |v| {
        v["replies"] = (m.replies + 1).into();
        v["retweets"] = (m.retweets - 1).into();
    });
    match Cache::open(&out) {
        Err(OpenError::Corrupt { path, reason }) => {
            assert!(path.ends_with(MANIFEST_FILE), "{}", path.display());
            assert!(reason.contains("retweets"), "{reason}");
        }
        other => panic!("expected a corrupt manifest, got {:?}", other.map(|_| ())),
    }
    restore();
    edit_manifest(&out, |v| v["replies"] = (m.replies + 1).into());
    expect_corrupt(&out, MANIFEST_FILE);
    restore();
    Cache::open(&out).unwrap();
}

/// Issue 26, item 4: the bad-input report is under the manifest's
/// checksums: truncated, a byte flipped, or deleted, it is a typed error
/// naming report.jsonl from `Cache::open`, `LazyCache::report`, and the
/// `dump` and `corpus_stats` programs.
#[test]
fn a_damaged_report_is_detected_by_every_reader() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("cache");
    build_cache(&repo("data-samples/corpus"), &out, 2);
    let report = out.join("report.jsonl");
    let pristine = fs::read(&report).unwrap();
    assert!(pristine.len() > 10, "the corpus has skipped inputs");
    let n = pristine.len();
    let mut damages: Vec<(String, Option<Vec<u8>>)> = vec![
        ("deleted".into(), None),
        ("emptied".into(), Some(Vec::new())),
        ("last line cut".into(), Some(pristine[..n - 1].to_vec())),
        ("half".into(), Some(pristine[..n / 2].to_vec())),
    ];
    for pos in [0, n / 3, n / 2, n - 2, n - 1] {
        let mut b = pristine.clone();
        b[pos] ^= 0x01;
        damages.push((format!("byte {pos} flipped"), Some(b)));
    }
    for (what, bytes) in damages {
        match &bytes {
            None => fs::remove_file(&report).unwrap(),
            Some(b) => fs::write(&report, b).unwrap(),
        }
        let names_it = |e: &OpenError| match e {
            OpenError::Corrupt { path, .. } | OpenError::Io { path, .. } => {
                path.ends_with("report.jsonl")
            }
            _ => false,
        };
        match Cache::open(&out) {
            Err(e) => assert!(names_it(&e), "{what}: {e}"),
            Ok(_) => panic!("{what}: Cache::open accepted it"),
        }
        match socialctx::LazyCache::open(&out).map(|c| c.report()) {
            Ok(Ok(_)) => panic!("{what}: LazyCache::report accepted it"),
            Ok(Err(e)) | Err(e) => assert!(names_it(&e), "{what}: {e}"),
        }
        for program in ["dump", "corpus_stats"] {
            let o = example(program).arg(&out).output().unwrap();
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(o.status.code(), Some(1), "{what}: {program}: {err}");
            assert!(err.contains("report.jsonl"), "{what}: {program}: {err}");
        }
        fs::write(&report, &pristine).unwrap();
    }
    Cache::open(&out).unwrap();
}
