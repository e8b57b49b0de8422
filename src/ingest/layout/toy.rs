//! A toy layout, registered only in unit tests: the proof that a layout is
//! this one file and one line in [`LAYOUTS`](super::LAYOUTS), and that it
//! decides for itself. It shares PHEME's source folder (`source-tweets/`)
//! and claims the threads that have its own `toy.json` beside it (a
//! PHEME thread without one stays PHEME's); replies are in `comments/`,
//! one flat JSON object a file; the label and its name are `toy.json`'s,
//! the event the grandparent folder.

use std::collections::HashMap;

use super::{
    LABEL_FILE, LabelSource, Layout, ReactionFields, SIDE_FILES, SourceFields, UserFields,
    claim_by_file,
};
use crate::ingest::discover::ThreadDir;
use crate::ingest::features::labels::Annotation;
use crate::ingest::parents::Structure;
use crate::ingest::parse::{Reason, Value, count, parse_id, string, timestamp, type_name};
use crate::schema::{Label, ReactionKind};

/// The toy layout.
#[derive(Debug)]
pub struct Toy;

impl Layout for Toy {
    fn name(&self) -> &'static str {
        "toy"
    }
    fn source_dirs(&self) -> &'static [&'static str] {
        &["source-tweets"]
    }
    fn reaction_dirs(&self) -> &'static [(&'static str, ReactionKind)] {
        &[("comments", ReactionKind::Reply)]
    }
    fn side_files(&self) -> [Option<&'static str>; SIDE_FILES] {
        let mut files = [None; SIDE_FILES];
        files[LABEL_FILE] = Some("toy.json");
        files
    }
    /// Its source folder is PHEME's: only its own label file makes a
    /// thread its own.
    fn claim(&self, entries: u16) -> u8 {
        claim_by_file(self, entries, LABEL_FILE)
    }
    fn label_source(&self, _: &ThreadDir) -> LabelSource {
        LabelSource::LabelFile
    }
    /// `{"label": "rumour" | "non-rumour" | anything}`: the name is the
    /// file's word.
    fn label_file(&self, root: Value<'_, '_>) -> Result<(Label, String), Reason> {
        let o = root
            .as_object()
            .ok_or_else(|| format!("the file holds {}, not a label", type_name(root)))?;
        let word = string(o.get("label"), "label")?;
        let label = match word {
            "rumour" => Label::Rumour,
            "non-rumour" => Label::NonRumour,
            _ => Label::Unknown,
        };
        Ok((label, word.to_owned()))
    }
    fn event_name<'t>(&self, td: &'t ThreadDir) -> &'t str {
        &td.event
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
    /// by its own layout, in source-id order: the toy claims the thread its
    /// `toy.json` marks although PHEME's source folder is there too (it is
    /// registered after PHEME: order does not choose), and labels it from
    /// that file; `dump` prints that label, not the folder's name.
    #[test]
    fn a_registered_layout_claims_and_labels_its_threads_beside_pheme() {
        let dir = tempfile::tempdir().unwrap();
        let corpus = dir.path().join("corpus");
        let toy = corpus.join("forum/threads/7");
        fs::create_dir_all(toy.join("source-tweets")).unwrap();
        fs::create_dir_all(toy.join("comments")).unwrap();
        let post = format!(r#"{{"at": "{AT}", "body": "a post", "by": "u1"}}"#);
        fs::write(toy.join("source-tweets/7.json"), post).unwrap();
        fs::write(toy.join("toy.json"), r#"{"label": "rumour"}"#).unwrap();
        for (id, likes) in [(9, 2), (8, 5)] {
            let c = format!(
                r#"{{"id": "{id}", "at": "{AT}", "body": "comment {id}", "by": "u{id}", "likes": {likes}}}"#
            );
            fs::write(toy.join(format!("comments/{id}.json")), c).unwrap();
        }
        // A PHEME thread with the toy's folder but not its label file:
        // still PHEME's (whose claim the toy's folder does not change).
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
            (p.source_id(), p.source_text(), p.event(), p.label()),
            (5, "a tweet", "ev", "non-rumours")
        );
        assert_eq!((p.reaction_count(), p.label_code()), (0, 0));
        assert_eq!(
            (t.source_id(), t.source_text(), t.event()),
            (7, "a post", "forum")
        );
        assert_eq!((t.label(), t.label_code()), ("rumour", 1));
        let ids: Vec<u64> = t.reaction_records().map(|r| r.id).collect();
        assert_eq!(ids, [8, 9], "(created_at, id) order");
        assert!(t.reaction_records().all(|r| r.kind == ReactionKind::Reply));

        let mut out = Vec::new();
        crate::dump::write_cache(&mut out, &c, &crate::dump::DumpOptions::default()).unwrap();
        let out = String::from_utf8(out).unwrap();
        let labels: Vec<&str> = out
            .lines()
            .map(|l| {
                l.split("\"label\": \"")
                    .nth(1)
                    .unwrap()
                    .split('"')
                    .next()
                    .unwrap()
            })
            .collect();
        assert_eq!(labels, ["non-rumours", "rumour"], "{out}");
    }

    /// A toy thread whose label file is bad is the toy's still, unlabelled,
    /// and the file is reported; one whose file gives another word keeps
    /// that word as its label's name.
    #[test]
    fn a_bad_label_file_is_reported_and_leaves_the_thread_unlabelled() {
        let dir = tempfile::tempdir().unwrap();
        let corpus = dir.path().join("corpus");
        for (id, label) in [(1, "not json"), (2, r#"{"label": "satire"}"#)] {
            let t = corpus.join(format!("ev/threads/{id}"));
            fs::create_dir_all(t.join("source-tweets")).unwrap();
            let post = format!(r#"{{"at": "{AT}", "body": "post {id}", "by": "u1"}}"#);
            fs::write(t.join(format!("source-tweets/{id}.json")), post).unwrap();
            fs::write(t.join("toy.json"), label).unwrap();
        }
        let cache = dir.path().join("cache");
        let s = build(&corpus, &cache, &BuildOptions::default(), &NoProgress).unwrap();
        assert_eq!(s.report.len(), 1, "{:?}", s.report);
        assert_eq!(s.report[0].path, "ev/threads/1/toy.json");
        let c = Cache::open(&cache).unwrap();
        let got: Vec<_> = c
            .iter()
            .map(|t| {
                (
                    t.source_text().to_owned(),
                    t.label().to_owned(),
                    t.label_code(),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("post 1".to_owned(), "threads".to_owned(), -1),
                ("post 2".to_owned(), "satire".to_owned(), -1)
            ]
        );
    }
}
