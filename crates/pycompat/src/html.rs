//! HTML entities as nltk's `_replace_html_entities` decodes them (the first
//! step of `TweetTokenizer.tokenize`): `ENT_RE = &(#?(x?))([^&;\s]+);`,
//! named entities from `html.entities.name2codepoint`, numbers through
//! Python's `int()`, 0x80..=0x9F through cp1252.

use std::sync::OnceLock;

use crate::class::{Class, run_end};
use crate::int::py_int;
use crate::tokens_tables as t;

/// `[^&;\s]`, the body of an entity.
fn entity_body() -> &'static Class {
    static C: OnceLock<Class> = OnceLock::new();
    C.get_or_init(|| Class::new(t::CLS_ENTBODY))
}

/// The replacement of one entity match (`None`: removed).
fn convert_entity(hash_or_x: bool, hex: bool, body: &str) -> Option<char> {
    let number = if hash_or_x {
        let n = py_int(body, if hex { 16 } else { 10 })?;
        if (0x80..=0x9F).contains(&n) {
            let c = t::CP1252[(n - 0x80) as usize];
            return if c == 0 { None } else { char::from_u32(c) };
        }
        n
    } else {
        let k = t::ENTITIES
            .binary_search_by(|&(name, _)| name.cmp(body))
            .ok()?;
        t::ENTITIES[k].1 as i64
    };
    if !(0..=0x10FFFF).contains(&number) {
        return None;
    }
    Some(char::from_u32(number as u32).unwrap_or('\u{FFFD}'))
}

/// `ENT_RE.sub(_convert_entity, s)` into `out`; false (and `out` untouched)
/// when no entity matches.
pub(crate) fn replace_entities(s: &str, out: &mut String) -> bool {
    let body_class = entity_body();
    let b = s.as_bytes();
    let mut copied = 0usize;
    let mut any = false;
    let mut from = 0usize;
    while let Some(off) = memchr::memchr(b'&', &b[from..]) {
        let i = from + off;
        from = i + 1;
        let r = run_end(s, i + 1, body_class);
        if r == i + 1 || b.get(r) != Some(&b';') {
            continue;
        }
        let run = &s[i + 1..r];
        // &(#?(x?))([^&;\s]+); with backtracking when the body would be empty.
        let mut hash = run.starts_with('#');
        let mut rest = if hash { &run[1..] } else { run };
        let mut x = rest.starts_with('x');
        if x {
            rest = &rest[1..];
        }
        let body = if !rest.is_empty() {
            rest
        } else if x {
            x = false;
            &run[usize::from(hash)..]
        } else {
            hash = false;
            run
        };
        if !any {
            out.clear();
            any = true;
        }
        out.push_str(&s[copied..i]);
        if let Some(c) = convert_entity(hash || x, x, body) {
            out.push(c);
        }
        copied = r + 1;
        from = r + 1;
    }
    if any {
        out.push_str(&s[copied..]);
    }
    any
}
