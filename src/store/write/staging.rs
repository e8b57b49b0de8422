//! The staging directory of an unfinished embed: the plan it resumes
//! under, its progress file, and how it starts afresh or resumes (the
//! batches whose rows read back as written are kept).

use std::fs::{self, File};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::super::format::{
    Dtype, INDEX_FILE, KEYS_FILE, NO_ROW, PROGRESS_FILE, StoreFile, npy_header, segment_file,
};
use super::super::read::EmbeddingStore;
use super::Result;
use super::files::{create_segment, hash_file, io, rows_err, sync_path, write_npy};
use crate::error::EmbeddingError;
use crate::read::texts::UniqueTexts;

/// What an unfinished embed records in its staging directory; it resumes
/// only under the same plan.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(super) struct Plan {
    pub(super) cache_content_id: String,
    pub(super) field: String,
    pub(super) dtype: String,
    pub(super) batch_size: usize,
    pub(super) unique: usize,
    pub(super) reactions: usize,
    pub(super) model_id: Option<String>,
    /// The reused store's keys file checksum, if any.
    pub(super) source: Option<String>,
    pub(super) todo: usize,
    pub(super) compact: bool,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct Progress {
    pub(super) plan: Plan,
    pub(super) done: usize,
    pub(super) dim: Option<usize>,
    /// Per batch written, the xxh3-64 of its rows' bytes: a resumed embed
    /// keeps the batches whose rows read back the same (rows are synced
    /// about once a second, not per batch, so after a power loss the
    /// progress may claim rows that never reached the disk).
    #[serde(default)]
    pub(super) hashes: Vec<u64>,
    /// The index's and the keys' size and checksum, as written (they are
    /// synced only at publication).
    #[serde(default)]
    pub(super) files: std::collections::BTreeMap<String, StoreFile>,
}

/// The reused previous store.
#[derive(Debug)]
pub(super) struct Prev {
    pub(super) store: EmbeddingStore,
    pub(super) keys_xxh3: String,
}

#[derive(Debug)]
pub(super) struct Run {
    /// The store's verified record (beside its lock).
    pub(super) record: PathBuf,
    /// Segments of the previous store read before reusing it.
    pub(super) segments_read: usize,
    pub(super) root: PathBuf,
    pub(super) partial: PathBuf,
    pub(super) target: PathBuf,
    pub(super) lock: File,
    pub(super) unique: UniqueTexts,
    pub(super) plan: Plan,
    pub(super) prev: Option<Prev>,
    pub(super) not_reused: Option<String>,
    /// Why an interrupted embed of another model was started over.
    pub(super) restarted: Option<String>,
    pub(super) reuse_from: Vec<Option<u32>>,
    pub(super) todo: Vec<u32>,
    pub(super) done: usize,
    pub(super) resumed: usize,
    pub(super) dim: Option<usize>,
    pub(super) seg: Option<(File, usize)>,
    /// The new segment's number (the previous store's segment count when
    /// appending, 0 when compacting).
    pub(super) seg_no: usize,
    pub(super) dropped: usize,
    /// Per batch written, its rows' xxh3-64 ([`Progress::hashes`]).
    pub(super) hashes: Vec<u64>,
    pub(super) last_sync: std::time::Instant,
    /// [`Progress::files`].
    pub(super) files: std::collections::BTreeMap<String, StoreFile>,
}

impl Drop for Run {
    fn drop(&mut self) {
        // Unlocked explicitly: a child forked meanwhile (a DataLoader
        // worker) shares the lock's open file.
        let _ = self.lock.unlock();
    }
}

