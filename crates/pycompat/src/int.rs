//! Python's `int(s, base)` for `str` (bases 10 and 16, what `html.unescape`'s
//! numeric entities need): `str.isspace` stripping, a sign, single `_`
//! between digits, the `0x` prefix, any Unicode decimal digit, and 3.11's
//! limit of 4300 digits in base 10.

use crate::pytext::is_space as py_isspace;
use crate::tokens_tables as t;

/// Python `int(body, base)` for `str`, as `Some(value)` (saturated far above
/// 0x10FFFF) or `None` for a ValueError.
pub(crate) fn py_int(body: &str, base: u32) -> Option<i64> {
    // _PyUnicode_TransformDecimalAndSpaceToASCII, then PyLong_FromString.
    let mut it = body
        .chars()
        .map(|c| {
            let u = c as u32;
            if u < 127 {
                u as u8
            } else if py_isspace(c) {
                b' '
            } else {
                match t::DECIMAL.binary_search_by_key(&u, |&(cp, _)| cp) {
                    Ok(k) => b'0' + t::DECIMAL[k].1 as u8,
                    Err(_) => b'?',
                }
            }
        })
        .peekable();
    let is_sp = |b: u8| matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c);
    while it.peek().is_some_and(|&b| is_sp(b)) {
        it.next();
    }
    let mut neg = false;
    match it.peek() {
        Some(b'+') => {
            it.next();
        }
        Some(b'-') => {
            it.next();
            neg = true;
        }
        _ => {}
    }
    let digit = |b: u8| -> Option<u32> {
        let v = match b {
            b'0'..=b'9' => (b - b'0') as u32,
            b'a'..=b'z' => (b - b'a') as u32 + 10,
            b'A'..=b'Z' => (b - b'A') as u32 + 10,
            _ => return None,
        };
        (v < base).then_some(v)
    };
    // The 0x prefix (base 16), then one optional underscore.
    let mut pending: Option<u8> = None;
    if base == 16 && it.peek() == Some(&b'0') {
        it.next();
        match it.peek() {
            Some(b'x') | Some(b'X') => {
                it.next();
                if it.peek() == Some(&b'_') {
                    it.next();
                }
            }
            _ => pending = Some(b'0'),
        }
    }
    let mut value: i64 = 0;
    let mut digits = 0usize;
    let mut prev: u8 = 0;
    let first = pending.or_else(|| it.peek().copied());
    if first == Some(b'_') {
        return None;
    }
    let mut tail: Option<u8> = None;
    loop {
        let b = match pending.take() {
            Some(b) => b,
            None => match it.next() {
                Some(b) => b,
                None => break,
            },
        };
        if b == b'_' {
            if prev == b'_' {
                return None;
            }
        } else if let Some(v) = digit(b) {
            digits += 1;
            value = (value * base as i64 + v as i64).min(1 << 40);
        } else {
            tail = Some(b);
            break;
        }
        prev = b;
    }
    // CPython 3.11's int_max_str_digits (4300) applies to base 10 only.
    if prev == b'_' || digits == 0 || (base == 10 && digits > 4300) {
        return None;
    }
    if let Some(b) = tail {
        if !is_sp(b) {
            return None;
        }
        for b in it {
            if !is_sp(b) {
                return None;
            }
        }
    }
    Some(if neg { -value } else { value })
}
