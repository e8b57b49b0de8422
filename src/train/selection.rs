//! Which reactions of a thread count: by kind, by a time window after the
//! source, and at most the earliest `max_cxt`. Shared by the loader and the
//! statistics, so that both see the same reactions.

use std::time::Duration;

use crate::read::NumView;
use crate::schema::ReactionKind;

/// Which reactions count as context.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Kinds {
    /// Replies only: the reference's default.
    #[default]
    Replies,
    /// Retweets only.
    Retweets,
    /// Replies and retweets.
    Both,
}

impl Kinds {
    /// Whether a reaction of kind `k` is selected.
    pub fn includes(self, k: ReactionKind) -> bool {
        match self {
            Kinds::Replies => k == ReactionKind::Reply,
            Kinds::Retweets => k == ReactionKind::Retweet,
            Kinds::Both => true,
        }
    }
}

/// Which reactions of a thread go into a batch.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Selection {
    /// Context kinds.
    pub kinds: Kinds,
    /// Keep reactions within this long after the source (inclusive); none = all.
    pub window: Option<Duration>,
    /// Keep at most this many (the earliest).
    pub max_cxt: usize,
}

impl Default for Selection {
    fn default() -> Self {
        Selection {
            kinds: Kinds::Replies,
            window: None,
            max_cxt: 200,
        }
    }
}

impl Selection {
    /// Indices (within the thread) of the selected reactions, in order.
    ///
    /// ```no_run
    /// # let cache = socialctx::Cache::open("c").unwrap();
    /// # let thread = cache.thread(0).unwrap();
    /// let sel = socialctx::Selection::default();
    /// let picked: Vec<usize> = sel.indices(&thread.numbers()).collect();
    /// ```
    pub fn indices<'a>(&self, t: &NumView<'a>) -> impl Iterator<Item = usize> + 'a {
        let source = t.source_created_at();
        let window = self
            .window
            .map(|w| i64::try_from(w.as_secs()).unwrap_or(i64::MAX));
        let kinds = self.kinds;
        t.reaction_records()
            .enumerate()
            .filter(move |(_, r)| {
                kinds.includes(r.kind)
                    && window.is_none_or(|w| {
                        let dt = r.created_at.saturating_sub(source);
                        (0..=w).contains(&dt)
                    })
            })
            .map(|(i, _)| i)
            .take(self.max_cxt)
    }
}
