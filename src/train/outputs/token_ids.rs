//! Output `"token_ids"`: each row slot's reaction's tokens through a
//! [`Vocabulary`], int32 `[max_tokens]` per slot (see
//! [`Vocabulary::token_ids`]).

use std::sync::Arc;

use super::{Desc, Dtype, Output, Result, Slots, ThreadOut};
use crate::train::vocab::Vocabulary;

/// Token ids through a vocabulary, at most `max_tokens` per slot.
#[derive(Debug)]
pub(super) struct TokenIds {
    vocab: Arc<Vocabulary>,
    max_tokens: usize,
}

impl TokenIds {
    pub(super) fn new(vocab: Arc<Vocabulary>, max_tokens: usize) -> Self {
        TokenIds { vocab, max_tokens }
    }
}

impl Output for TokenIds {
    fn buffers(&self) -> Vec<Desc> {
        vec![Desc {
            name: "token_ids",
            key: None,
            dtype: Dtype::I32,
            per_slot: Some(self.max_tokens),
        }]
    }

    fn fill(&self, slots: &Slots<'_, '_>, out: &mut ThreadOut<'_, '_>) -> Result<()> {
        let texts = || Ok((slots.position.unwrap_or(0), slots.thread()?));
        let ids = out.one(0).i32();
        if self.max_tokens == 0 {
            // What `TokenIdsMut::new` says of zero tokens per slot.
            return Err(crate::error::LoadError::BufferSize {
                buffer: "token ids",
                expected: ids.len(),
                found: ids.len(),
            });
        }
        self.vocab
            .thread_token_ids(texts, slots.reactions, ids, None)
    }
}
