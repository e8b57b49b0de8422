//! The oracle's JSON Lines format, written from a cache.
//!
//! One line per thread in source-id order:
//! `{"source_id": "...", "label": "...", "reactions": [{"id": "...", "kind": "reply",
//! "created_at": 1413987677, "features": [3349.0, ...]}]}`, with the same
//! separators as Python's `json.dumps`. Each feature is printed with the
//! fewest digits that read back (as an `f64`, then rounded to `f32`) to the
//! stored value, so comparing with the oracle's doubles after `f32` rounding
//! is exact. `"label"` is the thread's label as its corpus layout named it
//! ([`ThreadView::label`]: PHEME's is its parent folder, as the oracle's;
//! a layout with a label file of its own names it from that file).
//!
//! With [`DumpOptions::tokens`], the texts for embedding instead, in the
//! format of the text oracle `rpdnn_tokens.py`.

use std::io::{self, Write};

use crate::read::{Cache, ThreadSource, ThreadView};
use crate::schema::{Annotated, REACTION_COLUMNS, ReactionKind, Veracity};

/// Writes `x` so that parsing the text as f64 and rounding to f32 gives `x`
/// back, in Python's style (`1.0`, `0.25`, `1e-07`).
fn write_f32<W: Write>(w: &mut W, x: f32) -> io::Result<()> {
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
    // `From`, not `Error::other`: an I/O error keeps its kind (a closed
    // pipe under `dump --tokens | head` is not a failure).
    serde_json::to_writer(&mut *w, s).map_err(io::Error::from)
}

/// What [`write_cache`] prints.
///
/// ```
/// let opts = socialctx::dump::DumpOptions::default().retweets(true);
/// assert!(opts.retweets && !opts.extended);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DumpOptions {
    /// Include retweets (the oracle's `--retweets`).
    pub retweets: bool,
    /// Add the extended features as extra keys: per thread `event`,
    /// `veracity` and `annotated_rumour`; per reaction `depth`,
    /// `persistence`, `follows_source`, `followed_by_source`,
    /// `reciprocal_follow` and `user_reliability` (null where unknown).
    pub extended: bool,
    /// Print the texts for embedding instead of the features, in the format
    /// of the text oracle `rpdnn_tokens.py`: `{"source_id", "reactions":
    /// [{"id", "reply_tokens", "description_tokens"}]}` (`extended` is then
    /// ignored, and `graph` too).
    pub tokens: bool,
    /// Add each reaction's parent in the propagation tree (`FEATURES.md`):
    /// `"parent": "<tweet id>"` (the source's id for the root's children) and
    /// `"parent_how": "in_reply_to" | "structure" | "defaulted"`.
    pub graph: bool,
}

impl DumpOptions {
    /// Sets [`retweets`](Self::retweets).
    pub fn retweets(mut self, yes: bool) -> Self {
        self.retweets = yes;
        self
    }

    /// Sets [`extended`](Self::extended).
    pub fn extended(mut self, yes: bool) -> Self {
        self.extended = yes;
        self
    }

    /// Sets [`graph`](Self::graph).
    pub fn graph(mut self, yes: bool) -> Self {
        self.graph = yes;
        self
    }

    /// Sets [`tokens`](Self::tokens).
    pub fn tokens(mut self, yes: bool) -> Self {
        self.tokens = yes;
        self
    }
}

fn write_token_list<'a, W: Write>(
    w: &mut W,
    tokens: Option<impl Iterator<Item = &'a str>>,
) -> io::Result<()> {
    let Some(tokens) = tokens else {
        return w.write_all(b"null");
    };
    w.write_all(b"[")?;
    for (i, t) in tokens.enumerate() {
        if i > 0 {
            w.write_all(b", ")?;
        }
        write_str(w, t)?;
    }
    w.write_all(b"]")
}

/// Writes one thread as a line of the text oracle (`rpdnn_tokens.py`).
/// A reply whose `text` is not a string is left out, as the oracle leaves it.
fn write_tokens_thread<W: Write>(
    w: &mut W,
    t: &ThreadView<'_>,
    opts: DumpOptions,
) -> io::Result<()> {
    write!(
        w,
        "{{\"source_id\": \"{}\", \"reactions\": [",
        t.source_id()
    )?;
    let mut first = true;
    for r in t.reactions() {
        if (r.kind() == ReactionKind::Retweet && !opts.retweets) || !r.has_text_tokens() {
            continue;
        }
        if !first {
            w.write_all(b", ")?;
        }
        first = false;
        write!(w, "{{\"id\": \"{}\", \"reply_tokens\": ", r.id())?;
        write_token_list(w, r.reply_tokens().as_ref().map(|t| t.iter()))?;
        w.write_all(b", \"description_tokens\": ")?;
        write_token_list(w, r.description_tokens().as_ref().map(|t| t.iter()))?;
        w.write_all(b"}")?;
    }
    w.write_all(b"]}\n")
}

