//! Corpus layouts: where a collector keeps a thread's files, how its
//! tweets' JSON reads and how its threads are labelled. Everything that
//! differs between layouts lives in one file per layout behind the
//! [`Layout`] trait; the build's stages ask the thread's layout
//! ([`ThreadDir::layout`]) and never name a folder, a file or a JSON field
//! themselves.
//!
//! Adding a layout takes one new file (a type implementing [`Layout`]) and
//! its entry in the `layouts!` line, which declares its module and
//! registers it in [`LAYOUTS`]. Each layout decides for itself which threads
//! are its own ([`Layout::claim`]: the strongest claim wins, whatever the
//! order of [`LAYOUTS`], and a tie is reported, never settled by order),
//! their labels ([`Layout::label_source`]) and their events
//! ([`Layout::event_name`]). What plans and fingerprints store of a layout
//! is its [name](Layout::name), never its place in [`LAYOUTS`]. See
//! ARCHITECTURE.md ("Corpus layouts") for a worked example.

use std::collections::HashMap;
use std::ffi::OsStr;

use pycompat::Timestamp;

use super::discover::ThreadDir;
use super::features::labels::Annotation;
use super::parents::Structure;
use super::parse::{Reason, Value};
use crate::schema::{Label, ReactionKind};

/// Declares each layout's module (`module::Type`, the type in
/// `module.rs`) and registers the type in [`LAYOUTS`]: a layout is one
/// entry of the one line below.
macro_rules! layouts {
    ($($(#[$when:meta])* $module:ident::$layout:ident),* $(,)?) => {
        $($(#[$when])* pub mod $module;)*
        /// Every layout a build recognises (their order decides nothing:
        /// see [`Layout::claim`]). The unit tests' toy layout registers
        /// here too, as any layout does, compiled only into the tests.
        pub static LAYOUTS: &[&dyn Layout] = &[$($(#[$when])* &$module::$layout),*];
    };
}

layouts![
    pheme::Pheme,
    #[cfg(test)]
    toy::Toy
];

/// The most layouts [`LAYOUTS`] may hold (discovery keeps one `u16` of
/// found entries per layout on the stack).
pub(crate) const MAX_LAYOUTS: usize = 4;
const _: () = assert!(LAYOUTS.len() <= MAX_LAYOUTS);

/// The index in [`LAYOUTS`] of the layout named `name` (in this process:
/// what is stored is the name).
pub(crate) fn layout_named(name: &str) -> Option<u8> {
    LAYOUTS
        .iter()
        .position(|l| l.name() == name)
        .and_then(|i| u8::try_from(i).ok())
}

/// The side files a layout may have, by role: the index into
/// [`Layout::side_files`].
pub const SIDE_FILES: usize = 5;
/// Role of the reply tree (PHEME's `structure.json`): parents and depths.
pub const STRUCTURE_FILE: usize = 0;
/// Role of the thread's annotation (PHEME's `annotation.json`): label codes.
pub const ANNOTATION_FILE: usize = 1;
/// Role of the follow graph (PHEME's `who-follows-whom.dat`, one
/// `follower<TAB>followed` pair of user ids a line).
pub const FOLLOWS_FILE: usize = 2;
/// Role of the retweets as JSON Lines (PHEME's `retweets.json`), each line
/// read by [`Layout::reaction_fields`].
pub const RETWEETS_FILE: usize = 3;
/// Role of a layout's own label file (PHEME has none), read by
/// [`Layout::label_file`] where [`Layout::label_source`] says
/// [`LabelSource::LabelFile`].
pub const LABEL_FILE: usize = 4;

/// The claim of a layout on a thread that has one of its source folders:
/// [`Layout::claim`]'s default.
pub const FOLDER_CLAIM: u8 = 1;
/// The claim of a layout on a thread that has a file only that layout has
/// (its own label file, say): above [`FOLDER_CLAIM`], so that a layout
/// sharing another's folders takes the threads its file marks.
pub const OWN_FILE_CLAIM: u8 = 2;

/// The claim of a layout that shares another's folders: [`OWN_FILE_CLAIM`]
/// where one of its source folders and its side file `role` (its own label
/// file, say) are both there, else 0, which leaves the thread to the
/// layout whose folders they are. For [`Layout::claim`].
pub fn claim_by_file(layout: &dyn Layout, entries: u16, role: usize) -> u8 {
    let has_source = entries & source_bits(layout) != 0;
    let has_file = entries & side_bit(layout, role) != 0;
    if has_source && has_file {
        OWN_FILE_CLAIM
    } else {
        0
    }
}

/// Where a thread's label comes from, as its layout says
/// ([`Layout::label_source`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LabelSource {
    /// The folders decide: this label, named after the parent folder.
    Folders(Label),
    /// The [`ANNOTATION_FILE`]'s `is_rumour` ([`Layout::annotation`]),
    /// unknown where it says neither or cannot be read; named after the
    /// parent folder.
    Annotation,
    /// The layout's own [`LABEL_FILE`] ([`Layout::label_file`]), which
    /// names the label too; unknown where the thread has none or it cannot
    /// be read.
    LabelFile,
}

/// One corpus layout: its folder and file names, its tweets' schema, which
/// threads it claims, their labels and their events.
///
/// The names are `'static` slices so that discovery compares names without
/// allocating; a thread's found entries are a `u16` mask: bit `i` for
/// `source_dirs()[i]`, then one per `reaction_dirs()`, then one per
/// `side_files()` (at most 16 in all).
pub trait Layout: Sync + std::fmt::Debug {
    /// Its identity: what plans and fingerprints store, and what messages
    /// say. Unique among [`LAYOUTS`]; a registered layout keeps its name
    /// (renaming it makes its threads' stored fingerprints read as changed
    /// and its plans unreadable).
    fn name(&self) -> &'static str;
    /// Folders that hold a thread's source tweet, in order of preference.
    fn source_dirs(&self) -> &'static [&'static str];
    /// Folders that hold reactions (one tweet a file), with their kind.
    fn reaction_dirs(&self) -> &'static [(&'static str, ReactionKind)];
    /// The side files' names, by role ([`STRUCTURE_FILE`], ...); `None`
    /// where the layout has no such file.
    fn side_files(&self) -> [Option<&'static str>; SIDE_FILES];
    /// How strongly it claims an all-digit folder whose listing found
    /// `entries` (the mask of its own names); 0: not its thread. The
    /// strongest claim takes the thread; two layouts claiming one alike is
    /// reported and the thread skipped. Default: [`FOLDER_CLAIM`] when one
    /// of its source folders is there. A layout that shares another's
    /// folders claims [`OWN_FILE_CLAIM`] where its own file is there (and
    /// 0 where it is not, or the two would tie): [`claim_by_file`].
    fn claim(&self, entries: u16) -> u8 {
        let sources = (1u16 << self.source_dirs().len()) - 1;
        if entries & sources != 0 {
            FOLDER_CLAIM
        } else {
            0
        }
    }
    /// A source tweet's fields, from its parsed JSON.
    fn source_fields<'i>(&self, root: Value<'_, 'i>) -> Result<SourceFields<'i>, Reason>;
    /// A reaction's fields, from its parsed JSON.
    fn reaction_fields<'i>(&self, root: Value<'_, 'i>) -> Result<ReactionFields<'i>, Reason>;
    /// The reply tree and each tweet's depth, from the parsed
    /// [`STRUCTURE_FILE`].
    fn structure(&self, root: Value<'_, '_>) -> Result<(Structure, HashMap<u64, u32>), Reason>;
    /// The label codes, from the parsed [`ANNOTATION_FILE`].
    fn annotation(&self, root: Value<'_, '_>) -> Result<Annotation, Reason>;
    /// Where the thread's label comes from. Default (PHEME's rule): its
    /// label folder (`rumours`, `non-rumours`), else its annotation file
    /// where it has one, else unknown.
    fn label_source(&self, td: &ThreadDir) -> LabelSource {
        match Label::from_folder(&td.label) {
            Label::Unknown if td.side_file(ANNOTATION_FILE).is_some() => LabelSource::Annotation,
            folder => LabelSource::Folders(folder),
        }
    }
    /// The label and its name (stored with the thread; `dump` prints it),
    /// from the parsed [`LABEL_FILE`]. Only asked of a layout whose
    /// [`label_source`](Layout::label_source) says
    /// [`LabelSource::LabelFile`].
    fn label_file(&self, _root: Value<'_, '_>) -> Result<(Label, String), Reason> {
        Err(format!("the {} layout has no label file", self.name()))
    }
    /// The thread's event, from its folders: by default
    /// [`folder_event`].
    fn event_name<'t>(&self, td: &'t ThreadDir) -> &'t str {
        folder_event(td)
    }
}

/// The event of a thread by its folders: the grandparent folder when the
/// parent is a label folder (`rumours`, `non-rumours`), else the parent.
pub fn folder_event(td: &ThreadDir) -> &str {
    match Label::from_folder(&td.label) {
        Label::Rumour | Label::NonRumour => &td.event,
        Label::Unknown => &td.label,
    }
}

/// The mask of `layout`'s source folders in a thread's entries.
pub(crate) fn source_bits(layout: &dyn Layout) -> u16 {
    (1 << layout.source_dirs().len()) - 1
}

/// The mask of `layout`'s tweet folders (source and reactions).
pub(crate) fn folder_bits(layout: &dyn Layout) -> u16 {
    (1 << (layout.source_dirs().len() + layout.reaction_dirs().len())) - 1
}

/// The entries bit of side file `role` of `layout`.
pub(crate) fn side_bit(layout: &dyn Layout, role: usize) -> u16 {
    1 << (layout.source_dirs().len() + layout.reaction_dirs().len() + role)
}

/// The entries bit of a tweet folder name of `layout`, if it is one.
pub(crate) fn folder_bit(layout: &dyn Layout, name: &OsStr) -> Option<u16> {
    let sources = layout.source_dirs();
    sources
        .iter()
        .position(|s| name == *s)
        .or_else(|| {
            layout
                .reaction_dirs()
                .iter()
                .position(|(s, _)| name == *s)
                .map(|i| i + sources.len())
        })
        .map(|i| 1 << i)
}

/// The entries bit of a side file name of `layout`, if it is one.
pub(crate) fn file_bit(layout: &dyn Layout, name: &OsStr) -> Option<u16> {
    layout
        .side_files()
        .iter()
        .position(|s| s.is_some_and(|s| name == s))
        .map(|role| side_bit(layout, role))
}

/// The fields of a reaction (reply or retweet) that the features use.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReactionFields<'a> {
    /// Tweet id, from `id_str`.
    pub id: u64,
    /// `created_at`.
    pub created_at: Timestamp,
    /// `full_text` if that key exists, else `text`.
    pub text: &'a str,
    /// What RPDNN tokenises for the embedding: `text` if that key exists,
    /// else `full_text` (the opposite preference); `None` when that value is
    /// not a string (the reference's text stage then fails on the reaction).
    pub reply_text: Option<&'a str>,
    /// `retweet_count`.
    pub retweet_count: i64,
    /// `favorite_count`, null -> 0.
    pub favorite_count: i64,
    /// Length of `entities.urls`, null -> 0.
    pub url_count: usize,
    /// Whether the key `extended_entities` is present (even with value null).
    pub has_extended_entities: bool,
    /// The tweet it answers: `in_reply_to_status_id_str` when that is a
    /// decimal id, else `in_reply_to_status_id` when that is a non-negative
    /// integer; anything else (absent, null, malformed) is `None`, never an error.
    pub in_reply_to: Option<u64>,
    /// The author.
    pub user: UserFields<'a>,
}

/// The fields of a reaction's author that the features use.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct UserFields<'a> {
    /// `user.id_str`.
    pub id_str: &'a str,
    /// `user.created_at`.
    pub created_at: Timestamp,
    /// `user.statuses_count`.
    pub statuses_count: i64,
    /// `user.listed_count`.
    pub listed_count: i64,
    /// `user.followers_count`.
    pub followers_count: i64,
    /// `user.friends_count`.
    pub friends_count: i64,
    /// `user.favourites_count`.
    pub favourites_count: i64,
    /// Python truthiness of `user.verified`.
    pub verified: bool,
    /// Python truthiness of `user.geo_enabled`.
    pub geo_enabled: bool,
    /// Python truthiness of `user.profile_use_background_image`.
    pub profile_use_background_image: bool,
    /// `user.description` (None when null).
    pub description: Option<&'a str>,
    /// `user.name`.
    pub name: &'a str,
}

