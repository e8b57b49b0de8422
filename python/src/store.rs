//! `_verify_store`: an embedding store checked in full by the crate's
//! reader, for `socialctx.embed` (which writes stores; `texts.rs` has its
//! other helpers).

use pyo3::prelude::*;

use crate::cache::PyCache;
use crate::error::{EmbeddingError, Result};

/// Verifies store `name` of `cache` in full (metadata, checksums,
/// headers, index, finite rows; with `same_content`, that it belongs to
/// this content of the cache) and returns its metadata as JSON; raises
/// EmbeddingError naming the file and the reason.
#[pyfunction]
#[pyo3(signature = (cache, name, same_content=true))]
pub(crate) fn _verify_store(
    py: Python<'_>,
    cache: &Bound<'_, PyCache>,
    name: &str,
    same_content: bool,
) -> Result<String> {
    let c = &*cache.get().reader;
    let store = py.detach(|| {
        if same_content {
            c.embeddings(name)
        } else {
            c.embeddings_of_any_content(name)
        }
    })?;
    Ok(serde_json::to_string(store.meta()).map_err(|e| EmbeddingError::new_err(e.to_string()))?)
}
