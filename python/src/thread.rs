//! `Thread`: one thread of a cache, read through the cache's reader;
//! feature rows and extended columns are zero-copy NumPy views whose base
//! is the `Cache` object.

use std::sync::Arc;

use numpy::{IntoPyArray, PyArray1};
use pyo3::exceptions::{PyIndexError, PyKeyError};
use pyo3::prelude::*;

use socialctx as sc;

use crate::convert::{Reader, view1, view2};
use crate::error::Result;

/// One thread of a cache: its source tweet and reactions.
#[pyclass(frozen, module = "socialctx", name = "Thread")]
pub(crate) struct PyThread {
    pub(crate) reader: Arc<Reader>,
    /// The `Cache` object: the base of the NumPy views (it keeps the map alive).
    pub(crate) owner: Py<PyAny>,
    pub(crate) index: usize,
}

/// The thread at position `i`, texts included; IndexError past the end.
pub(crate) fn view_at(reader: &Reader, i: usize) -> Result<sc::ThreadView<'_>> {
    reader
        .thread(i)?
        .ok_or_else(|| PyIndexError::new_err(format!("no thread at position {i}")).into())
}

impl PyThread {
    fn view(&self) -> Result<sc::ThreadView<'_>> {
        view_at(&*self.reader, self.index)
    }

    fn owner<'py>(&self, py: Python<'py>) -> Bound<'py, PyAny> {
        self.owner.bind(py).clone()
    }
}

#[pymethods]
impl PyThread {
    fn __len__(&self) -> Result<usize> {
        Ok(self.view()?.reaction_count())
    }

    fn __repr__(&self) -> Result<String> {
        let t = self.view()?;
        Ok(format!(
            "socialctx.Thread(source_id={}, label={:?}, reactions={})",
            t.source_id(),
            t.label(),
            t.reaction_count()
        ))
    }

    /// Position of the thread in the cache.
    #[getter]
    fn position(&self) -> usize {
        self.index
    }

    /// Source tweet id.
    #[getter]
    fn source_id(&self) -> Result<u64> {
        Ok(self.view()?.source_id())
    }

    /// Event (the grandparent folder's name).
    #[getter]
    fn event(&self) -> Result<String> {
        Ok(self.view()?.event().to_owned())
    }

    /// Label folder name (`rumours`, `non-rumours`, ...).
    #[getter]
    fn label(&self) -> Result<String> {
        Ok(self.view()?.label().to_owned())
    }

    /// 1 rumour, 0 non-rumour, -1 unknown.
    #[getter]
    fn label_code(&self) -> Result<i8> {
        Ok(self.view()?.label_code())
    }

    /// Source tweet text.
    #[getter]
    fn source_text(&self) -> Result<String> {
        Ok(self.view()?.source_text().to_owned())
    }

    /// The source tweet author's user id (as the tweet's `user.id_str`).
    #[getter]
    fn source_user_id(&self) -> Result<String> {
        Ok(self.view()?.source_user_id().to_owned())
    }

    /// The source author's key: `source_user_id` as a number when decimal,
    /// else a hash with the top bit set; comparable with `user_keys`.
    #[getter]
    fn source_user_key(&self) -> Result<u64> {
        Ok(self.view()?.source_user_key())
    }

    /// Source tweet `created_at`, seconds since the epoch.
    #[getter]
    fn source_created_at(&self) -> Result<i64> {
        Ok(self.view()?.source_created_at())
    }

