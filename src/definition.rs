//! The definition digest: which code computed the values a cache stores.
//!
//! `build.rs` digests the sources that compute stored values (the list and
//! why: ARCHITECTURE.md, "The definition digest") at every build of the
//! crate, and `socialctx-pycompat` its own; the two make this library's
//! definition. A build records it in the manifest (and an incremental
//! build's fingerprints, a plan, a partition's manifest), and reuse checks
//! it: an incremental build over a cache of another definition builds in
//! full, a partition build refuses a plan of another, a merge refuses
//! partitions of another. A one-line change of a feature function thus
//! never mixes with values computed before it, and nobody has to remember
//! to bump a number.

use std::sync::OnceLock;

use xxhash_rust::xxh3::xxh3_64;

/// The environment variable of the upgrade simulation, for this
/// repository's tests: `SOCIALCTX_TEST_DEFINITION=N` (a nonzero integer)
/// makes this process another version of the library, one whose
/// `description_len` is the true one plus `N` and whose definition digest
/// differs accordingly, without a second build of the crate. Read once per
/// process; compiled in always, as the publish fault hook is (the tests
/// drive the binaries users run).
pub const TEST_ENV: &str = "SOCIALCTX_TEST_DEFINITION";

/// The simulated upgrade's offset ([`TEST_ENV`]); 0 when not set.
fn test_offset() -> i64 {
    static OFFSET: OnceLock<i64> = OnceLock::new();
    *OFFSET.get_or_init(|| {
        std::env::var(TEST_ENV)
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    })
}

/// What the upgrade simulation adds to `description_len` (0.0 normally).
pub(crate) fn description_len_offset() -> f64 {
    test_offset() as f64
}

/// The warning of a process the upgrade simulation changes: compiled into
/// the binaries users run, the hook alters stored values, so a build, a
/// merge or a partition it touched never passes without a word.
pub(crate) fn simulation_warning() -> Option<String> {
    let n = test_offset();
    (n != 0).then(|| {
        format!(
            "{TEST_ENV}={n} is set: this process simulates another version of the library for this repository's tests (description_len + {n}, definition {}); unset it for real caches",
            definition()
        )
    })
}

/// The definition digest of sources `ours` and `pycompat`, shifted by a
/// simulated upgrade `offset` (none when 0): 16 hex digits.
fn combine(ours: &str, pycompat: &str, offset: i64) -> String {
    let mut text = format!("socialctx {ours}; socialctx-pycompat {pycompat}");
    if offset != 0 {
        text += &format!("; test offset {offset}");
    }
    format!("{:016x}", xxh3_64(text.as_bytes()))
}

/// This library's definition digest (16 hex digits): what a build records.
pub(crate) fn definition() -> &'static str {
    static DEFINITION: OnceLock<String> = OnceLock::new();
    DEFINITION.get_or_init(|| {
        // The sources, then the locked versions of the dependencies that
        // compute stored values (build.rs).
        let ours = format!(
            "{} locked {}",
            env!("SOCIALCTX_SOURCE_DIGEST"),
            env!("SOCIALCTX_LOCKED")
        );
        combine(&ours, pycompat::SOURCE_DIGEST, test_offset())
    })
}

/// How an artifact's recorded definition reads in a message: an artifact
/// from before definitions were recorded has none.
pub(crate) fn shown(recorded: &str) -> &str {
    if recorded.is_empty() {
        "none recorded"
    } else {
        recorded
    }
}

#[cfg(test)]
mod tests;