/// What differs between an interrupted embed's plan and this one's, as
/// "X changed (old → new)", the options first.
fn plan_changes(old: &Plan, new: &Plan) -> String {
    let mut changed = Vec::new();
    let mut note = |what: &str, a: String, b: String| {
        if a != b {
            changed.push(format!("{what} changed ({a} → {b})"));
        }
    };
    note("the field", old.field.clone(), new.field.clone());
    note("the dtype", old.dtype.clone(), new.dtype.clone());
    note(
        "the batch size",
        old.batch_size.to_string(),
        new.batch_size.to_string(),
    );
    note(
        "compaction",
        old.compact.to_string(),
        new.compact.to_string(),
    );
    note(
        "the cache's content (rebuilt since)",
        old.cache_content_id.clone(),
        new.cache_content_id.clone(),
    );
    let show = |s: &Option<String>| s.clone().unwrap_or_else(|| "none".into());
    note("the store it reuses", show(&old.source), show(&new.source));
    if changed.is_empty() {
        // Only the counts that follow from the inputs.
        changed.push(format!(
            "its inputs changed ({} → {} texts to embed)",
            old.todo, new.todo
        ));
    }
    changed.join(", ")
}

impl Run {
    /// The progress of an interrupted embed with the same plan whose files
    /// are there, else None.
    pub(super) fn resumable(&mut self) -> Option<Progress> {
        let text = fs::read(self.partial.join(PROGRESS_FILE)).ok()?;
        let p: Progress = serde_json::from_slice(&text).ok()?;
        // Rows of two models of one width look alike: only a model known
        // to be the same (the same id, given or derived) continues the
        // rows already written. Without an id, "the same" cannot be
        // known, so the embed starts over.
        let Some(ours) = &self.plan.model_id else {
            self.restarted = Some(format!(
                "{}: an interrupted embed is there, but no model id was given, so whether its \
                 rows are this model's cannot be checked; starting over (give the same model_id \
                 to resume)",
                self.partial.display()
            ));
            return None;
        };
        if p.plan.model_id.as_ref() != Some(ours) {
            self.restarted = Some(format!(
                "{}: the interrupted embed was made by {}, not by model {ours:?}; starting over",
                self.partial.display(),
                crate::error::made_by(&p.plan.model_id),
            ));
            return None;
        }
        if p.plan != self.plan {
            // Said as the model id's case is: an interrupted embed thrown
            // away without a word looks like a resume that never happened.
            self.restarted = Some(format!(
                "{}: the interrupted embed is not resumed because {}; starting over (the same \
                 options resume it)",
                self.partial.display(),
                plan_changes(&p.plan, &self.plan)
            ));
            return None;
        }
        // Index and keys as written, and every linked segment there (none
        // of them synced before publication).
        let files = [INDEX_FILE, KEYS_FILE].iter().all(|f| {
            hash_file(&self.partial.join(f))
                .is_ok_and(|h| p.files.get(*f).is_some_and(|want| *want == h))
        });
        let linked = match (&self.prev, self.plan.compact) {
            (Some(prev), false) => prev.store.meta().segments.iter().enumerate().all(|(k, s)| {
                fs::metadata(self.partial.join(segment_file(k))).is_ok_and(|m| m.len() == s.bytes)
            }),
            _ => true,
        };
        // Compacting with a previous store, the segment holds the reused
        // rows from the start.
        let seg = self.partial.join(segment_file(self.seg_no));
        let seg_needed = p.done > 0 || (self.plan.compact && self.prev.is_some());
        (files && linked && (!seg_needed || seg.is_file())).then_some(p)
    }

