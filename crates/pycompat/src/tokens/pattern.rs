//! nltk's tokenizer pattern (`PHONE_WORD_RE`, nltk 3.10.4 casual.py), rebuilt
//! from the probed classes as explicit case-sensitive ranges and compiled
//! with `regex-automata`: a Thompson NFA searched by a lazy (hybrid) DFA,
//! anchored and leftmost-first, with a PikeVM over the same NFA as the
//! fallback should the lazy DFA ever give up. Two variants: the common one
//! without the e-mail branch and with unbounded repeats, and the exact one.

use std::sync::OnceLock;

use regex_automata::MatchKind;
use regex_automata::hybrid::dfa::DFA;
use regex_automata::nfa::thompson::pikevm::PikeVM;
use regex_automata::nfa::thompson::{NFA, WhichCaptures};

use super::classes::classes;
use crate::tokens_tables as t;

/// `[...]` of explicit ranges for `regex-syntax`.
fn class_src(ranges: &[(u32, u32)]) -> String {
    use std::fmt::Write;
    let mut s = String::from("[");
    for &(lo, hi) in ranges {
        if lo == hi {
            let _ = write!(s, "\\x{{{lo:X}}}");
        } else {
            let _ = write!(s, "\\x{{{lo:X}}}-\\x{{{hi:X}}}");
        }
    }
    s.push(']');
    s
}

/// Replaces every `{NAME}` of `template` with the probed class `CLS_NAME`
/// (any other `{...}`, e.g. a repeat count, is kept).
fn expand(template: &str) -> String {
    let table: &[(&str, &[(u32, u32)])] = &[
        ("H", t::CLS_H),
        ("T", t::CLS_T),
        ("P", t::CLS_P),
        ("S", t::CLS_S),
        ("AZ09PCT", t::CLS_AZ09PCT),
        ("AZ09DOTDASH", t::CLS_AZ09DOTDASH),
        ("DOT", t::CLS_DOT),
        ("AZ", t::CLS_AZ),
        ("URLRUN", t::CLS_URLRUN),
        ("NOSPPAR", t::CLS_NOSPPAR),
        ("NOSP", t::CLS_NOSP),
        ("URLEND", t::CLS_URLEND),
        ("ZEROONE", t::CLS_ZEROONE),
        ("PHSEP", t::CLS_PHSEP),
        ("LPAREN", t::CLS_LPAREN),
        ("DIGIT", t::CLS_DIGIT),
        ("LTGT", t::CLS_LTGT),
        ("EYES", t::CLS_EYES),
        ("NOSE", t::CLS_NOSE),
        ("MOUTH", t::CLS_MOUTH),
        ("TAGBODY", t::CLS_TAGBODY),
        ("DASH", t::CLS_DASH),
        ("WORDU", t::CLS_WORDU),
        ("HASHMID", t::CLS_HASHMID),
        ("EMLOCAL", t::CLS_EMLOCAL),
        ("WORDDASH", t::CLS_WORDDASH),
        ("NONSPACE", t::CLS_NONSPACE),
        ("SKIN", t::CLS_SKIN),
        ("REGIND", t::CLS_REGIND),
        ("LETTER", t::CLS_LETTER),
        ("APOSDASH", t::CLS_APOSDASH),
        ("SIGN", t::CLS_SIGN),
        ("NUMSEP", t::CLS_NUMSEP),
        ("HSPACE", t::CLS_HSPACE),
    ];
    let mut out = String::new();
    let mut rest = template;
    while let Some(i) = rest.find('{') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        let j = after.find('}').expect("unclosed brace in template");
        let name = &after[..j];
        match table.iter().find(|(n, _)| *n == name) {
            Some((_, r)) => out.push_str(&class_src(r)),
            None => {
                out.push('{');
                out.push_str(name);
                out.push('}');
            }
        }
        rest = &after[j + 1..];
    }
    out.push_str(rest);
    out
}

/// URLS, first branch (scheme, or `domain.tld/`), as in casual.py.
const URL_TEMPLATE: &str = concat!(
    r"(?:{H}{T}{T}{P}{S}?:(?:/{1,3}|{AZ09PCT})|{AZ09DOTDASH}{1,255}{DOT}(?:{AZ}{2,13})/)",
    r"(?:{URLRUN}+|\({NOSPPAR}{0,255}?\({NOSPPAR}{1,255}\){NOSPPAR}{0,255}?\)|\({NOSP}{1,255}?\))+",
    r"(?:\({NOSPPAR}{0,255}?\({NOSPPAR}{1,255}\){NOSPPAR}{0,255}?\)|\({NOSP}{1,255}?\)|{URLEND})",
);

