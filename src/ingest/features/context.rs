//! Features 25-27: the reaction's place in the thread and its author's description.

use super::b;
use crate::ingest::layout::{ReactionFields, SourceFields};
use crate::schema::Feature::{CType, HasDescription, TDiff};
use crate::schema::NUM_FEATURES;
use crate::schema::ReactionKind;
use pycompat as pytext;
use pycompat::seconds_between;

/// Fills features 25-27 of `f` (TDiff to HasDescription).
pub fn compute(
    r: &ReactionFields<'_>,
    s: &SourceFields<'_>,
    kind: ReactionKind,
    f: &mut [f64; NUM_FEATURES],
) {
    // Minutes since the source tweet; negative when the reaction is older.
    f[TDiff] = seconds_between(r.created_at, s.created_at) / 60.0;
    f[CType] = b(kind == ReactionKind::Reply);
    f[HasDescription] = b(r.user.description.is_some_and(pytext::has_token));
}
