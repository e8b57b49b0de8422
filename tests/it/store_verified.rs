//! A nightly embed reads only the segments changed since they were last
//! verified (the store's verified record, `.NAME.verified` beside it: per
//! segment its checksum and stat, git's racy-clean rule), and damage is
//! still caught: a touched, rewritten or replaced segment is read again, a
//! kill between publication and the record costs one full verification,
//! and a mangled or hostile record reads as none.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::common::*;
use crate::embeddings::{copy_dir, embed, rewrite_replies, write_toy_batch};
use socialctx::{Cache, EmbeddingStore, StoreMeta, StoreWriter, TextField};

/// What a nightly embed of store "r" (model "toy") did.
struct Night {
    segments_read: usize,
    not_reused: Option<String>,
    new_inputs: usize,
    meta: StoreMeta,
}

fn nightly(cache: &Cache, verify: bool) -> Night {
    let mut w = StoreWriter::new("r", TextField::Reply)
        .batch_size(16)
        .model_id(Some("toy"))
        .verify(verify)
        .begin(cache)
        .unwrap();
    let (segments_read, new_inputs) = (w.segments_read(), w.new_inputs());
    let not_reused = w.not_reused().map(str::to_owned);
    for b in w.done()..w.batches() {
        write_toy_batch(&mut w, b);
    }
    Night {
        segments_read,
        not_reused,
        new_inputs,
        meta: w.finish().unwrap(),
    }
}

/// The golden corpus copied, built and embedded as store "r" (one
/// segment, recorded as verified): (the corpus, the cache dir).
fn embedded(tmp: &Path) -> (PathBuf, PathBuf) {
    let corpus = tmp.join("corpus");
    copy_dir(&repo("tests/fixtures/golden/corpus"), &corpus);
    let out = tmp.join("cache");
    build_cache(&corpus, &out, 2);
    embed(&Cache::open(&out).unwrap(), "r", 16, false, None);
    (corpus, out)
}

/// The night's change: reply `n` rewritten, the cache rebuilt.
fn change(corpus: &Path, out: &Path, n: usize) -> Cache {
    rewrite_replies(corpus, n..n + 1);
    build_cache(corpus, out, 2);
    Cache::open(out).unwrap()
}

fn record_path(out: &Path) -> PathBuf {
    out.join("derived/embeddings/.r.verified")
}

fn seg(out: &Path, n: usize) -> PathBuf {
    out.join(format!("derived/embeddings/r/seg-{n:05}.npy"))
}

#[test]
fn a_nightly_reads_no_segment_verified_before_and_verify_reads_them_all() {
    let tmp = tempfile::tempdir().unwrap();
    let (corpus, out) = embedded(tmp.path());
    assert!(
        record_path(&out).is_file(),
        "the first embed records its segment"
    );
    let first = change(&corpus, &out, 0);
    let night = nightly(&first, false);
    assert_eq!((night.segments_read, night.meta.segments.len()), (0, 2));
    assert!(night.new_inputs > 0 && night.not_reused.is_none());
    let second = change(&corpus, &out, 1);
    let night = nightly(&second, false);
    assert_eq!((night.segments_read, night.meta.segments.len()), (0, 3));
    // An explicit verification reads every one of them.
    let third = change(&corpus, &out, 2);
    let night = nightly(&third, true);
    assert_eq!((night.segments_read, night.meta.segments.len()), (3, 4));
    let meta = EmbeddingStore::verify(&third, "r").unwrap();
    assert_eq!(meta, night.meta);
    // Readers are unchanged: they verify everything whatever the record.
    EmbeddingStore::open(&third, "r").unwrap();
}

/// Flips the last byte of `path` in place, keeping its size and mtime (the
/// ctime moves: it cannot be set back).
fn corrupt_in_place(path: &Path) {
    let mtime = fs::metadata(path).unwrap().modified().unwrap();
    let mut b = fs::read(path).unwrap();
    *b.last_mut().unwrap() ^= 1;
    fs::write(path, &b).unwrap();
    fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
}

/// Replaces `path` by a damaged copy of the same size and mtime (a new
/// inode).
fn replace_damaged(path: &Path) {
    let mtime = fs::metadata(path).unwrap().modified().unwrap();
    let mut b = fs::read(path).unwrap();
    *b.last_mut().unwrap() ^= 1;
    let tmp = path.with_extension("tmp");
    fs::write(&tmp, &b).unwrap();
    fs::File::options()
        .write(true)
        .open(&tmp)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    fs::rename(&tmp, path).unwrap();
}

