//! How an epoch is cut into batches: shuffled or length-bucketed, and
//! shared out between the ranks of a distributed job.
//!
//! Length bucketing is what RPDNN's own AllenNLP `BucketIterator` does:
//! threads are sorted by how many rows they contribute (with seeded noise,
//! so that equal lengths mix differently each epoch), cut into batches of
//! neighbours, and the batches' order is shuffled. With
//! [`Pad::Longest`](crate::Pad::Longest) a batch is then only as wide as its
//! longest thread, so an epoch carries little padding. When batches are
//! padded to a multiple of some width ([`pad_multiple`](Batching::pad_multiple)),
//! threads are sorted by that padded width first and by the noisy length
//! only within it: the noise (±10 %) otherwise carries a thread of 9 rows
//! among the 8s and doubles that batch's width to 16, while within one
//! width class it still mixes the batches differently each epoch.
//!
//! Everything depends only on the inputs and the seed: the same batches on
//! any machine, for any number of loader workers.

use crate::error::LoadError;

/// How to cut `n` items into batches (see [`plan`](Batching::plan)).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Batching {
    /// Items per batch (at most).
    pub batch_size: usize,
    /// Shuffle with this seed; `None` keeps the items' order (and, when
    /// bucketing, the batches' sorted order and no noise).
    pub seed: Option<u64>,
    /// Sort by length first, with lengths scaled by `1 + u * noise` for a
    /// seeded uniform `u` in `[-1, 1)`; `None` for no bucketing.
    pub bucket_noise: Option<f64>,
    /// Ranks sharing the epoch: the number of batches is made a multiple of
    /// it, so that every rank gets the same number.
    pub world_size: usize,
    /// With several ranks, drop the items that would not fill a batch for
    /// every rank instead of spreading them (see [`plan`](Batching::plan)).
    pub drop_last: bool,
    /// With bucketing, the multiple batches are padded to
    /// ([`Pad::Longest`](crate::Pad::Longest)'s `multiple`): threads are
    /// sorted by their length rounded up to it first, the noisy length
    /// breaking ties. `None` sorts by the noisy length alone.
    pub pad_multiple: Option<usize>,
}

impl Default for Batching {
    fn default() -> Self {
        Batching {
            batch_size: 1,
            seed: None,
            bucket_noise: None,
            world_size: 1,
            drop_last: false,
            pad_multiple: None,
        }
    }
}

impl Batching {
    /// The batches of one epoch over items `0..lengths.len()` (indices into
    /// the caller's positions), in the order they are to be fed.
    ///
    /// - One rank (`world_size` 1): full batches of `batch_size`, the last one
    ///   smaller, as a plain loop over chunks gives.
    /// - Several ranks: the batch count is rounded up to a multiple of
    ///   `world_size` and the items are spread over the batches as evenly as
    ///   possible (sizes differ by at most one, none exceeds `batch_size`), so
    ///   every item is in exactly one batch and every rank gets the same number
    ///   of batches: rank `r` takes batches `r, r + world_size, ...`
    ///   ([`rank_batches`](Self::rank_batches)). With `drop_last`, only `world_size * k` full
    ///   batches are kept and the rest of the items wait for another epoch, as
    ///   `DistributedSampler(drop_last=True)` does. When the batches
    ///   outnumber the items (batch size 1, say 5 threads on 2 ranks),
    ///   no batch is left empty: the plan is batches of one, the order's
    ///   first items repeated to fill the last ones, as `DistributedSampler`
    ///   pads by repetition (with `drop_last` they are dropped instead).
    ///
    /// `lengths` matter only when bucketing. No batch is ever empty: fewer
    /// items than ranks are padded by repetition too (no items: no
    /// batches). Fails when `batch_size` or `world_size` is 0.
    pub fn plan(&self, lengths: &[usize]) -> Result<Vec<Vec<usize>>, LoadError> {
        let how = self;
        let n = lengths.len();
        let (bs, world) = (how.batch_size, how.world_size);
        if bs == 0 || world == 0 {
            return Err(LoadError::BadBatching {
                reason: "batch_size and world_size must be at least 1".into(),
            });
        }
        let mut order: Vec<usize> = (0..n).collect();
        match (how.bucket_noise, how.seed) {
            (Some(noise), seed) => {
                if !(0.0..1.0).contains(&noise) {
                    return Err(LoadError::BadBatching {
                        reason: format!("bucket noise must be in [0, 1), not {noise}"),
                    });
                }
                let mut rng = SplitMix(seed.unwrap_or(0) ^ 0x5EED_B0C4_E7ED_0001);
                // The width a thread alone would be padded to (an empty
                // thread is one row wide, as `Loader::width_of` pads it).
                let width = |l: usize| {
                    how.pad_multiple
                        .map_or(0, |m| l.max(1).next_multiple_of(m.max(1)))
                };
                let keys: Vec<(usize, f64)> = lengths
                    .iter()
                    .map(|&l| {
                        let u = if seed.is_some() { rng.uniform() } else { 0.0 };
                        (width(l), l as f64 * (1.0 + u * noise))
                    })
                    .collect();
                order.sort_by(|&a, &b| {
                    let (ka, kb) = (keys[a], keys[b]);
                    ka.0.cmp(&kb.0).then(ka.1.total_cmp(&kb.1)).then(a.cmp(&b))
                });
            }
            (None, Some(seed)) => super::loader::shuffle(&mut order, seed),
            (None, None) => {}
        }
        let mut batches = if world == 1 {
            order.chunks(bs).map(<[usize]>::to_vec).collect::<Vec<_>>()
        } else if how.drop_last {
            let k = n / bs / world * world;
            order[..k * bs].chunks(bs).map(<[usize]>::to_vec).collect()
        } else {
            let count = n.div_ceil(bs).next_multiple_of(world);
            if n == 0 {
                // Nothing to share: no batch for any rank (equal counts).
                Vec::new()
            } else if count > n {
                // Batches of one (batch_size 1, or ranks close to the
                // thread count): spreading would leave some batch empty and
                // its rank's loss NaN. Pad by repetition, as
                // DistributedSampler does: the epoch's first threads again.
                return Ok(pad_by_repetition(&order, count, how));
            } else {
                let (base, extra) = (n / count, n % count);
                let mut start = 0;
                (0..count)
                    .map(|i| {
                        let len = base + usize::from(i < extra);
                        let batch = order[start..start + len].to_vec();
                        start += len;
                        batch
                    })
                    .collect()
            }
        };
        if how.bucket_noise.is_some()
            && let Some(seed) = how.seed
        {
            super::loader::shuffle(&mut batches, seed ^ 0xBA7C_4E50_0DE2_0002);
        }
        Ok(batches)
    }

