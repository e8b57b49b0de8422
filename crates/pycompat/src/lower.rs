//! Python 3.11's `str.lower()`: full case mappings (some chars lower to
//! several) and the Final_Sigma rule of CPython's `handle_capital_sigma`.

use std::sync::OnceLock;

use crate::class::{BlockSet, in_ranges};
use crate::tokens_tables as t;

/// The blocks with a `str.lower()` mapping (ASCII aside).
fn lower_blocks() -> &'static BlockSet {
    static B: OnceLock<BlockSet> = OnceLock::new();
    B.get_or_init(|| {
        let mut b = BlockSet::new();
        for &(c, _) in t::LOWER1 {
            b.insert(c, c);
        }
        for &(c, _) in t::LOWER_MULTI {
            b.insert(c, c);
        }
        b.insert(0x3A3, 0x3A3);
        b
    })
}

#[inline]
fn case_ignorable(c: char) -> bool {
    in_ranges(t::CASE_IGNORABLE, c as u32)
}

/// `s.lower()` (Python 3.11) appended to `out`.
pub(crate) fn py_lower(s: &str, out: &mut String) {
    if s.is_ascii() {
        out.push_str(s);
        out.make_ascii_lowercase();
        return;
    }
    let lower = lower_blocks();
    for (i, c) in s.char_indices() {
        let u = c as u32;
        if u < 128 {
            out.push(c.to_ascii_lowercase());
        } else if !lower.contains(u) {
            out.push(c);
        } else if u == 0x3A3 {
            out.push(if final_sigma(s, i) { 'ς' } else { 'σ' });
        } else if let Ok(k) = t::LOWER1.binary_search_by_key(&u, |&(cp, _)| cp) {
            out.push(char::from_u32(t::LOWER1[k].1).unwrap_or(c));
        } else if let Ok(k) = t::LOWER_MULTI.binary_search_by_key(&u, |&(cp, _)| cp) {
            out.push_str(t::LOWER_MULTI[k].1);
        } else {
            out.push(c);
        }
    }
}

/// CPython's `handle_capital_sigma` for the Σ at byte `i` of `s`.
fn final_sigma(s: &str, i: usize) -> bool {
    let before = s[..i].chars().rev().find(|&c| !case_ignorable(c));
    let Some(b) = before else { return false };
    if !in_ranges(t::CASED_NOT_CI, b as u32) {
        return false;
    }
    match s[i + 'Σ'.len_utf8()..]
        .chars()
        .find(|&c| !case_ignorable(c))
    {
        None => true,
        Some(c) => !in_ranges(t::CASED_NOT_CI, c as u32),
    }
}
