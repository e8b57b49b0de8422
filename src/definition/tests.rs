//! The digest changes with any line of a source that computes stored
//! values and with nothing else: the very function `build.rs` runs, over
//! copies of the sources with one line edited (no second build of the
//! crate).

use std::fs;
use std::path::{Path, PathBuf};

mod hash {
    include!("hash.rs");
    pub(super) fn digest(root: &std::path::Path, entries: &[&str], skip: &[&str]) -> String {
        source_digest(root, entries, skip).unwrap().0
    }
    pub(super) fn try_digest(root: &std::path::Path, entries: &[&str]) -> std::io::Result<String> {
        source_digest(root, entries, &[]).map(|d| d.0)
    }
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn list(s: &'static str) -> Vec<&'static str> {
    s.split(';').filter(|e| !e.is_empty()).collect()
}

/// The root crate's entries and skipped files, as `build.rs` used them.
fn ours() -> (Vec<&'static str>, Vec<&'static str>) {
    (
        list(env!("SOCIALCTX_SOURCE_LIST")),
        list(env!("SOCIALCTX_SOURCE_SKIP")),
    )
}

fn copy(from: &Path, to: &Path) {
    if from.is_dir() {
        fs::create_dir_all(to).unwrap();
        for e in fs::read_dir(from).unwrap() {
            let e = e.unwrap();
            copy(&e.path(), &to.join(e.file_name()));
        }
    } else {
        fs::create_dir_all(to.parent().unwrap()).unwrap();
        fs::copy(from, to).unwrap();
    }
}

/// `rel` under `root` with the first `from` replaced by `to`.
fn edit(root: &Path, rel: &str, from: &str, to: &str) -> String {
    let path = root.join(rel);
    let text = fs::read_to_string(&path).unwrap();
    assert!(text.contains(from), "{rel} has no {from:?}");
    fs::write(&path, text.replacen(from, to, 1)).unwrap();
    text
}

#[test]
fn the_build_script_and_this_function_agree_over_the_checkout() {
    let (entries, skip) = ours();
    assert_eq!(
        hash::digest(&repo(), &entries, &skip),
        env!("SOCIALCTX_SOURCE_DIGEST")
    );
    let (entries, skip) = (list(pycompat::SOURCE_LIST.0), list(pycompat::SOURCE_LIST.1));
    assert_eq!(
        hash::digest(&repo().join("crates/pycompat"), &entries, &skip),
        pycompat::SOURCE_DIGEST
    );
}

/// The upgrade: `description_len + 1`, one line of one feature
/// function, changes the digest; so does a new source file, a line of the
/// writer, of a plan, of the re-pack, merge and incremental build or of
/// pycompat's text functions. CLI text, the loader, training, fingerprints,
/// publication and a CRLF checkout do not; nor does another location of
/// the checkout.
#[test]
fn a_one_line_edit_of_a_feature_changes_it_and_unrelated_files_do_not() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("checkout");
    let (entries, skip) = ours();
    for e in entries
        .iter()
        .chain(["src/train", "crates/cli/src/lib.rs"].iter())
    {
        copy(&repo().join(e), &root.join(e));
    }
    let digest = || hash::digest(&root, &entries, &skip);
    let base = digest();
    assert_eq!(base, env!("SOCIALCTX_SOURCE_DIGEST"), "another location");

    let user = "src/ingest/features/user.rs";
    let line = "f[DescriptionLen] = u.description.map_or(0, pytext::count_words) as f64;";
    let was = edit(
        &root,
        user,
        line,
        "f[DescriptionLen] = u.description.map_or(0, pytext::count_words) as f64 + 1.0;",
    );
    assert_ne!(digest(), base, "description_len + 1");
    fs::write(root.join(user), &was).unwrap();
    assert_eq!(digest(), base, "reverted");

    let mut changed = 0;
    for (rel, from) in [
        ("src/ingest/writer.rs", "fn "),
        ("src/ingest/parents.rs", "fn "),
        ("src/schema.rs", "\"description_len\""),
        ("src/format/manifest.rs", "pub struct"),
        // What carries values into a partition (labels, events, the
        // rumour index), recomputes them on reuse, or copies them through
        // the read half into a merge or an incremental build.
        ("src/ingest/plan.rs", "idx.add(author, t)"),
        (
            "src/incremental/reuse.rs",
            "row[col] = idx.reliability(r.user_key, r.created_at);",
        ),
        ("src/repack.rs", "fn "),
        ("src/merge.rs", "fn "),
        ("src/read/view.rs", "fn "),
    ] {
        let was = edit(&root, rel, from, &format!(" {from}"));
        assert_ne!(digest(), base, "{rel}");
        fs::write(root.join(rel), &was).unwrap();
        changed += 1;
    }
    fs::write(root.join("src/ingest/features/extra.rs"), "// new\n").unwrap();
    assert_ne!(digest(), base, "a new feature file");
    fs::remove_file(root.join("src/ingest/features/extra.rs")).unwrap();

    for (rel, from) in [
        ("crates/cli/src/lib.rs", "fn "),
        ("src/train/loader.rs", "fn "),
        ("src/ingest/publish.rs", "fn "),
        ("src/ingest/fingerprint.rs", "fn "),
        ("src/ingest/layout/toy.rs", "fn "),
    ] {
        edit(&root, rel, from, &format!("  {from}"));
        assert_eq!(digest(), base, "{rel} computes no stored value");
    }
    fs::write(root.join("src/ingest/notes.txt"), "not a source\n").unwrap();
    let crlf = was.replace('\n', "\r\n");
    fs::write(root.join(user), crlf).unwrap();
    assert_eq!(digest(), base, "a CRLF checkout, a file that is not .rs");
    assert_eq!(changed, 9);
}

#[test]
fn a_one_line_edit_of_pycompat_changes_the_definition() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("pycompat");
    copy(&repo().join("crates/pycompat/src"), &root.join("src"));
    let (entries, skip) = (list(pycompat::SOURCE_LIST.0), list(pycompat::SOURCE_LIST.1));
    let digest = || hash::digest(&root, &entries, &skip);
    let base = digest();
    assert_eq!(base, pycompat::SOURCE_DIGEST);
    let was = edit(&root, "src/pytext.rs", "fn ", "fn  ");
    let edited = digest();
    assert_ne!(edited, base, "pytext.rs");
    assert_ne!(
        super::combine("a", &edited, 0),
        super::combine("a", &base, 0)
    );
    fs::write(root.join("src/pytext.rs"), was).unwrap();
    edit(&root, "src/timestamp/tests.rs", "fn ", "fn  ");
    assert_eq!(digest(), base, "the unit tests compute nothing stored");
}

