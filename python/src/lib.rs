//! `socialctx._socialctx`: the Python binding of the socialctx crate.
//!
//! A thin layer over the crate's public API, one module per class (as
//! pydantic-core and polars): this file only declares them and the module.
//! Three rules shape it:
//! - Rust work runs with the GIL released (`Python::detach`): builds,
//!   opens, batch fills, statistics.
//! - Cache data is never copied: feature rows and extended columns are NumPy
//!   views of the memory map whose `base` is the `Cache` object, so a view
//!   keeps the map alive after `del cache`.
//! - Batches are NumPy arrays allocated once; `Loader.fill` writes every
//!   output straight into them in one `socialctx::Loader::fill_into` call.
//!
//! Modules depend downwards only (no two import each other): `error`, then
//! `convert` (argument and array conversions, the `Reader` and
//! `CacheReader` types); `batch` and `graph` on those; `thread`, `texts`,
//! `vocab` on those; `arrow` on those; `cache` on them and `arrow`; `stats`,
//! `split`, `store` on `cache`; `fill` (a Loader's settings and its one
//! fill) on `batch`, `stats` and `vocab`; `epoch` on `fill`; `loader` on
//! `fill`, `epoch`, `graph` and `cache`; `build` on `convert` and `error`;
//! `cli` on `build`.

mod arrow;
mod batch;
mod build;
mod cache;
mod cli;
mod convert;
mod epoch;
mod error;
mod fill;
mod graph;
mod loader;
mod output;
mod split;
mod stats;
mod store;
mod texts;
mod thread;
mod vocab;

use pyo3::prelude::*;

use socialctx as sc;

#[pymodule]
fn _socialctx(m: &Bound<'_, PyModule>) -> PyResult<()> {
    error::register(m)?;
    m.add("FEATURE_NAMES", sc::Feature::NAMES.to_vec())?;
    m.add("NUM_FEATURES", sc::Feature::COUNT)?;
    m.add("FORMAT_VERSION", sc::FORMAT_VERSION)?;
    m.add("DEFINITION", sc::Manifest::current_definition())?;
    m.add_function(wrap_pyfunction!(cache::open, m)?)?;
    m.add_function(wrap_pyfunction!(build::build, m)?)?;
    m.add_function(wrap_pyfunction!(build::plan, m)?)?;
    m.add_function(wrap_pyfunction!(build::build_partition, m)?)?;
    m.add_function(wrap_pyfunction!(build::merge, m)?)?;
    m.add_function(wrap_pyfunction!(split::read_split, m)?)?;
    m.add_function(wrap_pyfunction!(loader::shuffled, m)?)?;
    m.add_function(wrap_pyfunction!(store::_open_store, m)?)?;
    m.add_function(wrap_pyfunction!(store::_verify_store, m)?)?;
    m.add_class::<store::PyStoreWriter>()?;
    m.add_class::<output::PyReplacement>()?;
    m.add_class::<cache::PyCache>()?;
    m.add_class::<arrow::PyArrowData>()?;
    m.add_class::<cache::CacheIter>()?;
    m.add_class::<cache::PyBadInput>()?;
    m.add_class::<thread::PyThread>()?;
    m.add_class::<texts::PyUniqueTexts>()?;
    m.add_class::<vocab::PyVocabulary>()?;
    m.add_class::<split::PySplit>()?;
    m.add_class::<stats::PyFeatureStats>()?;
    m.add_class::<loader::PyLoader>()?;
    m.add_class::<batch::PyBatch>()?;
    m.add_class::<graph::PyGraphBatch>()?;
    m.add_class::<epoch::Epoch>()?;
    m.add_class::<build::BuildSummary>()?;
    m.add_class::<build::PlanSummary>()?;
    cli::register(m)?;
    Ok(())
}
