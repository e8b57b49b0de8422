//! Serializing tweets the way the PHEME files have them: Twitter API v1.1
//! key sets and key orders, with the three user-object shapes.

use crate::data::{CLIENTS, PLACES, Place};
use crate::json::JsonWriter;
use crate::model::{Media, Tweet, UrlEnt, User, UserShape};

fn write_url(j: &mut JsonWriter, u: &UrlEnt) {
    j.open_object().key("url").string(&u.url);
    j.key("indices")
        .open_array()
        .uint(u.start as u64)
        .uint(u.end as u64)
        .close_array();
    j.key("expanded_url")
        .string(&u.expanded)
        .key("display_url")
        .string(&u.display)
        .close_object();
}

/// The members of a user object, in the orders below.
#[derive(Clone, Copy)]
enum UserField {
    FollowReq,
    UseBg,
    TextColor,
    DefaultImg,
    Id,
    BgHttps,
    Verified,
    ProfileLocation,
    ImgHttps,
    SidebarFill,
    Entities,
    Followers,
    SidebarBorder,
    IdStr,
    BgColor,
    Listed,
    TransEnabled,
    UtcOffset,
    Statuses,
    Description,
    Friends,
    Location,
    LinkColor,
    Img,
    Following,
    GeoEnabled,
    Banner,
    BgImg,
    Name,
    Lang,
    BgTile,
    Favourites,
    ScreenName,
    Notifications,
    Url,
    CreatedAt,
    ContributorsEnabled,
    TimeZone,
    Protected,
    DefaultProfile,
    IsTranslator,
}

use UserField::*;

/// Key order of [`UserShape::WithLocation`] users.
const ORDER_WITH_LOCATION: [UserField; 41] = [
    FollowReq,
    UseBg,
    TextColor,
    DefaultImg,
    Id,
    BgHttps,
    Verified,
    ProfileLocation,
    ImgHttps,
    SidebarFill,
    Entities,
    Followers,
    SidebarBorder,
    IdStr,
    BgColor,
    Listed,
    TransEnabled,
    UtcOffset,
    Statuses,
    Description,
    Friends,
    Location,
    LinkColor,
    Img,
    Following,
    GeoEnabled,
    Banner,
    BgImg,
    Name,
    Lang,
    BgTile,
    Favourites,
    ScreenName,
    Notifications,
    Url,
    CreatedAt,
    ContributorsEnabled,
    TimeZone,
    Protected,
    DefaultProfile,
    IsTranslator,
];

/// Key order of [`UserShape::Plain`] and [`UserShape::Old`] users (the
/// old ones skip `entities` and `is_translation_enabled`).
const ORDER_PLAIN: [UserField; 40] = [
    FollowReq,
    UseBg,
    DefaultImg,
    Id,
    BgHttps,
    Verified,
    TextColor,
    ImgHttps,
    SidebarFill,
    Entities,
    Followers,
    SidebarBorder,
    IdStr,
    BgColor,
    Listed,
    TransEnabled,
    UtcOffset,
    Statuses,
    Description,
    Friends,
    Location,
    LinkColor,
    Img,
    Following,
    GeoEnabled,
    Banner,
    BgImg,
    ScreenName,
    Lang,
    BgTile,
    Favourites,
    Name,
    Notifications,
    Url,
    CreatedAt,
    ContributorsEnabled,
    TimeZone,
    Protected,
    DefaultProfile,
    IsTranslator,
];