/// Sets `path`'s mtime to what it is (a `touch -r` of itself): the bytes
/// stay, the ctime moves.
fn touch_same(path: &Path) {
    let mtime = fs::metadata(path).unwrap().modified().unwrap();
    fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
}

#[test]
fn a_touched_rewritten_or_replaced_segment_is_read_and_damage_caught() {
    for (what, damage, damaged) in [
        ("touched", touch_same as fn(&Path), false),
        ("rewritten in place", corrupt_in_place, true),
        ("replaced", replace_damaged, true),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let (corpus, out) = embedded(tmp.path());
        let cache = change(&corpus, &out, 0);
        nightly(&cache, false);
        // Two segments, both recorded; the damage hits the old one, whose
        // size and mtime stay as they were.
        let before = fs::metadata(seg(&out, 0)).unwrap();
        damage(&seg(&out, 0));
        let after = fs::metadata(seg(&out, 0)).unwrap();
        assert_eq!((before.len(), before.mtime()), (after.len(), after.mtime()));
        let cache = change(&corpus, &out, 1);
        let night = nightly(&cache, false);
        if damaged {
            let why = night.not_reused.unwrap_or_else(|| panic!("{what}: reused"));
            assert!(
                why.contains("seg-00000.npy") && why.contains("checksum mismatch"),
                "{what}: {why}"
            );
            assert_eq!(night.new_inputs, night.meta.unique, "{what}: recomputed");
        } else {
            assert_eq!(night.segments_read, 1, "{what}: only it is read");
            assert!(night.not_reused.is_none(), "{what}");
        }
        EmbeddingStore::open(&cache, "r").unwrap();
        // And the night after reads nothing again.
        let cache = change(&corpus, &out, 2);
        assert_eq!(nightly(&cache, false).segments_read, 0, "{what}");
    }
}

/// Damage that leaves the stat as it was (the disk itself) is linked
/// unread by a nightly embed: every reader refuses it, and an explicit
/// verification finds it and drops the record, so the next nightly
/// recomputes the rows.
#[test]
fn damage_behind_the_stat_is_found_by_readers_and_verify() {
    let tmp = tempfile::tempdir().unwrap();
    let (_, out) = embedded(tmp.path());
    let cache = Cache::open(&out).unwrap();
    // The record rewritten to vouch for the damaged segment's new stat,
    // which is what the disk damaging it in place would look like.
    corrupt_in_place(&seg(&out, 0));
    let mut rec: serde_json::Value =
        serde_json::from_slice(&fs::read(record_path(&out)).unwrap()).unwrap();
    let m = fs::metadata(seg(&out, 0)).unwrap();
    rec["segments"][0]["ctime_ns"] = (m.ctime() * 1_000_000_000 + m.ctime_nsec()).into();
    rec["at_ns"] = (rec["segments"][0]["ctime_ns"].as_i64().unwrap() + 1).into();
    fs::write(record_path(&out), rec.to_string()).unwrap();
    let err = EmbeddingStore::open(&cache, "r").unwrap_err().to_string();
    assert!(err.contains("checksum mismatch"), "{err}");
    let err = EmbeddingStore::verify(&cache, "r").unwrap_err().to_string();
    assert!(err.contains("checksum mismatch"), "{err}");
    assert!(!record_path(&out).exists(), "verify dropped the record");
    let night = nightly(&cache, false);
    assert!(night.not_reused.unwrap().contains("checksum mismatch"));
    EmbeddingStore::open(&cache, "r").unwrap();
}

