//! Global per-feature statistics for normalisation.
//!
//! As the reference's `compute_global_values_4_all_dataset_numercial_features`:
//! over a chosen set of threads and context kinds, per feature the count,
//! mean, population standard deviation (ddof 0), minimum and maximum,
//! accumulated in `f64` with two passes (mean first, then squared deviations:
//! no catastrophic cancellation). Saved as JSON beside the cache.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::selection::{Kinds, Selection};
use crate::error::LoadError;
use crate::read::ThreadSource;
use crate::schema::{FEATURE_NAMES, NUM_FEATURES};

type Result<T, E = LoadError> = std::result::Result<T, E>;

/// Statistics of the 28 features over a set of reactions.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FeatureStats {
    /// Feature names, in order (checked on load).
    pub feature_names: Vec<String>,
    /// Threads visited.
    pub threads: u64,
    /// Reactions counted (the same for every feature).
    pub count: u64,
    /// Mean of each feature.
    pub mean: [f64; NUM_FEATURES],
    /// Population standard deviation (ddof 0) of each feature.
    pub std: [f64; NUM_FEATURES],
    /// Minimum of each feature (0 when `count` is 0).
    pub min: [f64; NUM_FEATURES],
    /// Maximum of each feature (0 when `count` is 0).
    pub max: [f64; NUM_FEATURES],
    /// What they were computed over (None in files saved before it was
    /// recorded): [`check_for`](Self::check_for) refuses them for values
    /// of another definition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub computed_over: Option<StatsSource>,
}

/// What statistics were computed over: the values (the definition digest
/// of the code that computed them), the cache generation, the selection.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StatsSource {
    /// The definition digest recorded in the cache's manifest (empty for a
    /// cache built before it was recorded).
    pub definition: String,
    /// The cache's content id (its generation).
    pub content_id: String,
    /// The reactions counted: `"replies"`, `"retweets"` or `"both"`.
    pub kinds: String,
    /// The time window in seconds (None: every reaction).
    pub window_s: Option<f64>,
}

impl FeatureStats {
    /// Computes the statistics over the reactions that `selection` picks in
    /// the threads at `positions`.
    ///
    /// ```no_run
    /// use socialctx::{Cache, FeatureStats, Selection, ThreadSource};
    /// let cache = Cache::open("target/socialctx-cache")?;
    /// let all: Vec<usize> = (0..cache.len()).collect();
    /// let sel = Selection { max_cxt: usize::MAX, ..Selection::default() };
    /// let stats = FeatureStats::compute(&cache, &all, &sel)?;
    /// println!("mean t_diff {}", stats.mean[25]);
    /// # Ok::<(), socialctx::Error>(())
    /// ```
    pub fn compute<C: ThreadSource + ?Sized>(
        cache: &C,
        positions: &[usize],
        selection: &Selection,
    ) -> Result<FeatureStats> {
        let mut sum = [0f64; NUM_FEATURES];
        let mut min = [f64::INFINITY; NUM_FEATURES];
        let mut max = [f64::NEG_INFINITY; NUM_FEATURES];
        let mut count = 0u64;
        let each = |f: &mut dyn FnMut(&[f32; NUM_FEATURES])| -> Result<()> {
            for &p in positions {
                let t = cache
                    .numbers(p)?
                    .ok_or(LoadError::NoSuchThread { position: p })?;
                let rows = t.features();
                for i in selection.indices(&t) {
                    f(&rows[i]);
                }
            }
            Ok(())
        };
        each(&mut |row| {
            count += 1;
            for (k, &x) in row.iter().enumerate() {
                let x = f64::from(x);
                sum[k] += x;
                min[k] = min[k].min(x);
                max[k] = max[k].max(x);
            }
        })?;
        let n = count.max(1) as f64;
        let mean = sum.map(|s| s / n);
        let mut sq = [0f64; NUM_FEATURES];
        each(&mut |row| {
            for (k, &x) in row.iter().enumerate() {
                let d = f64::from(x) - mean[k];
                sq[k] += d * d;
            }
        })?;
        if count == 0 {
            min = [0.0; NUM_FEATURES];
            max = [0.0; NUM_FEATURES];
        }
        Ok(FeatureStats {
            feature_names: FEATURE_NAMES.iter().map(|s| s.to_string()).collect(),
            threads: positions.len() as u64,
            count,
            mean,
            std: sq.map(|s| (s / n).sqrt()),
            min,
            max,
            computed_over: Some(StatsSource {
                definition: cache.manifest().definition.clone(),
                content_id: cache.content_id(),
                kinds: match selection.kinds {
                    Kinds::Replies => "replies",
                    Kinds::Retweets => "retweets",
                    Kinds::Both => "both",
                }
                .into(),
                window_s: selection.window.map(|w| w.as_secs_f64()),
            }),
        })
    }

