//! Drawing accounts, texts and tweets from a thread's random stream.

use std::fmt::Write as _;

use crate::data::{DAY, EVENTS, Event, PLACES, TIME_ZONES, Vocab};
use crate::ids::{snowflake, user_id_at};
use crate::model::{Lang, Media, Mention, TextBuf, Tweet, UrlEnt, User, UserShape};
use crate::rng::Rng;

fn tco(rng: &mut Rng, secs: i64) -> String {
    // t.co links were http:// (22 chars) until early 2015, then mostly https:// (23).
    let mut s = String::from(if secs > 1_420_070_400 && rng.chance(0.5) {
        "https://t.co/"
    } else {
        "http://t.co/"
    });
    rng.alnum(&mut s, 10);
    s
}

fn link(rng: &mut Rng, v: &Vocab, tb: &mut TextBuf, secs: i64, words: &[&str]) -> UrlEnt {
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

fn media(rng: &mut Rng, tb: &mut TextBuf, owner: &str, status_id: u64, ms: i64) -> Media {
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

fn mention(tb: &mut TextBuf, id: u64, screen_name: &str, name: &str) -> Mention {
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

fn words_for(v: &Vocab, lang: Lang) -> &[&'static str] {
    match lang {
        Lang::En => &v.en,
        Lang::De => &v.de,
        Lang::Fr => &v.fr,
        Lang::Es => &v.es,
        Lang::Ja => &v.ja,
    }
}

/// The oddities a text gets, drawn once per tweet.
struct Quirks {
    newline: bool,
    entity: bool,
    emoji: bool,
    typographic: bool,
    question: bool,
}

/// Free text of about `budget` code points: sentences of words in `lang`
/// with event keywords mixed in, and the requested quirks.
fn body(
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

fn quirks(rng: &mut Rng, question: f64) -> Quirks {
    Quirks {
        newline: rng.chance(0.05),
        entity: rng.chance(0.04),
        emoji: rng.chance(0.04),
        typographic: rng.chance(0.025),
        question: rng.chance(question),
    }
}

fn screen_name_from(rng: &mut Rng, v: &Vocab, name: &str) -> String {
    let mut s = String::new();
    match rng.below(5) {
        0 => {
            s.push_str(rng.word(&v.first));
            s.push_str(rng.word(&v.last));
        }
        1 => {
            s.push_str(rng.word(&v.first));
            s.push('_');
            s.push_str(rng.word(&v.last));
        }
        2 => {
            s.push_str(&rng.word(&v.first).to_lowercase());
            let _ = write!(s, "{}", rng.between(1, 2014));
        }
        3 => {
            s.extend(name.chars().filter(char::is_ascii_alphanumeric));
            if s.is_empty() {
                s.push_str(rng.word(&v.last));
            }
            let _ = write!(s, "{}", rng.between(0, 99));
        }
        _ => {
            let n = rng.between(6, 12) as usize;
            rng.alnum(&mut s, n);
            s = s.to_lowercase();
        }
    }
    s.truncate(15);
    s
}

fn display_name(rng: &mut Rng, v: &Vocab, lang: Lang) -> String {
    let native = match lang {
        Lang::De => Some(&v.de_names),
        Lang::Fr => Some(&v.fr_names),
        Lang::Es => Some(&v.es_names),
        Lang::Ja => Some(&v.ja_names),
        Lang::En => None,
    };
    if let Some(names) = native
        && rng.chance(0.6)
    {
        return (*rng.pick(names)).to_string();
    }
    match rng.below(20) {
        0..=9 => format!("{} {}", rng.word(&v.first), rng.word(&v.last)),
        10..=12 => (rng.word(&v.first)).to_string(),
        13 => format!("{} {}", rng.word(&v.first), rng.word(&v.last)).to_uppercase(),
        14 => format!("{} {}", rng.word(&v.first), rng.word(&v.last)).to_lowercase(),
        15 => format!(
            "{} {} {}",
            rng.word(&v.first),
            rng.word(&v.bmp_emoji),
            rng.word(&v.last)
        ),
        16 => format!("{} {}", rng.word(&v.first), rng.word(&v.astral)),
        _ => (rng.word(&v.nick)).to_string(),
    }
}

fn bio(rng: &mut Rng, v: &Vocab, lang: Lang, secs: i64, urls: &mut Vec<UrlEnt>) -> String {
    let pool = match lang {
        Lang::De if rng.chance(0.7) => &v.bio_de,
        Lang::Fr if rng.chance(0.7) => &v.bio_fr,
        _ => &v.bio_en,
    };
    let mut tb = TextBuf::default();
    let target = rng.between(20, 160) as usize;
    while tb.n < target {
        if tb.n > 0 {
            tb.push(rng.word(&[". ", " | ", ", ", " \u{2022} ", ". ", " \n", " "]));
        }
        tb.push(rng.word(pool));
    }
    if rng.chance(0.05) {
        tb.push(" ");
        tb.push(if rng.chance(0.6) {
            rng.word(&v.astral)
        } else {
            rng.word(&v.bmp_emoji)
        });
    }
    if rng.chance(0.08) && tb.n < 130 {
        let owned = tb.s.clone();
        let words: Vec<&str> = owned.split_whitespace().collect();
        let mut r2 = Rng::new(rng.next());
        let u = link(&mut r2, v, &mut tb, secs, &words);
        urls.push(u);
    }
    tb.s
}

fn colors(rng: &mut Rng, v: &Vocab, default: bool) -> [&'static str; 5] {
    if default {
        ["333333", "DDEEF6", "C0DEED", "C0DEED", "0084B4"]
    } else {
        [
            rng.word(&v.colors),
            rng.word(&v.colors),
            rng.word(&v.colors),
            rng.word(&v.colors),
            rng.word(&v.colors),
        ]
    }
}

/// A random account seen tweeting at `at`.
pub(crate) fn random_user(rng: &mut Rng, v: &Vocab, at: i64, lang: Lang, shape: UserShape) -> User {
    let age = if rng.chance(0.08) {
        rng.between(2 * DAY, 365 * DAY)
    } else {
        rng.between(365 * DAY, 3100 * DAY)
    };
    let created = (at - age).max(1_142_899_200 + rng.between(0, 300 * DAY));
    let id = user_id_at(created) + rng.below(400_000);
    let name = display_name(rng, v, lang);
    let screen_name = screen_name_from(rng, v, &name);
    let mut desc_urls = Vec::new();
    let description = if rng.chance(0.0002) {
        None
    } else if rng.chance(0.15) {
        Some(String::new())
    } else {
        Some(bio(rng, v, lang, at, &mut desc_urls))
    };
    let url = if rng.chance(0.34) {
        let mut tb = TextBuf::default();
        let words = [screen_name.as_str(), "blog", "home"];
        let mut u = link(rng, v, &mut tb, at, &words);
        u.start = 0;
        u.expanded = format!("http://www.{}.com", screen_name.to_lowercase());
        u.display = format!("{}.com", screen_name.to_lowercase());
        Some(u)
    } else {
        None
    };
    let verified = rng.chance(0.015);
    let mut followers = rng.count(250.0, 1.7);
    if verified {
        followers = followers * 100 + 10_000;
    }
    let default_profile = rng.chance(0.32);
    finish_user(
        rng,
        v,
        UserSeed {
            id,
            screen_name,
            name,
            description,
            desc_urls,
            url,
            created,
            followers,
            verified,
            default_profile,
            lang,
            shape,
            at,
        },
    )
}

struct UserSeed {
    id: u64,
    screen_name: String,
    name: String,
    description: Option<String>,
    desc_urls: Vec<UrlEnt>,
    url: Option<UrlEnt>,
    created: i64,
    followers: u64,
    verified: bool,
    default_profile: bool,
    lang: Lang,
    shape: UserShape,
    at: i64,
}

fn finish_user(rng: &mut Rng, v: &Vocab, s: UserSeed) -> User {
    let friends = rng.count(350.0, 1.2);
    let statuses = rng.count(4000.0, 1.6).max(1);
    let favourites = if rng.chance(0.08) {
        0
    } else {
        rng.count(400.0, 1.8)
    };
    let listed = if rng.chance(0.17) {
        0
    } else {
        s.followers / rng.between(20, 120) as u64 + rng.between(1, 5) as u64
    };
    let default_image = rng.chance(0.03);
    let image = if default_image {
        format!(
            "pbs.twimg.com/sticky/default_profile_images/default_profile_{}_normal.png",
            rng.below(7)
        )
    } else {
        let t = rng.between(s.created.max(1_356_998_400), s.at) * 1000;
        let low = rng.next();
        let mut key = String::new();
        rng.alnum(&mut key, 8);
        let ext = *rng.pick(&["jpeg", "jpg", "jpg", "png"]);
        format!(
            "pbs.twimg.com/profile_images/{}/{key}_normal.{ext}",
            snowflake(t, low)
        )
    };
    let bg_image = if s.default_profile {
        "abs.twimg.com/images/themes/theme1/bg.png".to_string()
    } else if rng.chance(0.4) {
        format!(
            "abs.twimg.com/images/themes/theme{}/bg.{}",
            rng.between(2, 18),
            if rng.chance(0.7) { "gif" } else { "png" }
        )
    } else {
        let mut key = String::new();
        let n = rng.between(8, 32) as usize;
        rng.alnum(&mut key, n);
        format!(
            "pbs.twimg.com/profile_background_images/{}/{key}.jpeg",
            rng.between(100_000_000, 599_999_999_999_999_999)
        )
    };
    let time_zone = if rng.chance(0.33) {
        None
    } else {
        Some(*rng.pick(TIME_ZONES))
    };
    User {
        id: s.id,
        screen_name: s.screen_name,
        name: s.name,
        description: s.description,
        desc_urls: s.desc_urls,
        url: s.url,
        location: if rng.chance(0.25) {
            ""
        } else {
            rng.word(&v.locations)
        },
        time_zone,
        created: s.created,
        followers: s.followers,
        friends,
        statuses,
        favourites,
        listed,
        verified: s.verified,
        geo_enabled: rng.chance(0.45),
        use_bg_image: rng.chance(0.88),
        bg_tile: !s.default_profile && rng.chance(0.5),
        default_profile: s.default_profile,
        default_image,
        translator: rng.chance(0.005),
        colors: colors(rng, v, s.default_profile),
        bg_image,
        image,
        banner: if rng.chance(0.87) {
            Some(rng.between(s.created.max(1_338_508_800), s.at))
        } else {
            None
        },
        lang: if s.lang == Lang::En && rng.chance(0.1) {
            "en-gb"
        } else {
            s.lang.code()
        },
        shape: s.shape,
    }
}

/// A news account: the same id, names and creation date in every thread of
/// a run; its counts move a little from thread to thread.
pub(crate) fn news_user(
    rng: &mut Rng,
    v: &Vocab,
    seed: u64,
    entry: &(&str, &str, f64),
    lang: Lang,
    at: i64,
    shape: UserShape,
) -> User {
    let (screen_name, name, followers) = *entry;
    let mut base = Rng::derive(seed, screen_name, 0);
    let created = base.between(1_167_609_600, 1_293_840_000);
    let id = user_id_at(created) + base.below(400_000);
    let mut desc_urls = Vec::new();
    let mut tb = TextBuf::default();
    tb.push(base.word(&v.bio_news));
    tb.push(". ");
    tb.push(base.word(&v.bio_news));
    tb.push(".");
    if base.chance(0.4) {
        let words: Vec<&str> = name.split_whitespace().collect();
        desc_urls.push(link(&mut base, v, &mut tb, 1_400_000_000, &words));
    }
    let mut url = TextBuf::default();
    let mut home = link(&mut base, v, &mut url, 1_400_000_000, &[screen_name]);
    home.expanded = format!("http://www.{}.com", screen_name.to_lowercase());
    home.display = format!("{}.com", screen_name.to_lowercase());
    let mut u = finish_user(
        &mut base,
        v,
        UserSeed {
            id,
            screen_name: screen_name.to_string(),
            name: name.to_string(),
            description: Some(tb.s),
            desc_urls,
            url: Some(home),
            created,
            followers: 0,
            verified: true,
            default_profile: false,
            lang,
            shape,
            at: 1_400_000_000,
        },
    );
    u.followers = (followers * (0.97 + 0.06 * rng.unit())) as u64;
    u.listed = u.followers / 60 + rng.below(500);
    u.statuses = u.statuses * 20 + (at - 1_400_000_000) as u64 / 300 + rng.below(50);
    u.friends /= 3;
    u.geo_enabled = false;
    u.use_bg_image = true;
    u
}

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