    /// The reactions' 28 features (np.float32 [n, 28]): a read-only,
    /// zero-copy view of the memory map, the same memory on every access.
    #[getter]
    fn features<'py>(&self, py: Python<'py>) -> Result<Bound<'py, PyAny>> {
        let t = self.view()?;
        Ok(view2(
            self.owner(py),
            t.features().as_flattened(),
            sc::Feature::COUNT,
        )?)
    }

    /// Reaction tweet ids (np.uint64 [n]), in (created_at, id) order.
    #[getter]
    fn reaction_ids<'py>(&self, py: Python<'py>) -> Result<Bound<'py, PyArray1<u64>>> {
        let t = self.view()?;
        let v: Vec<u64> = t.reaction_records().map(|r| r.id).collect();
        Ok(v.into_pyarray(py))
    }

    /// The reactions' authors' keys (np.uint64 [n]): `user.id_str` as a
    /// number when decimal, else a hash with the top bit set; the source's
    /// is `source_user_key`.
    #[getter]
    fn user_keys<'py>(&self, py: Python<'py>) -> Result<Bound<'py, PyArray1<u64>>> {
        let t = self.view()?;
        let v: Vec<u64> = t.reaction_records().map(|r| r.user_key).collect();
        Ok(v.into_pyarray(py))
    }

    /// Reaction `created_at`, seconds since the epoch (np.int64 [n]).
    #[getter]
    fn created_at<'py>(&self, py: Python<'py>) -> Result<Bound<'py, PyArray1<i64>>> {
        let t = self.view()?;
        let v: Vec<i64> = t.reaction_records().map(|r| r.created_at).collect();
        Ok(v.into_pyarray(py))
    }

    /// Reaction kinds (np.uint8 [n]): 1 reply, 0 retweet (as feature `c_type`).
    #[getter]
    fn kinds<'py>(&self, py: Python<'py>) -> Result<Bound<'py, PyArray1<u8>>> {
        let t = self.view()?;
        let v: Vec<u8> = t
            .reaction_records()
            .map(|r| u8::from(r.kind == sc::ReactionKind::Reply))
            .collect();
        Ok(v.into_pyarray(py))
    }

    /// Each reaction's parent in the propagation tree (np.int64 [n]): the
    /// position of an earlier reply, -1 for the source (FEATURES.md).
    #[getter]
    fn parents<'py>(&self, py: Python<'py>) -> Result<Bound<'py, PyArray1<i64>>> {
        let t = self.view()?;
        let v: Vec<i64> = t
            .reaction_records()
            .map(|r| match r.parent {
                sc::ReactionNum::PARENT_SOURCE => -1,
                p => i64::from(p),
            })
            .collect();
        Ok(v.into_pyarray(py))
    }

    /// How each parent was found (np.uint8 [n]): 0 in_reply_to, 1 structure, 2 defaulted.
    #[getter]
    fn parent_how<'py>(&self, py: Python<'py>) -> Result<Bound<'py, PyArray1<u8>>> {
        let t = self.view()?;
        let v: Vec<u8> = t.reaction_records().map(|r| r.parent_how as u8).collect();
        Ok(v.into_pyarray(py))
    }

    /// Reaction texts.
    #[getter]
    fn texts(&self) -> Result<Vec<String>> {
        Ok(self
            .view()?
            .reactions()
            .map(|r| r.text().to_owned())
            .collect())
    }

    /// The reaction authors' descriptions (None where null).
    #[getter]
    fn descriptions(&self) -> Result<Vec<Option<String>>> {
        Ok(self
            .view()?
            .reactions()
            .map(|r| r.user_description().map(str::to_owned))
            .collect())
    }

    /// Per reaction, RPDNN's `preprocessing_tweet_text` tokens of the reply
    /// (`[]` where the reference gives none; None for a retweet, or a reply
    /// whose `text` is not a string).
    #[getter]
    fn reply_tokens(&self) -> Result<Vec<Option<Vec<String>>>> {
        Ok(token_lists(&self.view()?, |r| r.reply_tokens()))
    }

    /// Per reaction, the author's description split on ' ' (None without a
    /// description: `has_description` = 0).
    #[getter]
    fn description_tokens(&self) -> Result<Vec<Option<Vec<String>>>> {
        Ok(token_lists(&self.view()?, |r| r.description_tokens()))
    }

    /// An extended per-reaction column (np.float32 [n], NaN where unknown):
    /// a read-only, zero-copy view. KeyError for an unknown name.
    fn column<'py>(&self, py: Python<'py>, name: &str) -> Result<Bound<'py, PyAny>> {
        let c = self.reader.reaction_column(name).ok_or_else(|| {
            PyKeyError::new_err(format!(
                "no reaction column {name:?} (this cache has {:?})",
                self.reader.manifest().reaction_columns
            ))
        })?;
        let t = self.view()?;
        Ok(view1(self.owner(py), t.column(c))?)
    }

    /// An extended per-thread value (e.g. "veracity"), None when unknown.
    /// KeyError for an unknown name.
    fn value(&self, name: &str) -> Result<Option<f32>> {
        let c = self.reader.thread_column(name).ok_or_else(|| {
            PyKeyError::new_err(format!(
                "no thread column {name:?} (this cache has {:?})",
                self.reader.manifest().thread_columns
            ))
        })?;
        Ok(self.view()?.thread_value(c).filter(|v| !v.is_nan()))
    }
}

/// Per reaction of `view`, the token list `list` picks, as Python lists.
fn token_lists<'a>(
    view: &sc::ThreadView<'a>,
    list: impl Fn(&sc::ReactionView<'a>) -> Option<sc::TokenList<'a>>,
) -> Vec<Option<Vec<String>>> {
    view.reactions()
        .map(|r| list(&r).map(|t| t.iter().map(str::to_owned).collect()))
        .collect()
}
