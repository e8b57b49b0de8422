//! The oracle's JSON Lines format, written from a cache.
//!
//! One line per thread in source-id order:
//! `{"source_id": "...", "label": "...", "reactions": [{"id": "...", "kind": "reply",
//! "created_at": 1413987677, "features": [3349.0, ...]}]}`, with the same
//! separators as Python's `json.dumps`. Each feature is printed with the
//! fewest digits that read back (as an `f64`, then rounded to `f32`) to the
//! stored value, so comparing with the oracle's doubles after `f32` rounding
//! is exact.

use std::io::{self, Write};

use crate::cache::{Cache, ThreadView};
use crate::discover::ReactionKind;

/// Writes `x` so that parsing the text as f64 and rounding to f32 gives `x`
/// back, in Python's style (`1.0`, `0.25`, `1e-07`).
///
/// ```
/// let mut s = Vec::new();
/// socialctx::dump::write_f32(&mut s, 34.6).unwrap();
/// assert_eq!(s, b"34.6");
/// ```
pub fn write_f32<W: Write>(w: &mut W, x: f32) -> io::Result<()> {
    if !x.is_finite() {
        // Python's json.dumps spelling (not strict JSON, as in the oracle).
        let s = if x.is_nan() {
            "NaN"
        } else if x > 0.0 {
            "Infinity"
        } else {
            "-Infinity"
        };
        return w.write_all(s.as_bytes());
    }
    let short = format!("{x:?}");
    // The shortest f32 digits can, in rare cases, round differently when read
    // as f64 first; then print the exact f64 value of the f32 instead.
    match short.parse::<f64>() {
        Ok(back) if back as f32 == x => w.write_all(short.as_bytes()),
        _ => write!(w, "{:?}", f64::from(x)),
    }
}

fn write_str<W: Write>(w: &mut W, s: &str) -> io::Result<()> {
    serde_json::to_writer(&mut *w, s).map_err(io::Error::other)
}

/// Writes one thread as an oracle line; retweets only if `retweets`.
pub fn write_thread<W: Write>(w: &mut W, t: &ThreadView<'_>, retweets: bool) -> io::Result<()> {
    write!(w, "{{\"source_id\": \"{}\", \"label\": ", t.source_id())?;
    write_str(w, t.label())?;
    w.write_all(b", \"reactions\": [")?;
    let mut first = true;
    for r in t.reactions() {
        if r.kind() == ReactionKind::Retweet && !retweets {
            continue;
        }
        if !first {
            w.write_all(b", ")?;
        }
        first = false;
        write!(
            w,
            "{{\"id\": \"{}\", \"kind\": \"{}\", \"created_at\": {}, \"features\": [",
            r.id(),
            r.kind().as_str(),
            r.created_at()
        )?;
        for (i, x) in r.features().iter().enumerate() {
            if i > 0 {
                w.write_all(b", ")?;
            }
            write_f32(w, *x)?;
        }
        w.write_all(b"]}")?;
    }
    w.write_all(b"]}\n")
}

/// Writes every thread of `cache` as oracle lines.
pub fn write_cache<W: Write>(w: &mut W, cache: &Cache, retweets: bool) -> io::Result<()> {
    for t in cache.iter() {
        write_thread(w, &t, retweets)?;
    }
    w.flush()
}
