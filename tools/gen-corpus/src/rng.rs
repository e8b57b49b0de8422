//! Randomness: splitmix64 seeding, xoshiro256** streams, and only IEEE basic
//! arithmetic on floats (no libm), so that every platform draws the same values.

use xxhash_rust::xxh3::xxh3_64_with_seed;

/// A xoshiro256** stream.
pub(crate) struct Rng([u64; 4]);

impl Rng {
    pub(crate) fn new(seed: u64) -> Self {
        let mut x = seed;
        let mut s = [0u64; 4];
        for v in &mut s {
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            *v = z ^ (z >> 31);
        }
        Rng(s)
    }

    /// A stream for (seed, tag, index), independent of every other stream.
    pub(crate) fn derive(seed: u64, tag: &str, index: u64) -> Self {
        let mut key = Vec::with_capacity(tag.len() + 8);
        key.extend_from_slice(tag.as_bytes());
        key.extend_from_slice(&index.to_le_bytes());
        Rng::new(xxh3_64_with_seed(&key, seed))
    }

    pub(crate) fn next(&mut self) -> u64 {
        let s = &mut self.0;
        let result = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// Uniform in `0..n` (n > 0).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next()) * u128::from(n)) >> 64) as u64
    }

    /// Uniform in `lo..=hi`.
    pub(crate) fn between(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.below((hi - lo + 1) as u64) as i64
    }

    /// Uniform in `[0, 1)`.
    pub(crate) fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    pub(crate) fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    pub(crate) fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len() as u64) as usize]
    }

    pub(crate) fn word<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[self.below(xs.len() as u64) as usize]
    }

    /// Approximately standard normal (Irwin-Hall sum of 12 uniforms).
    pub(crate) fn normal(&mut self) -> f64 {
        let mut sum = 0.0;
        for _ in 0..12 {
            sum += self.unit();
        }
        sum - 6.0
    }

    pub(crate) fn lognormal(&mut self, median: f64, sigma: f64) -> f64 {
        median * exp(sigma * self.normal())
    }

    /// A non-negative count drawn from a log-normal.
    pub(crate) fn count(&mut self, median: f64, sigma: f64) -> u64 {
        self.lognormal(median, sigma).round() as u64
    }

    pub(crate) fn alnum(&mut self, out: &mut String, n: usize) {
        const CHARS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
        for _ in 0..n {
            out.push(char::from(*self.pick(CHARS)));
        }
    }
}

/// `e^x` with basic arithmetic only (range reduction and a Taylor series).
pub(crate) fn exp(x: f64) -> f64 {
    let x = x.clamp(-700.0, 700.0);
    let k = (x / std::f64::consts::LN_2).round();
    let r = x - k * std::f64::consts::LN_2;
    let (mut term, mut sum) = (1.0, 1.0);
    for i in 1..=20 {
        term *= r / f64::from(i);
        sum += term;
    }
    sum * f64::from_bits(((k as i64 + 1023) as u64) << 52)
}
