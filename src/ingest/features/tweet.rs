//! Features 16-24: the reaction tweet itself.

use super::b;
use crate::ingest::parse::{ReactionFields, SourceFields};
use pycompat as pytext;

/// Fills `f[16..=24]`.
pub fn compute(r: &ReactionFields<'_>, s: &SourceFields<'_>, f: &mut [f64]) {
    f[16] = r.retweet_count as f64;
    f[17] = r.favorite_count as f64;
    f[18] = b(r.text.contains('?'));
    f[19] = b(pytext::py_strip(r.text) == pytext::py_strip(s.text));
    f[20] = b(r.user.profile_use_background_image);
    f[21] = b(r.url_count > 0);
    f[22] = r.url_count as f64;
    f[23] = b(r.has_extended_entities);
    f[24] = pytext::context_len(r.text, s.screen_name) as f64;
}
