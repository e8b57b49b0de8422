//! One thread's assembly, all of it here: its source tweet, every reaction
//! file of its tweet folders (parsed by its layout, features computed, texts
//! appended to one arena), its side files (structure, annotation, and for
//! the extended columns the follow graph and retweets), all in
//! `(created_at, id)` order and ready for the writer. What differs between
//! corpus layouts (names, JSON schema) is asked of the thread's
//! [`Layout`](super::layout::Layout). Bad files become report lines, never
//! errors.

use std::collections::HashMap;

use super::discover::ThreadDir;
use super::extended::Extended;
use super::features::labels::Annotation;
use super::features::propagation::author_counts;
use super::features::relations::FollowGraph;
use super::features::reliability::RumourIndex;
use super::files::{Names, ReplyTokenizer, Row, STRAY, for_each_line, is_json_name, reaction_row};
use super::layout::{
    ANNOTATION_FILE, FOLLOWS_FILE, LABEL_FILE, LabelSource, RETWEETS_FILE, STRUCTURE_FILE,
    SourceFields,
};
use super::parents::{Node, Structure, assign};
use super::parse::{Reason, TweetReader, Value, user_key};
use super::record::{ThreadData, ThreadText};
use crate::format::ThreadRecord;
use crate::format::report::BadInput;
use crate::schema::{Annotated, Label, ReactionKind, THREAD_EXTRA};

/// One processed thread: its data (None if the thread was skipped) and the
/// bad inputs met on the way.
pub(crate) struct Outcome {
    pub(crate) data: Option<ThreadData>,
    pub(crate) bad: Vec<BadInput>,
    /// Files opened and read for it.
    pub(crate) files_read: u64,
    /// Instead of `data`: the thread is copied as it is from the cache the
    /// writer carries threads from (an incremental build's old cache).
    pub(crate) carried: Option<crate::format::gather::Carried>,
}

/// Per-worker reusable state.
pub(super) struct Worker<'i> {
    source: TweetReader,
    reaction: TweetReader,
    /// For thread files (structure, annotation, follows, retweets.json).
    extra: TweetReader,
    names: Names,
    tok: ReplyTokenizer,
    max_file_bytes: u64,
    /// Corpus-wide rumour index; `Some` when extended features are built.
    index: Option<&'i RumourIndex>,
}

impl<'i> Worker<'i> {
    /// A worker with empty buffers; `index` is `Some` when the build
    /// computes the extended features.
    pub(super) fn new(max_file_bytes: u64, index: Option<&'i RumourIndex>) -> Self {
        Worker {
            source: TweetReader::new(),
            reaction: TweetReader::new(),
            extra: TweetReader::new(),
            names: Names::default(),
            tok: ReplyTokenizer::default(),
            max_file_bytes,
            index,
        }
    }

    pub(super) fn process(&mut self, td: &ThreadDir) -> Outcome {
        let before = self.files_read();
        let mut out = self.assemble(td);
        out.files_read = self.files_read() - before;
        out
    }

    fn files_read(&self) -> u64 {
        self.source.files_read() + self.reaction.files_read() + self.extra.files_read()
    }