fn write_code<W: Write>(w: &mut W, name: Option<&str>) -> io::Result<()> {
    match name {
        Some(name) => write!(w, "\"{name}\""),
        None => w.write_all(b"null"),
    }
}

/// Writes one thread as an oracle line.
fn write_thread<W: Write>(
    w: &mut W,
    cache: &Cache,
    t: &ThreadView<'_>,
    opts: DumpOptions,
) -> io::Result<()> {
    if opts.tokens {
        return write_tokens_thread(w, t, opts);
    }
    write!(w, "{{\"source_id\": \"{}\", \"label\": ", t.source_id())?;
    write_str(w, t.label())?;
    if opts.extended {
        w.write_all(b", \"event\": ")?;
        write_str(w, t.event())?;
        let value = |column| cache.thread_column(column).and_then(|c| t.thread_value(c));
        w.write_all(b", \"veracity\": ")?;
        write_code(
            w,
            value("veracity")
                .and_then(Veracity::from_code)
                .map(Veracity::as_str),
        )?;
        w.write_all(b", \"annotated_rumour\": ")?;
        let annotated = value("annotated_rumour").and_then(Annotated::from_code);
        write_code(w, annotated.map(Annotated::as_str))?;
    }
    w.write_all(b", \"reactions\": [")?;
    let columns: Vec<(&str, &[f32])> = if opts.extended {
        REACTION_COLUMNS
            .iter()
            .map(|name| {
                (
                    *name,
                    cache.reaction_column(name).map_or(&[][..], |c| t.column(c)),
                )
            })
            .collect()
    } else {
        Vec::new()
    };
    let mut first = true;
    for (i, r) in t.reactions().enumerate() {
        if r.kind() == ReactionKind::Retweet && !opts.retweets {
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
        w.write_all(b"]")?;
        for (name, values) in &columns {
            write!(w, ", \"{name}\": ")?;
            match values.get(i) {
                Some(v) if !v.is_nan() => write!(w, "{v}")?,
                _ => w.write_all(b"null")?,
            }
        }
        if opts.graph {
            let parent = match t.reaction(r.parent() as usize) {
                Some(p) => p.id(),
                None => t.source_id(),
            };
            let how = r.parent_how().as_str();
            write!(w, ", \"parent\": \"{parent}\", \"parent_how\": \"{how}\"")?;
        }
        w.write_all(b"}")?;
    }
    w.write_all(b"]}\n")
}

/// Writes every thread of `cache` as oracle lines, in source-id order, as
/// `opts` says (the defaults: the numerical oracle's lines, replies only).
///
/// ```no_run
/// use socialctx::{Cache, dump::{DumpOptions, write_cache}};
/// let cache = Cache::open("target/socialctx-cache")?;
/// write_cache(&mut std::io::stdout().lock(), &cache, &DumpOptions::default().retweets(true))?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn write_cache<W: Write>(w: &mut W, cache: &Cache, opts: &DumpOptions) -> io::Result<()> {
    for t in cache.iter() {
        write_thread(w, cache, &t, *opts)?;
    }
    w.flush()
}

#[cfg(test)]
mod tests {
    use super::write_f32;

    fn f32_text(x: f32) -> String {
        let mut s = Vec::new();
        write_f32(&mut s, x).unwrap();
        String::from_utf8(s).unwrap()
    }

    #[test]
    fn floats_print_as_python_reads_them_back() {
        assert_eq!(f32_text(34.6), "34.6");
        assert_eq!(f32_text(1.0), "1.0");
        assert_eq!(f32_text(0.25), "0.25");
        assert_eq!(f32_text(1e-7), "1e-7");
        assert_eq!(f32_text(f32::NAN), "NaN");
        assert_eq!(f32_text(f32::NEG_INFINITY), "-Infinity");
        for x in [34.6f32, 1e-7, 0.1, f32::MAX, f32::MIN_POSITIVE, -2.5e-3] {
            assert_eq!(f32_text(x).parse::<f64>().unwrap() as f32, x);
        }
    }
}
