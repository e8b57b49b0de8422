//! The probed classes that the hand-written parts of the tokenizer test, and
//! the ASCII sets its fast paths decide from.

use std::sync::OnceLock;

use crate::class::Class;
use crate::tokens_tables as t;

/// The classes used by the hand-written parts.
#[derive(Debug)]
pub(super) struct Classes {
    pub(super) az09: Class,
    pub(super) az: Class,
    pub(super) dot: Class,
    pub(super) dotdash: Class,
    pub(super) word: Class,
    pub(super) hang: Class,
    pub(super) nonspace: Class,
    pub(super) emlocal: Class,
    pub(super) worddash: Class,
    /// ASCII chars with which no alternative but the last two (`\S`, and
    /// an emoji sequence, whose second char is not ASCII) can start: see
    /// [`lone_ascii`].
    pub(super) lone: u128,
    /// ASCII chars that start an alternative when they follow a `.`:
    /// [`lone_dot`].
    pub(super) after_dot: u128,
    /// The ASCII chars of `{HSPACE}` (the ellipsis's gaps).
    pub(super) hspace: u128,
}

pub(super) fn classes() -> &'static Classes {
    static C: OnceLock<Classes> = OnceLock::new();
    C.get_or_init(|| Classes {
        az09: Class::new(t::CLS_AZ09),
        az: Class::new(t::CLS_AZ),
        dot: Class::new(t::CLS_DOT),
        dotdash: Class::new(t::CLS_DOTDASH),
        word: Class::new(t::CLS_WORD),
        hang: Class::new(t::CLS_HANG),
        nonspace: Class::new(t::CLS_NONSPACE),
        emlocal: Class::new(t::CLS_EMLOCAL),
        worddash: Class::new(t::CLS_WORDDASH),
        lone: lone_ascii(),
        after_dot: ascii_of(&[t::CLS_AZ09DOTDASH, t::CLS_EMLOCAL, t::CLS_HSPACE]) | 1 << b'@',
        hspace: ascii_of(&[t::CLS_HSPACE]),
    })
}

/// The ASCII members of the union of `classes`.
fn ascii_of(classes: &[&'static [(u32, u32)]]) -> u128 {
    classes.iter().fold(0, |m, c| m | Class::new(c).ascii)
}

/// The ASCII non-`\s` chars that can start no alternative of the pattern
/// but `{NONSPACE}` and the emoji sequence `{NONSPACE}{SKIN}` /
/// `{NONSPACE}\x{200D}...` (see [`REST_AFTER_EMAIL`]): not the first char of
/// a URL (`{H}`, `{AZ09DOTDASH}`; the naked domain's `[a-z0-9]` is inside
/// it), a phone number (`+`, `{ZEROONE}`, `{LPAREN}`, `{DIGIT}`), an
/// emoticon (`{LTGT}`, `{EYES}`, `{MOUTH}`, `<`), a tag or arrow (`<`,
/// `{DASH}`), a handle (`@`), a hashtag (`#`), an e-mail (`{EMLOCAL}`), a
/// word or number (`{LETTER}`, `{SIGN}`, `{DIGIT}`, `{WORDU}`) or an
/// ellipsis (`.`). Such a char followed by an ASCII char (neither a skin
/// tone nor U+200D) or by the end is a token of its own.
fn lone_ascii() -> u128 {
    let starts = ascii_of(&[
        t::CLS_H,
        t::CLS_AZ09DOTDASH,
        t::CLS_ZEROONE,
        t::CLS_LPAREN,
        t::CLS_DIGIT,
        t::CLS_LTGT,
        t::CLS_EYES,
        t::CLS_MOUTH,
        t::CLS_DASH,
        t::CLS_EMLOCAL,
        t::CLS_LETTER,
        t::CLS_SIGN,
        t::CLS_WORDU,
    ]) | [b'+', b'<', b'@', b'#', b'.']
        .iter()
        .fold(0u128, |m, &c| m | 1 << c);
    Class::new(t::CLS_NONSPACE).ascii & !starts
}

/// Whether the `.` at `b[pos]` is a token of its own, decided from ASCII
/// bytes alone (false: ask the pattern). After a `.`, only a URL
/// (`{AZ09DOTDASH}{1,255}{DOT}...`), an e-mail (`{EMLOCAL}{1,64}@`) or an
/// ellipsis (`\.(?:{HSPACE}*\.)+`) goes on, so the `.` stands alone when
/// it ends the text, or is followed by an ASCII char in none of those
/// classes, or by ASCII `{HSPACE}` chars and then an ASCII char other than
/// `.`.
pub(super) fn lone_dot(b: &[u8], pos: usize, cl: &Classes) -> bool {
    let hspace = |c: u8| c < 0x80 && (cl.hspace >> c) & 1 != 0;
    match b.get(pos + 1) {
        None => true,
        Some(&n) if n >= 0x80 => false,
        Some(&n) if hspace(n) => {
            let mut i = pos + 1;
            while i < b.len() && hspace(b[i]) {
                i += 1;
            }
            // Other {HSPACE} chars are not ASCII: the pattern decides.
            b.get(i).is_none_or(|&c| c < 0x80 && c != b'.')
        }
        Some(&n) => (cl.after_dot >> n) & 1 == 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the classes make of the chars the fast paths are about (a
    /// change of the generated tables that moved one would show here).
    #[test]
    fn lone_and_after_dot_chars() {
        let cl = classes();
        let set = |m: u128| {
            (0u8..128)
                .filter(|&c| (m >> c) & 1 != 0)
                .map(char::from)
                .collect::<String>()
        };
        let lone = set(cl.lone);
        for c in "!\"$%&'*,?^`~".chars() {
            assert!(lone.contains(c), "{c:?} in {lone:?}");
        }
        for c in "abz019.:;=8<>()[]{}/\\|@#+-_ \n".chars() {
            assert!(!lone.contains(c), "{c:?} in {lone:?}");
        }
        let after = set(cl.after_dot);
        for c in "az09AZ.-+_@ \t".chars() {
            assert!(after.contains(c), "{c:?} not in {after:?}");
        }
        for c in "!?,\n\r\"'".chars() {
            assert!(!after.contains(c), "{c:?} in {after:?}");
        }
    }
}
