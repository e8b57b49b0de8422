//! Cache round trip, determinism, atomic replacement, locking, and reader
//! errors on damaged caches.

mod common;

use std::fs;
use std::path::{Path, PathBuf};

use common::*;
use socialctx::ReactionKind;
use socialctx::ThreadSource;
use socialctx::internals::{CacheWriter, MANIFEST_FILE, WriterOptions};
use socialctx::{BuildError, Cache, OpenError};

fn golden() -> PathBuf {
    repo("tests/fixtures/golden/corpus")
}

/// Every file of a cache directory, by name.
fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<_> = fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    v.sort();
    v
}

#[test]
fn round_trip_preserves_threads_reactions_and_text() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("c");
    let summary = build_cache(&golden(), &out, 2);
    let cache = Cache::open(&out).unwrap();
    let m = cache.manifest();
    assert!(m.shards.len() > 1, "small shard cap gives several shards");
    assert_eq!(cache.len() as u64, m.threads);
    assert_eq!(m.reactions, m.replies + m.retweets);
    assert_eq!(m.skipped as usize, summary.report.len());

    let mut prev = 0u64;
    let mut reactions = 0u64;
    for (i, t) in cache.iter().enumerate() {
        assert!(t.source_id() > prev, "ascending source ids");
        prev = t.source_id();
        assert_eq!(cache.position(t.source_id()), Some(i));
        assert_eq!(cache.get(t.source_id()).unwrap().source_id(), t.source_id());
        assert_eq!(cache.thread(i).unwrap().source_id(), t.source_id());
        assert_eq!(t.features().len(), t.reaction_count());
        let mut last = (i64::MIN, 0u64);
        for (j, r) in t.reactions().enumerate() {
            assert!((r.created_at(), r.id()) > last, "(created_at, id) order");
            last = (r.created_at(), r.id());
            assert_eq!(r.features(), &t.features()[j]);
            let c_type = if r.kind() == ReactionKind::Reply {
                1.0
            } else {
                0.0
            };
            assert_eq!(r.features()[26], c_type, "c_type agrees with kind");
        }
        reactions += t.reaction_count() as u64;
    }
    assert_eq!(reactions, m.reactions);
    assert!(cache.get(1).is_none());
    assert!(cache.get(u64::MAX).is_none());
    assert!(cache.thread(cache.len()).is_none());

    // Texts and descriptions are the files' own, byte for byte.
    let t = cache.get(524922078638903296).expect("thread present");
    assert_eq!(t.label(), "non-rumours");
    assert_eq!(t.label_code(), 0);
    // The event without PHEME's folder suffix (issue 11, item 7).
    let thread_dir = walk_find(&golden(), "524922078638903296");
    let event_folder = thread_dir.parent().unwrap().parent().unwrap();
    let folder = event_folder.file_name().unwrap().to_str().unwrap();
    assert_eq!(Some(t.event()), folder.strip_suffix("-all-rnr-threads"));
    for r in t.reactions() {
        let sub = if r.kind() == ReactionKind::Reply {
            "reactions"
        } else {
            "retweets"
        };
        let raw = fs::read(thread_dir.join(sub).join(format!("{}.json", r.id()))).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&raw).unwrap();
        let text = v
            .get("full_text")
            .or(v.get("text"))
            .unwrap()
            .as_str()
            .unwrap();
        assert_eq!(r.text(), text);
        assert_eq!(r.user_description(), v["user"]["description"].as_str());
    }
    let src_dir = ["source-tweets", "source-tweet"]
        .iter()
        .map(|d| thread_dir.join(d))
        .find(|p| p.is_dir())
        .unwrap();
    let src_file = fs::read_dir(&src_dir)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let src: serde_json::Value = serde_json::from_slice(&fs::read(src_file).unwrap()).unwrap();
    assert_eq!(t.source_text(), src["text"].as_str().unwrap());
    assert_eq!(t.source_user_id(), src["user"]["id_str"].as_str().unwrap());
}

#[test]
fn same_corpus_gives_byte_identical_cache_for_any_thread_count() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b, c) = (
        tmp.path().join("a"),
        tmp.path().join("b"),
        tmp.path().join("c"),
    );
    build_cache(&golden(), &a, 1);
    build_cache(&golden(), &b, 2);
    build_cache(&golden(), &c, 5);
    let fa = files(&a);
    assert!(fa.len() > 3);
    assert_eq!(fa, files(&b));
    assert_eq!(fa, files(&c));
}

