//! What a `Loader` is, as the crate's types: its keywords parsed once into
//! a selection, padding and an output spec (`sc::BatchSpec`: embedding
//! stores, dense or not, token ids), and the fill, one call to the crate's
//! `Loader::fill_into` with the GIL released. `Loader` (loader.rs) and
//! `Epoch` (epoch.rs) share it; a new batch output is the crate's alone
//! (named in `outputs=`; `batch.rs` carries every output by name).

use std::sync::Arc;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use socialctx as sc;

use crate::batch::{BatchShape, PyBatch};
use crate::convert::{Keywords, Reader, kinds_of, window_of};
use crate::error::{EmbeddingError, PyScError, Result};
use crate::stats::PyFeatureStats;
use crate::vocab::PyVocabulary;

/// A Loader's settings: everything a fill needs, shared with its epochs.
pub(crate) struct LoaderCore {
    pub(crate) reader: Arc<Reader>,
    pub(crate) selection: sc::Selection,
    stats: Option<sc::FeatureStats>,
    empty: sc::EmptyThreads,
    pub(crate) pad: sc::Pad,
    /// The outputs besides the features (stores, token ids).
    spec: sc::BatchSpec,
    /// The shape of the Batches it makes (checked at every fill).
    pub(crate) shape: BatchShape,
}

impl LoaderCore {
    /// Parses `Loader()`'s keywords and opens the stores named.
    pub(crate) fn new(
        py: Python<'_>,
        reader: Arc<Reader>,
        given: Option<&Bound<'_, PyDict>>,
    ) -> Result<Self> {
        let mut kw = Keywords::new("Loader()", given);
        let kinds: String = kw.get("kinds", "replies".to_owned())?;
        let max_cxt: usize = kw.get("max_cxt", 200)?;
        let window_s: Option<f64> = kw.get("window_s", None)?;
        let stats: Option<Bound<'_, PyFeatureStats>> = kw.get("stats", None)?;
        let empty: String = kw.get("empty", "row".to_owned())?;
        let embeddings: Option<Bound<'_, PyAny>> = kw.get("embeddings", None)?;
        let pad: String = kw.get("pad", "max".to_owned())?;
        let pad_multiple: usize = kw.get("pad_multiple", 8)?;
        let dense: bool = kw.get("dense", true)?;
        let vocab: Option<Bound<'_, PyVocabulary>> = kw.get("token_ids", None)?;
        let max_tokens: Option<usize> = kw.get("max_tokens", None)?;
        let named: Option<Vec<String>> = kw.get("outputs", None)?;
        kw.finish()?;
        let token_ids = match (vocab, max_tokens) {
            (None, None) => None,
            (Some(v), Some(l)) if l >= 1 => Some((v.get().shared(), l)),
            (Some(_), Some(_)) => return Err(value_error("max_tokens must be at least 1")),
            (Some(_), None) => {
                return Err(value_error(
                    "token_ids=vocabulary needs max_tokens= (tokens kept per reaction)",
                ));
            }
            (None, Some(_)) => {
                return Err(value_error(
                    "max_tokens= is for token ids: give token_ids=vocabulary too",
                ));
            }
        };
        if max_cxt == 0 {
            return Err(value_error("max_cxt must be at least 1"));
        }
        let pad = match pad.as_str() {
            "max" => sc::Pad::Max,
            "longest" if pad_multiple >= 1 => sc::Pad::Longest {
                multiple: pad_multiple,
            },
            "longest" => return Err(value_error("pad_multiple must be at least 1")),
            other => {
                return Err(value_error(format!(
                    "pad must be \"max\" or \"longest\", not {other:?}"
                )));
            }
        };
        let empty = match empty.as_str() {
            "row" => sc::EmptyThreads::ZeroRow,
            "masked" => sc::EmptyThreads::Masked,
            other => {
                return Err(value_error(format!(
                    "empty must be \"row\" or \"masked\", not {other:?}"
                )));
            }
        };
        let (names, models) = stores_of(embeddings.as_ref())?;
        for (i, name) in names.iter().enumerate() {
            if names[..i].contains(name) {
                return Err(value_error(format!("embedding store {name:?} named twice")));
            }
        }
        let selection = sc::Selection {
            kinds: kinds_of(&kinds)?,
            window: window_of(window_s)?,
            max_cxt,
        };
        let mut stores = Vec::with_capacity(names.len());
        for (name, model) in names.iter().zip(&models) {
            let store = py.detach(|| sc::EmbeddingStore::open(&*reader, name))?;
            if let Some(id) = model {
                store.require_model(id)?;
            }
            if store.dim() == 0 {
                return Err(EmbeddingError::new_err(format!(
                    "{}: store {name:?} has no rows (no input to embed)",
                    store.dir().display()
                ))
                .into());
            }
            stores.push(store);
        }
        let mut spec = py.detach(|| sc::BatchSpec::new().embeddings(&*reader, stores, dense))?;
        if let Some((vocab, l)) = token_ids {
            spec = spec.token_ids(vocab, l);
        }
        let named = named.unwrap_or_default();
        for (i, name) in named.iter().enumerate() {
            if named[..i].contains(name) {
                return Err(value_error(format!(
                    "output {name:?} named twice in outputs="
                )));
            }
        }
        for name in named {
            spec = spec.output(&name).ok_or_else(|| {
                value_error(format!(
                    "no output {name:?}: outputs= names one of {:?} (embeddings and token ids \
                     are asked for with embeddings= and token_ids=, not outputs=)",
                    sc::BatchSpec::output_names()
                ))
            })?;
        }
        let shape = BatchShape::new(max_cxt, &spec);
        Ok(LoaderCore {
            reader,
            selection,
            stats: stats.map(|s| s.get().inner.clone()),
            empty,
            pad,
            spec,
            shape,
        })
    }

