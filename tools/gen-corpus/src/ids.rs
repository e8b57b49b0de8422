//! Time and ids: snowflakes, Twitter's `created_at` format, user ids by date.

use std::fmt::Write as _;

use chrono::DateTime;

/// Twitter's snowflake epoch (ms).
pub(crate) const TWEPOCH_MS: i64 = 1_288_834_974_657;

pub(crate) fn snowflake(ms: i64, low: u64) -> u64 {
    (((ms - TWEPOCH_MS) as u64) << 22) | (low & 0x3F_FFFF)
}

/// `Www Mmm dd HH:MM:SS +0000 yyyy`.
pub(crate) fn twitter_time(out: &mut String, secs: i64) {
    let t = DateTime::from_timestamp(secs, 0).expect("timestamps stay in 2006-2016");
    let _ = write!(out, "{}", t.format("%a %b %d %H:%M:%S +0000 %Y"));
}

/// Roughly the user id Twitter handed out at a given time (piecewise linear).
pub(crate) fn user_id_at(secs: i64) -> u64 {
    const KNOTS: [(i64, i64); 11] = [
        (1_142_899_200, 12),
        (1_167_609_600, 600_000),
        (1_199_145_600, 11_000_000),
        (1_230_768_000, 18_000_000),
        (1_262_304_000, 100_000_000),
        (1_293_840_000, 235_000_000),
        (1_325_376_000, 455_000_000),
        (1_356_998_400, 1_100_000_000),
        (1_388_534_400, 2_270_000_000),
        (1_420_070_400, 2_960_000_000),
        (1_433_116_800, 3_300_000_000),
    ];
    let i = KNOTS
        .iter()
        .rposition(|k| k.0 <= secs)
        .unwrap_or(0)
        .min(KNOTS.len() - 2);
    let (t0, v0) = KNOTS[i];
    let (t1, v1) = KNOTS[i + 1];
    let v =
        i128::from(v0) + i128::from(v1 - v0) * i128::from(secs.max(t0) - t0) / i128::from(t1 - t0);
    v.max(12) as u64
}
