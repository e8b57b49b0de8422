//! Stage 2: read a tweet file safely and parse it, with the typed field
//! helpers every layout's schema uses (what each layout picks out lives in
//! [`layout`](super::layout)).
//!
//! Files are read into a buffer the worker reuses, parsed by simd-json into a
//! tape whose allocation is also reused, and the fields are borrowed straight
//! from the buffer (simd-json unescapes strings in place). Nothing is
//! allocated per tweet on the success path. Object keys that appear twice
//! take the last value, as Python's `json` does.

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::path::Path;

use simd_json::prelude::*;
use simd_json::{Buffers, Tape, ValueType};

use pycompat::{Timestamp, parse_created_at};

/// Moved to the format (the read side keys source authors with it too).
pub use crate::format::user_key;

/// A parsed JSON value, borrowing from the reader's buffer.
pub type Value<'t, 'i> = simd_json::tape::Value<'t, 'i>;

/// Default cap on the size of one tweet file (tweets are 3-5 KB).
pub const DEFAULT_MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// A reader's first buffer, and the least it grows by: a tweet fits in one read.
const READ_CHUNK: usize = 64 * 1024;

/// Why a file was rejected, in plain words (becomes a report line).
pub type Reason = String;

/// A worker's reusable read buffer and parser state.
///
/// ```
/// use socialctx::internals::parse::TweetReader;
/// let mut r = TweetReader::new();
/// let json = br#"{"text": "hi", "user": {"screen_name": "a", "id_str": "1"},
///                 "created_at": "Wed Jan 07 11:06:08 +0000 2015"}"#;
/// let src = r.parse_bytes(json, |v| socialctx::internals::layout::pheme::source_fields(v).map(|s| s.screen_name.to_owned()));
/// assert_eq!(src.unwrap().unwrap(), "a");
/// ```
pub struct TweetReader {
    /// The loaded bytes are `buf[..len]`. The buffer stays initialised to its
    /// whole length (zeroed once, when it grows), so that a file can be read
    /// straight into it.
    buf: Vec<u8>,
    /// The JSON error of the last parse, for [`explain`](Self::explain).
    failure: std::cell::Cell<Option<JsonFailure>>,
    /// Files read so far (for the build summary).
    files_read: u64,
    len: usize,
    buffers: Buffers,
    tape: Tape<'static>,
}

impl std::fmt::Debug for TweetReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TweetReader")
            .field("loaded_bytes", &self.len)
            .field("capacity", &self.buf.len())
            .finish_non_exhaustive()
    }
}

impl Default for TweetReader {
    fn default() -> Self {
        Self::new()
    }
}

impl TweetReader {
    /// A reader with empty buffers; they grow to the largest file seen.
    pub fn new() -> Self {
        TweetReader {
            buf: vec![0; READ_CHUNK],
            failure: std::cell::Cell::new(None),
            files_read: 0,
            len: 0,
            buffers: Buffers::new(16 * 1024),
            tape: Tape::null(),
        }
    }

    /// Reads `path` into the buffer. Files larger than `max_bytes` are
    /// rejected.
    pub fn read_file(&mut self, path: &Path, max_bytes: u64) -> Result<(), Reason> {
        let file = open_options()
            .open(path)
            .map_err(|e| format!("cannot open: {e}"))?;
        self.read_from(file, max_bytes, false)
    }

    /// Reads the file `name` of the open directory `dir` into the buffer.
    ///
    /// Opening relative to the directory (`openat`) spares the kernel a walk
    /// of the whole path for every one of a corpus's many small files.
    /// `regular` says that the directory listing gave `name` as a regular
    /// file: a read that returns less than asked of a regular file is then
    /// its end (POSIX), which spares the second `read` that would only
    /// return 0. Anything else (a symlink, an unknown type) is read to a
    /// zero-byte read.
    #[cfg(unix)]
    pub fn read_file_in(
        &mut self,
        dir: &rustix::fs::Dir,
        name: &std::ffi::OsStr,
        max_bytes: u64,
        regular: bool,
    ) -> Result<(), Reason> {
        use rustix::fs::{Mode, OFlags, openat};
        if name.as_encoded_bytes().contains(&0) {
            return Err("file name contains a NUL byte".to_string());
        }
        // rustix converts short names to C strings on the stack: no
        // allocation per file.
        let dir = dir
            .fd()
            .map_err(|e| format!("cannot open: {}", std::io::Error::from(e)))?;
        let fd = openat(
            dir,
            name,
            OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK,
            Mode::empty(),
        )
        .map_err(|e| format!("cannot open: {}", std::io::Error::from(e)))?;
        self.read_from(File::from(fd), max_bytes, regular)
    }

