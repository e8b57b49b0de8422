//! Tweets: source tweets, replies and retweets assembled from a text and an
//! account.

use super::text::{body, link, media, mention, pick_lang, quirks};
use super::user::{display_name, screen_name_from};
use crate::data::{EVENTS, PLACES, Vocab};
use crate::ids::{snowflake, user_id_at};
use crate::model::{Lang, Media, Mention, TextBuf, Tweet, UrlEnt, User};
use crate::rng::Rng;

#[derive(Clone, Copy)]
struct Mix {
    max_tags: u32,
    tag: f64,
    url: f64,
    media: f64,
}

fn new_tweet(id: u64, secs: i64, client: usize, user: User, lang: Lang) -> Tweet {
    Tweet {
        id,
        secs,
        text: String::new(),
        client,
        reply_to: None,
        mentions: Vec::new(),
        hashtags: Vec::new(),
        urls: Vec::new(),
        media: None,
        retweet_count: 0,
        favorite_count: 0,
        lang: lang.code(),
        sensitive: None,
        geo: None,
        place: None,
        user,
        retweeted: None,
    }
}

/// Hashtags, links, photo, geo: everything after the words.
fn decorate(rng: &mut Rng, v: &Vocab, ev: usize, mut tb: TextBuf, t: &mut Tweet, mix: Mix) {
    for _ in 0..mix.max_tags {
        if rng.chance(mix.tag) {
            tb.space();
            let tag = rng.word(&v.tags[ev]);
            let start = tb.n;
            tb.push("#");
            tb.push(tag);
            t.hashtags.push((tag.to_string(), start, tb.n));
        }
    }
    if rng.chance(mix.url) {
        let words = v.keywords[ev].clone();
        t.urls.push(link(rng, v, &mut tb, t.secs, &words));
        if rng.chance(0.1) {
            t.urls.push(link(rng, v, &mut tb, t.secs, &words));
        }
    }
    if rng.chance(mix.media) {
        t.media = Some(media(
            rng,
            &mut tb,
            &t.user.screen_name,
            t.id,
            t.secs * 1000,
        ));
        if tb.n < 40 && rng.chance(0.5) {
            t.lang = "und";
        }
    }
    if !t.urls.is_empty() || t.media.is_some() {
        t.sensitive = Some((rng.chance(0.01), rng.chance(0.1)));
    }
    if rng.chance(0.04) {
        let p = rng.below(PLACES.len() as u64) as usize;
        t.place = Some(p);
        if rng.chance(0.55) {
            let [w, s, e, n] = PLACES[p].bbox;
            t.geo = Some((w + (e - w) * rng.unit(), s + (n - s) * rng.unit()));
        }
    }
    t.text = tb.s;
}

pub(crate) fn source_tweet(
    rng: &mut Rng,
    v: &Vocab,
    ev: usize,
    lang: Lang,
    user: User,
    ms: i64,
    low: u64,
) -> Tweet {
    let client = v.client(rng);
    let mut t = new_tweet(snowflake(ms, low), ms / 1000, client, user, lang);
    let mut tb = TextBuf::default();
    if rng.chance(0.15) {
        tb.push(if lang == Lang::De {
            "EIL: "
        } else {
            "BREAKING: "
        });
    }
    let q = quirks(rng, 0.1);
    let budget = rng.between(40, 95) as usize;
    body(rng, v, ev, lang, &mut tb, budget, &q);
    decorate(
        rng,
        v,
        ev,
        tb,
        &mut t,
        Mix {
            max_tags: 2,
            tag: 0.45,
            url: 0.45,
            media: 0.28,
        },
    );
    t.retweet_count = rng.count(100.0, 1.5);
    t.favorite_count = rng.count(50.0, 1.6);
    t
}

/// Who and what an earlier reply was, for nested replies.
pub(crate) struct Earlier {
    pub(crate) id: u64,
    pub(crate) user: User,
}

pub(crate) struct ReplyCtx<'a> {
    pub(crate) v: &'a Vocab,
    pub(crate) ev: usize,
    pub(crate) source: &'a Tweet,
}

