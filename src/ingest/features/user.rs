//! Features 0-15: the reaction's author (`u = r.user`).

use super::b;
use crate::ingest::layout::{ReactionFields, SourceFields};
use crate::schema::Feature::{
    AccountAge, DescriptionLen, EngagementScr, FavouritesScr, FollowRatio, FollowRatioVer2,
    Followers, FollowingRate, Followings, IsGeoEnabled, IsSourceUser, IsVerified, LenProfilename,
    ListedCount, NumPosts, UserFavouritesCount,
};
use crate::schema::NUM_FEATURES;
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

/// Fills features 0-15 of `f` (NumPosts to IsSourceUser).
pub fn compute(
    r: &ReactionFields<'_>,
    s: &SourceFields<'_>,
    f: &mut [f64; NUM_FEATURES],
) -> Result<(), String> {
    let u = &r.user;
    let posts = i128::from(u.statuses_count);
    let followers = i128::from(u.followers_count);
    let followings = i128::from(u.friends_count);
    let favs = i128::from(u.favourites_count);
    let age = account_age_days(r.created_at, u.created_at);
    f[NumPosts] = posts as f64;
    f[ListedCount] = u.listed_count as f64;
    f[Followers] = followers as f64;
    f[Followings] = followings as f64;
    f[FollowRatio] = div(followers, followings + 1, "follow_ratio")?;
    f[FollowRatioVer2] = div(followers, followings + followers + 1, "follow_ratio_ver2")?;
    f[UserFavouritesCount] = favs as f64;
    f[AccountAge] = age;
    f[IsVerified] = b(u.verified);
    // `int / float` in Python converts the int to float first.
    f[EngagementScr] = per_day(posts, age, "engagement_scr")?;
    f[FollowingRate] = per_day(followings, age, "following_rate")?;
    f[FavouritesScr] = per_day(favs, age, "favourites_scr")?;
    f[IsGeoEnabled] = b(u.geo_enabled);
    f[DescriptionLen] = u.description.map_or(0, pytext::count_words) as f64;
    f[LenProfilename] = pytext::char_len(u.name) as f64;
    f[IsSourceUser] = b(u.id_str == s.user_id_str);
    Ok(())
}
