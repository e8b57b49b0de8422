//! Features 0-15: the reaction's author (`u = r.user`).

use super::b;
use crate::parse::{ReactionFields, SourceFields};
use crate::pytext;
use crate::timestamp::account_age_days;

/// Python `int / int`: both operands fit f64 exactly below 2^53, which covers
/// every real count; beyond that the result may differ in the last bit.
fn div(a: i128, b: i128) -> f64 {
    a as f64 / b as f64
}

/// Fills `f[0..=15]`.
pub fn compute(r: &ReactionFields<'_>, s: &SourceFields<'_>, f: &mut [f64]) {
    let u = &r.user;
    let posts = i128::from(u.statuses_count);
    let followers = i128::from(u.followers_count);
    let followings = i128::from(u.friends_count);
    let favs = i128::from(u.favourites_count);
    let age = account_age_days(r.created_at, u.created_at);
    f[0] = posts as f64;
    f[1] = u.listed_count as f64;
    f[2] = followers as f64;
    f[3] = followings as f64;
    f[4] = div(followers, followings + 1);
    f[5] = div(followers, followings + followers + 1);
    f[6] = favs as f64;
    f[7] = age;
    f[8] = b(u.verified);
    // `int / float` in Python converts the int to float first.
    f[9] = posts as f64 / (age + 1.0);
    f[10] = followings as f64 / (age + 1.0);
    f[11] = favs as f64 / (age + 1.0);
    f[12] = b(u.geo_enabled);
    f[13] = u.description.map_or(0, pytext::count_words) as f64;
    f[14] = pytext::char_len(u.name) as f64;
    f[15] = b(u.id_str == s.user_id_str);
}
