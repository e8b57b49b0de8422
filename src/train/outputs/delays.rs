//! Output `"delays"`: each row slot's reaction's delay after the source
//! tweet, in seconds (float32, `created_at` differences as stored), 0 for
//! padding and empty-thread rows.

use super::{BatchMut, Desc, Dtype, Output, Result, Slots, ThreadOut};

/// Seconds from the source to each slot's reaction.
#[derive(Debug, Default)]
pub(super) struct Delays;

impl Output for Delays {
    fn buffers(&self) -> Vec<Desc> {
        vec![Desc {
            name: "delays",
            key: None,
            dtype: Dtype::F32,
            per_slot: None,
        }]
    }

    fn fill(&self, slots: &Slots<'_, '_>, out: &mut ThreadOut<'_, '_>) -> Result<()> {
        let dst = out.one(0).f32();
        let Some(t) = &slots.thread else {
            dst.fill(0.0);
            return Ok(());
        };
        let source = t.source_created_at();
        let records = t.reaction_records();
        let mut times = records.map(|r| r.created_at);
        // Slots hold their reactions in time order: one pass over the records.
        let mut next = 0usize;
        for (d, &r) in dst.iter_mut().zip(slots.reactions) {
            *d = if r == BatchMut::NO_REACTION {
                0.0
            } else {
                let r = r as usize;
                let at = if r >= next {
                    let skip = r - next;
                    next = r + 1;
                    times.nth(skip).unwrap_or(source)
                } else {
                    t.reaction_records().nth(r).map_or(source, |x| x.created_at)
                };
                (at - source) as f32
            };
        }
        Ok(())
    }
}