    /// Whether these statistics may normalise `cache`'s values. Statistics
    /// of values of another definition (another version of the library
    /// computed them) are refused, naming both digests: their means and
    /// deviations would standardise other numbers without a word. Those of
    /// another generation of the same definition (last night's, the
    /// corpus rebuilt since) are accepted: the values are computed the
    /// same way, and statistics that lag a day are normal practice. When
    /// it cannot be checked (a file saved before the definition was
    /// recorded, a cache built before) they are accepted with the warning
    /// returned.
    pub fn check_for<C: ThreadSource + ?Sized>(&self, cache: &C) -> Result<Option<String>> {
        let ours = &cache.manifest().definition;
        let fix = format!(
            "recompute them over this cache (socialctx stats {} --save FILE, or \
             FeatureStats.compute(cache))",
            cache.dir().display()
        );
        let Some(over) = &self.computed_over else {
            return Ok(Some(format!(
                "these statistics were saved before socialctx recorded what they were computed \
                 over, so they cannot be checked against the values of {} (definition {}): {fix} \
                 to have them checked",
                cache.dir().display(),
                if ours.is_empty() {
                    "not recorded"
                } else {
                    ours
                },
            )));
        };
        if over.definition == *ours {
            return Ok(None);
        }
        if over.definition.is_empty() || ours.is_empty() {
            return Ok(Some(format!(
                "{}: whether these statistics (definition {}) are of this cache's values \
                 (definition {}) cannot be checked, one of them was made before definitions \
                 were recorded: {fix}",
                cache.dir().display(),
                or_unknown(&over.definition),
                or_unknown(ours),
            )));
        }
        Err(LoadError::BadStats {
            path: cache.dir().to_path_buf(),
            reason: format!(
                "these statistics were computed over values of definition {} (cache \
                 generation {}), this cache's values are of definition {ours} (another \
                 version of socialctx computed them): they would standardise other numbers; \
                 {fix}",
                over.definition, over.content_id
            ),
        })
    }

    /// Writes the statistics as JSON, replacing `path` atomically.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        let mut json = serde_json::to_vec_pretty(self).map_err(|e| LoadError::BadStats {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        json.push(b'\n');
        // Whole or not at all, keeping the file's mode, group and links.
        crate::output::replace_file(path, |f| std::io::Write::write_all(f, &json))
            .map_err(|e| LoadError::io(path, e))
    }

    /// Reads statistics written by [`save`](Self::save).
    pub fn load(path: impl AsRef<Path>) -> Result<FeatureStats> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|e| LoadError::io(path, e))?;
        let bad = |reason: String| LoadError::BadStats {
            path: path.to_path_buf(),
            reason,
        };
        let stats: FeatureStats = serde_json::from_slice(&bytes)
            .map_err(|e| bad(format!("not a statistics file: {e}")))?;
        if stats
            .feature_names
            .iter()
            .map(String::as_str)
            .ne(FEATURE_NAMES)
        {
            return Err(bad("feature names differ from this library's".into()));
        }
        // Values no computation gives: a negative deviation flips or blows
        // up every normalised value (-inf at -EPSILON), and a mean or
        // deviation past float32 makes batches of infinities, silently.
        let limit = f64::from(f32::MAX);
        for (f, name) in FEATURE_NAMES.iter().enumerate() {
            let (mean, std) = (stats.mean[f], stats.std[f]);
            if !(0.0..=limit).contains(&std) || mean.abs() > limit {
                return Err(bad(format!(
                    "feature {name}: mean {mean}, std {std}: a standard deviation is at least 0 \
                     and both are within float32's range"
                )));
            }
        }
        Ok(stats)
    }
}

/// A digest, or "not recorded" for an empty one.
fn or_unknown(digest: &str) -> &str {
    if digest.is_empty() {
        "not recorded"
    } else {
        digest
    }
}

impl FeatureStats {
    /// The reference's epsilon added to the standard deviation.
    pub const EPSILON: f64 = 1e-6;

    /// One value `x` of feature `f` (typed: no index past the 28) standardised, `(x - mean) / (std +
    /// EPSILON)` as the reference's `global_norm` (computed in f64, given
    /// as f32): bit for bit what a [`Loader::normalize`](crate::Loader::normalize)d
    /// batch holds.
    pub fn normalize(&self, f: crate::Feature, x: f32) -> f32 {
        let f = f as usize;
        normalized(x, self.mean[f], 1.0 / (self.std[f] + Self::EPSILON))
    }
}

/// `(x - mean) * inv`, in f64, as f32: the one formula of both.
#[inline]
fn normalized(x: f32, mean: f64, inv: f64) -> f32 {
    ((f64::from(x) - mean) * inv) as f32
}

/// [`FeatureStats::normalize`] with the inverses computed once, for the
/// loader's every value.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Normalizer {
    mean: [f64; NUM_FEATURES],
    inv: [f64; NUM_FEATURES],
}

impl Normalizer {
    /// From global statistics.
    pub(crate) fn new(stats: &FeatureStats) -> Self {
        Normalizer {
            mean: stats.mean,
            inv: stats.std.map(|s| 1.0 / (s + FeatureStats::EPSILON)),
        }
    }

    /// Normalises one value of feature `f`.
    #[inline]
    pub(crate) fn apply(&self, f: usize, x: f32) -> f32 {
        normalized(x, self.mean[f], self.inv[f])
    }
}
