//! The shared vocabulary of the build and the read half: what a reaction is,
//! what the features and extra columns are called and in which order they are
//! stored, and what the label codes mean.
//!
//! Everything here is part of the cache's meaning, so the build writes it and
//! the reader checks against it; neither half owns it. The contract each name
//! stands for is [`FEATURES.md`](https://github.com/socialctx/socialctx/blob/main/FEATURES.md)
//! (repository root).

use std::ops::{Index, IndexMut};

/// Whether a reaction is a reply or a retweet (from the folder it is in).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum ReactionKind {
    /// From `reactions/` or `replies/`; feature `c_type` = 1.
    Reply = 0,
    /// From `retweets/`; feature `c_type` = 0.
    Retweet = 1,
}

impl ReactionKind {
    /// The name the oracle prints: `"reply"` or `"retweet"`.
    pub fn as_str(self) -> &'static str {
        match self {
            ReactionKind::Reply => "reply",
            ReactionKind::Retweet => "retweet",
        }
    }

    /// Decodes the stored byte; `None` for an unknown value.
    /// ```
    /// use socialctx::ReactionKind;
    /// assert_eq!(ReactionKind::from_u8(1), Some(ReactionKind::Retweet));
    /// assert_eq!(ReactionKind::from_u8(2), None);
    /// ```
    pub fn from_u8(v: u8) -> Option<Self> {
        match v {
            0 => Some(ReactionKind::Reply),
            1 => Some(ReactionKind::Retweet),
            _ => None,
        }
    }
}

/// How a reaction's parent in the propagation tree was found (`FEATURES.md`,
/// "Propagation tree"); stored per reaction as a byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ParentHow {
    /// The tweet named by `in_reply_to_status_id(_str)`.
    InReplyTo = 0,
    /// The nearest stored ancestor in `structure.json`.
    Structure = 1,
    /// Neither: the source (always so for retweets).
    Defaulted = 2,
}

impl ParentHow {
    /// The name `dump --graph` prints: `"in_reply_to"`, `"structure"` or `"defaulted"`.
    pub fn as_str(self) -> &'static str {
        match self {
            ParentHow::InReplyTo => "in_reply_to",
            ParentHow::Structure => "structure",
            ParentHow::Defaulted => "defaulted",
        }
    }

    /// Decodes the stored byte; `None` for an unknown value.
    /// ```
    /// use socialctx::ParentHow;
    /// assert_eq!(ParentHow::from_u8(1), Some(ParentHow::Structure));
    /// assert_eq!(ParentHow::from_u8(3), None);
    /// ```
    pub fn from_u8(v: u8) -> Option<Self> {
        match v {
            0 => Some(ParentHow::InReplyTo),
            1 => Some(ParentHow::Structure),
            2 => Some(ParentHow::Defaulted),
            _ => None,
        }
    }
}

/// Number of numerical features per reaction.
pub const NUM_FEATURES: usize = 28;

/// One reaction's features, in [`FEATURE_NAMES`] order
/// ([`Feature::NAMES`]); index it with a [`Feature`].
pub(crate) type FeatureVec = [f32; NUM_FEATURES];

/// The feature names, in storage order (the reference's order).
pub const FEATURE_NAMES: [&str; NUM_FEATURES] = [
    "num_posts",
    "listed_count",
    "followers",
    "followings",
    "follow_ratio",
    "follow_ratio_ver2",
    "user_favourites_count",
    "account_age",
    "is_verified",
    "engagement_scr",
    "following_rate",
    "favourites_scr",
    "is_geo_enabled",
    "description_len",
    "len_profilename",
    "is_source_user",
    "num_retweets",
    "num_favorites",
    "has_question",
    "is_duplicate",
    "has_img",
    "has_urls",
    "num_urls",
    "has_native_media",
    "context_len",
    "t_diff",
    "c_type",
    "has_description",
];

