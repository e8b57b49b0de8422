//! Accounts: names, screen names, bios, colours and counts, for reacting
//! users and news accounts.

use std::fmt::Write as _;

use super::text::link;
use crate::data::{DAY, TIME_ZONES, Vocab};
use crate::ids::{snowflake, user_id_at};
use crate::model::{Lang, TextBuf, UrlEnt, User, UserShape};
use crate::rng::Rng;

pub(super) fn screen_name_from(rng: &mut Rng, v: &Vocab, name: &str) -> String {
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

pub(super) fn display_name(rng: &mut Rng, v: &Vocab, lang: Lang) -> String {
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

pub(super) fn bio(
    rng: &mut Rng,
    v: &Vocab,
    lang: Lang,
    secs: i64,
    urls: &mut Vec<UrlEnt>,
) -> String {
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

pub(super) fn colors(rng: &mut Rng, v: &Vocab, default: bool) -> [&'static str; 5] {
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

pub(super) struct UserSeed {
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

pub(super) fn finish_user(rng: &mut Rng, v: &Vocab, s: UserSeed) -> User {
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
