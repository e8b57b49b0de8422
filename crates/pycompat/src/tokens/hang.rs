//! nltk's `HANG_RE` substitution: `([^\p{L}\p{N}])\1{3,}` becomes three
//! copies of the char (a backreference, so written by hand).

use super::classes::classes;

/// Whether some 4 consecutive bytes are equal (branch-free chunks, so the
/// compiler can vectorize the common, negative case).
fn ascii_run4(b: &[u8]) -> bool {
    if b.len() < 4 {
        return false;
    }
    let n = b.len() - 3;
    let (b0, b1, b2, b3) = (&b[..n], &b[1..n + 1], &b[2..n + 2], &b[3..n + 3]);
    let mut i = 0;
    while i < n {
        let j = (i + 32).min(n);
        let mut hit = false;
        for k in i..j {
            hit |= (b0[k] == b1[k]) & (b1[k] == b2[k]) & (b2[k] == b3[k]);
        }
        if hit {
            return true;
        }
        i = j;
    }
    false
}

/// `HANG_RE.sub(r"\1\1\1", s)` into `out`; false when nothing changes.
pub(super) fn hang(s: &str, out: &mut String) -> bool {
    let cl = classes();
    // First a read-only byte scan for a run of four (the common case has none).
    let b = s.as_bytes();
    let any = if s.is_ascii() {
        ascii_run4(b) && {
            let mut found = false;
            for i in 0..b.len().saturating_sub(3) {
                let x = b[i];
                if b[i + 1] == x && b[i + 2] == x && b[i + 3] == x && cl.hang.has(x as char) {
                    found = true;
                    break;
                }
            }
            found
        }
    } else {
        let mut prev = None;
        let mut count = 0usize;
        let mut found = false;
        for c in s.chars() {
            if Some(c) == prev {
                count += 1;
                if count == 4 && cl.hang.has(c) {
                    found = true;
                    break;
                }
            } else {
                prev = Some(c);
                count = 1;
            }
        }
        found
    };
    if !any {
        return false;
    }
    out.clear();
    let mut it = s.char_indices().peekable();
    while let Some((i, c)) = it.next() {
        let mut j = i + c.len_utf8();
        let mut n = 1usize;
        while let Some(&(k, d)) = it.peek() {
            if d != c {
                break;
            }
            n += 1;
            j = k + d.len_utf8();
            it.next();
        }
        if n >= 4 && cl.hang.has(c) {
            out.push(c);
            out.push(c);
            out.push(c);
        } else {
            out.push_str(&s[i..j]);
        }
    }
    true
}