fn write_user(j: &mut JsonWriter, u: &User) {
    let order: &[UserField] = if u.shape == UserShape::WithLocation {
        &ORDER_WITH_LOCATION
    } else {
        &ORDER_PLAIN
    };
    let old = u.shape == UserShape::Old;
    let [text, fill, border, bg, link] = u.colors;
    j.open_object();
    for &f in order {
        match f {
            FollowReq => j.key("follow_request_sent").bool(false),
            UseBg => j.key("profile_use_background_image").bool(u.use_bg_image),
            TextColor => j.key("profile_text_color").string(text),
            DefaultImg => j.key("default_profile_image").bool(u.default_image),
            Id => j.key("id").uint(u.id),
            BgHttps => j
                .key("profile_background_image_url_https")
                .string(&format!("https://{}", u.bg_image)),
            Verified => j.key("verified").bool(u.verified),
            ProfileLocation => j.key("profile_location").null(),
            ImgHttps => j
                .key("profile_image_url_https")
                .string(&format!("https://{}", u.image)),
            SidebarFill => j.key("profile_sidebar_fill_color").string(fill),
            Entities if old => j,
            Entities => {
                j.key("entities").open_object();
                if let Some(url) = &u.url {
                    j.key("url").open_object().key("urls").open_array();
                    write_url(j, url);
                    j.close_array().close_object();
                }
                j.key("description").open_object().key("urls").open_array();
                for d in &u.desc_urls {
                    write_url(j, d);
                }
                j.close_array().close_object().close_object()
            }
            Followers => j.key("followers_count").uint(u.followers),
            SidebarBorder => j.key("profile_sidebar_border_color").string(border),
            IdStr => j.key("id_str").string(&u.id.to_string()),
            BgColor => j.key("profile_background_color").string(bg),
            Listed => j.key("listed_count").uint(u.listed),
            TransEnabled if old => j,
            TransEnabled => j.key("is_translation_enabled").bool(false),
            UtcOffset => match u.time_zone {
                Some((_, off)) => j.key("utc_offset").int(i64::from(off)),
                None => j.key("utc_offset").null(),
            },
            Statuses => j.key("statuses_count").uint(u.statuses),
            Description => j.key("description").opt_string(u.description.as_deref()),
            Friends => j.key("friends_count").uint(u.friends),
            Location => j.key("location").string(u.location),
            LinkColor => j.key("profile_link_color").string(link),
            Img => j
                .key("profile_image_url")
                .string(&format!("http://{}", u.image)),
            Following => j.key("following").bool(false),
            GeoEnabled => j.key("geo_enabled").bool(u.geo_enabled),
            Banner => match u.banner {
                Some(t) => j.key("profile_banner_url").string(&format!(
                    "https://pbs.twimg.com/profile_banners/{}/{t}",
                    u.id
                )),
                None => j,
            },
            BgImg => j
                .key("profile_background_image_url")
                .string(&format!("http://{}", u.bg_image)),
            Name => j.key("name").string(&u.name),
            Lang => j.key("lang").string(u.lang),
            BgTile => j.key("profile_background_tile").bool(u.bg_tile),
            Favourites => j.key("favourites_count").uint(u.favourites),
            ScreenName => j.key("screen_name").string(&u.screen_name),
            Notifications => j.key("notifications").bool(false),
            Url => j
                .key("url")
                .opt_string(u.url.as_ref().map(|x| x.url.as_str())),
            CreatedAt => j.key("created_at").time(u.created),
            ContributorsEnabled => j.key("contributors_enabled").bool(false),
            TimeZone => j.key("time_zone").opt_string(u.time_zone.map(|z| z.0)),
            Protected => j.key("protected").bool(false),
            DefaultProfile => j.key("default_profile").bool(u.default_profile),
            IsTranslator => j.key("is_translator").bool(u.translator),
        };
    }
    j.close_object();
}

fn fit(w: u32, h: u32, max: u32) -> (u32, u32) {
    if w <= max && h <= max {
        (w, h)
    } else if w >= h {
        (max, h * max / w)
    } else {
        (w * max / h, max)
    }
}

fn write_media(j: &mut JsonWriter, m: &Media) {
    j.open_object();
    if let Some((status, user)) = m.from {
        j.key("source_user_id")
            .uint(user)
            .key("source_status_id_str")
            .string(&status.to_string());
    }
    j.key("expanded_url").string(&format!(
        "http://twitter.com/{}/status/{}/photo/1",
        m.owner, m.status_id
    ));
    let short = &m.url[m.url.len() - 10..];
    j.key("display_url")
        .string(&format!("pic.twitter.com/{short}"));
    j.key("url").string(&m.url);
    j.key("media_url_https")
        .string(&format!("https://pbs.twimg.com/media/{}.jpg", m.key));
    if let Some((status, user)) = m.from {
        j.key("source_user_id_str")
            .string(&user.to_string())
            .key("source_status_id")
            .uint(status);
    }
    j.key("id_str").string(&m.id.to_string());
    j.key("sizes").open_object();
    for (name, (w, h), resize) in [
        ("small", fit(m.w, m.h, 340), "fit"),
        ("large", fit(m.w, m.h, 1024), "fit"),
        ("medium", fit(m.w, m.h, 600), "fit"),
        ("thumb", (150, 150), "crop"),
    ] {
        j.key(name)
            .open_object()
            .key("h")
            .uint(u64::from(h))
            .key("resize")
            .string(resize)
            .key("w")
            .uint(u64::from(w))
            .close_object();
    }
    j.close_object();
    j.key("indices")
        .open_array()
        .uint(m.start as u64)
        .uint(m.end as u64)
        .close_array();
    j.key("type").string("photo").key("id").uint(m.id);
    j.key("media_url")
        .string(&format!("http://pbs.twimg.com/media/{}.jpg", m.key));
    j.close_object();
}

fn write_point(j: &mut JsonWriter, a: f64, b: f64) {
    j.open_object()
        .key("type")
        .string("Point")
        .key("coordinates")
        .open_array()
        .coordinate(a)
        .coordinate(b)
        .close_array()
        .close_object();
}

