//! Cache round trip, determinism, atomic replacement, locking and what a
//! reader sees across rebuilds (damaged caches: `cache_damage.rs`).

use std::fs;
use std::path::Path;

use crate::common::cache_files::*;
use crate::common::*;
use socialctx::ReactionKind;
use socialctx::ThreadSource;
use socialctx::internals::{CacheWriter, WriterOptions};
use socialctx::{BuildError, Cache};

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
