//! The build's thread record: one thread as the pipeline (or the re-pack
//! of a cache's thread, `crate::repack`, for merges and incremental builds)
//! hands it to the [writer](super::writer).

use crate::format::{
    DESCRIPTION, InputKeys, REPLY_TOKENS, ReactionRecord, ReactionSpans, Span, ThreadRecord,
};
use crate::schema::{Feature, FeatureVec, REACTION_EXTRA, THREAD_EXTRA};

/// Per-thread texts, as the pipeline hands them to the writer.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct ThreadText {
    /// Event: the grandparent directory's name.
    pub event: String,
    /// Label folder: the parent directory's name.
    pub label: String,
    /// Source tweet `user.id_str`.
    pub source_user_id: String,
    /// Source tweet text (`text`, else `full_text`).
    pub source_text: String,
}

/// Per reaction of `t`, the keys of its embedding inputs, from the texts
/// stored for it (what [`TextField::tokens_of`](crate::TextField::tokens_of)
/// reads back).
pub(super) fn input_keys(t: &ThreadData) -> impl Iterator<Item = InputKeys> + '_ {
    let text = |s: Span| {
        (s != Span::NONE).then(|| &t.text_arena[s.start as usize..(s.start + s.len) as usize])
    };
    t.reaction_texts
        .iter()
        .zip(&t.features)
        .map(move |(spans, f)| {
            let description = if f[Feature::HasDescription] == 1.0 {
                text(spans[DESCRIPTION])
            } else {
                None
            };
            InputKeys::of(text(spans[REPLY_TOKENS]), description)
        })
}

/// One thread as the pipeline hands it to the writer.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ThreadData {
    /// Numbers; `first_reaction` and `reaction_count` are set by the writer.
    pub record: ThreadRecord,
    /// Texts.
    pub text: ThreadText,
    /// Reactions in `(created_at, id)` order.
    pub reactions: Vec<ReactionRecord>,
    /// The reactions' texts and descriptions, back to back.
    pub text_arena: String,
    /// Per reaction, same order: text, description and reply-token spans in
    /// `text_arena`.
    pub reaction_texts: Vec<ReactionSpans>,
    /// Their features, same order.
    pub features: Vec<FeatureVec>,
    /// Extended per-reaction values, same order, in
    /// [`REACTION_COLUMNS`](crate::Manifest::REACTION_COLUMNS) order (NaN =
    /// unknown); empty when the build has no extended features.
    pub reaction_extra: Vec<[f32; REACTION_EXTRA]>,
    /// Extended per-thread values in [`THREAD_COLUMNS`](crate::Manifest::THREAD_COLUMNS) order.
    pub thread_extra: [f32; THREAD_EXTRA],
    /// The reactions' embedding-input keys, same order, when they are
    /// already known: a re-pack of a cache's thread takes the keys that
    /// cache's writer computed from the same texts. Empty: the writer
    /// computes them from the texts (every build).
    pub inputs: Vec<InputKeys>,
}

impl ThreadData {
    /// A rough upper bound of the archived size (both files), used to cap shards.
    pub fn estimated_bytes(&self) -> usize {
        let t = &self.text;
        estimated_bytes(
            t.event.len()
                + t.label.len()
                + t.source_user_id.len()
                + t.source_text.len()
                + self.text_arena.len(),
            self.reactions.len(),
            self.reaction_extra.len(),
        )
    }
}

/// [`ThreadData::estimated_bytes`] of a thread with `texts` bytes of text
/// (its four own and its reactions'), `reactions` reactions and
/// `extended_rows` rows of extended values (its reactions, or 0): the one
/// rule a merge's copy of archived threads cuts shards by too.
pub(crate) fn estimated_bytes(texts: usize, reactions: usize, extended_rows: usize) -> usize {
    96 + texts
        + reactions * std::mem::size_of::<ReactionSpans>()
        + reactions * (24 + std::mem::size_of::<FeatureVec>() + std::mem::size_of::<InputKeys>())
        + extended_rows * REACTION_EXTRA * 4
}
