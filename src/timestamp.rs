//! PLACEHOLDER: replaced by the real module.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp {
    pub utc_micros: i64,
}
impl Timestamp {
    pub fn unix_seconds(self) -> i64 {
        self.utc_micros / 1_000_000
    }
}
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct TimestampError(pub String);
pub fn parse_created_at(_s: &str) -> Result<Timestamp, TimestampError> {
    unimplemented!()
}
pub fn seconds_between(a: Timestamp, b: Timestamp) -> f64 {
    (a.utc_micros - b.utc_micros) as f64 / 1e6
}
pub fn account_age_days(_tweet: Timestamp, _user_created: Timestamp) -> f64 {
    unimplemented!()
}
