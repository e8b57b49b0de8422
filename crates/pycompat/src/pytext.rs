//! Bit-exact reproductions of the Python 3.11 (Unicode 14.0) text semantics used
//! by RPDNN's features: `re`'s `\w` and `\s` for `str` patterns, `str.isspace`,
//! `str.split()`, `str.strip()`, `len(str)` and two `re.findall`/`re.sub`
//! based word counts.
//!
//! Rust's own predicates differ from Python's, so they must not be used as
//! substitutes: [`char::is_whitespace`] rejects the ASCII separators
//! U+001C..=U+001F that `str.isspace` accepts, and [`char::is_alphanumeric`]
//! accepts combining marks with the `Other_Alphabetic` property (e.g. U+093E
//! DEVANAGARI VOWEL SIGN AA, U+0345) that Python's `\w` rejects, and follows a
//! newer Unicode version.
//!
//! The character tables live in the generated file `pytext_tables.rs`
//! (regenerate with `python3 tools/pycompat-tables/regen.py`).
//! ASCII is answered from a 128-bit mask; other code points by binary search
//! over sorted inclusive ranges. Nothing in this module allocates.

use crate::class::in_ranges;
use crate::pytext_tables::{ASCII_SPACE, ASCII_WORD, ASCII_WORD_APOS, SPACE_RANGES, WORD_RANGES};

/// Bit `c` of a 128-bit ASCII mask (`c < 128`).
#[inline(always)]
fn ascii_bit(mask: u128, c: u32) -> bool {
    (mask >> c) & 1 != 0
}

/// Python `re` `\w` for `str` patterns: `re.match(r'\w', c)`, which equals
/// `c.isalnum() or c == '_'` (letters `L*`, numbers `Nd`/`Nl`/`No`, and `_`).
///
/// Combining marks (`Mn`/`Mc`/`Me`) and connector punctuation other than `_`
/// are *not* word chars.
///
/// ```
/// use pycompat::is_word;
/// assert!(is_word('a') && is_word('_') && is_word('٣') && is_word('½'));
/// assert!(!is_word('\'') && !is_word('\u{301}') && !is_word('‿'));
/// ```
#[inline]
pub fn is_word(c: char) -> bool {
    let c = c as u32;
    if c < 128 {
        ascii_bit(ASCII_WORD, c)
    } else {
        in_ranges(WORD_RANGES, c)
    }
}

/// Python whitespace: `c.isspace()`, which is also `re`'s `\s` and what
/// `str.split()` / `str.strip()` use.
///
/// Includes U+001C..=U+001F and U+0085, excludes U+200B and U+180E.
///
/// ```
/// use pycompat::is_space;
/// assert!(is_space(' ') && is_space('\u{1f}') && is_space('\u{a0}') && is_space('\u{3000}'));
/// assert!(!is_space('\u{200b}') && !is_space('\0'));
/// ```
#[inline]
pub fn is_space(c: char) -> bool {
    let c = c as u32;
    if c < 128 {
        ascii_bit(ASCII_SPACE, c)
    } else {
        in_ranges(SPACE_RANGES, c)
    }
}

/// `c in [\w']`: a char that belongs to a `[\w']+` run.
#[inline(always)]
fn is_word_or_apos(c: char) -> bool {
    let u = c as u32;
    if u < 128 {
        ascii_bit(ASCII_WORD_APOS, u)
    } else {
        in_ranges(WORD_RANGES, u)
    }
}

/// Incremental counter of `[\w']+` runs over a sequence of text pieces that
/// are logically concatenated (a run may span a piece boundary).
#[derive(Clone, Copy, Default)]
struct RunCounter {
    count: usize,
    in_run: bool,
}

/// `[\w']` membership of each ASCII byte, as a table: one load per byte on
/// the hot path instead of a 128-bit shift.
static ASCII_WORD_APOS_TABLE: [bool; 128] = {
    let mut t = [false; 128];
    let mut i = 0;
    while i < 128 {
        t[i] = (ASCII_WORD_APOS >> i) & 1 == 1;
        i += 1;
    }
    t
};

impl RunCounter {
    #[inline]
    fn feed(&mut self, s: &str) {
        let bytes = s.as_bytes();
        let (mut count, mut in_run) = (self.count, self.in_run);
        let mut i = 0;
        while i < bytes.len() {
            let b = bytes[i];
            let member = if b < 0x80 {
                i += 1;
                ASCII_WORD_APOS_TABLE[usize::from(b)]
            } else {
                // `i` is always on a char boundary: we only step by whole chars.
                let c = s[i..].chars().next().unwrap_or_default();
                i += c.len_utf8();
                is_word_or_apos(c)
            };
            count += usize::from(member & !in_run);
            in_run = member;
        }
        (self.count, self.in_run) = (count, in_run);
    }
}