/// Declares [`Feature`] and [`Feature::ALL`] from one list, so that the two
/// cannot drift apart.
macro_rules! features {
    ($(#[$meta:meta])* $($name:ident,)*) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        #[repr(usize)]
        #[allow(missing_docs)] // each variant is its Feature::NAMES entry, defined in FEATURES.md
        pub enum Feature {
            $($name,)*
        }

        impl Feature {
            /// Every feature, in storage order.
            pub const ALL: [Feature; NUM_FEATURES] = [$(Feature::$name,)*];
            /// The feature names, in storage order (the reference's order).
            pub const NAMES: [&'static str; NUM_FEATURES] = FEATURE_NAMES;
            /// Number of numerical features per reaction (28).
            pub const COUNT: usize = NUM_FEATURES;
        }
    };
}

features! {
    /// One of the 28 features; its discriminant is its column in a reaction's
    /// `[f32; 28]` row and its [`name`](Feature::name) is the
    /// [`NAMES`](Feature::NAMES) entry there.
    ///
    /// ```
    /// use socialctx::Feature;
    /// let mut row = [0.0f32; Feature::COUNT];
    /// row[Feature::TDiff] = 12.5;
    /// assert_eq!(row[25], 12.5);
    /// assert_eq!(Feature::TDiff.name(), "t_diff");
    /// assert_eq!(Feature::from_name("c_type"), Some(Feature::CType));
    /// ```
    NumPosts,
    ListedCount,
    Followers,
    Followings,
    FollowRatio,
    FollowRatioVer2,
    UserFavouritesCount,
    AccountAge,
    IsVerified,
    EngagementScr,
    FollowingRate,
    FavouritesScr,
    IsGeoEnabled,
    DescriptionLen,
    LenProfilename,
    IsSourceUser,
    NumRetweets,
    NumFavorites,
    HasQuestion,
    IsDuplicate,
    HasImg,
    HasUrls,
    NumUrls,
    HasNativeMedia,
    ContextLen,
    TDiff,
    CType,
    HasDescription,
}

impl Feature {
    /// Its column in a reaction's `[f32; 28]` row.
    pub const fn index(self) -> usize {
        self as usize
    }

    /// Its name in [`NAMES`](Feature::NAMES) (and in the oracle's output).
    pub const fn name(self) -> &'static str {
        FEATURE_NAMES[self as usize]
    }

    /// The feature called `name`, if any.
    pub fn from_name(name: &str) -> Option<Feature> {
        FEATURE_NAMES
            .iter()
            .position(|n| *n == name)
            .map(|i| Feature::ALL[i])
    }
}

impl<T> Index<Feature> for [T; NUM_FEATURES] {
    type Output = T;
    fn index(&self, f: Feature) -> &T {
        &self[f as usize]
    }
}

impl<T> IndexMut<Feature> for [T; NUM_FEATURES] {
    fn index_mut(&mut self, f: Feature) -> &mut T {
        &mut self[f as usize]
    }
}

/// Names of the extended per-reaction columns, in storage order.
pub const REACTION_COLUMNS: [&str; 6] = [
    "depth",
    "persistence",
    "follows_source",
    "followed_by_source",
    "reciprocal_follow",
    "user_reliability",
];

/// Names of the extended per-thread columns, in storage order.
pub const THREAD_COLUMNS: [&str; 2] = ["veracity", "annotated_rumour"];

/// Number of extended per-reaction columns.
pub(crate) const REACTION_EXTRA: usize = REACTION_COLUMNS.len();
/// Number of extended per-thread columns.
pub(crate) const THREAD_EXTRA: usize = THREAD_COLUMNS.len();

/// The position of the extended per-reaction column `name`.
pub(crate) fn reaction_column(name: &str) -> Option<usize> {
    REACTION_COLUMNS.iter().position(|c| *c == name)
}

/// "No row": the embedding-store index entry of a reaction with no input
/// (a retweet, a reply whose tokens are `[]`, no description): it reads as
/// zeros. Also
/// [`EmbeddingStore::NO_ROW`](crate::EmbeddingStore::NO_ROW),
/// [`UniqueTexts::NONE`](crate::UniqueTexts::NONE) and the Python binding's
/// `UniqueTexts.NONE`.
pub const NO_ROW: u32 = u32::MAX;

/// A thread's label, from the name of the folder it is in; stored as its
/// [`code`](Label::code).
///
/// ```
/// use socialctx::Label;
/// assert_eq!(Label::from_folder("rumours"), Label::Rumour);
/// assert_eq!(Label::from_folder("ferguson").code(), -1);
/// assert_eq!(Label::from_code(0), Some(Label::NonRumour));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(i8)]
pub enum Label {
    /// A thread in a `rumours` folder: code 1.
    Rumour = 1,
    /// A thread in a `non-rumours` folder: code 0.
    NonRumour = 0,
    /// A thread in any other folder: code -1.
    Unknown = -1,
}

impl Label {
    /// The label of a thread whose parent folder is called `folder`.
    pub fn from_folder(folder: &str) -> Label {
        match folder {
            "rumours" => Label::Rumour,
            "non-rumours" => Label::NonRumour,
            _ => Label::Unknown,
        }
    }

    /// The stored code: 1, 0 or -1.
    pub const fn code(self) -> i8 {
        self as i8
    }

    /// Decodes a stored code; `None` for anything but 1, 0 and -1.
    pub fn from_code(code: i8) -> Option<Label> {
        match code {
            1 => Some(Label::Rumour),
            0 => Some(Label::NonRumour),
            -1 => Some(Label::Unknown),
            _ => None,
        }
    }
}

/// The `veracity` thread column: a rumour's truth as annotated in
/// `annotation.json` (NaN in the column when unknown or not a rumour).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Veracity {
    /// Code 0: `misinformation` = 1.
    False,
    /// Code 1: `true` = 1.
    True,
    /// Code 2: neither.
    Unverified,
}