    pub(super) fn resume_from(&mut self, p: Progress) -> Result<()> {
        if p.hashes.len() != p.done {
            return self.start();
        }
        self.done = p.done;
        self.resumed = p.done;
        self.dim = p.dim;
        self.hashes = p.hashes;
        self.files = p.files;
        let path = self.partial.join(segment_file(self.seg_no));
        if let Some(dim) = p.dim
            && path.is_file()
        {
            let header = npy_header(
                Dtype::of_meta(&self.plan.dtype).unwrap_or(Dtype::F32),
                &[self.seg_rows(), dim],
            );
            let f = io(&path, File::options().read(true).write(true).open(&path))?;
            let mut head = vec![0u8; header.len()];
            io(&path, f.read_exact_at(&mut head, 0))?;
            if head != header {
                return self.start();
            }
            // Keep the batches whose rows read back as written.
            let (at, row) = (
                header.len(),
                dim * Dtype::of_meta(&self.plan.dtype)
                    .unwrap_or(Dtype::F32)
                    .size(),
            );
            let mut good = 0;
            let mut buf = Vec::new();
            while good < self.done {
                let n = (self.todo.len() - good * self.plan.batch_size).min(self.plan.batch_size);
                buf.resize(n * row, 0);
                for (from, to, off) in self.batch_runs(good, self.plan.batch_size, at, row) {
                    io(&path, f.read_exact_at(&mut buf[from..to], off))?;
                }
                if xxhash_rust::xxh3::xxh3_64(&buf) != self.hashes[good] {
                    break;
                }
                good += 1;
            }
            self.done = good;
            self.resumed = good;
            self.hashes.truncate(good);
            self.seg = Some((f, header.len()));
        } else if p.done > 0 {
            return self.start();
        }
        Ok(())
    }

    /// Where batch `b`'s rows go: (start, end) in the batch's bytes and the
    /// file offset, per run of rows (one run when appending; when
    /// compacting, rows go to their inputs' positions, in runs of
    /// consecutive ones).
    pub(super) fn batch_runs(
        &self,
        b: usize,
        batch_size: usize,
        at: usize,
        row: usize,
    ) -> Vec<(usize, usize, u64)> {
        let first = b * batch_size;
        let picked =
            &self.todo[first.min(self.todo.len())..(first + batch_size).min(self.todo.len())];
        if !self.plan.compact {
            return vec![(0, picked.len() * row, (at + first * row) as u64)];
        }
        let mut runs = Vec::new();
        let mut i = 0;
        while i < picked.len() {
            let mut j = i + 1;
            while j < picked.len() && picked[j] == picked[j - 1] + 1 {
                j += 1;
            }
            runs.push((i * row, j * row, (at + picked[i] as usize * row) as u64));
            i = j;
        }
        runs
    }

    pub(super) fn seg_rows(&self) -> usize {
        if self.plan.compact {
            self.unique.len()
        } else {
            self.todo.len()
        }
    }

    /// Starts the staging directory afresh: the index, the keys, the
    /// previous store's segments (linked when appending, their reused rows
    /// copied when compacting), all synced before the first progress file.
    pub(super) fn start(&mut self) -> Result<()> {
        if fs::symlink_metadata(&self.partial).is_ok() {
            io(&self.partial, fs::remove_dir_all(&self.partial))?;
        }
        // Owner-only while written when it replaces a store (the swap
        // gives it the old one's mode and group): a store moved to another
        // disk and restricted there is not readable in its staging
        // directory beside it, nor in what a killed embed leaves.
        let mut mkdir = fs::DirBuilder::new();
        if self.target.is_dir() {
            std::os::unix::fs::DirBuilderExt::mode(&mut mkdir, 0o700);
        }
        io(&self.partial, mkdir.create(&self.partial))?;
        self.done = 0;
        self.hashes.clear();
        self.resumed = 0;
        self.dim = None;
        self.seg = None;
        let dtype = Dtype::of_meta(&self.plan.dtype).unwrap_or(Dtype::F32);
        let n = self.unique.len();
        let (index, keys): (Vec<u32>, Vec<u128>) = match (&self.prev, self.plan.compact) {
            (Some(p), false) => {
                let base = p.store.rows() as u32;
                let mut global = vec![0u32; n];
                let mut next = base;
                for (u, g) in global.iter_mut().enumerate() {
                    *g = match self.reuse_from[u] {
                        Some(r) => r,
                        None => {
                            next += 1;
                            next - 1
                        }
                    };
                }
                let index = self
                    .unique
                    .index()
                    .iter()
                    .map(|&u| {
                        if u == NO_ROW {
                            NO_ROW
                        } else {
                            global[u as usize]
                        }
                    })
                    .collect();
                let keys = p
                    .store
                    .keys()
                    .chain(self.todo.iter().map(|&u| self.unique.key(u as usize)))
                    .collect();
                (index, keys)
            }
            _ => (
                self.unique.index().to_vec(),
                (0..n).map(|u| self.unique.key(u)).collect(),
            ),
        };
        let key_words: Vec<u64> = keys
            .iter()
            .flat_map(|&k| [k as u64, (k >> 64) as u64])
            .collect();
        let index = write_npy(
            &self.partial.join(INDEX_FILE),
            Dtype::U32,
            &[index.len()],
            zerocopy::IntoBytes::as_bytes(index.as_slice()),
        )?;
        let keys = write_npy(
            &self.partial.join(KEYS_FILE),
            Dtype::U64,
            &[keys.len(), 2],
            zerocopy::IntoBytes::as_bytes(key_words.as_slice()),
        )?;
        self.files = [(INDEX_FILE.to_owned(), index), (KEYS_FILE.to_owned(), keys)].into();
        if let Some(p) = &self.prev {
            let dim = p.store.dim();
            self.dim = Some(dim);
            if self.plan.compact {
                self.copy_reused(dtype, dim)?;
            } else {
                for (k, (from, _, _)) in p.store.segments().enumerate() {
                    let to = self.partial.join(segment_file(k));
                    if fs::hard_link(from, &to).is_err() {
                        // No links here (another file system below?): a copy.
                        io(&to, fs::copy(from, &to))?;
                        sync_path(&to)?;
                    }
                }
                if !self.todo.is_empty() {
                    let path = self.partial.join(segment_file(self.seg_no));
                    self.seg = Some(create_segment(&path, dtype, self.todo.len(), dim)?);
                }
            }
        }
        self.save_progress()
    }