    /// Files this reader has read (opened and read, whatever the outcome).
    pub fn files_read(&self) -> u64 {
        self.files_read
    }

    fn read_from(&mut self, mut file: File, max_bytes: u64, regular: bool) -> Result<(), Reason> {
        self.files_read += 1;
        self.len = 0;
        // Reading one byte past the cap tells a file over it from one at it,
        // and caps what a huge (or endless) file can make us read.
        let limit = usize::try_from(max_bytes.saturating_add(1)).unwrap_or(usize::MAX);
        let mut len = 0;
        while len < limit {
            if len == self.buf.len() {
                let grow = len.max(READ_CHUNK).min(limit - len);
                self.buf.resize(len + grow, 0);
            }
            let end = self.buf.len().min(limit);
            match file.read(&mut self.buf[len..end]) {
                Ok(0) => break,
                Ok(n) => {
                    len += n;
                    if regular && len < end {
                        break;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(read_reason(&e, "")),
            }
        }
        if len as u64 > max_bytes {
            return Err(format!(
                "file is over the {max_bytes}-byte limit for one tweet"
            ));
        }
        self.len = len;
        Ok(())
    }

    /// The bytes loaded by the last read (before parsing, which unescapes in place).
    pub fn bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    /// Copies `bytes` into the buffer (for tests, fuzzing and benches).
    pub fn load_bytes(&mut self, bytes: &[u8]) {
        if self.buf.len() < bytes.len() {
            self.buf.resize(bytes.len(), 0);
        }
        self.buf[..bytes.len()].copy_from_slice(bytes);
        self.len = bytes.len();
    }

    /// Parses the loaded bytes and hands the root value to `f`.
    ///
    /// `f` may return data borrowed from the buffer (not from the tape).
    pub fn parse<'s, R>(&'s mut self, f: impl FnOnce(Value<'_, 's>) -> R) -> Result<R, Reason> {
        if self.len == 0 {
            return Err("empty file".into());
        }
        let len = self.len;
        self.failure.set(None);
        let padded = len + simd_json::INPUT_PADDING;
        if self.buf.len() < padded {
            self.buf.resize(padded, 0);
        }
        // What follows the bytes is a previous file's: simd-json wants zeros.
        self.buf[len..padded].fill(0);
        let input = &mut self.buf[..padded];
        let mut tape: Tape<'s> = std::mem::replace(&mut self.tape, Tape::null()).reset();
        let result = match simd_json::fill_tape_padded(input, len, &mut self.buffers, &mut tape) {
            Ok(()) => Ok(f(tape.as_value())),
            Err(e) => {
                let failure = JsonFailure::of(&e);
                self.failure.set(Some(failure));
                Err(failure.short())
            }
        };
        self.tape = tape.reset();
        result
    }

    /// `reason` in more words if it is the JSON error of the last
    /// [`parse`](Self::parse): where it is (`line 1 column 643 (char 642)`, as
    /// Python says it) and, for a structural error, what (an unterminated
    /// string, a file that ends inside an object, NaN). Other reasons are
    /// returned as they are.
    pub fn explain(&self, reason: Reason) -> Reason {
        match self.failure.take() {
            Some(f) if reason == f.short() => f.explain(&self.buf[..self.len.min(self.buf.len())]),
            _ => reason,
        }
    }

    /// [`load_bytes`](Self::load_bytes) then [`parse`](Self::parse).
    pub fn parse_bytes<'s, R>(
        &'s mut self,
        bytes: &[u8],
        f: impl FnOnce(Value<'_, 's>) -> R,
    ) -> Result<R, Reason> {
        self.load_bytes(bytes);
        self.parse(f)
    }
}

