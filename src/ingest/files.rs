//! Helpers of a thread's assembly: listing a tweet folder in a reused
//! buffer, turning a reaction file into a cache row, streaming a JSON Lines
//! file.

pub(super) use rustix::fs::Dir;

use std::path::Path;

use super::features;
use super::layout::{Layout, SourceFields};
use super::parse::{Reason, TweetReader, open_file, read_reason, user_key};
use crate::format::{ReactionRecord, ReactionSpans, Span};
use crate::schema::{FeatureVec, ReactionKind};
use pycompat::{Tokenizer, Tokens};

/// The visible file names of one directory, sorted, in one reused buffer
/// (no allocation per file once it has grown).
#[derive(Default)]
pub(super) struct Names {
    bytes: Vec<u8>,
    /// Each name's start and length in `bytes`, and whether the listing
    /// gave it as a regular file.
    spans: Vec<(usize, usize, bool)>,
}

impl Names {
    /// Lists `dir` (hidden names skipped) in byte order and returns it open,
    /// for opening its files relative to it: one open of the directory, and
    /// no allocation per entry (names are copied straight from `getdents`).
    pub(super) fn list_open(&mut self, dir: &Path) -> std::io::Result<Dir> {
        use rustix::fs::{CWD, Mode, OFlags, openat};
        self.bytes.clear();
        self.spans.clear();
        let fd = openat(
            CWD,
            dir,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        let mut listing = rustix::fs::Dir::new(fd)?;
        while let Some(entry) = listing.read() {
            let entry = entry?;
            let name = entry.file_name().to_bytes();
            if !name.starts_with(b".") {
                let regular = entry.file_type() == rustix::fs::FileType::RegularFile;
                self.spans.push((self.bytes.len(), name.len(), regular));
                self.bytes.extend_from_slice(name);
            }
        }
        let bytes = &self.bytes;
        self.spans
            .sort_unstable_by(|a, b| bytes[a.0..a.0 + a.1].cmp(&bytes[b.0..b.0 + b.1]));
        Ok(listing)
    }

    /// The names, in order.
    pub(super) fn iter(&self) -> impl DoubleEndedIterator<Item = &std::ffi::OsStr> + '_ {
        self.entries().map(|(name, _)| name)
    }

    /// The names, in order, each with whether the listing gave it as a
    /// regular file (`d_type`; false when the file system does not say).
    pub(super) fn entries(&self) -> impl DoubleEndedIterator<Item = (&std::ffi::OsStr, bool)> + '_ {
        use std::os::unix::ffi::OsStrExt;
        self.spans.iter().map(|&(start, len, regular)| {
            let name = std::ffi::OsStr::from_bytes(&self.bytes[start..start + len]);
            (name, regular)
        })
    }
}

/// Whether a tweet file name ends in `.json`; anything else in a tweet folder
/// (`123.json~`, `#123.json#`, `notes.txt`) is a stray file, reported and skipped.
pub(super) fn is_json_name(name: &std::ffi::OsStr) -> bool {
    name.as_encoded_bytes().ends_with(b".json")
}

/// The report reason for a stray file in a tweet folder.
pub(super) const STRAY: &str = "not a .json file (an editor backup or stray file?); skipped";

/// One reaction, ready for the cache (its author's key in `rec.user_key`).
pub(super) struct Row {
    pub(super) rec: ReactionRecord,
    /// Text, description and reply tokens in the thread's text arena.
    pub(super) text: ReactionSpans,
    pub(super) features: FeatureVec,
    /// The tweet it answers (`in_reply_to_status_id(_str)`), if any.
    pub(super) in_reply_to: Option<u64>,
}

/// The cache stores reply tokens as the tokenizer joins them.
const _: () = assert!(Tokens::SEPARATOR == crate::format::TOKEN_SEPARATOR);

/// A worker's reply tokenizer and its reused token buffer.
#[derive(Debug, Default)]
pub(super) struct ReplyTokenizer {
    tokenizer: Tokenizer,
    tokens: Tokens,
}

