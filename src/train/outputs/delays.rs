//! Output `"delays"`: each slot's reaction's delay after the source tweet,
//! in seconds (float32, `created_at` differences as stored), 0 for
//! padding, empty-thread rows and graph roots.

use super::{Desc, Dtype, Output, Result, Slots, ThreadOut};

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
        dst.fill(0.0);
        if slots.position.is_none() {
            return Ok(());
        }
        let t = slots.thread()?;
        let source = t.source_created_at();
        for (d, &r) in dst.iter_mut().zip(slots.reactions) {
            // None for NO_REACTION (padding, a root).
            if let Some(x) = t.reaction(r as usize) {
                *d = (x.created_at() - source) as f32;
            }
        }
        Ok(())
    }
}