/// The report reason for a failed read; `at` locates it in the file
/// (e.g. `" (line 3)"`), or is empty.
pub(crate) fn read_reason(e: &std::io::Error, at: &str) -> Reason {
    match e.raw_os_error() {
        Some(n) if n == rustix::io::Errno::ISDIR.raw_os_error() => {
            "not a regular file (a directory)".to_string()
        }
        _ => format!("cannot read{at}: {e}"),
    }
}

/// Opens `path` as [`TweetReader::read_file`] does (read-only, non-blocking),
/// for callers that stream a file instead of reading it whole.
pub(crate) fn open_file(path: &Path) -> Result<File, Reason> {
    open_options()
        .open(path)
        .map_err(|e| format!("cannot open: {e}"))
}

/// Read-only, and non-blocking so that a FIFO in the corpus cannot hang a worker.
fn open_options() -> OpenOptions {
    let mut o = OpenOptions::new();
    o.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(
        &mut o,
        rustix::fs::OFlags::NONBLOCK.bits() as i32,
    );
    o
}

/// What went wrong in a parse, kept so that [`TweetReader::explain`] can say
/// it in more words once the buffer is no longer borrowed by the tape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum JsonFailure {
    Utf8,
    /// simd-json's first stage: the buffer is untouched, so it can be scanned.
    Structure,
    Number(usize),
    Escape(usize),
    /// Nested deeper than simd-json's limit (valid JSON perhaps, no tweet).
    Depth(usize),
    Other(usize),
}

impl JsonFailure {
    fn of(e: &simd_json::Error) -> JsonFailure {
        use simd_json::ErrorType as E;
        match e.error() {
            E::InvalidUtf8 => JsonFailure::Utf8,
            E::InvalidNumber | E::InvalidExponent => JsonFailure::Number(e.index()),
            E::InvalidUnicodeCodepoint | E::InvalidUnicodeEscape | E::InvalidEscape => {
                JsonFailure::Escape(e.index())
            }
            E::Syntax | E::Eof | E::UnterminatedString => JsonFailure::Structure,
            E::DepthLimitExceeded => JsonFailure::Depth(e.index()),
            _ => JsonFailure::Other(e.index()),
        }
    }

    /// The reason without looking at the bytes.
    fn short(self) -> Reason {
        match self {
            JsonFailure::Utf8 => "not valid UTF-8".into(),
            JsonFailure::Number(_) => {
                "invalid JSON: a malformed number, or an integer too large for 64 bits".into()
            }
            JsonFailure::Escape(_) => "invalid JSON: a malformed \\u escape, or one that encodes \
                 a lone surrogate (a Rust string cannot hold one)"
                .into(),
            JsonFailure::Depth(_) => format!(
                "JSON nested deeper than {} levels (arrays or objects; no tweet is): not read",
                simd_json::DEFAULT_MAX_DEPTH
            ),
            JsonFailure::Structure | JsonFailure::Other(_) => "invalid JSON".into(),
        }
    }

    fn explain(self, bytes: &[u8]) -> Reason {
        let short = self.short();
        match self {
            JsonFailure::Utf8 => short,
            JsonFailure::Number(i) => {
                let what = number_problem(bytes, i).unwrap_or(short);
                format!("{what}, near {}", position(bytes, i))
            }
            JsonFailure::Depth(i) => format!("{short}, near {}", position(bytes, i)),
            JsonFailure::Escape(i) => {
                let i = lone_surrogate(bytes).unwrap_or(i);
                format!("{short}, near {}", position(bytes, i))
            }
            JsonFailure::Structure => match scan(bytes) {
                Some(what) => format!("{short}: {what}"),
                None => short,
            },
            JsonFailure::Other(i) => match scan(bytes) {
                Some(what) => format!("{short}: {what}"),
                None => format!("{short} near {}", position(bytes, i)),
            },
        }
    }
}

