//! RPDNN's split files: which source tweets are in train, held-out and test.
//!
//! The files are CSV with a header row,
//! `tweet_id,created_at,text,label,user_id,user_name`, and texts quoted as
//! CSV does (commas, doubled quotes, newlines inside quotes). Only the ids
//! and labels matter here; the order of the file is kept.
//!
//! Ids that the cache does not hold are reported ([`ResolvedSplit::missing`]),
//! never silently dropped.

use std::path::Path;

use crate::error::LoadError;
use crate::read::ThreadSource;

type Result<T, E = LoadError> = std::result::Result<T, E>;

/// One split file, in file order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Split {
    /// Source tweet ids.
    pub ids: Vec<u64>,
    /// Their labels (1 rumour, 0 non-rumour), same order.
    pub labels: Vec<i8>,
}

/// A split matched against a cache.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResolvedSplit {
    /// Cache positions of the split's ids that the cache holds, in split order.
    pub positions: Vec<usize>,
    /// The split's labels of those positions, same order (1 rumour, 0 non-rumour).
    pub labels: Vec<i8>,
    /// The ids the cache does not hold, in split order.
    pub missing: Vec<u64>,
}

impl Split {
    /// Reads a split CSV.
    ///
    /// ```no_run
    /// let split = socialctx::Split::read("all_rnr_test_set_combined.csv")?;
    /// println!("{} source tweets", split.ids.len());
    /// # Ok::<(), socialctx::Error>(())
    /// ```
    pub fn read(path: impl AsRef<Path>) -> Result<Split> {
        let path = path.as_ref();
        let bad = |reason: String| LoadError::BadSplit {
            path: path.to_path_buf(),
            reason,
        };
        let mut reader = csv::ReaderBuilder::new()
            .has_headers(true)
            .from_path(path)
            .map_err(|e| bad(e.to_string()))?;
        let headers = reader.headers().map_err(|e| bad(e.to_string()))?.clone();
        let column = |name: &str| {
            headers
                .iter()
                .position(|h| h.trim_start_matches('\u{feff}') == name)
                .ok_or_else(|| {
                    let found: Vec<&str> = headers.iter().collect();
                    bad(format!(
                        "not an RPDNN split file: no {name:?} column (the header has {})",
                        if found.is_empty() {
                            "no columns".to_string()
                        } else {
                            found.join(", ")
                        }
                    ))
                })
        };
        let (id_col, label_col) = (column("tweet_id")?, column("label")?);
        let mut split = Split::default();
        for (i, row) in reader.records().enumerate() {
            let row = row.map_err(|e| bad(format!("record {}: {e}", i + 1)))?;
            let line = row.position().map_or(0, |p| p.line());
            let id = row.get(id_col).unwrap_or("");
            let id = id
                .trim()
                .parse::<u64>()
                .map_err(|_| bad(format!("line {line}: tweet_id {id:?} is not a tweet id")))?;
            let label = match row.get(label_col).map(str::trim) {
                Some("1") => 1,
                Some("0") => 0,
                Some(other) => {
                    return Err(bad(format!("line {line}: label {other:?} is not 0 or 1")));
                }
                None => return Err(bad(format!("line {line}: no label field"))),
            };
            split.ids.push(id);
            split.labels.push(label);
        }
        Ok(split)
    }

    /// Finds the split's threads in `cache`.
    pub fn resolve<C: ThreadSource + ?Sized>(&self, cache: &C) -> Result<ResolvedSplit> {
        let mut out = ResolvedSplit::default();
        for (&id, &label) in self.ids.iter().zip(&self.labels) {
            match cache.position(id)? {
                Some(p) => {
                    out.positions.push(p);
                    out.labels.push(label);
                }
                None => out.missing.push(id),
            }
        }
        Ok(out)
    }
}
