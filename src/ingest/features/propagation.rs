//! Extended per-reaction features from the thread's reply tree
//! (`structure.json`): `depth` and `persistence`.
//!
//! `structure.json` is nested objects keyed by tweet id strings, leaves `[]`.
//! The depth of an id is its nesting level: the top-level keys (normally just
//! the source) are 0, their children 1, and so on. Real files have several
//! roots, ids without files, files missing from the tree, depths over 10, and
//! one key with curly quotes inside it (not an id, so the ids in it stay
//! unknown); an id missing from the tree has an unknown depth (NaN).
//!
//! `persistence` is the number of tweets in the thread (source and reactions,
//! replies and retweets) posted by the reaction's author, as the reference's
//! docstring defines it. (The reference's code compares tweet ids instead of
//! user ids and so almost always yields 1; we implement the documented
//! meaning.)

use std::collections::HashMap;

use crate::ingest::parse::{Reason, parse_id};

type Value<'t, 'i> = simd_json::tape::Value<'t, 'i>;

/// Depth of every id in a parsed `structure.json` (the smallest, if an id
/// appears more than once). Keys that are not decimal ids are skipped.
///
/// ```
/// use socialctx::internals::parse::TweetReader;
/// use socialctx::internals::features::propagation::depths;
/// let mut r = TweetReader::new();
/// let d = r.parse_bytes(br#"{"1": {"2": [], "3": {"4": []}}}"#, depths).unwrap().unwrap();
/// assert_eq!((d[&1], d[&2], d[&4]), (0, 1, 2));
/// ```
pub fn depths(root: Value<'_, '_>) -> Result<HashMap<u64, u32>, Reason> {
    let top = root
        .as_object()
        .ok_or_else(|| "structure.json is not a JSON object".to_string())?;
    let mut out = HashMap::new();
    // Iterative, so that a very deep (or hostile) tree cannot overflow the stack.
    let mut stack = vec![(top, 0u32)];
    while let Some((obj, depth)) = stack.pop() {
        for (key, child) in obj.iter() {
            if let Some(id) = parse_id(key) {
                let d = out.entry(id).or_insert(depth);
                *d = (*d).min(depth);
            }
            if let Some(o) = child.as_object() {
                stack.push((o, depth + 1));
            }
        }
    }
    Ok(out)
}

/// Number of tweets per author key in a thread.
pub fn author_counts(authors: impl IntoIterator<Item = u64>) -> HashMap<u64, u32> {
    let mut counts = HashMap::new();
    for a in authors {
        *counts.entry(a).or_insert(0) += 1;
    }
    counts
}