/// What is wrong with the number at or just before `at` (where simd-json
/// stopped), when it can be told from its text: an integer beyond 64 bits
/// (valid JSON, which this parser does not hold), or a number JSON does
/// not allow.
fn number_problem(bytes: &[u8], at: usize) -> Option<String> {
    let is_num = |b: u8| b.is_ascii_digit() || matches!(b, b'-' | b'+' | b'.' | b'e' | b'E');
    let mut start = at.min(bytes.len());
    while start > 0 && is_num(bytes[start - 1]) {
        start -= 1;
    }
    let end = start + bytes[start..].iter().take_while(|&&b| is_num(b)).count();
    let token = std::str::from_utf8(&bytes[start..end]).ok()?;
    if token.is_empty() {
        return None;
    }
    let shown: String = token.chars().take(40).collect();
    let digits = token.strip_prefix('-').unwrap_or(token);
    let integer = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'));
    if integer {
        return Some(format!(
            "the integer {shown} is valid JSON, but no tweet field holds one: too large for 64 bits"
        ));
    }
    if serde_json::from_str::<serde_json::Number>(token).is_ok() {
        return Some(format!(
            "the number {shown} could not be read as a 64-bit number"
        ));
    }
    Some(format!("invalid JSON: {shown} is not a number JSON allows"))
}

/// Offset of the first `\\uXXXX` escape that encodes a surrogate not part
/// of a high-low pair.
fn lone_surrogate(bytes: &[u8]) -> Option<usize> {
    let hex = |i: usize| {
        let h = bytes.get(i + 2..i + 6)?;
        u16::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok()
    };
    let mut i = 0;
    while i + 6 <= bytes.len() {
        if bytes[i] == b'\\' {
            if bytes[i + 1] == b'u'
                && let Some(u) = hex(i)
            {
                match u {
                    0xD800..=0xDBFF => {
                        let low = (bytes.get(i + 6) == Some(&b'\\'))
                            .then(|| hex(i + 6))
                            .flatten();
                        if !matches!(low, Some(0xDC00..=0xDFFF)) {
                            return Some(i);
                        }
                        i += 12;
                        continue;
                    }
                    0xDC00..=0xDFFF => return Some(i),
                    _ => {}
                }
            }
            i += 2;
        } else {
            i += 1;
        }
    }
    None
}

/// `line L column C (char N)` of byte offset `i`, counted in characters.
fn position(bytes: &[u8], i: usize) -> String {
    let i = i.min(bytes.len());
    let before = String::from_utf8_lossy(&bytes[..i]);
    let char_index = before.chars().count();
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    format!("line {line} column {column} (char {char_index})")
}

/// Finds why an (untouched) JSON text is malformed, for the messages simd-json's
/// first stage gives without a position.
fn scan(bytes: &[u8]) -> Option<String> {
    let mut depth: Vec<u8> = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                let start = i;
                i += 1;
                loop {
                    match bytes.get(i) {
                        None => {
                            return Some(format!(
                                "unterminated string starting at {} (the file is truncated?)",
                                position(bytes, start)
                            ));
                        }
                        Some(b'\\') => i += 2,
                        Some(b'"') => break,
                        Some(_) => i += 1,
                    }
                }
            }
            open @ (b'{' | b'[') => depth.push(open),
            close @ (b'}' | b']') => {
                let want = if close == b'}' { b'{' } else { b'[' };
                if depth.pop() != Some(want) {
                    return Some(format!(
                        "unexpected {:?} at {}",
                        close as char,
                        position(bytes, i)
                    ));
                }
            }
            b'N' | b'I' | b'-'
                if bytes[i..].starts_with(b"NaN")
                    || bytes[i..].starts_with(b"Infinity")
                    || bytes[i..].starts_with(b"-Infinity") =>
            {
                return Some(format!(
                    "NaN or Infinity at {} is not JSON (Python's json module accepts it; \
                     we do not)",
                    position(bytes, i)
                ));
            }
            _ => {}
        }
        i += 1;
    }
    if !depth.is_empty() {
        return Some(format!(
            "the file ends inside an {} at {} (truncated?)",
            if depth.last() == Some(&b'{') {
                "object"
            } else {
                "array"
            },
            position(bytes, bytes.len())
        ));
    }
    None
}