    /// The batches of `plan` (from [`plan`](Self::plan)) that rank `rank` of
    /// [`world_size`](Self::world_size) feeds, in order.
    pub fn rank_batches<'p>(
        &self,
        plan: &'p [Vec<usize>],
        rank: usize,
    ) -> impl Iterator<Item = &'p [usize]> + use<'p> {
        plan.iter()
            .skip(rank)
            .step_by(self.world_size.max(1))
            .map(Vec::as_slice)
    }
}

/// `count` batches of one thread each over `order` (shorter than `count`):
/// `order` once, then its first threads again; the batches shuffled as a
/// bucketed plan's are.
fn pad_by_repetition(order: &[usize], count: usize, how: &Batching) -> Vec<Vec<usize>> {
    let mut batches: Vec<Vec<usize>> = (0..count).map(|i| vec![order[i % order.len()]]).collect();
    if how.bucket_noise.is_some()
        && let Some(seed) = how.seed
    {
        super::loader::shuffle(&mut batches, seed ^ 0xBA7C_4E50_0DE2_0002);
    }
    batches
}

/// splitmix64, as [`shuffle`](crate::shuffle) draws it.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [-1, 1), from the top 53 bits.
    fn uniform(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 52) as f64 - 1.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_cover(plan: &[Vec<usize>], n: usize) {
        let mut all: Vec<usize> = plan.iter().flatten().copied().collect();
        all.sort_unstable();
        assert_eq!(all, (0..n).collect::<Vec<_>>());
    }

    #[test]
    fn one_rank_is_plain_chunks() {
        let lengths = vec![3; 10];
        let how = Batching {
            batch_size: 4,
            ..Batching::default()
        };
        let plan = how.plan(&lengths).unwrap();
        assert_eq!(plan, vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7], vec![8, 9]]);
    }

    #[test]
    fn ranks_get_equal_counts_and_cover_once() {
        for n in [2usize, 3, 7, 33, 100, 101] {
            for world in [2usize, 3] {
                if n < world {
                    continue;
                }
                let lengths: Vec<usize> = (0..n).map(|i| i % 17).collect();
                for bucket in [None, Some(0.1)] {
                    let how = Batching {
                        batch_size: 8,
                        seed: Some(5),
                        bucket_noise: bucket,
                        world_size: world,
                        drop_last: false,
                        pad_multiple: None,
                    };
                    let plan = how.plan(&lengths).unwrap();
                    check_cover(&plan, n);
                    assert_eq!(plan.len() % world, 0);
                    let ones = Batching {
                        batch_size: 1,
                        ..how
                    };
                    let padded = ones.plan(&lengths).unwrap();
                    assert_eq!(padded.len(), n.next_multiple_of(world));
                    assert!(padded.iter().all(|b| b.len() == 1));
                    let mut seen: Vec<usize> = padded.iter().flatten().copied().collect();
                    seen.truncate(n);
                    if bucket.is_none() {
                        seen.sort_unstable();
                        assert_eq!(seen, (0..n).collect::<Vec<_>>());
                    }
                    assert!(plan.iter().all(|b| !b.is_empty() && b.len() <= 8));
                    let counts: Vec<usize> = (0..world)
                        .map(|r| how.rank_batches(&plan, r).count())
                        .collect();
                    assert!(counts.iter().all(|&c| c == counts[0]));
                }
            }
        }
    }

    #[test]
    fn bucketing_groups_similar_lengths_and_is_seeded() {
        let lengths: Vec<usize> = (0..1000).map(|i| (i * 7919) % 200).collect();
        let how = Batching {
            batch_size: 32,
            seed: Some(1),
            bucket_noise: Some(0.1),
            ..Batching::default()
        };
        let plan = how.plan(&lengths).unwrap();
        check_cover(&plan, 1000);
        assert_eq!(plan, how.plan(&lengths).unwrap());
        let other = (Batching {
            seed: Some(2),
            ..how
        })
        .plan(&lengths)
        .unwrap();
        assert_ne!(plan, other);
        let padded: usize = plan
            .iter()
            .map(|b| b.len() * b.iter().map(|&i| lengths[i]).max().unwrap())
            .sum();
        let real: usize = lengths.iter().sum();
        assert!(
            (padded as f64) < 1.15 * real as f64,
            "{padded} padded for {real} real rows"
        );
    }

    /// Padded rows of `plan` with each batch as wide as its longest
    /// thread rounded up to `multiple`.
    fn padded(plan: &[Vec<usize>], lengths: &[usize], multiple: usize) -> usize {
        plan.iter()
            .map(|b| {
                let longest = b.iter().map(|&i| lengths[i]).max().unwrap_or(0);
                b.len() * longest.max(1).next_multiple_of(multiple)
            })
            .sum()
    }

    #[test]
    fn bucketing_by_padded_width_keeps_batches_in_one_width_class() {
        // A PHEME-like skew: most threads short, a long tail.
        let mut rng = SplitMix(7);
        let lengths: Vec<usize> = (0..6425)
            .map(|_| {
                let u = (rng.next() >> 11) as f64 / (1u64 << 53) as f64;
                (-(1.0 - u).ln() * 12.0) as usize % 200
            })
            .collect();
        let width = |l: usize| l.max(1).next_multiple_of(8);
        let mut classes: Vec<usize> = lengths.iter().map(|&l| width(l)).collect();
        classes.sort_unstable();
        classes.dedup();
        let how = Batching {
            batch_size: 128,
            seed: Some(3),
            bucket_noise: Some(0.1),
            pad_multiple: Some(8),
            ..Batching::default()
        };
        let plan = how.plan(&lengths).unwrap();
        // Still a deterministic permutation of the items.
        check_cover(&plan, lengths.len());
        assert_eq!(plan, how.plan(&lengths).unwrap());
        let other = Batching {
            seed: Some(4),
            ..how
        };
        assert_ne!(plan, other.plan(&lengths).unwrap());
        // Sorted by width first, a batch straddles two classes only where
        // one class ends: at most one batch per class boundary.
        let mixed = |plan: &[Vec<usize>]| {
            plan.iter()
                .filter(|b| b.iter().any(|&i| width(lengths[i]) != width(lengths[b[0]])))
                .count()
        };
        assert!(mixed(&plan) < classes.len(), "{} mixed", mixed(&plan));
        // The noisy length alone (the previous order) mixes many more, and
        // pads more.
        let by_length = Batching {
            pad_multiple: None,
            ..how
        }
        .plan(&lengths)
        .unwrap();
        assert!(
            mixed(&by_length) > classes.len(),
            "{} mixed",
            mixed(&by_length)
        );
        assert!(padded(&plan, &lengths, 8) < padded(&by_length, &lengths, 8));
        // No order pads less than every thread padded alone (the floor).
        let floor: usize = lengths.iter().map(|&l| width(l)).sum();
        assert!(padded(&plan, &lengths, 8) >= floor);
    }

    #[test]
    fn drop_last_and_errors() {
        let lengths = vec![1; 10];
        let how = Batching {
            batch_size: 3,
            world_size: 2,
            drop_last: true,
            ..Batching::default()
        };
        let plan = how.plan(&lengths).unwrap();
        assert_eq!(plan.len(), 2);
        assert!(plan.iter().all(|b| b.len() == 3));
        assert!(
            (Batching {
                world_size: 2,
                ..how
            })
            .plan(&[1])
            .is_ok()
        );
        assert!(
            (Batching {
                world_size: 2,
                drop_last: false,
                ..how
            })
            .plan(&[1])
            .unwrap()
                == vec![vec![0], vec![0]]
        );
        assert!(
            (Batching {
                batch_size: 0,
                ..how
            })
            .plan(&lengths)
            .is_err()
        );
        assert!(
            (Batching {
                bucket_noise: Some(1.5),
                ..how
            })
            .plan(&lengths)
            .is_err()
        );
    }
}