    fn assemble(&mut self, td: &ThreadDir) -> Outcome {
        let fail = |reason: String| Outcome {
            data: None,
            bad: vec![BadInput::new(&td.rel, reason)],
            files_read: 0,
            carried: None,
        };
        let source_rel =
            match read_source(td, &mut self.source, &mut self.names, self.max_file_bytes) {
                Ok(rel) => rel,
                Err(reason) => return fail(reason),
            };
        let layout = td.layout();
        let source = match self.source.parse(|v| layout.source_fields(v)) {
            Ok(Ok(s)) => s,
            Ok(Err(r)) => return fail(format!("source tweet {source_rel}: {r}")),
            Err(r) => {
                let r = self.source.explain(r);
                return fail(format!("source tweet {source_rel}: {r}"));
            }
        };

        let mut bad = Vec::new();
        // `self.names` still lists the source folder; *.csv there is ignored.
        let source_dir = td.source_dir().unwrap_or_default();
        for name in self.names.iter() {
            if !is_json_name(name) && !name.as_encoded_bytes().ends_with(b".csv") {
                let path = format!("{}/{source_dir}/{}", td.rel, name.to_string_lossy());
                bad.push(BadInput::new(path, STRAY));
            }
        }
        let mut rows: Vec<Row> = Vec::new();
        let mut arena = String::new();
        for (dir_name, kind) in td.reaction_dirs() {
            let dir = td.path.join(dir_name);
            let dir_file = match self.names.list_open(&dir) {
                Ok(f) => f,
                Err(e) => {
                    bad.push(BadInput::new(
                        format!("{}/{dir_name}", td.rel),
                        format!("cannot list directory: {e}"),
                    ));
                    continue;
                }
            };
            for (name, regular) in self.names.entries() {
                let file_rel = || format!("{}/{dir_name}/{}", td.rel, name.to_string_lossy());
                if !is_json_name(name) {
                    bad.push(BadInput::new(file_rel(), STRAY));
                    continue;
                }
                let row = self
                    .reaction
                    .read_file_in(&dir_file, name, self.max_file_bytes, regular)
                    .and_then(|()| {
                        reaction_row(
                            layout,
                            &mut self.reaction,
                            &source,
                            kind,
                            &mut arena,
                            &mut self.tok,
                        )
                    });
                match row {
                    Ok(row) => rows.push(row),
                    Err(r) => bad.push(BadInput::new(file_rel(), self.reaction.explain(r))),
                }
            }
        }

        let structure = read_structure(&mut self.extra, self.max_file_bytes, td, &mut bad);
        let (structure, depths) = structure.map_or((None, None), |(s, d)| (Some(s), Some(d)));
        let extended = self.index.map(|index| {
            let readers = (&mut self.extra, &mut self.reaction);
            let mut ext = read_thread_files(
                readers,
                self.max_file_bytes,
                td,
                &source,
                (&mut rows, &mut arena, &mut self.tok),
                &mut bad,
            );
            ext.depths = depths;
            (index, ext)
        });

        // The label as the thread's layout decides it (PHEME: the folder's,
        // else, RumourEval and journalism, annotation.json's).
        let annotation = extended.as_ref().map(|(_, ext)| &ext.annotation);
        let (label, label_name) = thread_label(
            td,
            &mut self.extra,
            self.max_file_bytes,
            annotation,
            Some(&mut bad),
        );
        rows.sort_by_key(|r| (r.rec.created_at, r.rec.id));
        let nodes: Vec<Node> = rows
            .iter()
            .map(|r| Node {
                id: r.rec.id,
                kind: ReactionKind::from_u8(r.rec.kind).unwrap_or(ReactionKind::Reply),
                in_reply_to: r.in_reply_to,
            })
            .collect();
        let parents = assign(td.source_id, &nodes, structure.as_ref());
        for (row, (parent, how)) in rows.iter_mut().zip(parents) {
            (row.rec.parent, row.rec.parent_how) = (parent, how as u8);
        }
        let source_author = user_key(source.user_id_str);
        let mut data = ThreadData {
            record: ThreadRecord {
                source_id: td.source_id,
                source_created_at: source.created_at.unix_seconds(),
                first_reaction: 0,
                reaction_count: 0,
                label_code: label.code(),
            },
            text: ThreadText {
                event: td.event_name().to_owned(),
                label: label_name.unwrap_or_else(|| td.label.clone()),
                source_user_id: source.user_id_str.to_owned(),
                source_text: source.text.to_owned(),
            },
            reactions: Vec::with_capacity(rows.len()),
            text_arena: arena,
            reaction_texts: Vec::with_capacity(rows.len()),
            features: Vec::with_capacity(rows.len()),
            reaction_extra: Vec::new(),
            thread_extra: [f32::NAN; THREAD_EXTRA],
            inputs: Vec::new(),
        };
        if let Some((index, ext)) = extended {
            let counts = author_counts(
                std::iter::once(source_author).chain(rows.iter().map(|r| r.rec.user_key)),
            );
            data.reaction_extra = rows
                .iter()
                .map(|r| ext.reaction_values(r, source_author, &counts, index))
                .collect();
            data.thread_extra = [ext.annotation.veracity, ext.annotation.annotated_rumour];
        }
        for row in rows {
            data.reactions.push(row.rec);
            data.reaction_texts.push(row.text);
            data.features.push(row.features);
        }
        Outcome {
            data: Some(data),
            bad,
            files_read: 0,
            carried: None,
        }
    }
}

/// Reads the source tweet file of a thread into `reader`; returns its path
/// relative to the thread, or the reason it is unusable.
pub(super) fn read_source(
    td: &ThreadDir,
    reader: &mut TweetReader,
    names: &mut Names,
    max: u64,
) -> Result<String, String> {
    let dir_name = td.source_dir().ok_or_else(|| {
        let dirs: Vec<String> = td
            .layout()
            .source_dirs()
            .iter()
            .map(|d| format!("{d}/"))
            .collect();
        format!("no {} folder", dirs.join(" or "))
    })?;
    let dir = td.path.join(dir_name);
    let listed = names
        .list_open(&dir)
        .map_err(|e| format!("cannot list {dir_name}/: {e}"))?;
    // The reference takes the last name in sorted order, ignoring *.csv; we
    // also pass over stray files (editor backups...), which `process` reports.
    let (name, regular) = names
        .entries()
        .rev()
        .find(|(n, _)| is_json_name(n))
        .ok_or_else(|| format!("no source tweet file in {dir_name}/"))?;
    let rel = format!("{dir_name}/{}", name.to_string_lossy());
    reader
        .read_file_in(&listed, name, max, regular)
        .map_err(|r| format!("source tweet {rel}: {r}"))?;
    Ok(rel)
}

