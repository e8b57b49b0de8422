//! This crate's source digest (`SOURCE_DIGEST`): the text preprocessing,
//! tokens, timestamps and numbers it computes are stored in socialctx's
//! caches, so socialctx's definition digest includes it. Made from this
//! package's own files, so that a packaged crate makes it too.

use std::path::Path;

include!("source_hash.rs");

/// Every source but the unit tests' own file.
const SOURCES: &[&str] = &["src"];
const SKIP: &[&str] = &["src/timestamp/tests.rs"];

fn main() {
    // Read when run, not baked in when compiled: cargo reuses one compiled
    // build script for copies of this workspace at other paths that share a
    // target directory (pip's temporary build tree, then the checkout), and
    // a compiled-in path named the first copy's, long removed.
    let root = std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let root = Path::new(&root);
    let (digest, hashed) = source_digest(root, SOURCES, SKIP)
        .unwrap_or_else(|e| panic!("the source digest cannot be made: {e}"));
    for p in &hashed {
        println!("cargo:rerun-if-changed={}", p.display());
    }
    println!("cargo:rerun-if-changed=source_hash.rs");
    println!("cargo:rustc-env=PYCOMPAT_SOURCE_DIGEST={digest}");
    println!("cargo:rustc-env=PYCOMPAT_SOURCE_LIST={}", SOURCES.join(";"));
    println!("cargo:rustc-env=PYCOMPAT_SOURCE_SKIP={}", SKIP.join(";"));
}
