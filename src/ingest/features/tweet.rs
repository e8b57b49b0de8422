//! Features 16-24: the reaction tweet itself.

use super::b;
use crate::ingest::layout::{ReactionFields, SourceFields};
use crate::schema::Feature::{
    ContextLen, HasImg, HasNativeMedia, HasQuestion, HasUrls, IsDuplicate, NumFavorites,
    NumRetweets, NumUrls,
};
use crate::schema::NUM_FEATURES;
use pycompat as pytext;

/// Fills features 16-24 of `f` (NumRetweets to ContextLen).
pub fn compute(r: &ReactionFields<'_>, s: &SourceFields<'_>, f: &mut [f64; NUM_FEATURES]) {
    f[NumRetweets] = r.retweet_count as f64;
    f[NumFavorites] = r.favorite_count as f64;
    f[HasQuestion] = b(r.text.contains('?'));
    f[IsDuplicate] = b(pytext::py_strip(r.text) == pytext::py_strip(s.text));
    f[HasImg] = b(r.user.profile_use_background_image);
    f[HasUrls] = b(r.url_count > 0);
    f[NumUrls] = r.url_count as f64;
    f[HasNativeMedia] = b(r.has_extended_entities);
    f[ContextLen] = pytext::context_len(r.text, s.screen_name) as f64;
}