pub(crate) fn type_name(v: Value<'_, '_>) -> &'static str {
    match v.value_type() {
        ValueType::Null => "null",
        ValueType::Bool => "a boolean",
        ValueType::I64 | ValueType::U64 | ValueType::I128 | ValueType::U128 => "an integer",
        ValueType::F64 => "a non-integer number",
        ValueType::String => "a string",
        ValueType::Array => "an array",
        ValueType::Object => "an object",
        _ => "an unexpected value",
    }
}

pub(crate) fn missing(path: &str) -> Reason {
    format!("missing field {path}")
}

pub(crate) fn wrong(path: &str, expected: &str, v: Value<'_, '_>) -> Reason {
    format!("field {path} is {}, expected {expected}", type_name(v))
}

pub(crate) fn req<'t, 'i>(v: Option<Value<'t, 'i>>, path: &str) -> Result<Value<'t, 'i>, Reason> {
    v.ok_or_else(|| missing(path))
}

pub(crate) fn string<'i>(v: Option<Value<'_, 'i>>, path: &str) -> Result<&'i str, Reason> {
    let v = req(v, path)?;
    v.into_string().ok_or_else(|| wrong(path, "a string", v))
}

pub(crate) fn integer(v: Value<'_, '_>, path: &str) -> Result<i64, Reason> {
    match v.value_type() {
        ValueType::I64 | ValueType::U64 => v
            .as_i64()
            .ok_or_else(|| format!("field {path} is an integer too large for 64 bits")),
        _ => Err(wrong(path, "an integer", v)),
    }
}

pub(crate) fn count(v: Option<Value<'_, '_>>, path: &str) -> Result<i64, Reason> {
    integer(req(v, path)?, path)
}

pub(crate) fn timestamp(v: Option<Value<'_, '_>>, path: &str) -> Result<Timestamp, Reason> {
    let s = string(v, path)?;
    parse_created_at(s).map_err(|e| format!("field {path} {s:?} is not a valid timestamp: {e}"))
}

/// Python truthiness of a JSON value (`bool(x)` after `json.load`).
pub fn truthy(v: Value<'_, '_>) -> bool {
    match v.value_type() {
        ValueType::Null => false,
        ValueType::Bool => v.as_bool().unwrap_or(false),
        ValueType::F64 => v.as_f64().is_some_and(|f| f != 0.0),
        ValueType::String => v.into_string().is_some_and(|s| !s.is_empty()),
        ValueType::Array => v.as_array().is_some_and(|a| !a.is_empty()),
        ValueType::Object => v.as_object().is_some_and(|o| !o.is_empty()),
        _ => v.as_i64().is_none_or(|i| i != 0),
    }
}

pub(crate) fn flag(v: Option<Value<'_, '_>>, path: &str) -> Result<bool, Reason> {
    Ok(truthy(req(v, path)?))
}

