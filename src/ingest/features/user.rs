//! Features 0-15: the reaction's author (`u = r.user`).

use super::b;
use crate::ingest::parse::{ReactionFields, SourceFields};
use pycompat as pytext;
use pycompat::account_age_days;

/// Python `int / int`: both operands fit f64 exactly below 2^53, which covers
/// every real count; beyond that the result may differ in the last bit.
/// Division by zero is an error, as in Python.
fn div(a: i128, b: i128, what: &str) -> Result<f64, String> {
    if b == 0 {
        return Err(format!(
            "division by zero computing {what} (as in the reference)"
        ));
    }
    Ok(a as f64 / b as f64)
}

/// Python `x / (age + 1)` for an account age in days.
fn per_day(x: i128, age: f64, what: &str) -> Result<f64, String> {
    if age + 1.0 == 0.0 {
        return Err(format!(
            "division by zero computing {what}: account_age is -1 (user created after the tweet)"
        ));
    }
    Ok(x as f64 / (age + 1.0))
}

/// Fills `f[0..=15]`.
pub fn compute(r: &ReactionFields<'_>, s: &SourceFields<'_>, f: &mut [f64]) -> Result<(), String> {
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
    f[4] = div(followers, followings + 1, "follow_ratio")?;
    f[5] = div(followers, followings + followers + 1, "follow_ratio_ver2")?;
    f[6] = favs as f64;
    f[7] = age;
    f[8] = b(u.verified);
    // `int / float` in Python converts the int to float first.
    f[9] = per_day(posts, age, "engagement_scr")?;
    f[10] = per_day(followings, age, "following_rate")?;
    f[11] = per_day(favs, age, "favourites_scr")?;
    f[12] = b(u.geo_enabled);
    f[13] = u.description.map_or(0, pytext::count_words) as f64;
    f[14] = pytext::char_len(u.name) as f64;
    f[15] = b(u.id_str == s.user_id_str);
    Ok(())
}
