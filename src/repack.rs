//! Re-packing a cache's threads, shared by [`merge`](crate::merge) and
//! [`build_incremental`](crate::build_incremental): above both halves, since
//! it reads a cache (`read`) to hand its threads to a writer (`ingest`).

use crate::format::{ReactionRecord, ThreadRecord};
use crate::ingest::writer::{ThreadData, ThreadText};
use crate::read::ThreadView;
use crate::schema::{REACTION_EXTRA, THREAD_EXTRA};

/// The re-pack of merges and incremental builds: one thread of a cache as
/// the writer takes it, reconstructed so that writing it again gives the
/// same bytes (its stored text arena included).
pub(crate) fn thread_data(t: &ThreadView<'_>, extended: bool) -> ThreadData {
    let (segment, reaction_texts) = t.stored_texts();
    let n = t.reaction_count();
    let reaction_extra = if extended {
        let cols: Vec<&[f32]> = (0..REACTION_EXTRA).map(|c| t.column(c)).collect();
        (0..n)
            .map(|i| std::array::from_fn(|c| cols[c].get(i).copied().unwrap_or(f32::NAN)))
            .collect()
    } else {
        Vec::new()
    };
    let thread_extra: [f32; THREAD_EXTRA] =
        std::array::from_fn(|c| t.thread_value(c).unwrap_or(f32::NAN));
    ThreadData {
        record: ThreadRecord {
            source_id: t.source_id(),
            source_created_at: t.source_created_at(),
            first_reaction: 0,
            reaction_count: 0,
            label_code: t.label_code(),
        },
        text: ThreadText {
            event: t.event().to_owned(),
            label: t.label().to_owned(),
            source_user_id: t.source_user_id().to_owned(),
            source_text: t.source_text().to_owned(),
        },
        reactions: t
            .reaction_records()
            .map(|r| ReactionRecord {
                id: r.id,
                created_at: r.created_at,
                user_key: r.user_key,
                kind: r.kind as u8,
                parent: r.parent,
                parent_how: r.parent_how as u8,
            })
            .collect(),
        text_arena: segment.to_owned(),
        reaction_texts,
        features: t.features().to_vec(),
        reaction_extra,
        thread_extra,
    }
}
