//! Zero-copy views into validated shards: a thread's numbers ([`NumView`]),
//! a thread with its texts ([`ThreadView`]) and one reaction ([`ReactionView`]).
//! Every accessor is a pointer into the memory map.

use zerocopy::{FromBytes, IntoBytes};

use crate::format::{
    ArchivedInputKeys, ArchivedReactionRecord, ArchivedShard, ArchivedSpan, ArchivedTextShard,
    ArchivedThreadRecord, ArchivedThreadSpans,
};
use crate::format::{DESCRIPTION, REPLY_TOKENS, TEXT, TOKEN_SEPARATOR};
use crate::schema::{Feature, FeatureVec, NUM_FEATURES, ParentHow, ReactionKind};

/// A zero-copy view of one thread's numbers: ids, times, kinds, features.
#[derive(Clone, Copy)]
pub struct NumView<'a> {
    shard: &'a ArchivedShard,
    rec: &'a ArchivedThreadRecord,
    /// Position of the thread within its shard.
    index: usize,
    rows: &'a [FeatureVec],
}

impl std::fmt::Debug for NumView<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NumView")
            .field("source_id", &self.source_id())
            .field("label_code", &self.label_code())
            .field("reactions", &self.reaction_count())
            .finish_non_exhaustive()
    }
}

impl<'a> NumView<'a> {
    pub(super) fn new(
        shard: &'a ArchivedShard,
        rec: &'a ArchivedThreadRecord,
        index: usize,
        rows: &'a [FeatureVec],
    ) -> Self {
        NumView {
            shard,
            rec,
            index,
            rows,
        }
    }

    /// Source tweet id.
    pub fn source_id(&self) -> u64 {
        self.rec.source_id.to_native()
    }
    /// The [`Label`](crate::Label) code: 1 rumour, 0 non-rumour, -1 unknown.
    pub fn label_code(&self) -> i8 {
        self.rec.label_code
    }
    /// Source tweet `created_at`, seconds since the epoch.
    pub fn source_created_at(&self) -> i64 {
        self.rec.source_created_at.to_native()
    }
    fn range(&self) -> std::ops::Range<usize> {
        let first = self.rec.first_reaction.to_native() as usize;
        first..first + self.rec.reaction_count.to_native() as usize
    }
    /// Number of reactions (replies and retweets).
    pub fn reaction_count(&self) -> usize {
        self.rec.reaction_count.to_native() as usize
    }
    /// The features of all reactions, in reaction order: one contiguous slice.
    pub fn features(&self) -> &'a [[f32; NUM_FEATURES]] {
        &self.rows[self.range()]
    }
    /// Values of extra per-reaction column `c` (see the manifest's
    /// `reaction_columns`; [`ThreadSource::reaction_column`](crate::ThreadSource::reaction_column) finds it by name) for
    /// this thread's reactions, aligned with [`features`](Self::features).
    /// Empty if the column does not exist.
    pub fn column(&self, c: usize) -> &'a [f32] {
        self.shard
            .reaction_columns
            .get(c)
            .and_then(|col| <[f32]>::ref_from_bytes(col.as_slice().as_bytes()).ok())
            .and_then(|col| col.get(self.range()))
            .unwrap_or_default()
    }

    /// Value of extra per-thread column `c` (see the manifest's
    /// `thread_columns`), or None if the column does not exist.
    pub fn thread_value(&self, c: usize) -> Option<f32> {
        let col = self.shard.thread_columns.get(c)?;
        let i = self.index;
        col.get(i).map(|v| v.to_native())
    }

    /// The reactions' embedding-input keys, aligned with
    /// [`features`](Self::features) (what [`UniqueTexts`](crate::UniqueTexts)
    /// collects from without reading the texts).
    pub(crate) fn input_keys(&self) -> &'a [ArchivedInputKeys] {
        &self.shard.inputs[self.range()]
    }

    /// Reactions' numbers, in `(created_at, id)` order, aligned with [`features`](Self::features).
    pub fn reaction_records(&self) -> impl ExactSizeIterator<Item = ReactionNum> + 'a {
        self.shard.reactions[self.range()]
            .iter()
            .map(|r| ReactionNum {
                id: r.id.to_native(),
                created_at: r.created_at.to_native(),
                user_key: r.user_key.to_native(),
                // Validated at open.
                kind: ReactionKind::from_u8(r.kind).unwrap_or(ReactionKind::Reply),
                parent: r.parent.to_native(),
                parent_how: ParentHow::from_u8(r.parent_how).unwrap_or(ParentHow::Defaulted),
            })
    }
}