impl ReplyTokenizer {
    /// Appends the RPDNN tokens of `text` to `arena`, joined by
    /// [`TOKEN_SEPARATOR`](crate::format::TOKEN_SEPARATOR), and returns their span (empty for `[]`).
    pub(super) fn push(&mut self, arena: &mut String, text: &str) -> Span {
        self.tokenizer.reply_tokens(text, &mut self.tokens);
        let start = arena.len();
        // Already joined by TOKEN_SEPARATOR: one copy.
        arena.push_str(self.tokens.joined());
        Span {
            start: start as u32,
            len: (arena.len() - start) as u32,
        }
    }
}

/// Parses the reaction loaded in `reader`, computes its features and
/// appends its texts to `arena` (no allocation per reaction). Replies are
/// tokenised with `tok` (retweets have no reply tokens).
pub(super) fn reaction_row(
    layout: &dyn Layout,
    reader: &mut TweetReader,
    source: &SourceFields<'_>,
    kind: ReactionKind,
    arena: &mut String,
    tok: &mut ReplyTokenizer,
) -> Result<Row, Reason> {
    reader.parse(|v| {
        let r = layout.reaction_fields(v)?;
        let features = features::compute(&r, source, kind)?;
        let reply_tokens = match (kind, r.reply_text) {
            (ReactionKind::Reply, Some(text)) => tok.push(arena, text),
            _ => Span::NONE,
        };
        let text: ReactionSpans = [
            Span::push(arena, r.text),
            r.user
                .description
                .map_or(Span::NONE, |d| Span::push(arena, d)),
            reply_tokens,
        ];
        Ok(Row {
            rec: ReactionRecord {
                id: r.id,
                kind: kind as u8,
                created_at: r.created_at.unix_seconds(),
                user_key: user_key(r.user.id_str),
                // Set by the thread's assembly once every reaction is read.
                parent: crate::format::PARENT_SOURCE,
                parent_how: crate::schema::ParentHow::Defaulted as u8,
            },
            text,
            features,
            in_reply_to: r.in_reply_to,
        })
    })?
}

/// Streams the non-blank lines of a JSON Lines file to `f` with their line
/// numbers (from 1), in bounded memory: one status per line, each capped at
/// `max` bytes like a tweet file (a longer line is reported to `f` and
/// skipped), however large the file. A `retweets.json` holds a whole thread's
/// retweets, so reading it whole would make memory grow with the file.
pub(super) fn for_each_line(
    path: &Path,
    max: u64,
    f: &mut impl FnMut(usize, Result<&[u8], Reason>),
) -> Result<(), Reason> {
    use std::io::{BufRead, Read};
    let mut reader = std::io::BufReader::with_capacity(64 * 1024, open_file(path)?);
    let mut line = Vec::new();
    let read_error = |n: usize, e: std::io::Error| read_reason(&e, &format!(" (line {n})"));
    for n in 1.. {
        line.clear();
        let got = (&mut reader)
            .take(max.saturating_add(1))
            .read_until(b'\n', &mut line)
            .map_err(|e| read_error(n, e))?;
        if got == 0 {
            return Ok(());
        }
        if line.last() == Some(&b'\n') {
            line.pop();
        } else if line.len() as u64 > max {
            // Skip the rest of the over-long line without keeping it.
            loop {
                let buf = reader.fill_buf().map_err(|e| read_error(n, e))?;
                if buf.is_empty() {
                    break;
                }
                match buf.iter().position(|&b| b == b'\n') {
                    Some(p) => {
                        reader.consume(p + 1);
                        break;
                    }
                    None => {
                        let len = buf.len();
                        reader.consume(len);
                    }
                }
            }
            f(
                n,
                Err(format!("line is over the {max}-byte limit for one tweet")),
            );
            continue;
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        f(n, Ok(&line));
    }
    Ok(())
}