#[test]
fn rebuild_replaces_cache_and_leaves_no_temporary_files() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("cache");
    build_cache(&repo("tests/fixtures/real/pheme-rnr/corpus"), &out, 2);
    let first = Cache::open(&out).unwrap().len();
    build_cache(&golden(), &out, 2);
    let cache = Cache::open(&out).unwrap();
    assert_ne!(cache.len(), first);
    let mut names: Vec<_> = fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, vec![".cache.lock".to_string(), "cache".to_string()]);
}

#[test]
fn refuses_to_replace_a_directory_that_is_not_a_cache() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("precious");
    fs::create_dir(&out).unwrap();
    fs::write(out.join("thesis.tex"), "do not delete").unwrap();
    let err = CacheWriter::create(&out, WriterOptions::default()).expect_err("refused");
    assert!(err.to_string().contains("not a socialctx cache"), "{err}");
    assert_eq!(
        fs::read_to_string(out.join("thesis.tex")).unwrap(),
        "do not delete"
    );
}

#[test]
fn a_second_writer_fails_clearly_while_the_first_holds_the_lock() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("cache");
    let first = CacheWriter::create(&out, WriterOptions::default()).unwrap();
    let err = CacheWriter::create(&out, WriterOptions::default()).expect_err("locked");
    assert!(matches!(err, BuildError::Locked { .. }), "{err}");
    let tmpdir = first.temp_dir().to_path_buf();
    assert!(tmpdir.is_dir());
    drop(first);
    assert!(
        !tmpdir.exists(),
        "an abandoned build removes its temporary directory"
    );
    assert!(!out.exists(), "and publishes nothing");
    let again = CacheWriter::create(&out, WriterOptions::default());
    assert!(again.is_ok(), "the lock is released on drop");
}

/// A fresh small cache for damage tests.
fn small_cache(dir: &Path) -> PathBuf {
    let out = dir.join("cache");
    build_cache(&repo("tests/fixtures/real/pheme-rnr/corpus"), &out, 2);
    out
}

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

/// A lazy cache reads the generation it opened: its files were opened with
/// the manifest, so renaming one away afterwards (or a rebuild swapping in a
/// new cache) does not change what it reads, even for shards it had not
/// touched yet. (That I/O errors are not memoised as corruption is a unit
/// test of the reader.)
#[test]
fn lazy_cache_reads_the_generation_it_opened() {
    use socialctx::LazyCache;
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("c");
    build_cache(&golden(), &out, 2);
    let eager = Cache::open(&out).unwrap();
    let shard = out.join(&eager.manifest().shards[0].numbers.file);
    let first_id = eager.thread(0).unwrap().source_id();
    drop(eager);

    let lazy = LazyCache::open(&out).unwrap();
    let aside = tmp.path().join("aside");
    fs::rename(&shard, &aside).unwrap();
    let t = lazy
        .get(first_id)
        .expect("the file was opened with the manifest")
        .expect("thread present");
    assert_eq!(t.source_id(), first_id);
    fs::rename(&aside, &shard).unwrap();

    // A rebuild (different shard size: different files) publishes while the
    // lazy cache is open and untouched: it still reads the old generation.
    let lazy = LazyCache::open(&out).unwrap();
    let before: Vec<u64> = (0..lazy.len())
        .map(|i| Cache::open(&out).unwrap().thread(i).unwrap().source_id())
        .collect();
    let opts = socialctx::BuildOptions::default().threads(1).shard_bytes(1);
    socialctx::build(golden(), &out, &opts, &socialctx::NoProgress).unwrap();
    assert_ne!(
        Cache::open(&out).unwrap().manifest().shards.len(),
        lazy.manifest().shards.len()
    );
    for (i, id) in before.iter().enumerate() {
        let t = lazy.thread(i).unwrap().expect("thread present");
        assert_eq!(t.source_id(), *id);
        assert_eq!(t.features().len(), t.reaction_count());
    }
    assert_eq!(lazy.report().unwrap().len() as u64, lazy.manifest().skipped);
}