impl Veracity {
    /// The stored code.
    pub const fn code(self) -> f32 {
        match self {
            Veracity::False => 0.0,
            Veracity::True => 1.0,
            Veracity::Unverified => 2.0,
        }
    }

    /// Decodes a stored code; `None` for NaN or an unknown value.
    pub fn from_code(code: f32) -> Option<Veracity> {
        [Veracity::False, Veracity::True, Veracity::Unverified]
            .into_iter()
            .find(|v| v.code() == code)
    }

    /// The name the oracle prints.
    pub const fn as_str(self) -> &'static str {
        match self {
            Veracity::False => "false",
            Veracity::True => "true",
            Veracity::Unverified => "unverified",
        }
    }
}

/// The `annotated_rumour` thread column: the annotators' `is_rumour`
/// judgement in `annotation.json` (NaN in the column when there is none).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Annotated {
    /// Code 0: `"nonrumour"`.
    NonRumour,
    /// Code 1: `"rumour"`.
    Rumour,
    /// Code 2: `"unclear"`.
    Unclear,
}

impl Annotated {
    /// The stored code.
    pub const fn code(self) -> f32 {
        match self {
            Annotated::NonRumour => 0.0,
            Annotated::Rumour => 1.0,
            Annotated::Unclear => 2.0,
        }
    }

    /// Decodes a stored code; `None` for NaN or an unknown value.
    pub fn from_code(code: f32) -> Option<Annotated> {
        [Annotated::NonRumour, Annotated::Rumour, Annotated::Unclear]
            .into_iter()
            .find(|v| v.code() == code)
    }

    /// The name the oracle prints (`annotation.json`'s own spelling).
    pub const fn as_str(self) -> &'static str {
        match self {
            Annotated::NonRumour => "nonrumour",
            Annotated::Rumour => "rumour",
            Annotated::Unclear => "unclear",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The enum, the array of variants and the names must never drift apart:
    /// a variant's Debug name in snake case is its FEATURE_NAMES entry.
    #[test]
    fn feature_enum_matches_names() {
        for (i, f) in Feature::ALL.into_iter().enumerate() {
            assert_eq!(f.index(), i);
            let mut snake = String::new();
            for (j, c) in format!("{f:?}").chars().enumerate() {
                if c.is_ascii_uppercase() && j > 0 {
                    snake.push('_');
                }
                snake.push(c.to_ascii_lowercase());
            }
            assert_eq!(snake, FEATURE_NAMES[i], "{f:?}");
            assert_eq!(Feature::from_name(FEATURE_NAMES[i]), Some(f));
        }
        assert_eq!(Feature::from_name("nope"), None);
    }

    #[test]
    fn codes_round_trip() {
        for l in [Label::Rumour, Label::NonRumour, Label::Unknown] {
            assert_eq!(Label::from_code(l.code()), Some(l));
        }
        assert_eq!(Label::from_code(7), None);
        for v in [Veracity::False, Veracity::True, Veracity::Unverified] {
            assert_eq!(Veracity::from_code(v.code()), Some(v));
        }
        assert_eq!(Veracity::from_code(f32::NAN), None);
        for a in [Annotated::NonRumour, Annotated::Rumour, Annotated::Unclear] {
            assert_eq!(Annotated::from_code(a.code()), Some(a));
        }
        assert_eq!(Annotated::from_code(3.0), None);
    }
}