    /// What bucketed batches are sorted by first: the multiple `pad="longest"`
    /// rounds widths up to (None with `pad="max"`, where every batch is as
    /// wide).
    pub(crate) fn pad_multiple(&self) -> Option<usize> {
        match self.pad {
            sc::Pad::Longest { multiple } => Some(multiple),
            sc::Pad::Max => None,
        }
    }

    /// The crate's Loader for these settings (cheap: it borrows them).
    pub(crate) fn loader(&self) -> sc::Loader<'_, Reader> {
        let mut loader = sc::Loader::new(&*self.reader, self.selection)
            .empty_threads(self.empty)
            .pad(self.pad)
            .outputs(&self.spec);
        if let Some(stats) = &self.stats {
            loader = loader.normalize(stats);
        }
        loader
    }

    /// Fills `batch` with the threads at `positions`: every output in one
    /// call, into its NumPy buffers, with the GIL released.
    pub(crate) fn fill(
        &self,
        py: Python<'_>,
        positions: &[usize],
        labels: Option<&[i8]>,
        batch: &mut PyBatch,
    ) -> Result<()> {
        let shape = &self.shape;
        if batch.shape != *shape {
            let (b, l) = (&batch.shape, shape);
            let shown = |l: &BatchShape| {
                let outputs: Vec<String> = (l.outputs.iter())
                    .map(|o| match &o.key {
                        Some(k) => format!("{}[{k:?}] {}", o.name, o.dtype),
                        None => format!("{} {}", o.name, o.dtype),
                    })
                    .collect();
                format!("max_cxt {}, outputs [{}]", l.max_cxt, outputs.join(", "))
            };
            return Err(value_error(format!(
                "this Batch was made for another Loader ({}); this Loader has {}: make \
                 batches with loader.new_batch",
                shown(b),
                shown(l)
            )));
        }
        if positions.len() > batch.batch_size {
            return Err(value_error(format!(
                "{} positions do not fit a Batch of {} threads",
                positions.len(),
                batch.batch_size
            )));
        }
        let loader = self.loader();
        batch.fill_with(py, |out| loader.fill_into(positions, labels, out))?;
        batch.size = positions.len();
        Ok(())
    }

    pub(crate) fn lengths(&self, py: Python<'_>, positions: &[usize]) -> Result<Vec<usize>> {
        Ok(py.detach(|| self.loader().lengths(positions))?)
    }
}

/// `Loader.plan`'s keywords: how the epoch is cut, and which rank's share.
pub(crate) struct PlanOptions {
    pub(crate) how: sc::Batching,
    /// Only this rank's batches (None: all).
    pub(crate) rank: Option<usize>,
}

impl PlanOptions {
    pub(crate) fn from_keywords(
        batch_size: usize,
        given: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let mut kw = Keywords::new("Loader.plan()", given);
        let seed: Option<u64> = kw.get("seed", None)?;
        let bucket: bool = kw.get("bucket", false)?;
        let noise: f64 = kw.get("noise", 0.1)?;
        let world_size: usize = kw.get("world_size", 1)?;
        let rank: Option<usize> = kw.get("rank", None)?;
        let drop_last: bool = kw.get("drop_last", false)?;
        kw.finish()?;
        Ok(PlanOptions {
            how: sc::Batching {
                batch_size,
                seed,
                bucket_noise: bucket.then_some(noise),
                world_size,
                drop_last,
                // Set from the Loader's `pad` by the caller.
                pad_multiple: None,
            },
            rank,
        })
    }
}

fn value_error(message: impl Into<String>) -> PyScError {
    PyValueError::new_err(message.into()).into()
}

/// `embeddings=`: store names (a list), or names each with the model its
/// store must have been made by (a dict `{name: model_id}`; None: any),
/// in the order given.
fn stores_of(given: Option<&Bound<'_, PyAny>>) -> PyResult<(Vec<String>, Vec<Option<String>>)> {
    let Some(given) = given else {
        return Ok((Vec::new(), Vec::new()));
    };
    if let Ok(d) = given.cast::<PyDict>() {
        let mut names = Vec::with_capacity(d.len());
        let mut models = Vec::with_capacity(d.len());
        for (k, v) in d.iter() {
            names.push(k.extract::<String>().map_err(|_| embeddings_type(given))?);
            models.push(
                v.extract::<Option<String>>()
                    .map_err(|_| embeddings_type(given))?,
            );
        }
        return Ok((names, models));
    }
    let names: Vec<String> = given.extract().map_err(|_| embeddings_type(given))?;
    let models = vec![None; names.len()];
    Ok((names, models))
}

fn embeddings_type(given: &Bound<'_, PyAny>) -> PyErr {
    let shown = given
        .repr()
        .map_or_else(|_| "?".to_owned(), |r| r.to_string());
    PyTypeError::new_err(format!(
        "Loader() argument 'embeddings': store names (a list of str) or each store's required \
         model ({{name: model_id}}, a dict of str to str or None), not {shown}"
    ))
}