/// `len(re.findall(r"[\w']+", s))`: the number of maximal runs of word chars
/// and apostrophes (`'` only, not U+2019).
///
/// ```
/// use pycompat::count_words;
/// assert_eq!(count_words("don't stop, it's 9 o'clock"), 5);
/// assert_eq!(count_words("' ''"), 2);
/// assert_eq!(count_words("e\u{301}x"), 2); // combining mark splits words
/// ```
pub fn count_words(s: &str) -> usize {
    let mut rc = RunCounter::default();
    rc.feed(s);
    rc.count
}

/// `s.strip()`: `s` without leading and trailing Python whitespace.
///
/// ```
/// use pycompat::py_strip;
/// assert_eq!(py_strip("\u{1c}\u{3000} a b\u{85}"), "a b");
/// assert_eq!(py_strip("\u{200b}x "), "\u{200b}x");
/// ```
pub fn py_strip(s: &str) -> &str {
    s.trim_matches(is_space)
}

/// `len(s.split()) > 0`: whether `s` has any non-whitespace char.
///
/// ```
/// use pycompat::has_token;
/// assert!(!has_token(" \u{a0}\u{2029}"));
/// assert!(has_token("\u{200b}"));
/// ```
pub fn has_token(s: &str) -> bool {
    s.chars().any(|c| !is_space(c))
}

/// `len(s)`: the length in code points (not bytes).
///
/// ```
/// use pycompat::char_len;
/// assert_eq!(char_len("e\u{301}😀"), 3);
/// ```
pub fn char_len(s: &str) -> usize {
    s.chars().count()
}

/// Length of the match of `(?:@<screen_name>)\s+` at the start of `rest`
/// (which starts with `@`), if any.
#[inline]
fn mention_match(rest: &str, screen_name: &str) -> Option<usize> {
    let after = rest[1..].strip_prefix(screen_name)?;
    let trimmed = after.trim_start_matches(is_space);
    (trimmed.len() < after.len()).then(|| rest.len() - trimmed.len())
}

/// Length of the match of ` http\S+` at the start of `rest` (which starts
/// with a space), if any.
#[inline]
fn url_match(rest: &str) -> Option<usize> {
    let after = rest.strip_prefix(" http")?;
    let end = after.find(is_space).unwrap_or(after.len());
    (end > 0).then_some(5 + end)
}

