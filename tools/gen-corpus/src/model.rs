//! The model: tweets, users and their entities, before serialization.

#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lang {
    En,
    De,
    Fr,
    Es,
    Ja,
}

impl Lang {
    pub(crate) fn code(self) -> &'static str {
        match self {
            Lang::En => "en",
            Lang::De => "de",
            Lang::Fr => "fr",
            Lang::Es => "es",
            Lang::Ja => "ja",
        }
    }
}

#[derive(Clone)]
pub(crate) struct UrlEnt {
    pub(crate) url: String,
    pub(crate) expanded: String,
    pub(crate) display: String,
    pub(crate) start: usize,
    pub(crate) end: usize,
}

#[derive(Clone)]
pub(crate) struct Mention {
    pub(crate) id: u64,
    pub(crate) screen_name: String,
    pub(crate) name: String,
    pub(crate) start: usize,
    pub(crate) end: usize,
}

#[derive(Clone)]
pub(crate) struct Media {
    pub(crate) id: u64,
    pub(crate) key: String,
    pub(crate) url: String,
    pub(crate) owner: String,
    pub(crate) status_id: u64,
    pub(crate) w: u32,
    pub(crate) h: u32,
    pub(crate) start: usize,
    pub(crate) end: usize,
    /// (status id, user id) of the tweet the photo was first posted in.
    pub(crate) from: Option<(u64, u64)>,
    /// Further photos of a multi-photo tweet (id, key, width, height); they
    /// appear in `extended_entities` only.
    pub(crate) more: Vec<(u64, String, u32, u32)>,
}

/// Key order of the user object; PHEME files come in three shapes.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum UserShape {
    /// With `profile_location` (2015 crawls).
    WithLocation,
    /// Without `profile_location`.
    Plain,
    /// Older crawls: no `entities` and no `is_translation_enabled`.
    Old,
}

#[derive(Clone)]
pub(crate) struct User {
    pub(crate) id: u64,
    pub(crate) screen_name: String,
    pub(crate) name: String,
    pub(crate) description: Option<String>,
    pub(crate) desc_urls: Vec<UrlEnt>,
    pub(crate) url: Option<UrlEnt>,
    pub(crate) location: &'static str,
    pub(crate) time_zone: Option<(&'static str, i32)>,
    pub(crate) created: i64,
    pub(crate) followers: u64,
    pub(crate) friends: u64,
    pub(crate) statuses: u64,
    pub(crate) favourites: u64,
    pub(crate) listed: u64,
    pub(crate) verified: bool,
    pub(crate) geo_enabled: bool,
    pub(crate) use_bg_image: bool,
    pub(crate) bg_tile: bool,
    pub(crate) default_profile: bool,
    pub(crate) default_image: bool,
    pub(crate) translator: bool,
    pub(crate) colors: [&'static str; 5],
    pub(crate) bg_image: String,
    pub(crate) image: String,
    pub(crate) banner: Option<i64>,
    pub(crate) lang: &'static str,
    pub(crate) shape: UserShape,
}

#[derive(Clone)]
pub(crate) struct Tweet {
    pub(crate) id: u64,
    pub(crate) secs: i64,
    pub(crate) text: String,
    pub(crate) client: usize,
    /// (status id, user id, screen name)
    pub(crate) reply_to: Option<(u64, u64, String)>,
    pub(crate) mentions: Vec<Mention>,
    pub(crate) hashtags: Vec<(String, usize, usize)>,
    pub(crate) urls: Vec<UrlEnt>,
    pub(crate) media: Option<Media>,
    pub(crate) retweet_count: u64,
    pub(crate) favorite_count: u64,
    pub(crate) lang: &'static str,
    /// `possibly_sensitive`, and whether `possibly_sensitive_appealable` follows it.
    pub(crate) sensitive: Option<(bool, bool)>,
    pub(crate) geo: Option<(f64, f64)>,
    pub(crate) place: Option<usize>,
    pub(crate) user: User,
    pub(crate) retweeted: Option<Box<Tweet>>,
}

/// Text under construction, with its length in code points (entity indices).
#[derive(Default)]
pub(crate) struct TextBuf {
    pub(crate) s: String,
    pub(crate) n: usize,
}

impl TextBuf {
    pub(crate) fn push(&mut self, t: &str) {
        self.s.push_str(t);
        self.n += t.chars().count();
    }

    pub(crate) fn space(&mut self) {
        if !self.s.is_empty() && !self.s.ends_with([' ', '\n']) {
            self.push(" ");
        }
    }
}
