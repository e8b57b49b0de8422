//! Extended per-reaction feature `user_reliability`: 0 if the reaction's
//! author posted a source tweet labelled rumour (a thread in a `rumours`
//! folder) at or before the reaction's time anywhere in the corpus, else 1.
//!
//! The corpus-wide index (author → time of their earliest rumour source) is
//! built before the main pass from the source tweets alone, so no reaction
//! file is read twice.

use std::collections::HashMap;

/// Author key → `created_at` (seconds) of their earliest rumour source tweet.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct RumourIndex {
    first: HashMap<u64, i64>,
}

impl RumourIndex {
    /// Records that `author` posted a rumour source at `created_at`.
    pub fn add(&mut self, author: u64, created_at: i64) {
        let t = self.first.entry(author).or_insert(created_at);
        *t = (*t).min(created_at);
    }

    /// `user_reliability` of a reaction by `author` at `created_at`.
    ///
    /// ```
    /// let mut idx = socialctx::internals::features::reliability::RumourIndex::default();
    /// idx.add(7, 100);
    /// assert_eq!(idx.reliability(7, 100), 0.0);
    /// assert_eq!(idx.reliability(7, 99), 1.0);
    /// assert_eq!(idx.reliability(8, 500), 1.0);
    /// ```
    pub fn reliability(&self, author: u64, created_at: i64) -> f32 {
        match self.first.get(&author) {
            Some(&t) if t <= created_at => 0.0,
            _ => 1.0,
        }
    }

    /// Every (author key, earliest rumour source time), in no order.
    pub fn entries(&self) -> impl Iterator<Item = (u64, i64)> + '_ {
        self.first.iter().map(|(&a, &t)| (a, t))
    }

    /// Number of authors with a rumour source.
    pub fn len(&self) -> usize {
        self.first.len()
    }

    /// True when no rumour source was seen.
    pub fn is_empty(&self) -> bool {
        self.first.is_empty()
    }
}