/// One reaction's numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReactionNum {
    /// Tweet id.
    pub id: u64,
    /// `created_at`, seconds since the epoch.
    pub created_at: i64,
    /// The author's key: `user.id_str` as a number when it is a decimal id,
    /// else its xxh3-64 with the top bit set (the features' keying).
    pub user_key: u64,
    /// Reply or retweet.
    pub kind: ReactionKind,
    /// Its parent: the position of an earlier reply of the thread, or
    /// [`PARENT_SOURCE`](ReactionNum::PARENT_SOURCE) (`FEATURES.md`, "Propagation tree").
    pub parent: u32,
    /// How `parent` was found.
    pub parent_how: ParentHow,
}

impl ReactionNum {
    /// The [`parent`](Self::parent) of a reaction whose parent is the source
    /// tweet (also what [`ReactionView::parent`] returns for it).
    pub const PARENT_SOURCE: u32 = crate::format::PARENT_SOURCE;
}

/// A zero-copy view of one thread: its numbers and texts.
#[derive(Clone, Copy)]
pub struct ThreadView<'a> {
    num: NumView<'a>,
    text: &'a ArchivedTextShard,
    thread_text: &'a ArchivedThreadSpans,
}

impl std::fmt::Debug for ThreadView<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadView")
            .field("source_id", &self.source_id())
            .field("event", &self.event())
            .field("label", &self.label())
            .field("reactions", &self.reaction_count())
            .finish_non_exhaustive()
    }
}

/// The text a validated span addresses ("" if it is null).
fn span_text<'a>(arena: &'a str, s: &ArchivedSpan) -> &'a str {
    let start = s.start.to_native() as usize;
    // Spans were checked against the arena at validation; `get` keeps even a
    // broken invariant from panicking.
    arena
        .get(start..start + s.len.to_native() as usize)
        .unwrap_or("")
}

impl<'a> ThreadView<'a> {
    pub(super) fn new(
        num: NumView<'a>,
        text: &'a ArchivedTextShard,
        thread_text: &'a ArchivedThreadSpans,
    ) -> Self {
        ThreadView {
            num,
            text,
            thread_text,
        }
    }

