//! Tweet texts: bodies in each language with their quirks, links, media and
//! mentions, with the entities that point into them.

use std::fmt::Write as _;

use crate::data::{Event, Vocab};
use crate::ids::snowflake;
use crate::model::{Lang, Media, Mention, TextBuf, UrlEnt};
use crate::rng::Rng;

pub(super) fn tco(rng: &mut Rng, secs: i64) -> String {
    // t.co links were http:// (22 chars) until early 2015, then mostly https:// (23).
    let mut s = String::from(if secs > 1_420_070_400 && rng.chance(0.5) {
        "https://t.co/"
    } else {
        "http://t.co/"
    });
    rng.alnum(&mut s, 10);
    s
}

pub(super) fn link(
    rng: &mut Rng,
    v: &Vocab,
    tb: &mut TextBuf,
    secs: i64,
    words: &[&str],
) -> UrlEnt {
    tb.space();
    let url = tco(rng, secs);
    let start = tb.n;
    tb.push(&url);
    let mut path = String::from(rng.word(&v.domains));
    path.push('/');
    for i in 0..rng.between(2, 6) {
        if i > 0 {
            path.push('-');
        }
        let w = rng.word(words);
        path.extend(
            w.chars()
                .filter(char::is_ascii_alphanumeric)
                .map(|c| c.to_ascii_lowercase()),
        );
    }
    let _ = write!(path, "-{}", rng.between(10_000_000, 39_999_999));
    let display: String = if path.chars().count() > 26 {
        path.chars()
            .take(26)
            .chain(std::iter::once('\u{2026}'))
            .collect()
    } else {
        path.clone()
    };
    let host = if rng.chance(0.8) {
        "http://"
    } else {
        "https://"
    };
    UrlEnt {
        url,
        expanded: format!("{host}{path}"),
        display: display.trim_start_matches("www.").to_string(),
        start,
        end: tb.n,
    }
}

pub(super) fn media(
    rng: &mut Rng,
    tb: &mut TextBuf,
    owner: &str,
    status_id: u64,
    ms: i64,
) -> Media {
    tb.space();
    let url = tco(rng, ms / 1000);
    let start = tb.n;
    tb.push(&url);
    let mut key = String::new();
    rng.alnum(&mut key, 15);
    let (w, h) = match rng.below(4) {
        0 => (1024, rng.between(400, 1024) as u32),
        1 => (rng.between(400, 1024) as u32, 1024),
        2 => (600, rng.between(300, 800) as u32),
        _ => (rng.between(320, 1024) as u32, rng.between(240, 768) as u32),
    };
    let low = rng.next();
    let id = snowflake(ms - rng.between(300, 60_000), low);
    let mut more = Vec::new();
    if rng.chance(0.25) {
        for k in 1..=rng.between(1, 3) {
            let mut key = String::new();
            rng.alnum(&mut key, 15);
            more.push((
                id + k as u64 * 4096 + rng.below(4096),
                key,
                1024,
                rng.between(400, 1024) as u32,
            ));
        }
    }
    Media {
        id,
        key,
        url,
        owner: owner.to_string(),
        status_id,
        w,
        h,
        start,
        end: tb.n,
        from: None,
        more,
    }
}

pub(super) fn mention(tb: &mut TextBuf, id: u64, screen_name: &str, name: &str) -> Mention {
    let start = tb.n;
    tb.push("@");
    tb.push(screen_name);
    Mention {
        id,
        screen_name: screen_name.to_string(),
        name: name.to_string(),
        start,
        end: tb.n,
    }
}

pub(super) fn words_for(v: &Vocab, lang: Lang) -> &[&'static str] {
    match lang {
        Lang::En => &v.en,
        Lang::De => &v.de,
        Lang::Fr => &v.fr,
        Lang::Es => &v.es,
        Lang::Ja => &v.ja,
    }
}

