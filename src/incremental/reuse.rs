//! The reuse half of an incremental build: what of an unchanged thread the
//! pool takes from the old cache (its archived bytes, copied by the writer
//! as they are, or the thread decoded when its values must be recomputed).

use super::Old;
use crate::format::gather::{self, Carried};
use crate::ingest::discover::ThreadDir;
use crate::ingest::features::reliability::RumourIndex;
use crate::ingest::job::Reuse;
use crate::ingest::thread::Outcome;
use crate::ingest::writer::estimated_bytes;
use crate::read::ThreadSource;
use crate::repack::thread_data;
use crate::schema::{REACTION_EXTRA, ReactionKind, THREAD_EXTRA, reaction_column};

/// Unchanged threads from the old cache, with `user_reliability` recomputed
/// against `recompute` (the new rumour index) when the rumour sources
/// changed.
pub(super) struct Reuser<'a> {
    pub(super) old: &'a Old<'a>,
    pub(super) list: &'a [ThreadDir],
    pub(super) extended: bool,
    pub(super) recompute: Option<&'a RumourIndex>,
}

impl Reuser<'_> {
    /// Thread `pos` of the old cache as the writer copies it, when its
    /// bytes can be copied (laid out as this library's writer lays them
    /// out, with the columns this build writes).
    fn carried(&self, pos: usize) -> Option<Carried> {
        let cache = &self.old.cache;
        let m = cache.manifest();
        let columns = if self.extended {
            (REACTION_EXTRA, THREAD_EXTRA)
        } else {
            (0, 0)
        };
        if (m.reaction_columns.len(), m.thread_columns.len()) != columns {
            return None;
        }
        let (shard, index) = cache.shard_of(pos)?;
        let (numbers, text) = cache.archives(shard)?;
        if !gather::canonical(numbers, text, index) {
            return None;
        }
        let rec = &numbers.threads[index];
        let first = rec.first_reaction.to_native() as usize;
        let reactions = rec.reaction_count.to_native() as usize;
        let retweets = numbers.reactions[first..first + reactions]
            .iter()
            .filter(|r| r.kind == ReactionKind::Retweet as u8)
            .count();
        let texts = gather::thread_arena(text, index).len();
        Some(Carried {
            shard,
            index,
            source_id: rec.source_id.to_native(),
            reactions,
            retweets,
            bytes: estimated_bytes(texts, reactions, if self.extended { reactions } else { 0 }),
        })
    }
}

impl Reuse for Reuser<'_> {
    fn tally_of(&self, c: &Carried) -> (i8, &str) {
        let cache = &self.old.cache;
        match cache.archives(c.shard) {
            Some((numbers, text)) => {
                let event = &text.threads[c.index].event;
                let start = event.start.to_native() as usize;
                (
                    numbers.threads[c.index].label_code,
                    text.arena
                        .as_str()
                        .get(start..start + event.len.to_native() as usize)
                        .unwrap_or(""),
                )
            }
            None => (0, ""),
        }
    }

    fn take(&self, i: usize) -> Option<Outcome> {
        let o = self.old;
        let td = &self.list[i];
        let pos = o.reuse[i]?;
        let bad = o.report.get(&td.rel).cloned().unwrap_or_default();
        let Some(pos) = pos else {
            // Skipped last time, unchanged: skipped again, same lines.
            return Some(Outcome {
                data: None,
                bad,
                files_read: 0,
                carried: None,
            });
        };
        if self.recompute.is_none()
            && let Some(carried) = self.carried(pos)
        {
            // Copied as it is by the writer: not decoded, not re-encoded.
            return Some(Outcome {
                data: None,
                bad,
                files_read: 0,
                carried: Some(carried),
            });
        }
        let t = o.cache.thread(pos)?;
        let mut data = thread_data(&t, self.extended);
        // Each reaction record carries its author's key (format 5), the key
        // the rumour index is built with.
        if let (Some(col), Some(idx)) = (reaction_column("user_reliability"), self.recompute) {
            for (row, r) in data.reaction_extra.iter_mut().zip(&data.reactions) {
                row[col] = idx.reliability(r.user_key, r.created_at);
            }
        }
        Some(Outcome {
            data: Some(data),
            bad,
            files_read: 0,
            carried: None,
        })
    }
}