    /// Source tweet id.
    pub fn source_id(&self) -> u64 {
        self.num.source_id()
    }
    /// The [`Label`](crate::Label) code: 1 rumour, 0 non-rumour, -1 unknown.
    pub fn label_code(&self) -> i8 {
        self.num.label_code()
    }
    /// Source tweet `created_at`, seconds since the epoch.
    pub fn source_created_at(&self) -> i64 {
        self.num.source_created_at()
    }
    /// Number of reactions (replies and retweets).
    pub fn reaction_count(&self) -> usize {
        self.num.reaction_count()
    }
    /// The features of all reactions, in reaction order: one contiguous slice.
    pub fn features(&self) -> &'a [[f32; Feature::COUNT]] {
        self.num.features()
    }
    /// Values of extra per-reaction column `c`, as [`NumView::column`].
    pub fn column(&self, c: usize) -> &'a [f32] {
        self.num.column(c)
    }
    /// Value of extra per-thread column `c`, as [`NumView::thread_value`].
    pub fn thread_value(&self, c: usize) -> Option<f32> {
        self.num.thread_value(c)
    }
    /// Reactions' numbers, as [`NumView::reaction_records`].
    pub fn reaction_records(&self) -> impl ExactSizeIterator<Item = ReactionNum> + 'a {
        self.num.reaction_records()
    }
    /// The thread's reaction texts as stored: its slice of the shard's text
    /// arena (everything after its source text, up to the next thread's
    /// texts) and each reaction's text and description spans relative to
    /// that slice, into `spans` (cleared first). A merge re-packs threads
    /// with this, byte for byte.
    pub(crate) fn stored_texts(&self, spans: &mut Vec<crate::format::ReactionSpans>) -> &'a str {
        use crate::format::Span;
        let arena = self.text.arena.as_str();
        let src = &self.thread_text.source_text;
        let base = (src.start.to_native() + src.len.to_native()) as usize;
        let end = self
            .text
            .threads
            .get(self.num.index + 1)
            .map_or(arena.len(), |next| next.event.start.to_native() as usize);
        let segment = arena.get(base..end.max(base)).unwrap_or("");
        let r = self.num.range();
        let relative = |s: &ArchivedSpan| {
            if s.is_none() {
                Span::NONE
            } else {
                Span {
                    start: s.start.to_native() - base as u32,
                    len: s.len.to_native(),
                }
            }
        };
        spans.clear();
        spans.extend(
            self.text.reactions[r]
                .iter()
                .map(|spans| spans.each_ref().map(relative)),
        );
        segment
    }

    /// The numbers alone (what a training loop reads).
    pub fn numbers(&self) -> NumView<'a> {
        self.num
    }
    fn thread_text(&self, span: &ArchivedSpan) -> &'a str {
        span_text(self.text.arena.as_str(), span)
    }
    /// Event (grandparent folder name).
    pub fn event(&self) -> &'a str {
        self.thread_text(&self.thread_text.event)
    }
    /// The label's name, as the thread's corpus layout decided it with the
    /// label code: PHEME's is the parent folder's (`rumours`,
    /// `non-rumours`, or an event folder where `annotation.json` labels).
    pub fn label(&self) -> &'a str {
        self.thread_text(&self.thread_text.label)
    }
    /// Source author's `id_str`.
    pub fn source_user_id(&self) -> &'a str {
        self.thread_text(&self.thread_text.source_user_id)
    }
    /// Source author's key (the keying of [`ReactionView::user_key`]) of
    /// [`source_user_id`](Self::source_user_id): comparable with the
    /// reactions' [`ReactionView::user_key`].
    pub fn source_user_key(&self) -> u64 {
        crate::format::user_key(self.source_user_id())
    }
    /// Source tweet text.
    pub fn source_text(&self) -> &'a str {
        self.thread_text(&self.thread_text.source_text)
    }
    /// The reaction at `i` within this thread.
    pub fn reaction(&self, i: usize) -> Option<ReactionView<'a>> {
        let r = self.num.range();
        (i < r.len()).then(|| ReactionView {
            rec: &self.num.shard.reactions[r.start + i],
            arena: self.text.arena.as_str(),
            spans: &self.text.reactions[r.start + i],
            features: &self.num.rows[r.start + i],
        })
    }
    /// Reactions in `(created_at, id)` order.
    pub fn reactions(&self) -> impl ExactSizeIterator<Item = ReactionView<'a>> + 'a {
        let r = self.num.range();
        let recs = &self.num.shard.reactions[r.clone()];
        let texts = &self.text.reactions[r.clone()];
        let rows = &self.num.rows[r];
        let arena = self.text.arena.as_str();
        recs.iter()
            .zip(texts)
            .zip(rows)
            .map(move |((rec, spans), features)| ReactionView {
                rec,
                arena,
                spans,
                features,
            })
    }
}

/// A zero-copy view of one reaction.
#[derive(Clone, Copy)]
pub struct ReactionView<'a> {
    rec: &'a ArchivedReactionRecord,
    arena: &'a str,
    spans: &'a [ArchivedSpan; 3],
    features: &'a FeatureVec,
}

impl std::fmt::Debug for ReactionView<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReactionView")
            .field("id", &self.id())
            .field("kind", &self.kind())
            .field("created_at", &self.created_at())
            .finish_non_exhaustive()
    }
}

