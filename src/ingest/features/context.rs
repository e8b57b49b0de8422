//! Features 25-27: the reaction's place in the thread and its author's description.

use super::b;
use crate::ingest::parse::{ReactionFields, SourceFields};
use crate::schema::ReactionKind;
use pycompat as pytext;
use pycompat::seconds_between;

/// Fills `f[25..=27]`.
pub fn compute(r: &ReactionFields<'_>, s: &SourceFields<'_>, kind: ReactionKind, f: &mut [f64]) {
    // Minutes since the source tweet; negative when the reaction is older.
    f[25] = seconds_between(r.created_at, s.created_at) / 60.0;
    f[26] = b(kind == ReactionKind::Reply);
    f[27] = b(r.user.description.is_some_and(pytext::has_token));
}