pub(crate) fn reply(
    rng: &mut Rng,
    c: &ReplyCtx,
    parent: Option<&Earlier>,
    user: User,
    ms: i64,
    low: u64,
) -> Tweet {
    let v = c.v;
    let src = c.source;
    let lang = if rng.chance(0.3) {
        match src.lang {
            "de" => Lang::De,
            "fr" => Lang::Fr,
            "es" => Lang::Es,
            "ja" => Lang::Ja,
            _ => Lang::En,
        }
    } else {
        pick_lang(rng, &EVENTS[c.ev])
    };
    let client = v.client(rng);
    let mut t = new_tweet(snowflake(ms, low), ms / 1000, client, user, lang);
    let su = &src.user;
    let mut tb = TextBuf::default();
    let budget = rng.between(20, 115) as usize;
    match parent {
        Some(p) => {
            t.reply_to = Some((p.id, p.user.id, p.user.screen_name.clone()));
            t.mentions.push(mention(
                &mut tb,
                p.user.id,
                &p.user.screen_name,
                &p.user.name,
            ));
            if rng.chance(0.8) && p.user.id != su.id {
                tb.space();
                t.mentions
                    .push(mention(&mut tb, su.id, &su.screen_name, &su.name));
            }
        }
        None => {
            t.reply_to = Some((src.id, su.id, su.screen_name.clone()));
            if rng.chance(0.02) {
                // Old-style quote: “@Source: text…” comment
                tb.push("\u{201c}");
                t.mentions
                    .push(mention(&mut tb, su.id, &su.screen_name, &su.name));
                tb.push(": ");
                let quoted: String = src
                    .text
                    .chars()
                    .take(rng.between(20, 70) as usize)
                    .collect();
                tb.push(&quoted);
                tb.push("\u{201d}");
            } else if rng.chance(0.92) {
                t.mentions
                    .push(mention(&mut tb, su.id, &su.screen_name, &su.name));
            }
        }
    }
    for p in [0.35, 0.1] {
        if rng.chance(p) {
            tb.space();
            let name = display_name(rng, v, Lang::En);
            let screen = screen_name_from(rng, v, &name);
            let id = user_id_at(rng.between(1_167_609_600, 1_410_000_000));
            t.mentions.push(mention(&mut tb, id, &screen, &name));
        }
    }
    let q = quirks(rng, 0.22);
    body(rng, v, c.ev, lang, &mut tb, budget, &q);
    decorate(
        rng,
        v,
        c.ev,
        tb,
        &mut t,
        Mix {
            max_tags: 1,
            tag: 0.1,
            url: 0.1,
            media: 0.075,
        },
    );
    t.retweet_count = if rng.chance(0.88) {
        0
    } else {
        rng.count(2.0, 1.2).max(1)
    };
    t.favorite_count = if rng.chance(0.72) {
        0
    } else {
        rng.count(2.0, 1.2).max(1)
    };
    t
}

pub(crate) fn retweet(
    rng: &mut Rng,
    v: &Vocab,
    src: &Tweet,
    user: User,
    ms: i64,
    low: u64,
) -> Tweet {
    let client = v.client(rng);
    let mut t = new_tweet(snowflake(ms, low), ms / 1000, client, user, Lang::En);
    let su = &src.user;
    let mut tb = TextBuf::default();
    tb.push("RT ");
    t.mentions
        .push(mention(&mut tb, su.id, &su.screen_name, &su.name));
    tb.push(": ");
    let shift = tb.n;
    tb.push(&src.text);
    if tb.n > 140 {
        tb.s =
            tb.s.chars()
                .take(139)
                .chain(std::iter::once('\u{2026}'))
                .collect();
        tb.n = 140;
    }
    let fits = |end: usize| end + shift <= tb.n;
    t.mentions.extend(
        src.mentions
            .iter()
            .filter(|m| fits(m.end))
            .map(|m| Mention {
                start: m.start + shift,
                end: m.end + shift,
                ..m.clone()
            }),
    );
    t.hashtags.extend(
        src.hashtags
            .iter()
            .filter(|h| fits(h.2))
            .map(|h| (h.0.clone(), h.1 + shift, h.2 + shift)),
    );
    t.urls
        .extend(src.urls.iter().filter(|u| fits(u.end)).map(|u| UrlEnt {
            start: u.start + shift,
            end: u.end + shift,
            ..u.clone()
        }));
    t.media = src.media.as_ref().map(|m| Media {
        start: m.start + shift,
        end: m.end + shift,
        from: m.from.or(Some((src.id, su.id))),
        ..m.clone()
    });
    t.text = tb.s;
    t.lang = src.lang;
    t.sensitive = src.sensitive;
    t.retweet_count = src.retweet_count;
    if rng.chance(0.01) {
        let p = rng.below(PLACES.len() as u64) as usize;
        t.place = Some(p);
    }
    t.retweeted = Some(Box::new(src.clone()));
    t
}
