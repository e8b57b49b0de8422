//! The naked-domain branch of nltk's URL pattern,
//! `(?<!@)[a-z0-9]+(?:[.\-][a-z0-9]+){0,126}[.](?:[a-z]{2,13})\b/?(?!@)`:
//! look-arounds that `regex-automata` has not, so it is matched by hand in
//! the pattern's backtracking order.

use super::classes::classes;
use crate::class::{char_at, run_end};

/// The end of the naked-domain match starting at `q` (where `s[q]` is in
/// `[a-z0-9]` and the look-behind holds), following backtracking order.
pub(super) fn naked_from(s: &str, q: usize, ends: &mut Vec<usize>) -> Option<usize> {
    let cl = classes();
    ends.clear();
    let mut e = run_end(s, q, &cl.az09);
    ends.push(e);
    // (?:[.\-][a-z0-9]+){0,126}, greedy; giving back part of a run never
    // helps (the next item needs a char outside [a-z0-9]).
    while ends.len() <= 126 {
        match char_at(s, e) {
            Some(sep) if cl.dotdash.has(sep) => {
                let f = e + sep.len_utf8();
                match char_at(s, f) {
                    Some(c) if cl.az09.has(c) => {
                        e = run_end(s, f, &cl.az09);
                        ends.push(e);
                    }
                    _ => break,
                }
            }
            _ => break,
        }
    }
    for &ej in ends.iter().rev() {
        let Some(d) = char_at(s, ej) else { continue };
        if !cl.dot.has(d) {
            continue;
        }
        // [a-z]{2,13}\b: only the whole letter run can be followed by \b.
        let start = ej + d.len_utf8();
        let mut x = start;
        let mut n = 0usize;
        while let Some(c) = char_at(s, x) {
            if !cl.az.has(c) {
                break;
            }
            n += 1;
            x += c.len_utf8();
        }
        if !(2..=13).contains(&n) {
            continue;
        }
        let next = char_at(s, x);
        if let Some(c) = next
            && cl.word.has(c)
        {
            continue;
        }
        match next {
            Some('/') => {
                return Some(if char_at(s, x + 1) == Some('@') {
                    x
                } else {
                    x + 1
                });
            }
            Some('@') => continue,
            _ => return Some(x),
        }
    }
    None
}

/// Whether some `.` is followed by two `[a-z]` chars (else no naked domain).
pub(super) fn naked_possible(s: &str) -> bool {
    let cl = classes();
    for i in memchr::memchr_iter(b'.', s.as_bytes()) {
        let mut chars = s[i + 1..].chars();
        if let (Some(a), Some(b)) = (chars.next(), chars.next())
            && cl.az.has(a)
            && cl.az.has(b)
        {
            return true;
        }
    }
    false
}
