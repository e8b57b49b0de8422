//! Extended per-thread labels from `annotation.json`: the annotators'
//! rumour judgement and the veracity of a rumour.
//!
//! `is_rumour` is `"rumour"`, `"nonrumour"` or (once in PHEME) `"unclear"`.
//! Veracity follows the PHEME convention: `misinformation` = 1 → false,
//! else `true` = 1 → true, else unverified; both fields appear as ints or as
//! strings `"0"`/`"1"` and may be missing. Non-rumours have no veracity.

use simd_json::ValueType;
use simd_json::prelude::*;

use crate::ingest::parse::Reason;
use crate::schema::{Annotated, Veracity};

type Value<'t, 'i> = simd_json::tape::Value<'t, 'i>;

/// A thread's annotation: codes above, NaN where unknown or not applicable.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Annotation {
    /// An [`Annotated`] code, or NaN.
    pub annotated_rumour: f32,
    /// A [`Veracity`] code, or NaN.
    pub veracity: f32,
}

impl Default for Annotation {
    /// No annotation: both unknown.
    fn default() -> Self {
        Annotation {
            annotated_rumour: f32::NAN,
            veracity: f32::NAN,
        }
    }
}

fn is_one(v: Option<Value<'_, '_>>) -> bool {
    v.is_some_and(|v| match v.value_type() {
        ValueType::String => v.as_str() == Some("1"),
        _ => v.as_i64() == Some(1) || v.as_u64() == Some(1),
    })
}

/// Reads a parsed `annotation.json`.
///
/// ```
/// use socialctx::internals::parse::TweetReader;
/// use socialctx::internals::features::labels::annotation;
/// let mut r = TweetReader::new();
/// let a = r.parse_bytes(br#"{"is_rumour":"rumour","misinformation":0,"true":"1"}"#, annotation).unwrap().unwrap();
/// assert_eq!(a.veracity, socialctx::Veracity::True.code());
/// ```
pub fn annotation(root: Value<'_, '_>) -> Result<Annotation, Reason> {
    let obj = root
        .as_object()
        .ok_or_else(|| "annotation.json is not a JSON object".to_string())?;
    let (mut is_rumour, mut misinformation, mut truth) = (None, None, None);
    for (k, v) in obj.iter() {
        match k {
            "is_rumour" => is_rumour = Some(v),
            "misinformation" => misinformation = Some(v),
            "true" => truth = Some(v),
            _ => {}
        }
    }
    let annotated_rumour = match is_rumour.and_then(|v| v.into_string()) {
        Some("rumour") => Annotated::Rumour.code(),
        Some("nonrumour") => Annotated::NonRumour.code(),
        Some("unclear") => Annotated::Unclear.code(),
        _ => f32::NAN,
    };
    let veracity = if annotated_rumour == Annotated::NonRumour.code() {
        f32::NAN
    } else if is_one(misinformation) {
        Veracity::False.code()
    } else if is_one(truth) {
        Veracity::True.code()
    } else {
        Veracity::Unverified.code()
    };
    Ok(Annotation {
        annotated_rumour,
        veracity,
    })
}
