//! Re-packing a cache's threads, shared by [`merge`](crate::merge) and
//! [`build_incremental`](crate::build_incremental): above both halves, since
//! it reads a cache (`read`) to hand its threads to a writer (`ingest`).

use crate::format::{InputKeys, ReactionRecord, ThreadRecord};
use crate::ingest::writer::ThreadData;
use crate::read::ThreadView;
use crate::schema::REACTION_EXTRA;

/// The re-pack of merges and incremental builds: one thread of a cache as
/// the writer takes it, reconstructed so that writing it again gives the
/// same bytes (its stored text arena and input keys included).
pub(crate) fn thread_data(t: &ThreadView<'_>, extended: bool) -> ThreadData {
    let mut d = ThreadData::default();
    refill(&mut d, t, extended);
    d
}

/// [`thread_data`] into `d`, reusing its buffers (a merge refills one
/// `ThreadData` for every thread: no allocation per thread once they have
/// grown).
pub(crate) fn refill(d: &mut ThreadData, t: &ThreadView<'_>, extended: bool) {
    d.record = ThreadRecord {
        source_id: t.source_id(),
        source_created_at: t.source_created_at(),
        first_reaction: 0,
        reaction_count: 0,
        label_code: t.label_code(),
    };
    let set = |s: &mut String, v: &str| {
        s.clear();
        s.push_str(v);
    };
    set(&mut d.text.event, t.event());
    set(&mut d.text.label, t.label());
    set(&mut d.text.source_user_id, t.source_user_id());
    set(&mut d.text.source_text, t.source_text());
    d.reactions.clear();
    d.reactions
        .extend(t.reaction_records().map(|r| ReactionRecord {
            id: r.id,
            created_at: r.created_at,
            user_key: r.user_key,
            kind: r.kind as u8,
            parent: r.parent,
            parent_how: r.parent_how as u8,
        }));
    let segment = t.stored_texts(&mut d.reaction_texts);
    set(&mut d.text_arena, segment);
    d.features.clear();
    d.features.extend_from_slice(t.features());
    d.reaction_extra.clear();
    if extended {
        let cols: [&[f32]; REACTION_EXTRA] = std::array::from_fn(|c| t.column(c));
        d.reaction_extra.extend(
            (0..t.reaction_count())
                .map(|i| std::array::from_fn(|c| cols[c].get(i).copied().unwrap_or(f32::NAN))),
        );
    }
    d.thread_extra = std::array::from_fn(|c| t.thread_value(c).unwrap_or(f32::NAN));
    // The keys the partition's writer computed from these very texts (the
    // cache was validated, checksums included, when it was opened): the
    // same bytes as computing them again, without hashing every text.
    d.inputs.clear();
    d.inputs
        .extend(t.numbers().input_keys().iter().map(|k| InputKeys {
            reply: k.reply.each_ref().map(|x| x.to_native()),
            description: k.description.each_ref().map(|x| x.to_native()),
            reply_tokens: k.reply_tokens.to_native(),
            description_tokens: k.description_tokens.to_native(),
        }));
}
