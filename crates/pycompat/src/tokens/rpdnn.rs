//! The three `re.sub` of RPDNN's `preprocessing_tweet_text` that remove
//! links and handles from the lower-cased text: `http\S+`,
//! `pic.twitter.com\S+` and `(?:\@|https?\://)\S+`, where `\S` is "not
//! `str.isspace`".

use crate::class::char_at;
use crate::pytext::is_space as py_isspace;

/// End of the run of non-`str.isspace` chars at `i`.
#[inline]
fn nonspace_end(s: &str, mut i: usize) -> usize {
    while let Some(c) = char_at(s, i) {
        if py_isspace(c) {
            break;
        }
        i += c.len_utf8();
    }
    i
}

/// Python `re.sub(pat, '', s)` for a pattern `prefix\S+` where `prefix`
/// is matched at byte `i` by `at(s, i)` (returning the prefix length);
/// candidate starts are the bytes `b1` and `b2`. False (and `out`
/// untouched) when nothing matched.
pub(super) fn sub_prefix_nonspace(
    s: &str,
    out: &mut String,
    b1: u8,
    b2: Option<u8>,
    at: impl Fn(&str, usize) -> Option<usize>,
) -> bool {
    let b = s.as_bytes();
    let next = |from: usize| {
        let hay = &b[from..];
        match b2 {
            Some(b2) => memchr::memchr2(b1, b2, hay),
            None => memchr::memchr(b1, hay),
        }
        .map(|o| from + o)
    };
    let mut copied = 0;
    let mut any = false;
    let mut from = 0;
    while let Some(i) = next(from) {
        if let Some(n) = at(s, i) {
            let e = nonspace_end(s, i + n);
            if e > i + n {
                if !any {
                    out.clear();
                    any = true;
                }
                out.push_str(&s[copied..i]);
                copied = e;
                from = e;
                continue;
            }
        }
        from = i + 1;
    }
    if any {
        out.push_str(&s[copied..]);
    }
    any
}

pub(super) fn at_http(s: &str, i: usize) -> Option<usize> {
    s[i..].starts_with("http").then_some(4)
}

/// `pic.twitter.com` with `.` = any char except `\n`.
pub(super) fn at_pic(s: &str, i: usize) -> Option<usize> {
    let r = &s[i..];
    let r2 = r.strip_prefix("pic")?;
    let c = r2.chars().next().filter(|&c| c != '\n')?;
    let r3 = r2[c.len_utf8()..].strip_prefix("twitter")?;
    let d = r3.chars().next().filter(|&c| c != '\n')?;
    let r4 = r3[d.len_utf8()..].strip_prefix("com")?;
    Some(r.len() - r4.len())
}

/// `\@|https?\://`.
pub(super) fn at_handle_or_scheme(s: &str, i: usize) -> Option<usize> {
    let r = &s[i..];
    if r.starts_with('@') {
        return Some(1);
    }
    let r2 = r.strip_prefix("http")?;
    let r2 = r2.strip_prefix('s').unwrap_or(r2);
    let r3 = r2.strip_prefix("://")?;
    Some(r.len() - r3.len())
}
