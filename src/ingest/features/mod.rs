//! Stage 3: the 28 RPDNN numerical context features of one reaction.
//!
//! One module per family, named after where the values come from:
//! [`user`] (0-15: the reaction's author), [`tweet`] (16-24: the reaction
//! itself) and [`context`] (25-27: its relation to the source tweet and the
//! author's description). `FEATURES.md` (repository root) defines each value; every value is
//! computed in `f64` exactly as the Python reference does and stored as the
//! nearest `f32`.
//!
//! The extended features (beyond the reference's 28, optional and stored as
//! named columns) live in [`propagation`] (`depth`, `persistence`),
//! [`relations`] (`follows_source`, `followed_by_source`,
//! `reciprocal_follow`), [`reliability`] (`user_reliability`) and
//! [`labels`] (per thread: `veracity`, `annotated_rumour`).

pub mod context;
pub mod labels;
pub mod propagation;
pub mod relations;
pub mod reliability;
pub mod tweet;
pub mod user;

use super::layout::{ReactionFields, SourceFields};
use crate::schema::{FeatureVec, NUM_FEATURES, ReactionKind};

/// Python's `float(bool)`.
pub(crate) fn b(x: bool) -> f64 {
    if x { 1.0 } else { 0.0 }
}

/// Computes the 28 features of `reaction` (of kind `kind`) in the thread of `source`.
///
/// Fails only where the reference raises `ZeroDivisionError` (a ratio whose
/// denominator is 0, possible only with negative counts or an account created
/// a day or more after the tweet); the reaction is then skipped and reported.
pub fn compute(
    reaction: &ReactionFields<'_>,
    source: &SourceFields<'_>,
    kind: ReactionKind,
) -> Result<FeatureVec, String> {
    let mut f = [0f64; NUM_FEATURES];
    user::compute(reaction, source, &mut f)?;
    tweet::compute(reaction, source, &mut f);
    context::compute(reaction, source, kind, &mut f);
    // The upgrade simulation of the tests (0.0 otherwise): src/definition.rs.
    f[crate::schema::Feature::DescriptionLen] += crate::definition::description_len_offset();
    // `as` rounds to the nearest f32, ties to even: the contract's rounding.
    Ok(f.map(|x| x as f32))
}
