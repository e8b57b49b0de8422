//! The definition digest (src/definition.rs): a digest of the sources that
//! compute the values a cache stores, made at every build of the crate, so
//! that a change of any of them changes it without anyone bumping a number.
//! The list is in ARCHITECTURE.md ("The definition digest"); what stays out
//! (the command, the loader, training, reading, plans, publication) cannot
//! change a stored value. The Python-compatibility crate digests its own
//! sources the same way (crates/pycompat/build.rs): each package digests
//! what it ships, so a packaged crate builds its digest from its own files.

use std::path::Path;

include!("src/definition/hash.rs");
include!("src/definition/lock.rs");

/// What computes stored values: the vocabulary and the format, discovery
/// (labels, events, the report), parsing and the layouts' schemas, thread
/// assembly, parents, the features, the extended values and the writer
/// (input keys, shards, manifest); plans (they carry labels, events and the
/// rumour index into partitions); and what copies values from a cache into
/// another: the read half, the re-pack, merges and incremental builds (which
/// also recompute `user_reliability` of the threads they reuse). A test
/// (`src/definition/tests.rs`) finds every source that makes or carries
/// stored values and requires it here.
const SOURCES: &[&str] = &[
    "src/schema.rs",
    "src/format",
    "src/ingest",
    "src/read",
    "src/repack.rs",
    "src/merge.rs",
    "src/incremental.rs",
    "src/incremental",
];

/// Parts of `src/ingest` that compute no stored value: the pool and read-ahead
/// (order is restored by the sink), publication, fingerprints (which threads
/// to read again, never how), and the unit-test-only layout.
const SKIP: &[&str] = &[
    "src/ingest/pool.rs",
    "src/ingest/prefetch.rs",
    "src/ingest/publish.rs",
    "src/ingest/fingerprint.rs",
    "src/ingest/layout/toy.rs",
];

fn main() {
    // Read when run, not baked in when compiled: cargo reuses one compiled
    // build script for copies of this workspace at other paths that share a
    // target directory (pip's temporary build tree, then the checkout), and
    // a compiled-in path named the first copy's, long removed.
    let root = std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let root = Path::new(&root);
    let (digest, hashed) = source_digest(root, SOURCES, SKIP)
        .unwrap_or_else(|e| panic!("the definition digest cannot be made: {e}"));
    for p in &hashed {
        println!("cargo:rerun-if-changed={}", p.display());
    }
    println!("cargo:rerun-if-changed=src/definition/hash.rs");
    // The locked versions of the dependencies that compute stored values
    // (src/definition/lock.rs): a `cargo update` of simd-json or the
    // tokenizer's regex engine is an upgrade too. The lock beside this
    // manifest: the workspace's in this repository (the command, the wheel),
    // the package's own in a packaged crate; a dependent's own resolution is
    // out of a build script's reach, so there it records the packaged one.
    let lock_path = root.join("Cargo.lock");
    println!("cargo:rerun-if-changed=src/definition/lock.rs");
    println!("cargo:rerun-if-changed={}", lock_path.display());
    let locked = match std::fs::read_to_string(&lock_path) {
        Ok(text) => locked_closure(&text, VALUE_DEPENDENCIES).join(", "),
        Err(_) => "no lock".to_owned(),
    };
    println!("cargo:rustc-env=SOCIALCTX_LOCKED={locked}");
    println!("cargo:rustc-env=SOCIALCTX_SOURCE_DIGEST={digest}");
    // For the tests that rerun the digest over an edited copy.
    println!(
        "cargo:rustc-env=SOCIALCTX_SOURCE_LIST={}",
        SOURCES.join(";")
    );
    println!("cargo:rustc-env=SOCIALCTX_SOURCE_SKIP={}", SKIP.join(";"));
}
