//! The PHEME layout (and its relatives: RumourEval 2017, the PHEME
//! journalism release): `<event>/<label>/<id>/` thread folders with
//! `source-tweets/`, `reactions/` (or `replies/`) and `retweets/` holding
//! one tweet a file, the side files `structure.json`, `annotation.json`,
//! `who-follows-whom.dat` and `retweets.json`, and Twitter's v1.1 JSON.
//!
//! The field rules follow `FEATURES.md` (repository root) and the
//! reference's Python: a field used by a feature must be present with the
//! right JSON type, except the ones documented as "null -> 0"; the
//! `verified`/`geo_enabled`/`profile_use_background_image` flags use Python
//! truthiness; ids come from `id_str` (integer ids exceed 2^53). Object keys
//! that appear twice take the last value, as Python's `json` does.

use std::collections::HashMap;

use simd_json::prelude::*;

use super::{Layout, ReactionFields, SIDE_FILES, SourceFields, UserFields};
use crate::ingest::features::labels::{Annotation, annotation};
use crate::ingest::features::propagation::depths;
use crate::ingest::parents::{Structure, structure};
use crate::ingest::parse::{
    Reason, Value, count, flag, integer, parse_id, req, string, timestamp, type_name, wrong,
};
use crate::schema::ReactionKind;

/// The PHEME layout.
#[derive(Debug)]
pub struct Pheme;

/// Folder names that hold a thread's source tweet, in order of preference.
pub const SOURCE_DIRS: [&str; 2] = ["source-tweets", "source-tweet"];

/// Folder names that hold a thread's reactions, with the kind they give.
pub const REACTION_DIRS: [(&str, ReactionKind); 3] = [
    ("reactions", ReactionKind::Reply),
    ("replies", ReactionKind::Reply),
    ("retweets", ReactionKind::Retweet),
];

/// The side files, by role (read for the extended features; `structure.json`
/// by every build, for the parents; `annotation.json` also for the labels of
/// threads outside a label folder). No label file of its own: the label is
/// the folder's, else the annotation's (the default
/// [`Layout::label_source`]).
pub const SIDE_FILE_NAMES: [Option<&str>; SIDE_FILES] = [
    Some("structure.json"),
    Some("annotation.json"),
    Some("who-follows-whom.dat"),
    Some("retweets.json"),
    None,
];

impl Layout for Pheme {
    fn name(&self) -> &'static str {
        "pheme"
    }
    fn source_dirs(&self) -> &'static [&'static str] {
        &SOURCE_DIRS
    }
    fn reaction_dirs(&self) -> &'static [(&'static str, ReactionKind)] {
        &REACTION_DIRS
    }
    fn side_files(&self) -> [Option<&'static str>; SIDE_FILES] {
        SIDE_FILE_NAMES
    }
    fn source_fields<'i>(&self, root: Value<'_, 'i>) -> Result<SourceFields<'i>, Reason> {
        source_fields(root)
    }
    fn reaction_fields<'i>(&self, root: Value<'_, 'i>) -> Result<ReactionFields<'i>, Reason> {
        reaction_fields(root)
    }
    fn structure(&self, root: Value<'_, '_>) -> Result<(Structure, HashMap<u64, u32>), Reason> {
        Ok((structure(root)?, depths(root)?))
    }
    fn annotation(&self, root: Value<'_, '_>) -> Result<Annotation, Reason> {
        annotation(root)
    }
    /// PHEME's `-all-rnr-threads` suffix is removed, so one event has one
    /// name across datasets.
    fn event_name<'t>(&self, td: &'t crate::ingest::discover::ThreadDir) -> &'t str {
        let raw = super::folder_event(td);
        raw.strip_suffix("-all-rnr-threads")
            .filter(|e| !e.is_empty())
            .unwrap_or(raw)
    }
}

