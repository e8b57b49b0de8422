//! `Vocabulary`: token counts of a text field, counted in Rust from the
//! stored tokens (GIL released), saved in AllenNLP's directory format.

use std::path::PathBuf;

use numpy::PyArray1;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use socialctx as sc;

use crate::error::Result;

/// Tokens of one text field and their counts, most frequent first (ties by
/// the token). Made by `Cache.vocabulary`. Indices follow AllenNLP's padded
/// namespaces: 0 padding, 1 unknown, `tokens[i]` is `i + 2`.
#[pyclass(frozen, module = "socialctx", name = "Vocabulary")]
pub(crate) struct PyVocabulary {
    inner: sc::Vocabulary,
}

impl PyVocabulary {
    pub(crate) fn new(inner: sc::Vocabulary) -> Self {
        PyVocabulary { inner }
    }
}

#[pymethods]
impl PyVocabulary {
    /// The tokens, most frequent first.
    #[getter]
    fn tokens(&self) -> Vec<String> {
        self.inner.tokens().to_vec()
    }

    /// np.uint64 [len]: each token's count.
    #[getter]
    fn counts<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<u64>> {
        PyArray1::from_slice(py, self.inner.counts())
    }

    /// AllenNLP's index of `token`: 2 and up if known, 1 (unknown) otherwise.
    fn index(&self, token: &str) -> u32 {
        self.inner.index(token)
    }

    /// Writes AllenNLP's vocabulary directory (`non_padded_namespaces.txt`,
    /// `<namespace>.txt`), which `allennlp.data.Vocabulary.from_files` loads.
    #[pyo3(signature = (directory, namespace="tokens"))]
    fn save(&self, py: Python<'_>, directory: PathBuf, namespace: &str) -> Result<()> {
        if namespace.is_empty() || namespace.contains(['/', '\0']) {
            return Err(PyValueError::new_err(format!(
                "namespace {namespace:?} must be a plain file name"
            ))
            .into());
        }
        let inner = &self.inner;
        Ok(py.detach(|| inner.save(&directory, namespace))?)
    }

    fn __len__(&self) -> usize {
        self.inner.len()
    }

    fn __contains__(&self, token: &str) -> bool {
        self.inner.index(token) >= 2
    }

    fn __repr__(&self) -> String {
        format!("socialctx.Vocabulary(tokens={})", self.inner.len())
    }
}