#[test]
fn a_segment_changed_in_the_records_clock_tick_is_not_trusted() {
    let tmp = tempfile::tempdir().unwrap();
    let (_, out) = embedded(tmp.path());
    let rec: serde_json::Value =
        serde_json::from_slice(&fs::read(record_path(&out)).unwrap()).unwrap();
    let s = &rec["segments"][0];
    let newest = s["mtime_ns"]
        .as_i64()
        .unwrap()
        .max(s["ctime_ns"].as_i64().unwrap());
    assert!(
        rec["at_ns"].as_i64().unwrap() > newest,
        "the writer waits out the tick"
    );
    // at_ns at the segment's last change (mtime or ctime), or before it:
    // racy, read again; one ns later: trusted.
    for (back, read) in [(1, 1), (0, 0)] {
        for which in ["mtime_ns", "ctime_ns"] {
            let dir = tmp.path().join(format!("{which}-{back}"));
            let mut r = copy_store_keeping_stat(&out, &dir);
            let s = &r["segments"][0];
            let (m, c) = (
                s["mtime_ns"].as_i64().unwrap(),
                s["ctime_ns"].as_i64().unwrap(),
            );
            // The segment's other time older, so that `which` decides.
            let at = if which == "mtime_ns" { m } else { c };
            r["at_ns"] = (at + 1 - back).into();
            if which == "mtime_ns" {
                r["segments"][0]["ctime_ns"] = c.into();
                if c >= at {
                    // The link's ctime is newer than any mtime: only the
                    // ctime case can be made to decide here.
                    continue;
                }
            }
            fs::write(record_path(&dir), r.to_string()).unwrap();
            let night = nightly(&Cache::open(&dir).unwrap(), false);
            assert_eq!(night.segments_read, read, "{which} at_ns {}", r["at_ns"]);
        }
    }
}

/// A cache directory at `to` whose store "r" is `from`'s, hard-linked so
/// that the segment keeps its inode; its ctime moves with the link, so the
/// record copied along is rewritten with the new ctime, and `at_ns` one ns
/// past it (a record that vouches for the segment). Returns the record.
fn copy_store_keeping_stat(from: &Path, to: &Path) -> serde_json::Value {
    fs::create_dir_all(to.join("derived/embeddings/r")).unwrap();
    for e in fs::read_dir(from).unwrap() {
        let p = e.unwrap().path();
        if p.is_file() {
            fs::copy(&p, to.join(p.file_name().unwrap())).unwrap();
        }
    }
    for e in fs::read_dir(from.join("derived/embeddings/r")).unwrap() {
        let p = e.unwrap().path();
        fs::hard_link(
            &p,
            to.join("derived/embeddings/r").join(p.file_name().unwrap()),
        )
        .unwrap();
    }
    let m = fs::metadata(seg(to, 0)).unwrap();
    let mut rec: serde_json::Value =
        serde_json::from_slice(&fs::read(record_path(from)).unwrap()).unwrap();
    let ctime_ns = m.ctime() * 1_000_000_000 + m.ctime_nsec();
    rec["segments"][0]["ctime_ns"] = ctime_ns.into();
    rec["at_ns"] = (ctime_ns.max(rec["segments"][0]["mtime_ns"].as_i64().unwrap()) + 1).into();
    fs::write(record_path(to), rec.to_string()).unwrap();
    rec
}

/// The child of [`a_kill_between_publication_and_the_record_costs_one_full_verification`].
#[test]
#[ignore = "a child process of store_verified::a_kill_between_publication_and_the_record_costs_one_full_verification"]
fn killed_child() {
    let dir = std::env::var_os("SOCIALCTX_TEST_STORE_CHILD").expect("run by its parent test");
    nightly(&Cache::open(Path::new(&dir)).unwrap(), false);
}

#[test]
fn a_kill_between_publication_and_the_record_costs_one_full_verification() {
    let tmp = tempfile::tempdir().unwrap();
    let (corpus, out) = embedded(tmp.path());
    let before = fs::read(record_path(&out)).unwrap();
    change(&corpus, &out, 0);
    let child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["store_verified::killed_child", "--exact", "--ignored"])
        .env("SOCIALCTX_TEST_STORE_CHILD", &out)
        .env("SOCIALCTX_TEST_STORE_FAULT", "kill-before-record")
        .output()
        .unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(child.status.signal(), Some(9), "{child:?}");
    let cache = Cache::open(&out).unwrap();
    // Published: the new store opens, with its two segments; the record
    // is the previous store's, which vouches for nothing now.
    assert_eq!(
        EmbeddingStore::open(&cache, "r")
            .unwrap()
            .meta()
            .segments
            .len(),
        2
    );
    assert_eq!(fs::read(record_path(&out)).unwrap(), before);
    let night = nightly(&cache, false);
    assert_eq!((night.segments_read, night.new_inputs), (2, 0));
    let night = nightly(&cache, false);
    assert_eq!(night.segments_read, 0);
}

