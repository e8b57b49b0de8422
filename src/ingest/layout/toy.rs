//! A toy layout, registered only in unit tests: the proof that a layout is
//! this one file and one line in [`LAYOUTS`](super::LAYOUTS). Threads are
//! `<event>/<label>/<id>/` folders with the post in `post/` and replies in
//! `comments/`, one flat JSON object a file, and no side files.

use std::collections::HashMap;

use super::{Layout, ReactionFields, SIDE_FILES, SourceFields, UserFields};
use crate::ingest::features::labels::Annotation;
use crate::ingest::parents::Structure;
use crate::ingest::parse::{Reason, Value, count, parse_id, string, timestamp, type_name};
use crate::schema::ReactionKind;

/// The toy layout.
#[derive(Debug)]
pub struct Toy;

impl Layout for Toy {
    fn name(&self) -> &'static str {
        "toy"
    }
    fn source_dirs(&self) -> &'static [&'static str] {
        &["post"]
    }
    fn reaction_dirs(&self) -> &'static [(&'static str, ReactionKind)] {
        &[("comments", ReactionKind::Reply)]
    }
    fn side_files(&self) -> [Option<&'static str>; SIDE_FILES] {
        [None; SIDE_FILES]
    }
    fn source_fields<'i>(&self, root: Value<'_, 'i>) -> Result<SourceFields<'i>, Reason> {
        let o = root
            .as_object()
            .ok_or_else(|| format!("the file holds {}, not a post", type_name(root)))?;
        Ok(SourceFields {
            created_at: timestamp(o.get("at"), "at")?,
            text: string(o.get("body"), "body")?,
            user_id_str: string(o.get("by"), "by")?,
            screen_name: string(o.get("by"), "by")?,
        })
    }
    fn reaction_fields<'i>(&self, root: Value<'_, 'i>) -> Result<ReactionFields<'i>, Reason> {
        let o = root
            .as_object()
            .ok_or_else(|| format!("the file holds {}, not a comment", type_name(root)))?;
        let id = string(o.get("id"), "id")?;
        let created_at = timestamp(o.get("at"), "at")?;
        let text = string(o.get("body"), "body")?;
        let by = string(o.get("by"), "by")?;
        Ok(ReactionFields {
            id: parse_id(id).ok_or_else(|| format!("field id {id:?} is not an id"))?,
            created_at,
            text,
            reply_text: Some(text),
            retweet_count: 0,
            favorite_count: count(o.get("likes"), "likes")?,
            url_count: 0,
            has_extended_entities: false,
            in_reply_to: None,
            user: UserFields {
                id_str: by,
                created_at,
                statuses_count: 0,
                listed_count: 0,
                followers_count: 0,
                friends_count: 0,
                favourites_count: 0,
                verified: false,
                geo_enabled: false,
                profile_use_background_image: false,
                description: None,
                name: by,
            },
        })
    }
    fn structure(&self, _: Value<'_, '_>) -> Result<(Structure, HashMap<u64, u32>), Reason> {
        Err("the toy layout has no structure file".into())
    }
    fn annotation(&self, _: Value<'_, '_>) -> Result<Annotation, Reason> {
        Err("the toy layout has no annotation file".into())
    }
}

#[cfg(test)]
mod tests {
    use std::fs;

    use crate::{BuildOptions, Cache, NoProgress, ReactionKind, build};

    const AT: &str = "Wed Jan 07 11:06:08 +0000 2015";

    /// A corpus with a toy thread beside a PHEME one builds both, each read
    /// by its own layout, in source-id order.
    #[test]
    fn a_registered_layout_builds_beside_pheme() {
        let dir = tempfile::tempdir().unwrap();
        let corpus = dir.path().join("corpus");
        let toy = corpus.join("forum/rumours/7");
        fs::create_dir_all(toy.join("post")).unwrap();
        fs::create_dir_all(toy.join("comments")).unwrap();
        let post = format!(r#"{{"at": "{AT}", "body": "a post", "by": "u1"}}"#);
        fs::write(toy.join("post/7.json"), post).unwrap();
        for (id, likes) in [(9, 2), (8, 5)] {
            let c = format!(
                r#"{{"id": "{id}", "at": "{AT}", "body": "comment {id}", "by": "u{id}", "likes": {likes}}}"#
            );
            fs::write(toy.join(format!("comments/{id}.json")), c).unwrap();
        }
        // A PHEME thread with a folder named like the toy's: still PHEME.
        let pheme = corpus.join("ev-all-rnr-threads/non-rumours/5");
        fs::create_dir_all(pheme.join("source-tweets")).unwrap();
        fs::create_dir_all(pheme.join("comments")).unwrap();
        let src = format!(
            r#"{{"created_at": "{AT}", "text": "a tweet", "user": {{"id_str": "3", "screen_name": "s"}}}}"#
        );
        fs::write(pheme.join("source-tweets/5.json"), src).unwrap();

        let cache = dir.path().join("cache");
        let opts = BuildOptions::default().threads(2);
        let s = build(&corpus, &cache, &opts, &NoProgress).unwrap();
        assert!(s.report.is_empty(), "{:?}", s.report);
        let c = Cache::open(&cache).unwrap();
        let threads: Vec<_> = c.iter().collect();
        assert_eq!(threads.len(), 2);
        let (p, t) = (&threads[0], &threads[1]);
        assert_eq!(
            (p.source_id(), p.source_text(), p.event()),
            (5, "a tweet", "ev")
        );
        assert_eq!(p.reaction_count(), 0);
        assert_eq!(
            (t.source_id(), t.source_text(), t.event()),
            (7, "a post", "forum")
        );
        assert_eq!(t.label(), "rumours");
        let ids: Vec<u64> = t.reaction_records().map(|r| r.id).collect();
        assert_eq!(ids, [8, 9], "(created_at, id) order");
        assert!(t.reaction_records().all(|r| r.kind == ReactionKind::Reply));
    }
}