fn write_place(j: &mut JsonWriter, p: &Place) {
    let [w, s, e, n] = p.bbox;
    j.open_object().key("full_name").string(p.full_name);
    j.key("url")
        .string(&format!("https://api.twitter.com/1.1/geo/id/{}.json", p.id));
    j.key("country")
        .string(p.country)
        .key("place_type")
        .string("city");
    j.key("bounding_box")
        .open_object()
        .key("type")
        .string("Polygon")
        .key("coordinates")
        .open_array()
        .open_array();
    for (x, y) in [(w, s), (e, s), (e, n), (w, n)] {
        j.open_array().coordinate(x).coordinate(y).close_array();
    }
    j.close_array().close_array().close_object();
    j.key("contained_within")
        .open_array()
        .close_array()
        .key("country_code")
        .string(p.code)
        .key("attributes")
        .open_object()
        .close_object();
    j.key("id")
        .string(p.id)
        .key("name")
        .string(p.name)
        .close_object();
}

pub(crate) fn write_tweet(j: &mut JsonWriter, t: &Tweet) {
    let reply = t.reply_to.as_ref();
    j.open_object();
    j.key("contributors")
        .null()
        .key("truncated")
        .bool(false)
        .key("text")
        .string(&t.text);
    j.key("in_reply_to_status_id").opt_uint(reply.map(|r| r.0));
    j.key("id")
        .uint(t.id)
        .key("favorite_count")
        .uint(t.favorite_count);
    j.key("source")
        .string(CLIENTS[t.client].0)
        .key("retweeted")
        .bool(false);
    match t.geo {
        Some((lon, lat)) => write_point(j.key("coordinates"), lon, lat),
        None => {
            j.key("coordinates").null();
        }
    }
    j.key("entities")
        .open_object()
        .key("symbols")
        .open_array()
        .close_array();
    j.key("user_mentions").open_array();
    for m in &t.mentions {
        j.open_object()
            .key("id")
            .uint(m.id)
            .key("indices")
            .open_array()
            .uint(m.start as u64)
            .uint(m.end as u64)
            .close_array();
        j.key("id_str")
            .string(&m.id.to_string())
            .key("screen_name")
            .string(&m.screen_name)
            .key("name")
            .string(&m.name)
            .close_object();
    }
    j.close_array().key("hashtags").open_array();
    for (tag, start, end) in &t.hashtags {
        j.open_object()
            .key("indices")
            .open_array()
            .uint(*start as u64)
            .uint(*end as u64)
            .close_array()
            .key("text")
            .string(tag)
            .close_object();
    }
    j.close_array().key("urls").open_array();
    for u in &t.urls {
        write_url(j, u);
    }
    j.close_array();
    if let Some(m) = &t.media {
        j.key("media").open_array();
        write_media(j, m);
        j.close_array();
    }
    j.close_object();
    j.key("in_reply_to_screen_name")
        .opt_string(reply.map(|r| r.2.as_str()));
    j.key("id_str")
        .string(&t.id.to_string())
        .key("retweet_count")
        .uint(t.retweet_count);
    j.key("in_reply_to_user_id")
        .opt_uint(reply.map(|r| r.1))
        .key("favorited")
        .bool(false);
    if let Some(rt) = &t.retweeted {
        j.key("retweeted_status");
        write_tweet(j, rt);
    }
    j.key("user");
    write_user(j, &t.user);
    match t.geo {
        Some((lon, lat)) => write_point(j.key("geo"), lat, lon),
        None => {
            j.key("geo").null();
        }
    }
    let reply_user = reply.map(|r| r.1.to_string());
    j.key("in_reply_to_user_id_str")
        .opt_string(reply_user.as_deref());
    if let Some((sensitive, appealable)) = t.sensitive {
        j.key("possibly_sensitive").bool(sensitive);
        if appealable {
            j.key("possibly_sensitive_appealable").bool(false);
        }
    }
    j.key("lang").string(t.lang).key("created_at").time(t.secs);
    let reply_status = reply.map(|r| r.0.to_string());
    j.key("in_reply_to_status_id_str")
        .opt_string(reply_status.as_deref());
    match t.place {
        Some(p) => write_place(j.key("place"), &PLACES[p]),
        None => {
            j.key("place").null();
        }
    }
    if let Some(m) = &t.media {
        j.key("extended_entities")
            .open_object()
            .key("media")
            .open_array();
        write_media(j, m);
        for (id, key, w, h) in &m.more {
            let photo = Media {
                id: *id,
                key: key.clone(),
                w: *w,
                h: *h,
                more: Vec::new(),
                ..m.clone()
            };
            write_media(j, &photo);
        }
        j.close_array().close_object();
    }
    j.close_object();
}