    /// Compacting with a previous store (verified in full by `begin`): its
    /// rows of reused inputs, copied to their inputs' positions in the one
    /// new segment, and synced.
    pub(super) fn copy_reused(&mut self, dtype: Dtype, dim: usize) -> Result<()> {
        let Some(p) = &self.prev else { return Ok(()) };
        let path = self.partial.join(segment_file(0));
        let (file, at) = create_segment(&path, dtype, self.unique.len(), dim)?;
        let row = dim * dtype.size();
        let chunk_rows = ((8 << 20) / row.max(1)).max(1);
        let mut buf = Vec::with_capacity(chunk_rows * row);
        let mut u = 0;
        let n = self.unique.len();
        while u < n {
            if self.reuse_from[u].is_none() {
                u += 1;
                continue;
            }
            let start = u;
            buf.clear();
            while u < n && u - start < chunk_rows {
                let Some(r) = self.reuse_from[u] else { break };
                let bytes =
                    p.store
                        .row_bytes(r as usize)
                        .ok_or_else(|| EmbeddingError::Damaged {
                            path: p.store.dir().to_owned(),
                            reason: format!("no row {r}"),
                        })?;
                buf.extend_from_slice(bytes);
                u += 1;
            }
            io(&path, file.write_all_at(&buf, (at + start * row) as u64))?;
        }
        io(&path, file.sync_data())?;
        self.seg = Some((file, at));
        Ok(())
    }

    /// Records how far the embed is: not synced, as it only ever claims
    /// rows already synced (a lost one means redoing work, never trusting
    /// rows that are not there).
    pub(super) fn save_progress(&self) -> Result<()> {
        let p = Progress {
            plan: self.plan.clone(),
            done: self.done,
            dim: self.dim,
            hashes: self.hashes.clone(),
            files: self.files.clone(),
        };
        let path = self.partial.join(PROGRESS_FILE);
        let tmp = self.partial.join(format!("{PROGRESS_FILE}.tmp"));
        let text = serde_json::to_vec(&p).map_err(|e| rows_err(e.to_string()))?;
        io(&tmp, fs::write(&tmp, text))?;
        io(&path, fs::rename(&tmp, &path))
    }
}