/// Copies `src` to `dst`, creating entries in sorted or reverse-sorted order
/// (on file systems that list in creation order, the listings differ).
fn copy_tree(src: &Path, dst: &Path, reverse: bool) {
    fs::create_dir_all(dst).unwrap();
    let mut entries: Vec<_> = fs::read_dir(src)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    if reverse {
        entries.reverse();
    }
    for p in entries {
        let to = dst.join(p.file_name().unwrap());
        if p.is_dir() {
            copy_tree(&p, &to, reverse);
        } else {
            fs::copy(&p, &to).unwrap();
        }
    }
}

#[test]
fn directory_listing_order_does_not_change_the_cache() {
    // tmpfs lists entries newest first, so two copies made in opposite
    // orders list differently there; ext4 lists by name hash, the same for both.
    let shm = Path::new("/dev/shm");
    let tmp = if shm.is_dir() {
        tempfile::tempdir_in(shm)
    } else {
        tempfile::tempdir()
    }
    .unwrap();
    let (fwd, rev) = (tmp.path().join("fwd"), tmp.path().join("rev"));
    copy_tree(&golden(), &fwd, false);
    copy_tree(&golden(), &rev, true);
    let listing = |p: &Path| -> Vec<_> {
        fs::read_dir(p)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect()
    };
    let sub = "sydneysiege-all-rnr-threads/rumours";
    let differ = listing(&fwd.join(sub)) != listing(&rev.join(sub));
    if shm.is_dir() {
        assert!(
            differ,
            "on tmpfs the two copies must list in different orders"
        );
    } else {
        eprintln!("note: no /dev/shm; listing orders differ: {differ}");
    }
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    build_cache(&fwd, &a, 2);
    build_cache(&rev, &b, 2);
    assert_eq!(files(&a), files(&b));
}

#[test]
fn a_cache_parked_by_an_interrupted_fallback_publish_is_restored() {
    // Where there is no atomic exchange, publishing renames the old cache to
    // `.<name>.tmp-old-<pid>` before renaming the new one into place; a kill
    // in between leaves no target. The next build puts the old cache back
    // before it cleans up.
    let tmp = tempfile::tempdir().unwrap();
    let out = small_cache(tmp.path());
    let before = files(&out);
    let parked = tmp.path().join(".cache.tmp-old-4242");
    fs::rename(&out, &parked).unwrap();
    fs::create_dir(tmp.path().join(".cache.tmp-4242")).unwrap();
    let writer = CacheWriter::create(&out, WriterOptions::default()).unwrap();
    assert_eq!(files(&out), before, "old cache restored byte for byte");
    assert!(!parked.exists());
    assert!(
        !tmp.path().join(".cache.tmp-4242").exists(),
        "dead build's leftovers removed"
    );
    drop(writer);
    assert!(Cache::open(&out).is_ok());
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

/// Opens racing with rebuilds never fail: each open reads one whole
/// generation, and an open that a publish overtook starts over.
#[test]
fn opens_racing_rebuilds_always_succeed() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("c");
    build_cache(&golden(), &out, 2);
    let threads = Cache::open(&out).unwrap().len();
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            for i in 0..25 {
                // Alternate shard sizes so that every generation has other files.
                let opts = socialctx::BuildOptions::default()
                    .threads(1)
                    .shard_bytes(if i % 2 == 0 { 1 } else { 1 << 20 });
                socialctx::build(golden(), &out, &opts, &socialctx::NoProgress).unwrap();
            }
            done.store(true, Ordering::Relaxed);
        });
        let mut opens = 0;
        while !done.load(Ordering::Relaxed) || opens == 0 {
            let cache = Cache::open(&out).unwrap_or_else(|e| panic!("open {opens}: {e}"));
            assert_eq!(cache.len(), threads);
            opens += 1;
        }
    });
}