/// The oddities a text gets, drawn once per tweet.
pub(super) struct Quirks {
    newline: bool,
    entity: bool,
    emoji: bool,
    typographic: bool,
    question: bool,
}

/// Free text of about `budget` code points: sentences of words in `lang`
/// with event keywords mixed in, and the requested quirks.
pub(super) fn body(
    rng: &mut Rng,
    v: &Vocab,
    ev: usize,
    lang: Lang,
    tb: &mut TextBuf,
    budget: usize,
    q: &Quirks,
) {
    let words = words_for(v, lang);
    let start = tb.n;
    let mut in_sentence = 0;
    let mut newline_done = !q.newline;
    let mut entity_done = !q.entity;
    let mut quote_open = false;
    if q.typographic && rng.chance(0.4) {
        tb.space();
        tb.push("\u{201c}");
        quote_open = true;
    }
    while tb.n - start < budget {
        let w: &str = if rng.chance(0.1) {
            rng.word(&v.keywords[ev])
        } else {
            rng.word(words)
        };
        if lang == Lang::Ja {
            if in_sentence > 0 && rng.chance(0.2) {
                tb.push("\u{3001}");
            }
        } else if !quote_open || !tb.s.ends_with('\u{201c}') {
            tb.space();
        }
        if in_sentence == 0 && lang != Lang::Ja && rng.chance(0.5) {
            let mut cs = w.chars();
            if let Some(c) = cs.next() {
                tb.push(&c.to_uppercase().collect::<String>());
                tb.push(cs.as_str());
            }
        } else {
            tb.push(w);
        }
        in_sentence += 1;
        if !entity_done && tb.n - start > budget / 3 {
            tb.push(rng.word(&[" &amp;", " &amp;", " &gt;", " &lt;3", " -&gt;"]));
            entity_done = true;
        }
        if in_sentence >= 4 && rng.chance(0.2) {
            if lang == Lang::Ja {
                tb.push(rng.word(&["\u{3002}", "\u{ff01}", "\u{ff1f}"]));
            } else {
                tb.push(rng.word(&[".", ".", "!", ",", "...", "!!", ":"]));
            }
            in_sentence = 0;
            if !newline_done && tb.n - start > budget / 2 {
                tb.push(if rng.chance(0.7) { "\n" } else { "\n\n" });
                newline_done = true;
            }
        }
    }
    if !newline_done {
        tb.push("\n");
        tb.push(rng.word(words));
    }
    if quote_open {
        tb.push("\u{201d}");
    } else if q.typographic {
        tb.push(rng.word(&["\u{2026}", " \u{2014} really", "\u{2019}s", " \u{2013} wow"]));
    }
    if q.question {
        tb.push(rng.word(&["?", "?", "??", "?!", " ?"]));
    } else if rng.chance(0.5) {
        tb.push(rng.word(&[".", "!", "!!!", "..."]));
    }
    if q.emoji {
        tb.push(" ");
        let e = if rng.chance(0.5) {
            rng.word(&v.astral)
        } else {
            rng.word(&v.bmp_emoji)
        };
        for _ in 0..rng.between(1, 3) {
            tb.push(e);
        }
    }
}

pub(crate) fn pick_lang(rng: &mut Rng, ev: &Event) -> Lang {
    let x = rng.unit();
    if x < ev.de {
        Lang::De
    } else if x < ev.de + ev.fr {
        Lang::Fr
    } else if x < ev.de + ev.fr + 0.006 {
        Lang::Es
    } else if x < ev.de + ev.fr + 0.011 {
        Lang::Ja
    } else {
        Lang::En
    }
}

pub(super) fn quirks(rng: &mut Rng, question: f64) -> Quirks {
    Quirks {
        newline: rng.chance(0.05),
        entity: rng.chance(0.04),
        emoji: rng.chance(0.04),
        typographic: rng.chance(0.025),
        question: rng.chance(question),
    }
}