#[test]
fn a_mangled_or_hostile_record_reads_as_none() {
    let tmp = tempfile::tempdir().unwrap();
    let (_, out) = embedded(tmp.path());
    // The control: the record as a copy rewrites it vouches for the
    // segment (nothing read), so each mangling below is what makes the
    // difference.
    let control = tmp.path().join("control");
    copy_store_keeping_stat(&out, &control);
    assert_eq!(
        nightly(&Cache::open(&control).unwrap(), false).segments_read,
        0
    );
    type Mangle = Box<dyn Fn(&serde_json::Value) -> Vec<u8>>;
    let bytes = |b: &'static [u8]| -> Mangle { Box::new(move |_| b.to_vec()) };
    let with = |f: fn(&mut serde_json::Value)| -> Mangle {
        Box::new(move |good| {
            let mut v = good.clone();
            f(&mut v);
            v.to_string().into_bytes()
        })
    };
    let huge =
        br#"{"format":"socialctx-embeddings-verified","name":"r","at_ns":1e400,"segments":[]}"#;
    let mangled: Vec<(&str, Mangle)> = vec![
        ("empty", bytes(b"")),
        ("not json", bytes(b"{\"format\": ")),
        ("binary", bytes(&[0xff, 0, 0x93, 7])),
        ("a list", bytes(b"[]")),
        (
            "no segments",
            with(|v| v["segments"] = serde_json::Value::Null),
        ),
        ("a string at_ns", with(|v| v["at_ns"] = "soon".into())),
        ("a huge at_ns", bytes(huge)),
        (
            "a negative ino",
            with(|v| v["segments"][0]["ino"] = (-1).into()),
        ),
        ("another store's", with(|v| v["name"] = "other".into())),
        ("another format", with(|v| v["format"] = "git-index".into())),
        (
            "another checksum",
            with(|v| v["segments"][0]["xxh3"] = "0000000000000000".into()),
        ),
        (
            "another size",
            with(|v| v["segments"][0]["bytes"] = 64.into()),
        ),
        (
            "another file",
            with(|v| v["segments"][0]["file"] = "../r/seg-00000.npy".into()),
        ),
        (
            "another inode and at_ns at the end of time",
            with(|v| {
                v["segments"][0]["ino"] = 1.into();
                v["at_ns"] = i64::MAX.into();
            }),
        ),
        (
            "an mtime an hour on",
            with(|v| {
                let m = v["segments"][0]["mtime_ns"].as_i64().unwrap();
                v["segments"][0]["mtime_ns"] = (m + 3_600_000_000_000).into();
                v["at_ns"] = i64::MAX.into();
            }),
        ),
    ];
    let n = mangled.len();
    for (what, mangle) in mangled {
        let dir = tmp.path().join(what.replace([' ', '\''], "-"));
        let good = copy_store_keeping_stat(&out, &dir);
        fs::write(record_path(&dir), mangle(&good)).unwrap();
        let cache = Cache::open(&dir).unwrap();
        let night = nightly(&cache, false);
        assert_eq!(night.segments_read, 1, "{what}: read in full");
        assert!(night.not_reused.is_none(), "{what}");
        EmbeddingStore::open(&cache, "r").unwrap();
    }
    // Not a file: a directory, a FIFO (which would block an open), a link
    // to one. The nightly neither hangs nor fails.
    for what in ["dir", "fifo", "link"] {
        let dir = tmp.path().join(what);
        copy_store_keeping_stat(&out, &dir);
        let rec = record_path(&dir);
        fs::remove_file(&rec).unwrap();
        match what {
            "dir" => fs::create_dir(&rec).unwrap(),
            "fifo" => rustix::fs::mknodat(
                rustix::fs::CWD,
                &rec,
                rustix::fs::FileType::Fifo,
                rustix::fs::Mode::from_raw_mode(0o644),
                0,
            )
            .unwrap(),
            _ => std::os::unix::fs::symlink("/dev/zero", &rec).unwrap(),
        }
        let night = nightly(&Cache::open(&dir).unwrap(), false);
        assert_eq!(night.segments_read, 1, "{what}");
    }
    assert_eq!(n, 15);
}