/// Extracts a reaction's fields from its parsed JSON.
pub fn reaction_fields<'i>(root: Value<'_, 'i>) -> Result<ReactionFields<'i>, Reason> {
    let obj = root
        .as_object()
        .ok_or_else(|| format!("the file holds {}, not a tweet object", type_name(root)))?;
    let (mut created_at, mut id_str, mut full_text, mut text) = (None, None, None, None);
    let (mut retweets, mut favorites, mut entities, mut user) = (None, None, None, None);
    let mut has_extended_entities = false;
    let (mut reply_to_str, mut reply_to) = (None, None);
    // One pass over the keys; a repeated key overwrites, as in Python.
    for (k, v) in obj.iter() {
        match k {
            "created_at" => created_at = Some(v),
            "id_str" => id_str = Some(v),
            "full_text" => full_text = Some(v),
            "text" => text = Some(v),
            "retweet_count" => retweets = Some(v),
            "favorite_count" => favorites = Some(v),
            "entities" => entities = Some(v),
            "extended_entities" => has_extended_entities = true,
            "user" => user = Some(v),
            "in_reply_to_status_id_str" => reply_to_str = Some(v),
            "in_reply_to_status_id" => reply_to = Some(v),
            _ => {}
        }
    }
    let in_reply_to = reply_to_str
        .and_then(|v| v.into_string())
        .and_then(parse_id)
        .or_else(|| {
            reply_to
                .filter(|v| v.value_type() == ValueType::U64 || v.value_type() == ValueType::I64)
                .and_then(|v| v.as_u64())
        });
    let id_s = string(id_str, "id_str")?;
    let id =
        parse_id(id_s).ok_or_else(|| format!("field id_str {id_s:?} is not a decimal tweet id"))?;
    let created_at = timestamp(created_at, "created_at")?;
    let text_value = match (full_text, text) {
        (Some(v), _) => v
            .into_string()
            .ok_or_else(|| wrong("full_text", "a string", v))?,
        (None, Some(v)) => v
            .into_string()
            .ok_or_else(|| wrong("text", "a string", v))?,
        (None, None) => return Err("missing field text (and full_text)".into()),
    };
    let reply_text = match text {
        Some(v) => v.into_string(),
        None => Some(text_value),
    };
    let retweet_count = count(retweets, "retweet_count")?;
    let favorites = req(favorites, "favorite_count")?;
    let favorite_count = if favorites.is_null() {
        0
    } else {
        integer(favorites, "favorite_count")?
    };
    let entities = req(entities, "entities")?;
    let entities = entities
        .as_object()
        .ok_or_else(|| wrong("entities", "an object", entities))?;
    // A repeated key takes its last value, as Python's json module does.
    let urls = entities
        .iter()
        .filter(|(k, _)| *k == "urls")
        .map(|(_, v)| v)
        .last();
    let urls = req(urls, "entities.urls")?;
    let url_count = match urls.value_type() {
        ValueType::Null => 0,
        ValueType::Array => urls.as_array().map_or(0, |a| a.len()),
        _ => return Err(wrong("entities.urls", "an array or null", urls)),
    };
    let user = user_fields(req(user, "user")?)?;
    Ok(ReactionFields {
        id,
        created_at,
        text: text_value,
        reply_text,
        retweet_count,
        favorite_count,
        url_count,
        has_extended_entities,
        in_reply_to,
        user,
    })
}

