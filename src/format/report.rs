//! The bad-input report: one line per skipped file or thread.
//!
//! In lenient mode (the default) nothing stops a build: a file that cannot be
//! read or parsed, or a thread whose source tweet is unusable, is skipped and
//! recorded here with its path (relative to the corpus root) and a reason a
//! person can act on. The report is stored in the cache (`report.jsonl`) and
//! can be written elsewhere as JSON Lines: `{"path": ..., "reason": ...}`.

use std::io::{self, Write};

use serde::{Deserialize, Serialize};

/// One skipped input.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct BadInput {
    /// Path of the file or thread directory, relative to the corpus root,
    /// with `/` separators.
    pub path: String,
    /// Why it was skipped, in plain words.
    pub reason: String,
}

impl BadInput {
    /// A report line for `path` with `reason`.
    pub fn new(path: impl Into<String>, reason: impl Into<String>) -> Self {
        BadInput {
            path: path.into(),
            reason: reason.into(),
        }
    }
}

/// Writes `report` as JSON Lines, one `{"path", "reason"}` object per line.
///
/// ```
/// use socialctx::BadInput;
/// use socialctx::internals::write_jsonl;
/// let mut out = Vec::new();
/// write_jsonl(&mut out, &[BadInput::new("a/b.json", "empty file")]).unwrap();
/// assert_eq!(out, b"{\"path\":\"a/b.json\",\"reason\":\"empty file\"}\n");
/// ```
pub fn write_jsonl<W: Write>(mut w: W, report: &[BadInput]) -> io::Result<()> {
    for bad in report {
        serde_json::to_writer(&mut w, bad)?;
        w.write_all(b"\n")?;
    }
    w.flush()
}

/// Reads a report written by [`write_jsonl`].
pub fn read_jsonl(bytes: &[u8]) -> Result<Vec<BadInput>, serde_json::Error> {
    serde_json::Deserializer::from_slice(bytes)
        .into_iter::<BadInput>()
        .collect()
}