/// The "context length" feature:
/// `len(re.findall(r"[\w']+", re.sub(r"(?:@" + screen_name + r")\s+| http\S+", "", text)))`.
///
/// Every match of `@<screen_name>` followed by a greedy run (at least one) of
/// whitespace, and every match of ` http` followed by at least one
/// non-whitespace char (greedy) is deleted, scanning left to right like
/// `re.sub` (non-overlapping, first alternative tried first). Then `[\w']+`
/// runs are counted in the concatenation of the kept pieces, so deletions join
/// neighbours (`"a@bob b"` becomes `"ab"`).
///
/// The screen name is matched literally and case-sensitively (identical to
/// Python for real screen names, which are `[A-Za-z0-9_]`). The leading space
/// of ` http` is a literal ASCII space: a URL at the very start of the text, or
/// after other whitespace such as `\t` or U+00A0, is kept. Does not allocate.
///
/// ```
/// use pycompat::context_len;
/// assert_eq!(context_len("@bob hi there https://t.co/x", "bob"), 2);
/// assert_eq!(context_len("a@bob b", "bob"), 1); // "ab"
/// assert_eq!(context_len("@bobby x", "bob"), 2); // needs whitespace after the name
/// assert_eq!(context_len("https://t.co/x y", "bob"), 5); // no leading space: kept
/// ```
pub fn context_len(text: &str, screen_name: &str) -> usize {
    let bytes = text.as_bytes();
    let mut rc = RunCounter::default();
    let mut kept_from = 0; // start of the current kept piece
    let mut i = 0;
    while i < bytes.len() {
        // Both alternatives start with an ASCII byte, so `i` is a char boundary.
        let m = match bytes[i] {
            b'@' => mention_match(&text[i..], screen_name),
            b' ' => url_match(&text[i..]),
            _ => None,
        };
        match m {
            Some(len) => {
                rc.feed(&text[kept_from..i]);
                i += len;
                kept_from = i;
            }
            None => i += 1,
        }
    }
    rc.feed(&text[kept_from..]);
    rc.count
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Short alias; expected values below were checked in Python 3.11.7.
    fn cl(text: &str, name: &str) -> usize {
        context_len(text, name)
    }

    #[test]
    fn tables_are_sorted_disjoint_non_ascii() {
        for t in [WORD_RANGES, SPACE_RANGES] {
            assert!(t[0].0 >= 0x80);
            for w in t.windows(2) {
                assert!(w[0].0 <= w[0].1 && w[0].1 + 1 < w[1].0, "{w:x?}");
            }
            let last = t[t.len() - 1];
            assert!(last.0 <= last.1 && last.1 <= 0x10FFFF);
        }
    }

    #[test]
    fn word_chars() {
        for c in ['a', 'Z', '0', '9', '_', 'ª', 'µ', 'º', 'ß', 'İ', 'ǅ', 'ʰ'] {
            assert!(is_word(c), "{c:?}");
        }
        // numbers of other scripts / Nl / No
        for c in [
            '٣',
            '۳',
            '०',
            '１',
            '๑',
            'Ⅰ',
            '〇',
            '½',
            '²',
            '①',
            '\u{10107}',
        ] {
            assert!(is_word(c), "{c:?}");
        }
        // CJK, Arabic, astral letters
        for c in ['一', '文', 'あ', '가', 'م', '𝐀', '\u{20000}'] {
            assert!(is_word(c), "{c:?}");
        }
        // U+02BC MODIFIER LETTER APOSTROPHE is Lm, hence a word char (U+2019 is not)
        assert!(is_word('ʼ'));
        // marks, other connector punctuation, apostrophes, emoji, format chars, controls
        let non_word = "\u{301}\u{308}\u{93e}\u{345}\u{20dd}\u{fe0f}‿⁀⁔︳＿'’`´‘😀👍\u{1f3fb}\u{200b}\u{ad}\u{feff}\0\u{7f} @-";
        for c in non_word.chars() {
            assert!(!is_word(c), "{c:?}");
        }
    }

    #[test]
    fn space_chars() {
        let py: Vec<u32> = vec![
            0x9, 0xA, 0xB, 0xC, 0xD, 0x1C, 0x1D, 0x1E, 0x1F, 0x20, 0x85, 0xA0, 0x1680, 0x2000,
            0x2001, 0x2002, 0x2003, 0x2004, 0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200A, 0x2028,
            0x2029, 0x202F, 0x205F, 0x3000,
        ];
        // The first 0x3001 code points include every Python space.
        let got: Vec<u32> = (0..=0x3001u32)
            .filter_map(char::from_u32)
            .filter(|&c| is_space(c))
            .map(|c| c as u32)
            .collect();
        assert_eq!(got, py);
        for c in ['\u{200b}', '\u{180e}', '\u{feff}', '\0', '\u{2060}'] {
            assert!(!is_space(c), "{c:?}");
        }
    }

    #[test]
    fn count_words_cases() {
        assert_eq!(count_words(""), 0);
        assert_eq!(count_words("don't ' ''"), 3);
        assert_eq!(count_words("'"), 1);
        assert_eq!(count_words("e\u{301}"), 1);
        assert_eq!(count_words("e\u{301}x"), 2);
        assert_eq!(count_words("सा"), 1); // U+093E (Mc) is not \w
        assert_eq!(count_words("١٢ Ⅰ ½"), 3);
        assert_eq!(count_words("😀 a😀b"), 2);
        assert_eq!(count_words("a\u{200b}b"), 2);
        assert_eq!(count_words("a\0b"), 2);
        assert_eq!(count_words("a‿b_c"), 2);
        assert_eq!(count_words("a\u{ad}b"), 2);
        assert_eq!(count_words("it’s"), 2); // U+2019 is not an apostrophe here
        assert_eq!(count_words("x http://a http://b"), 5);
    }

    #[test]
    fn strip_token_len_cases() {
        assert_eq!(py_strip(""), "");
        assert_eq!(py_strip(" "), "");
        assert_eq!(py_strip("\u{1c} a \u{1f}"), "a");
        assert_eq!(py_strip("\u{200b}"), "\u{200b}");
        assert_eq!(py_strip("\u{200b} x \u{3000}"), "\u{200b} x");
        assert_eq!(py_strip("\u{85}"), "");
        assert!(!has_token(""));
        assert!(!has_token(" \t\u{85}\u{2028}"));
        assert!(has_token("\u{1c} a \u{1f}"));
        assert!(has_token("\u{200b}"));
        assert!(has_token("\0"));
        assert_eq!(char_len(""), 0);
        assert_eq!(char_len("\u{200b} x \u{3000}"), 5);
        assert_eq!(char_len("😀e\u{301}"), 3);
    }

    #[test]
    fn context_len_mentions() {
        assert_eq!(cl("@bob x", "bob"), 1);
        assert_eq!(cl("@bobby x", "bob"), 2); // prefix of another name: no \s follows
        assert_eq!(cl("hi @bob", "bob"), 2); // at the end, no whitespace after
        assert_eq!(cl("@bob @bob x", "bob"), 1);
        assert_eq!(cl("@bob@bob x", "bob"), 1); // "@bobx"
        assert_eq!(cl("a@bob b", "bob"), 1); // joined: "ab"
        assert_eq!(cl("x @bob\n\n@bob\t", "bob"), 1);
        assert_eq!(cl("@Bob x", "bob"), 2); // case-sensitive
        assert_eq!(cl("@bob\u{200b}x", "bob"), 2); // U+200B is not whitespace
        assert_eq!(cl("@bob\u{85}x", "bob"), 1); // U+0085 is
        assert_eq!(cl("@bob http://x", "bob"), 2); // the space went with the mention
        assert_eq!(cl("@bobhttp://x", "bob"), 2);
        assert_eq!(cl("x@bob http://y z", "bob"), 3); // "xhttp://y z"
        // empty screen name: pattern "@\s+"
        assert_eq!(cl("@ x", ""), 1);
        assert_eq!(cl("a@ b @\u{3000}c @", ""), 2); // "ab c @"
        assert_eq!(cl("", ""), 0);
        assert_eq!(cl("@", ""), 0);
    }

    #[test]
    fn context_len_urls() {
        assert_eq!(cl(" http", "bob"), 1); // no \S after: no match
        assert_eq!(cl("x http", "bob"), 2);
        assert_eq!(cl(" https://x", "bob"), 0);
        assert_eq!(cl("https://x y", "bob"), 3); // URL at the very start is kept
        assert_eq!(cl("x http://a http://b", "bob"), 1);
        assert_eq!(cl("x  http://a", "bob"), 1);
        assert_eq!(cl("x\u{a0}http://a", "bob"), 3); // only ' ' before http
        assert_eq!(cl("x\thttp://a", "bob"), 3);
        assert_eq!(cl("x http://a\u{a0}b", "bob"), 2); // \S stops at U+00A0
        assert_eq!(cl("a http://x@bob y", "bob"), 2);
        assert_eq!(cl("a http@bob y", "bob"), 2);
        assert_eq!(cl("a httpx", "bob"), 1); // "http" then \S+ = "x"
        assert_eq!(cl("a ht", "bob"), 2);
        assert_eq!(cl("a\0 http\0b", "bob"), 1); // NUL is \S
        assert_eq!(cl("😀 http://😀 ok", "bob"), 1);
    }

    /// FNV-1a 64 over the 512-byte bitmap of `pred` on one 4096-code-point block.
    fn block_hash(block: u32, pred: fn(char) -> bool) -> String {
        let mut bits = [0u8; 512];
        for i in 0..4096u32 {
            if char::from_u32(block * 4096 + i).is_some_and(pred) {
                bits[(i >> 3) as usize] |= 1 << (i & 7);
            }
        }
        let mut h: u64 = 0xCBF2_9CE4_8422_2325;
        for b in bits {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01B3);
        }
        format!("{h:016x}")
    }

    /// Parity with Python over the fixture file, written with the tables by
    /// `python3 tools/pycompat-tables/regen.py` (format documented in
    /// `tools/pycompat-tables/pytext_tables.py`): ~3000 random tricky strings with
    /// Python's answers for every function, plus per-4096-block hashes of
    /// `is_word`/`is_space` over all of 0..=0x10FFFF.
    #[test]
    fn python_parity_fixtures() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/pytext_cases.jsonl"
        );
        let data = std::fs::read_to_string(path).expect("read fixture");
        let (mut cases, mut blocks) = (0, 0);
        for (n, line) in data.lines().enumerate() {
            let v: serde_json::Value = serde_json::from_str(line).expect("json line");
            if let Some(a) = v.as_array() {
                let text = a[0].as_str().unwrap();
                let name = a[1].as_str().unwrap();
                let ctx = || format!("line {}: {text:?} / {name:?}", n + 1);
                assert_eq!(
                    count_words(text),
                    a[2].as_u64().unwrap() as usize,
                    "{}",
                    ctx()
                );
                let (sa, sb) = (a[3][0].as_u64().unwrap(), a[3][1].as_u64().unwrap());
                let want: String = text
                    .chars()
                    .skip(sa as usize)
                    .take((sb - sa) as usize)
                    .collect();
                assert_eq!(py_strip(text), want, "{}", ctx());
                assert_eq!(has_token(text), a[4].as_bool().unwrap(), "{}", ctx());
                assert_eq!(char_len(text), a[5].as_u64().unwrap() as usize, "{}", ctx());
                assert_eq!(
                    context_len(text, name),
                    a[6].as_u64().unwrap() as usize,
                    "{}",
                    ctx()
                );
                cases += 1;
            } else {
                let block = v["block"].as_u64().unwrap() as u32;
                assert_eq!(block_hash(block, is_word), v["word"], "word block {block}");
                assert_eq!(
                    block_hash(block, is_space),
                    v["space"],
                    "space block {block}"
                );
                blocks += 1;
            }
        }
        assert!(cases >= 3000, "{cases}");
        assert_eq!(blocks, 0x110000 / 4096);
    }
}