impl<'a> ReactionView<'a> {
    /// Tweet id.
    pub fn id(&self) -> u64 {
        self.rec.id.to_native()
    }
    /// Reply or retweet.
    pub fn kind(&self) -> ReactionKind {
        // Validated at open.
        ReactionKind::from_u8(self.rec.kind).unwrap_or(ReactionKind::Reply)
    }
    /// `created_at`, seconds since the epoch.
    pub fn created_at(&self) -> i64 {
        self.rec.created_at.to_native()
    }
    /// The author's key: `user.id_str` as a number when it is a decimal id,
    /// else its xxh3-64 with the top bit set
    /// (compare [`ThreadView::source_user_key`]).
    pub fn user_key(&self) -> u64 {
        self.rec.user_key.to_native()
    }
    /// Its parent: the position of an earlier reply, or [`PARENT_SOURCE`](ReactionNum::PARENT_SOURCE).
    pub fn parent(&self) -> u32 {
        self.rec.parent.to_native()
    }
    /// How [`parent`](Self::parent) was found.
    pub fn parent_how(&self) -> ParentHow {
        // Validated at open.
        ParentHow::from_u8(self.rec.parent_how).unwrap_or(ParentHow::Defaulted)
    }
    /// Reaction text (`full_text`, else `text`: what the features read).
    pub fn text(&self) -> &'a str {
        span_text(self.arena, &self.spans[TEXT])
    }
    /// Author's description, if not null.
    pub fn user_description(&self) -> Option<&'a str> {
        let d = &self.spans[DESCRIPTION];
        (!d.is_none()).then(|| span_text(self.arena, d))
    }
    /// The reply's RPDNN tokens (`preprocessing_tweet_text` of `text`, else
    /// `full_text`; see FEATURES.md, "Texts for embedding"): `None` for a
    /// retweet, and for a reply whose `text` is not a string (which the
    /// reference's text stage skips); empty where the reference gives `[]`.
    ///
    /// ```no_run
    /// # let cache = socialctx::Cache::open("c").unwrap();
    /// for r in cache.thread(0).unwrap().reactions() {
    ///     if let Some(tokens) = r.reply_tokens() {
    ///         let words: Vec<&str> = tokens.iter().collect();
    ///         println!("{} {words:?}", r.id());
    ///     }
    /// }
    /// ```
    pub fn reply_tokens(&self) -> Option<TokenList<'a>> {
        let k = &self.spans[REPLY_TOKENS];
        (!k.is_none()).then(|| TokenList(Joined::Reply(span_text(self.arena, k))))
    }
    /// The author's description as RPDNN splits it, `description.split(' ')`,
    /// when it has a token (`has_description` = 1); else `None`.
    pub fn description_tokens(&self) -> Option<TokenList<'a>> {
        if self.features[Feature::HasDescription] != 1.0 {
            return None;
        }
        self.user_description().map(TokenList::split_description)
    }
    /// Whether the reference's text stage keeps this reaction: false only for
    /// a reply whose `text` is not a string.
    pub fn has_text_tokens(&self) -> bool {
        self.kind() == ReactionKind::Retweet || !self.spans[REPLY_TOKENS].is_none()
    }
    /// The 28 features.
    pub fn features(&self) -> &'a [f32; Feature::COUNT] {
        self.features
    }
}

/// A list of tokens stored as one string: a reply's tokens (joined by
/// `'\n'`, which no token contains) or a description
/// (split on `' '`). Borrowed from the memory map.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct TokenList<'a>(Joined<'a>);

#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Joined<'a> {
    Reply(&'a str),
    Description(&'a str),
}

impl<'a> TokenList<'a> {
    fn split_description(d: &'a str) -> Self {
        TokenList(Joined::Description(d))
    }
    /// The stored string: tokens joined by their separator (`'\n'` for a
    /// reply, `' '` for a description).
    pub fn joined(&self) -> &'a str {
        match self.0 {
            Joined::Reply(s) | Joined::Description(s) => s,
        }
    }
    fn separator(&self) -> char {
        match self.0 {
            Joined::Reply(_) => TOKEN_SEPARATOR,
            Joined::Description(_) => ' ',
        }
    }
    /// The tokens in order.
    pub fn iter(&self) -> impl Iterator<Item = &'a str> + 'a {
        let s = self.joined();
        // An empty reply list holds no token; a description always splits
        // into at least one (Python's `''.split(' ')` is `['']`).
        let empty = s.is_empty() && matches!(self.0, Joined::Reply(_));
        s.split(self.separator()).filter(move |_| !empty)
    }
    /// Number of tokens.
    pub fn len(&self) -> usize {
        if self.is_empty() {
            return 0;
        }
        crate::format::token_count(self.joined(), self.separator()) as usize
    }
    /// No token (a reply the reference gives `[]`).
    pub fn is_empty(&self) -> bool {
        // A description always splits into at least one token.
        self.joined().is_empty() && matches!(self.0, Joined::Reply(_))
    }
}

impl std::fmt::Debug for TokenList<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}