/// The alternatives after URLS in REGEXPS_PHONE; `EMAIL` marks the e-mail branch.
const REST_BEFORE_EMAIL: &str = concat!(
    // PHONE_REGEX
    r"(?:(?:\+?{ZEROONE}{PHSEP}*)?(?:{LPAREN}?{DIGIT}{3}{PHSEP}*)?{DIGIT}{3}{PHSEP}*{DIGIT}{4})",
    // EMOTICONS
    r"|(?:{LTGT}?{EYES}{NOSE}?{MOUTH}|{MOUTH}{NOSE}?{EYES}{LTGT}?|</?3)",
    // HTML tags, arrows, handles, hashtags
    r"|<{TAGBODY}+>",
    r"|{DASH}+>|<{DASH}+",
    r"|(?:@{WORDU}+)",
    r"|(?:\#+{WORDU}+{HASHMID}*{WORDU}+)",
);
const EMAIL: &str = r"|{EMLOCAL}{1,64}@{WORDDASH}{1,63}\.(?:{WORDDASH}\.?){1,251}{WORDDASH}";
const REST_AFTER_EMAIL: &str = concat!(
    // emoji with skin tones / ZWJ sequences
    r"|{NONSPACE}(?:{SKIN}?(?:\x{200D}{NONSPACE}{SKIN}?)+|{SKIN})",
    // FLAGS
    r"|(?:{REGIND}{2}",
    r"|\x{1F3F4}\x{E0067}\x{E0062}\x{E0065}\x{E006E}\x{E0067}\x{E007F}",
    r"|\x{1F3F4}\x{E0067}\x{E0062}\x{E0073}\x{E0063}\x{E0074}\x{E007F}",
    r"|\x{1F3F4}\x{E0067}\x{E0062}\x{E0077}\x{E006C}\x{E0073}\x{E007F})",
    // words, numbers, ellipses, anything else
    r"|(?:{LETTER}(?:{LETTER}|{APOSDASH})+{LETTER})",
    r"|(?:{SIGN}?{DIGIT}+{NUMSEP}{DIGIT}+{SIGN}?)",
    r"|(?:{WORDU}+)",
    r"|(?:\.(?:{HSPACE}*\.){1,})",
    r"|(?:{NONSPACE})",
);

/// One compiled tokenizer pattern: patterns 0 (URL branch) and 1 (the rest),
/// searched anchored at a token start with a lazy DFA (leftmost-first gives
/// the end of the match and which pattern matched).
#[derive(Debug)]
pub(super) struct Engine {
    pub(super) nfa: NFA,
    pub(super) dfa: DFA,
    /// Only built if the lazy DFA ever reports an error (it is configured
    /// never to give up, so this is a safety net).
    pub(super) pike: OnceLock<PikeVM>,
}

/// The bounded repeats `{0,255}?`, `{1,255}?` and `{1,255}` equal `*?`, `+?`
/// and `+` when no run of non-`\s` chars is longer than 255 chars (every class
/// under them is inside `\S`): the common case compiles without counters.
fn unbound(p: &str) -> String {
    p.replace("{0,255}?", "*?")
        .replace("{1,255}?", "+?")
        .replace("{1,255}", "+")
}

pub(super) fn compile(exact: bool, with_email: bool) -> Engine {
    let mut url = expand(URL_TEMPLATE);
    let mut rest = expand(REST_BEFORE_EMAIL);
    if with_email {
        rest.push_str(&expand(EMAIL));
    }
    rest.push_str(&expand(REST_AFTER_EMAIL));
    if !exact {
        url = unbound(&url);
        rest = unbound(&rest);
    }
    let nfa = NFA::compiler()
        .syntax(
            regex_automata::util::syntax::Config::new()
                .unicode(true)
                .utf8(true),
        )
        .configure(
            NFA::config()
                .which_captures(WhichCaptures::Implicit)
                .nfa_size_limit(Some(1 << 30))
                .shrink(false),
        )
        .build_many(&[url.as_str(), rest.as_str()])
        .expect("tokenizer pattern compiles");
    let dfa = DFA::builder()
        .configure(
            DFA::config()
                .match_kind(MatchKind::LeftmostFirst)
                .cache_capacity(if exact { 16 << 20 } else { 2 << 20 })
                .minimum_cache_clear_count(None),
        )
        .build_from_nfa(nfa.clone())
        .expect("tokenizer DFA builds");
    Engine {
        nfa,
        dfa,
        pike: OnceLock::new(),
    }
}

/// The pattern for texts where the bounded repeats are unbounded in effect
/// and no e-mail can match (the common case).
pub(super) fn engine_fast() -> &'static Engine {
    static E: OnceLock<Engine> = OnceLock::new();
    E.get_or_init(|| compile(false, false))
}

/// The exact pattern (bounded repeats, e-mail branch), compiled on first use.
pub(super) fn engine_exact() -> &'static Engine {
    static E: OnceLock<Engine> = OnceLock::new();
    E.get_or_init(|| compile(true, true))
}

/// Compiles both tokenizer patterns now (they are otherwise compiled on
/// first use) and returns how long each took. For benchmarks.
#[doc(hidden)]
pub fn warm_up() -> (std::time::Duration, std::time::Duration) {
    let t0 = std::time::Instant::now();
    let _ = classes();
    let _ = engine_fast();
    let t1 = std::time::Instant::now();
    let _ = engine_exact();
    (t1 - t0, t1.elapsed())
}