/// Parses a decimal tweet id (`id_str`).
pub fn parse_id(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A valid reaction with `entities` (for the layouts' tests too).
    pub(crate) fn tweet(entities: &str) -> String {
        format!(
            r#"{{"created_at": "Wed Jan 07 11:06:08 +0000 2015", "id_str": "5", "text": "hi",
            "retweet_count": 0, "favorite_count": 0, "entities": {entities},
            "user": {{"id_str": "1", "created_at": "Wed Jan 07 11:06:08 +0000 2014",
            "statuses_count": 1, "listed_count": 0, "followers_count": 0, "friends_count": 0,
            "favourites_count": 0, "verified": false, "geo_enabled": false,
            "profile_use_background_image": true, "description": null, "name": "a"}}}}"#
        )
    }
    use crate::ingest::layout::pheme::reaction_fields;

    fn explained(json: &str) -> String {
        let mut r = TweetReader::new();
        let err = r.parse_bytes(json.as_bytes(), |_| ()).unwrap_err();
        r.explain(err)
    }

    /// JSON errors say what and where, in Python's position style.
    #[test]
    fn json_errors_say_what_and_where() {
        let t = tweet(r#"{"urls": []}"#);
        let cut = &t[..40];
        let e = explained(cut);
        assert!(
            e.contains("unterminated string starting at line 1 column"),
            "{e}"
        );
        let e = explained(&t.replace(r#""verified": false"#, r#""verified": NaN"#));
        assert!(e.contains("NaN or Infinity at line"), "{e}");
        let e = explained(&t.replace(r#""text": "hi""#, r#""text": "\ud800 x""#));
        assert!(e.contains("lone surrogate") && e.contains("(char "), "{e}");
        let e = explained(&t.replace(
            r#""retweet_count": 0"#,
            r#""retweet_count": 18446744073709551616"#,
        ));
        assert!(
            e.contains("too large for 64 bits, near line 2 column"),
            "{e}"
        );
        assert!(
            e.contains("the integer 18446744073709551616 is valid JSON"),
            "{e}"
        );
        // Valid JSON nested deeper than the parser goes: said so (issue
        // 35), not "invalid JSON".
        let deep = format!("{}{}", "[".repeat(200_000), "]".repeat(200_000));
        let e = explained(&deep);
        assert!(e.starts_with("JSON nested deeper than 1024 levels"), "{e}");
        let e = explained(r#"{"a": [1, 2"#);
        assert!(e.contains("ends inside an array"), "{e}");
        // A reason that is not the last parse's JSON error is kept as it is.
        let r = TweetReader::new();
        assert_eq!(r.explain("missing field x".into()), "missing field x");
    }

    /// Files of every size around the buffer's growth points read the same
    /// whether the listing said "regular file" (a short read ends the file)
    /// or not (read to a zero-byte read); the cap is exact either way; and a
    /// short file after a long one leaves nothing of the long one behind.
    #[test]
    fn reads_are_exact_at_every_size_and_cap() {
        let dir = tempfile::tempdir().unwrap();
        let fd = rustix::fs::open(
            dir.path(),
            rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::DIRECTORY,
            rustix::fs::Mode::empty(),
        )
        .unwrap();
        let listed = rustix::fs::Dir::new(fd).unwrap();
        let mut r = TweetReader::new();
        let sizes = [
            0,
            1,
            2_600,
            READ_CHUNK - 1,
            READ_CHUNK,
            READ_CHUNK + 1,
            3 * READ_CHUNK + 7,
            1 << 20,
        ];
        for (k, &size) in sizes.iter().enumerate() {
            let bytes: Vec<u8> = (0..size).map(|i| (i * 7 + k) as u8).collect();
            let name = format!("f{k}.json");
            std::fs::write(dir.path().join(&name), &bytes).unwrap();
            for regular in [true, false] {
                let name = std::ffi::OsStr::new(&name);
                r.read_file_in(&listed, name, u64::MAX, regular).unwrap();
                assert_eq!(r.bytes(), &bytes[..], "size {size}, regular {regular}");
                // At the cap: read whole; one byte over: refused.
                r.read_file_in(&listed, name, size as u64, regular).unwrap();
                assert_eq!(r.bytes().len(), size);
                if size > 0 {
                    let err = r
                        .read_file_in(&listed, name, size as u64 - 1, regular)
                        .unwrap_err();
                    assert!(err.contains("limit"), "{err}");
                }
            }
        }
        // A small tweet read into the grown buffer parses as itself: what
        // follows it in the buffer (the last file's bytes) is not read.
        std::fs::write(dir.path().join("t.json"), tweet(r#"{"urls": []}"#)).unwrap();
        r.read_file_in(&listed, std::ffi::OsStr::new("t.json"), u64::MAX, true)
            .unwrap();
        let text = r.parse(|v| reaction_fields(v).map(|f| f.text.to_owned()));
        assert_eq!(text, Ok(Ok("hi".to_string())));
    }
}
