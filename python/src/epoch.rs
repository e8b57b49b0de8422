//! `Epoch`: one epoch of a Loader's batches, refilling one Batch in place
//! at every step through the Loader's settings (`fill.rs`).

use std::sync::Arc;

use pyo3::prelude::*;

use socialctx as sc;

use crate::batch::{PyBatch, borrow_batch};
use crate::error::Result;
use crate::fill::LoaderCore;

/// One epoch of batches; yields the same Batch object every step.
#[pyclass(module = "socialctx")]
pub(crate) struct Epoch {
    core: Arc<LoaderCore>,
    batch: Py<PyBatch>,
    order: Vec<usize>,
    labels: Option<Vec<i8>>,
    plan: Vec<Vec<usize>>,
    next: usize,
    /// Real rows in the whole epoch.
    #[pyo3(get)]
    real_rows: u64,
    /// Rows the epoch's batches hold, padding included.
    #[pyo3(get)]
    padded_rows: u64,
    scratch: (Vec<usize>, Vec<i8>),
}

impl Epoch {
    /// The epoch of `order` (cache positions) cut as `how` says, filling `batch`.
    pub(crate) fn new(
        py: Python<'_>,
        core: Arc<LoaderCore>,
        batch: Py<PyBatch>,
        order: Vec<usize>,
        labels: Option<Vec<i8>>,
        how: sc::Batching,
    ) -> Result<Self> {
        let lengths = core.lengths(py, &order)?;
        let plan = how.plan(&lengths)?;
        let real_rows = lengths.iter().sum::<usize>() as u64;
        let padded_rows = {
            let loader = core.loader();
            plan.iter()
                .map(|b| (b.len() * loader.width_of(b.iter().map(|&i| lengths[i]))) as u64)
                .sum()
        };
        Ok(Epoch {
            core,
            batch,
            order,
            labels,
            plan,
            next: 0,
            real_rows,
            padded_rows,
            scratch: (Vec::new(), Vec::new()),
        })
    }
}

#[pymethods]
impl Epoch {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __len__(&self) -> usize {
        self.plan.len()
    }

    /// Share of the epoch's rows that are padding (0 to 1).
    #[getter]
    fn padding_fraction(&self) -> f64 {
        if self.padded_rows == 0 {
            0.0
        } else {
            1.0 - self.real_rows as f64 / self.padded_rows as f64
        }
    }

    fn __next__(&mut self, py: Python<'_>) -> Result<Option<Py<PyBatch>>> {
        let Some(picked) = self.plan.get(self.next) else {
            return Ok(None);
        };
        let (positions, labels) = &mut self.scratch;
        positions.clear();
        positions.extend(picked.iter().map(|&i| self.order[i]));
        let labels = self.labels.as_ref().map(|l| {
            labels.clear();
            labels.extend(picked.iter().map(|&i| l[i]));
            &labels[..]
        });
        {
            let bound = self.batch.bind(py);
            let mut b = borrow_batch(bound)?;
            self.core.fill(py, positions, labels, &mut b)?;
        }
        self.next += 1;
        Ok(Some(self.batch.clone_ref(py)))
    }
}