fn user_fields<'i>(user: Value<'_, 'i>) -> Result<UserFields<'i>, Reason> {
    let obj = user
        .as_object()
        .ok_or_else(|| wrong("user", "an object", user))?;
    let (mut id_str, mut created_at, mut statuses, mut listed) = (None, None, None, None);
    let (mut followers, mut friends, mut favourites, mut verified) = (None, None, None, None);
    let (mut geo, mut background, mut description, mut name) = (None, None, None, None);
    for (k, v) in obj.iter() {
        match k {
            "id_str" => id_str = Some(v),
            "created_at" => created_at = Some(v),
            "statuses_count" => statuses = Some(v),
            "listed_count" => listed = Some(v),
            "followers_count" => followers = Some(v),
            "friends_count" => friends = Some(v),
            "favourites_count" => favourites = Some(v),
            "verified" => verified = Some(v),
            "geo_enabled" => geo = Some(v),
            "profile_use_background_image" => background = Some(v),
            "description" => description = Some(v),
            "name" => name = Some(v),
            _ => {}
        }
    }
    let description = req(description, "user.description")?;
    let description = if description.is_null() {
        None
    } else {
        Some(
            description
                .into_string()
                .ok_or_else(|| wrong("user.description", "a string or null", description))?,
        )
    };
    Ok(UserFields {
        id_str: string(id_str, "user.id_str")?,
        created_at: timestamp(created_at, "user.created_at")?,
        statuses_count: count(statuses, "user.statuses_count")?,
        listed_count: count(listed, "user.listed_count")?,
        followers_count: count(followers, "user.followers_count")?,
        friends_count: count(friends, "user.friends_count")?,
        favourites_count: count(favourites, "user.favourites_count")?,
        verified: flag(verified, "user.verified")?,
        geo_enabled: flag(geo, "user.geo_enabled")?,
        profile_use_background_image: flag(background, "user.profile_use_background_image")?,
        description,
        name: string(name, "user.name")?,
    })
}

/// Extracts a source tweet's fields from its parsed JSON.
pub fn source_fields<'i>(root: Value<'_, 'i>) -> Result<SourceFields<'i>, Reason> {
    let obj = root
        .as_object()
        .ok_or_else(|| format!("the file holds {}, not a tweet object", type_name(root)))?;
    let (mut created_at, mut text, mut full_text, mut user) = (None, None, None, None);
    for (k, v) in obj.iter() {
        match k {
            "created_at" => created_at = Some(v),
            "text" => text = Some(v),
            "full_text" => full_text = Some(v),
            "user" => user = Some(v),
            _ => {}
        }
    }
    let text = match (text, full_text) {
        (Some(v), _) => v
            .into_string()
            .ok_or_else(|| wrong("text", "a string", v))?,
        (None, Some(v)) => v
            .into_string()
            .ok_or_else(|| wrong("full_text", "a string", v))?,
        (None, None) => return Err("missing field text (and full_text)".into()),
    };
    let user = req(user, "user")?;
    let user = user
        .as_object()
        .ok_or_else(|| wrong("user", "an object", user))?;
    let (mut id_str, mut screen_name) = (None, None);
    for (k, v) in user.iter() {
        match k {
            "id_str" => id_str = Some(v),
            "screen_name" => screen_name = Some(v),
            _ => {}
        }
    }
    Ok(SourceFields {
        created_at: timestamp(created_at, "created_at")?,
        text,
        user_id_str: string(id_str, "user.id_str")?,
        screen_name: string(screen_name, "user.screen_name")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::parse::TweetReader;
    use crate::ingest::parse::tests::tweet;

    fn url_count(entities: &str) -> Result<usize, Reason> {
        let mut r = TweetReader::new();
        r.parse_bytes(tweet(entities).as_bytes(), |v| {
            reaction_fields(v).map(|f| f.url_count)
        })
        .and_then(|x| x)
    }

    /// A repeated key takes its last value, as in Python, in nested objects too.
    #[test]
    fn duplicate_keys_take_the_last_value() {
        assert_eq!(url_count(r#"{"urls": [], "urls": [{"url": "x"}]}"#), Ok(1));
        assert_eq!(
            url_count(r#"{"urls": [{"url": "x"}], "urls": null}"#),
            Ok(0)
        );
        let mut r = TweetReader::new();
        let json =
            tweet(r#"{"urls": []}"#).replace(r#""text": "hi""#, r#""text": "a", "text": "b?""#);
        let text = r.parse_bytes(json.as_bytes(), |v| {
            reaction_fields(v).map(|f| f.text.to_owned())
        });
        assert_eq!(text, Ok(Ok("b?".to_string())));
    }
}