#[test]
fn the_two_copies_of_the_hash_are_one() {
    let a = fs::read(repo().join("src/definition/hash.rs")).unwrap();
    let b = fs::read(repo().join("crates/pycompat/source_hash.rs")).unwrap();
    assert!(
        a == b,
        "src/definition/hash.rs and crates/pycompat/source_hash.rs differ"
    );
}

#[test]
fn a_missing_source_is_an_error_not_a_smaller_digest() {
    let tmp = tempfile::tempdir().unwrap();
    let e = hash::try_digest(tmp.path(), &["src/ingest"]).unwrap_err();
    assert!(e.to_string().contains("src/ingest"), "{e}");
}

#[test]
fn the_simulated_upgrade_is_another_definition() {
    let real = super::combine("a", "b", 0);
    assert_ne!(super::combine("a", "b", 1), real);
    assert_ne!(super::combine("a", "b", 1), super::combine("a", "b", 2));
    assert_eq!(super::combine("a", "b", 0), real);
    assert_eq!(super::definition().len(), 16);
}

/// Whether `rel` is among the files `entries` less `skip` digest.
fn hashed(rel: &str, entries: &[&str], skip: &[&str]) -> bool {
    let under = |e: &&str| rel == *e || rel.starts_with(&format!("{e}/"));
    entries.iter().any(under) && !skip.iter().any(under)
}

/// The list cannot silently fall behind the code: every source of the
/// crate that makes a writer's input, writes a cache, or computes,
/// carries or copies stored values into one (a thread's label and event,
/// the rumour index and `user_reliability`, a re-packed thread) is hashed.
/// Plans carry labels, events and the rumour index into partitions; an
/// incremental build recomputes `user_reliability` and re-packs the
/// threads it reuses, as a merge re-packs partitions: an edit of any of
/// them changes stored values.
#[test]
fn every_source_that_makes_or_carries_stored_values_is_hashed() {
    const MARKS: &[&str] = &[
        "CacheWriter::create",
        "ThreadData::default",
        "ThreadData {",
        "ThreadDir {",
        "RumourIndex::default",
        ".reliability(",
        "thread_data(",
        "refill(",
    ];
    let (entries, skip) = ours();
    let mut files = Vec::new();
    let mut stack = vec![repo().join("src")];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                files.push(p);
            }
        }
    }
    let mut seen = 0;
    let mut missing = Vec::new();
    for p in &files {
        let rel = p.strip_prefix(repo()).unwrap().to_str().unwrap().to_owned();
        if rel.starts_with("src/definition") {
            continue;
        }
        let text = fs::read_to_string(p).unwrap();
        if MARKS.iter().any(|m| text.contains(m)) {
            seen += 1;
            if !hashed(&rel, &entries, &skip) {
                missing.push(rel);
            }
        }
    }
    assert!(seen >= 8, "the marks found only {seen} files");
    assert!(
        missing.is_empty(),
        "not in the definition digest: {missing:?}"
    );
}

mod lock {
    include!("lock.rs");
    pub(super) fn closure(lock: &str) -> Vec<String> {
        locked_closure(lock, VALUE_DEPENDENCIES)
    }
}

/// A `cargo update` that moves a dependency computing stored values (or
/// one of its own) changes the definition; one of the command's parser or
/// the tests' tools does not. The checkout's lock: what build.rs recorded.
#[test]
fn the_locked_versions_of_value_dependencies_are_part_of_it() {
    let text = fs::read_to_string(repo().join("Cargo.lock")).unwrap();
    let base = lock::closure(&text);
    assert_eq!(base.join(", "), env!("SOCIALCTX_LOCKED"));
    for name in [
        "simd-json ",
        "value-trait ",
        "regex-automata ",
        "regex-syntax ",
        "chrono ",
    ] {
        assert!(base.iter().any(|p| p.starts_with(name)), "{name}: {base:?}");
    }
    assert!(!base.iter().any(|p| p.starts_with("clap ")), "{base:?}");
    let bump = |name: &str| {
        let at = text
            .find(&format!("name = \"{name}\"\nversion = \""))
            .unwrap();
        let mut t = text.clone();
        t.insert(at + name.len() + 21, '9');
        lock::closure(&t)
    };
    assert_ne!(bump("simd-json"), base, "simd-json");
    assert_ne!(bump("value-trait"), base, "a dependency of simd-json");
    assert_ne!(bump("regex-syntax"), base, "the tokenizer pattern's parser");
    assert_eq!(bump("clap"), base, "the command's parser");
    assert_eq!(bump("tempfile"), base, "a test tool");
}
