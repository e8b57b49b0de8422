//! JSON output in Twitter's own style: compact, `\/` for slashes and `\uXXXX`
//! (surrogate pairs beyond the BMP) for everything that is not printable ASCII.

use std::fmt::Write as _;

use crate::ids::twitter_time;

/// A streaming writer of compact JSON into a reusable buffer.
///
/// Every value method writes the separator it needs first: a comma unless the
/// buffer is empty or ends with `{`, `[` or `:`. So an object is written as
/// `w.open_object().key("a").uint(1).key("b").null().close_object()`. The
/// writer does not check the nesting: the caller keeps keys and values paired
/// and the brackets balanced.
#[derive(Default)]
pub(crate) struct JsonWriter {
    buf: String,
}

impl JsonWriter {
    /// The JSON written since the last [`clear`](Self::clear).
    pub(crate) fn as_str(&self) -> &str {
        &self.buf
    }

    /// Empties the buffer, keeping its allocation.
    pub(crate) fn clear(&mut self) {
        self.buf.clear();
    }

    /// Appends a raw newline (after a complete document).
    pub(crate) fn newline(&mut self) {
        self.buf.push('\n');
    }

    fn separate(&mut self) {
        if let Some(&c) = self.buf.as_bytes().last()
            && !matches!(c, b'{' | b'[' | b':')
        {
            self.buf.push(',');
        }
    }

    /// An object key and its colon; `key` is written as is (no escaping).
    pub(crate) fn key(&mut self, key: &str) -> &mut Self {
        self.separate();
        self.buf.push('"');
        self.buf.push_str(key);
        self.buf.push_str("\":");
        self
    }

    /// A string value, escaped the way Twitter does.
    pub(crate) fn string(&mut self, v: &str) -> &mut Self {
        self.separate();
        self.buf.push('"');
        for c in v.chars() {
            match c {
                '"' => self.buf.push_str("\\\""),
                '\\' => self.buf.push_str("\\\\"),
                '/' => self.buf.push_str("\\/"),
                '\n' => self.buf.push_str("\\n"),
                '\r' => self.buf.push_str("\\r"),
                '\t' => self.buf.push_str("\\t"),
                c if c.is_ascii() && c >= ' ' => self.buf.push(c),
                c => {
                    let mut units = [0u16; 2];
                    for u in c.encode_utf16(&mut units) {
                        let _ = write!(self.buf, "\\u{u:04x}");
                    }
                }
            }
        }
        self.buf.push('"');
        self
    }

    /// A string value, or `null`.
    pub(crate) fn opt_string(&mut self, v: Option<&str>) -> &mut Self {
        match v {
            Some(v) => self.string(v),
            None => self.null(),
        }
    }

    /// An unsigned integer value.
    pub(crate) fn uint(&mut self, v: u64) -> &mut Self {
        self.separate();
        let _ = write!(self.buf, "{v}");
        self
    }

    /// A signed integer value.
    pub(crate) fn int(&mut self, v: i64) -> &mut Self {
        self.separate();
        let _ = write!(self.buf, "{v}");
        self
    }

    /// An unsigned integer value, or `null`.
    pub(crate) fn opt_uint(&mut self, v: Option<u64>) -> &mut Self {
        match v {
            Some(v) => self.uint(v),
            None => self.null(),
        }
    }

    /// A coordinate with at most 8 decimals and no trailing zeros, like Twitter's.
    pub(crate) fn coordinate(&mut self, v: f64) -> &mut Self {
        self.separate();
        let s = format!("{v:.8}");
        self.buf
            .push_str(s.trim_end_matches('0').trim_end_matches('.'));
        self
    }

    /// `true` or `false`.
    pub(crate) fn bool(&mut self, v: bool) -> &mut Self {
        self.separate();
        self.buf.push_str(if v { "true" } else { "false" });
        self
    }

    /// `null`.
    pub(crate) fn null(&mut self) -> &mut Self {
        self.separate();
        self.buf.push_str("null");
        self
    }

    /// A time as a string in Twitter's `created_at` format.
    pub(crate) fn time(&mut self, secs: i64) -> &mut Self {
        self.separate();
        self.buf.push('"');
        twitter_time(&mut self.buf, secs);
        self.buf.push('"');
        self
    }

    /// `{`; the members follow as [`key`](Self::key)-value pairs.
    pub(crate) fn open_object(&mut self) -> &mut Self {
        self.separate();
        self.buf.push('{');
        self
    }

    /// `}`.
    pub(crate) fn close_object(&mut self) -> &mut Self {
        self.buf.push('}');
        self
    }

    /// `[`.
    pub(crate) fn open_array(&mut self) -> &mut Self {
        self.separate();
        self.buf.push('[');
        self
    }

    /// `]`.
    pub(crate) fn close_array(&mut self) -> &mut Self {
        self.buf.push(']');
        self
    }
}

#[cfg(test)]
mod tests {
    use super::JsonWriter;

    #[test]
    fn separators_follow_the_nesting() {
        let mut w = JsonWriter::default();
        w.open_object().key("a").uint(1).key("b").open_array();
        w.int(-2).null().bool(true).open_object().close_object();
        w.close_array()
            .key("c")
            .opt_uint(None)
            .key("d")
            .opt_string(Some("x"));
        w.close_object();
        assert_eq!(
            w.as_str(),
            r#"{"a":1,"b":[-2,null,true,{}],"c":null,"d":"x"}"#
        );
    }

    #[test]
    fn strings_are_escaped_like_twitter() {
        let mut w = JsonWriter::default();
        w.string("a/b \"q\" \\ \n\r\t\u{1} é \u{2026} 😢");
        assert_eq!(
            w.as_str(),
            r#""a\/b \"q\" \\ \n\r\t\u0001 \u00e9 \u2026 \ud83d\ude22""#
        );
    }

    #[test]
    fn coordinates_have_at_most_8_decimals() {
        let mut w = JsonWriter::default();
        w.open_array()
            .coordinate(2.25)
            .coordinate(-33.990882)
            .coordinate(151.0)
            .coordinate(0.123456789)
            .close_array();
        assert_eq!(w.as_str(), "[2.25,-33.990882,151,0.12345679]");
    }

    #[test]
    fn times_use_the_created_at_format() {
        let mut w = JsonWriter::default();
        w.time(1_420_628_400);
        assert_eq!(w.as_str(), r#""Wed Jan 07 11:00:00 +0000 2015""#);
        w.clear();
        w.null().newline();
        assert_eq!(w.as_str(), "null\n");
    }
}
