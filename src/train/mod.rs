//! The training side, written against [`ThreadSource`](crate::ThreadSource):
//! batches ([`loader`]) of the reactions a [`selection`] picks, normalisation
//! statistics and the normaliser ([`stats`]) and split files ([`splits`]).

pub mod loader;
pub mod selection;
pub mod splits;
pub mod stats;
