//! Output `"embedding_index"` (and, dense, `"embeddings"`) of one
//! embedding store, keyed by its name: each row slot's global row in the
//! store, -1 for none, and the row's values.

use std::sync::Arc;

use super::{BatchMut, Desc, Dtype, Output, OutputMut, Result, Slots, ThreadOut};
use crate::store::EmbeddingStore;

/// One store's index (and rows) per row slot.
#[derive(Debug)]
pub(super) struct Embedding {
    store: Arc<EmbeddingStore>,
    /// Per thread, its first reaction in cache order (the store's index).
    offsets: Arc<[u64]>,
    dense: bool,
}

impl Embedding {
    pub(super) fn new(store: Arc<EmbeddingStore>, offsets: Arc<[u64]>, dense: bool) -> Self {
        Embedding {
            store,
            offsets,
            dense,
        }
    }

    /// The store's global row of reaction `r` of the thread whose first
    /// reaction is `first`; -1 for none.
    fn row(&self, first: Option<u64>, r: u32) -> i32 {
        if r == BatchMut::NO_REACTION {
            return -1;
        }
        first
            .and_then(|first| self.store.index().get((first + u64::from(r)) as usize))
            .filter(|&&row| row != EmbeddingStore::NO_ROW)
            .map_or(-1, |&row| row as i32)
    }

    /// Index and rows of `T` (float32 or float16 bits).
    fn dense<T>(&self, slots: &Slots<'_, '_>, first: Option<u64>, index: &mut [i32], rows: &mut [T])
    where
        T: Copy + Default + zerocopy::FromBytes + zerocopy::Immutable,
    {
        let dim = self.store.dim();
        if dim == 0 {
            for (slot, &r) in index.iter_mut().zip(slots.reactions) {
                *slot = self.row(first, r);
            }
            return;
        }
        let mut seg = None;
        for ((slot, &r), dst) in index
            .iter_mut()
            .zip(slots.reactions)
            .zip(rows.chunks_exact_mut(dim))
        {
            let row = self.row(first, r);
            // A slot that was padding in the last fill of this width holds
            // zeros already: a `[B, max_cxt]` batch, mostly padding, costs
            // only its real rows.
            if !(slots.reuse && row < 0 && *slot == -1) {
                self.store.copy_row(row, &mut seg, dst);
            }
            *slot = row;
        }
    }
}

impl Output for Embedding {
    fn buffers(&self) -> Vec<Desc> {
        let key = self
            .store
            .dir()
            .file_name()
            .map(|n| n.to_string_lossy().into_owned());
        let mut d = vec![Desc {
            name: "embedding_index",
            key: key.clone(),
            dtype: Dtype::I32,
            per_slot: None,
        }];
        if self.dense {
            d.push(Desc {
                name: "embeddings",
                key,
                dtype: if self.store.is_half() {
                    Dtype::F16
                } else {
                    Dtype::F32
                },
                per_slot: Some(self.store.dim()),
            });
        }
        d
    }

    fn fill(&self, slots: &Slots<'_, '_>, out: &mut ThreadOut<'_, '_>) -> Result<()> {
        let first = slots.position.and_then(|p| self.offsets.get(p).copied());
        if !self.dense {
            for (slot, &r) in out.one(0).i32().iter_mut().zip(slots.reactions) {
                *slot = self.row(first, r);
            }
            return Ok(());
        }
        let (index, rows) = out.two(0, 1);
        let index = index.i32();
        match rows {
            OutputMut::F16(rows) => self.dense(slots, first, index, rows),
            rows => self.dense(slots, first, index, rows.f32()),
        }
        Ok(())
    }
}

impl EmbeddingStore {
    /// For the row slots of a batch (`positions`' threads, `width` slots
    /// each, `reactions` as [`BatchMut::with_reactions`](crate::BatchMut::with_reactions)
    /// recorded them), each slot's global row in this store, or -1 for none.
    /// `offsets[p]` is thread `p`'s first reaction in cache order
    /// ([`reaction_offsets`](crate::ThreadSource::reaction_offsets)). Slots of threads
    /// past `positions` get -1. (A [`BatchSpec`](crate::BatchSpec) does this, and the
    /// gather, in the loader's fill.)
    pub fn rows_of_slots(
        &self,
        offsets: &[u64],
        positions: &[usize],
        reactions: &[u32],
        width: usize,
        out: &mut [i32],
    ) {
        let index = self.index();
        for (slot, (o, &r)) in out.iter_mut().zip(reactions).enumerate() {
            *o = if width == 0 || r == BatchMut::NO_REACTION {
                -1
            } else {
                positions
                    .get(slot / width)
                    .and_then(|&p| offsets.get(p))
                    .and_then(|&first| index.get((first + u64::from(r)) as usize))
                    .filter(|&&row| row != EmbeddingStore::NO_ROW)
                    .map_or(-1, |&row| row as i32)
            };
        }
    }
}