/// The fields of a source tweet that the features and the cache use.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SourceFields<'a> {
    /// `created_at`.
    pub created_at: Timestamp,
    /// `text` if that key exists, else `full_text` (the reference's preference).
    pub text: &'a str,
    /// `user.id_str`.
    pub user_id_str: &'a str,
    /// `user.screen_name`.
    pub screen_name: &'a str,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A shared-folder claim needs one source folder (any of them) and the
    /// file: PHEME's two source folders, its annotation file for the role.
    #[test]
    fn a_claim_by_file_needs_a_source_folder_and_the_file() {
        let p = &pheme::Pheme;
        let file = side_bit(p, ANNOTATION_FILE);
        assert_eq!(
            claim_by_file(p, 0b10 | file, ANNOTATION_FILE),
            OWN_FILE_CLAIM
        );
        assert_eq!(
            claim_by_file(p, 0b01 | file, ANNOTATION_FILE),
            OWN_FILE_CLAIM
        );
        assert_eq!(claim_by_file(p, 0b11, ANNOTATION_FILE), 0);
        assert_eq!(claim_by_file(p, file, ANNOTATION_FILE), 0);
    }

    /// Every registered layout fits its entries in a `u16`, and names
    /// itself uniquely (its name is what plans and fingerprints store).
    #[test]
    fn every_layout_fits_the_entries_mask_and_has_its_own_name() {
        for (i, l) in LAYOUTS.iter().enumerate() {
            assert_eq!(layout_named(l.name()), Some(i as u8), "{}", l.name());
            let n = l.source_dirs().len() + l.reaction_dirs().len() + SIDE_FILES;
            assert!(n <= 16, "{} has {n} entries", l.name());
            assert!(
                !l.source_dirs().is_empty(),
                "{} has no source folder",
                l.name()
            );
        }
    }
}