/// A symlinked cache directory stays a symlink: the new cache goes where it
/// points (staging, lock and all beside the real directory).
#[test]
fn a_symlinked_cache_dir_stays_a_symlink() {
    let tmp = tempfile::tempdir().unwrap();
    let disk = tmp.path().join("big-disk");
    fs::create_dir(&disk).unwrap();
    let link = tmp.path().join("cache");
    std::os::unix::fs::symlink(disk.join("cache"), &link).unwrap(); // dangling at first
    build_cache(&repo("tests/fixtures/real/pheme-rnr/corpus"), &link, 2);
    build_cache(&golden(), &link, 2);
    assert!(
        fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    let real = Cache::open(disk.join("cache")).unwrap();
    assert_eq!(real.len(), Cache::open(&link).unwrap().len());
    assert_eq!(
        real.manifest().threads,
        Cache::open(&link).unwrap().manifest().threads
    );
    let mut beside: Vec<_> = fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    beside.sort();
    assert_eq!(beside, ["big-disk", "cache"]);
    // A relative link works the same.
    let rel = tmp.path().join("rel");
    std::os::unix::fs::symlink("big-disk/cache", &rel).unwrap();
    build_cache(&repo("tests/fixtures/real/pheme-rnr/corpus"), &rel, 2);
    assert!(fs::symlink_metadata(&rel).unwrap().file_type().is_symlink());
    assert_ne!(Cache::open(disk.join("cache")).unwrap().len(), real.len());
}

/// Files in the cache directory that the cache did not write (notes,
/// derived statistics) survive a rebuild; the cache's own files do not.
#[test]
fn a_rebuild_keeps_the_users_files() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("cache");
    build_cache(&repo("tests/fixtures/real/pheme-rnr/corpus"), &out, 2);
    let first = Cache::open(&out).unwrap();
    let (old_id, derived) = (first.content_id(), first.derived_dir());
    assert_eq!(derived, out.join("derived"));
    fs::create_dir(&derived).unwrap();
    fs::write(derived.join(format!("stats-{old_id}.json")), "{}").unwrap();
    fs::write(out.join("NOTES.txt"), "my notes").unwrap();
    drop(first);
    // Many small shards now: the old shard files must all go.
    let opts = socialctx::BuildOptions::default().threads(2).shard_bytes(1);
    socialctx::build(golden(), &out, &opts, &socialctx::NoProgress).unwrap();
    let cache = Cache::open(&out).unwrap();
    assert_ne!(cache.content_id(), old_id);
    assert_eq!(
        fs::read_to_string(out.join("NOTES.txt")).unwrap(),
        "my notes"
    );
    assert!(derived.join(format!("stats-{old_id}.json")).is_file());
    let mut expected: Vec<String> = cache
        .manifest()
        .shards
        .iter()
        .flat_map(|s| [s.numbers.file.clone(), s.text.file.clone()])
        .chain(["manifest.json", "report.jsonl", "NOTES.txt", "derived"].map(String::from))
        .collect();
    expected.sort();
    let mut names: Vec<String> = fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, expected);
    // Same content, same id: a derived file named after it stays valid.
    socialctx::build(golden(), &out, &opts, &socialctx::NoProgress).unwrap();
    assert_eq!(Cache::open(&out).unwrap().content_id(), cache.content_id());
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

/// Prefetching (on a corpus just evicted from the page cache, so that it
/// really runs) changes nothing in the cache's bytes.
#[test]
fn prefetching_leaves_the_cache_byte_identical() {
    fn evict(dir: &Path) {
        use std::os::fd::AsRawFd;
        for e in fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                evict(&p);
            } else if let Ok(f) = fs::File::open(&p) {
                // SAFETY: a valid descriptor; offset 0, length 0 = whole file.
                unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
            }
        }
    }
    let tmp = tempfile::tempdir().unwrap();
    let corpus = repo("tests/fixtures/real/pheme-veracity/corpus");
    let mut caches = Vec::new();
    for depth in [0, 1, 64] {
        evict(&corpus);
        let out = tmp.path().join(format!("d{depth}"));
        let opts = socialctx::BuildOptions::default()
            .threads(2)
            .io_depth(depth);
        socialctx::build(&corpus, &out, &opts, &socialctx::NoProgress).unwrap();
        let mut files: Vec<(String, Vec<u8>)> = fs::read_dir(&out)
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                (
                    e.file_name().into_string().unwrap(),
                    fs::read(e.path()).unwrap(),
                )
            })
            .collect();
        files.sort();
        caches.push(files);
    }
    assert!(caches.windows(2).all(|w| w[0] == w[1]));
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