/// Reads the side files of the extended features when the thread has them:
/// the annotation, the follow graph and the retweets as JSON Lines (the
/// structure is read by every build, for the parents: [`read_structure`]).
fn read_thread_files(
    (extra, reaction): (&mut TweetReader, &mut TweetReader),
    max: u64,
    td: &ThreadDir,
    source: &SourceFields<'_>,
    (rows, arena, tok): (&mut Vec<Row>, &mut String, &mut ReplyTokenizer),
    bad: &mut Vec<BadInput>,
) -> Extended {
    let mut ext = Extended::default();
    let layout = td.layout();
    let rel = |name: &str| format!("{}/{name}", td.rel);
    if let Some(name) = td.side_file(ANNOTATION_FILE) {
        let r = extra.read_file(&td.path.join(name), max);
        match r.and_then(|()| extra.parse(|v| layout.annotation(v))?) {
            Ok(a) => ext.annotation = a,
            Err(reason) => bad.push(BadInput::new(rel(name), reason)),
        }
    }
    if let Some(name) = td.side_file(FOLLOWS_FILE) {
        match extra.read_file(&td.path.join(name), max) {
            Ok(()) => {
                let (graph, bad_lines) = FollowGraph::parse(extra.bytes());
                for line in bad_lines {
                    bad.push(BadInput::new(
                        rel(name),
                        format!("line {line}: expected two user ids separated by a tab"),
                    ));
                }
                ext.follows = Some(graph);
            }
            Err(reason) => bad.push(BadInput::new(rel(name), reason)),
        }
    }
    if let Some(name) = td.side_file(RETWEETS_FILE) {
        let path = td.path.join(name);
        let mut on_line = |n: usize, line: Result<&[u8], Reason>| {
            let row = line.and_then(|line| {
                reaction.load_bytes(line);
                reaction_row(layout, reaction, source, ReactionKind::Retweet, arena, tok)
            });
            match row {
                Ok(row) => rows.push(row),
                Err(reason) => bad.push(BadInput::new(rel(name), format!("line {n}: {reason}"))),
            }
        };
        if let Err(reason) = for_each_line(&path, max, &mut on_line) {
            bad.push(BadInput::new(rel(name), reason));
        }
    }
    ext
}

/// Reads a thread's structure file, if it has one, for the parents and
/// (extended builds) the depths; a bad file is reported.
fn read_structure(
    reader: &mut TweetReader,
    max: u64,
    td: &ThreadDir,
    bad: &mut Vec<BadInput>,
) -> Option<(Structure, HashMap<u64, u32>)> {
    let name = td.side_file(STRUCTURE_FILE)?;
    let r = reader.read_file(&td.path.join(name), max);
    match r.and_then(|()| reader.parse(|v| td.layout().structure(v))?) {
        Ok(s) => Some(s),
        Err(reason) => {
            bad.push(BadInput::new(format!("{}/{name}", td.rel), reason));
            None
        }
    }
}

/// A thread's label as its layout decides it ([`Layout::label_source`]):
/// the one rule, for the cache's label and for the rumour index. Returns
/// the label and, where the layout's own label file names it, its name
/// (else the name stored is the parent folder's, `td.label`, as the
/// reference's). `annotation`: the annotation file as the extended
/// features read it (`None`: read here if the rule needs it). A label file
/// that cannot be read leaves the label unknown, and is reported into `bad`
/// when given (the rumour index passes none: the main pass reports it).
///
/// [`Layout::label_source`]: super::layout::Layout::label_source
pub(super) fn thread_label(
    td: &ThreadDir,
    reader: &mut TweetReader,
    max: u64,
    annotation: Option<&Annotation>,
    bad: Option<&mut Vec<BadInput>>,
) -> (Label, Option<String>) {
    fn annotated(code: f32) -> Label {
        match Annotated::from_code(code) {
            Some(Annotated::Rumour) => Label::Rumour,
            Some(Annotated::NonRumour) => Label::NonRumour,
            _ => Label::Unknown,
        }
    }
    type Read = fn(&ThreadDir, Value<'_, '_>) -> Result<(Label, Option<String>), Reason>;
    let layout = td.layout();
    let (role, read): (usize, Read) = match layout.label_source(td) {
        LabelSource::Folders(label) => return (label, None),
        LabelSource::Annotation => {
            if let Some(a) = annotation {
                return (annotated(a.annotated_rumour), None);
            }
            (ANNOTATION_FILE, |td, v| {
                let a = td.layout().annotation(v)?;
                Ok((annotated(a.annotated_rumour), None))
            })
        }
        LabelSource::LabelFile => (LABEL_FILE, |td, v| {
            td.layout().label_file(v).map(|(l, name)| (l, Some(name)))
        }),
    };
    let Some(name) = td.side_file(role) else {
        return (Label::Unknown, None);
    };
    let r = reader.read_file(&td.path.join(name), max);
    match r.and_then(|()| reader.parse(|v| read(td, v))?) {
        Ok(label) => label,
        Err(reason) => {
            if let Some(bad) = bad {
                bad.push(BadInput::new(format!("{}/{name}", td.rel), reason));
            }
            (Label::Unknown, None)
        }
    }
}
