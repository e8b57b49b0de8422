//! The training side, written against [`ThreadSource`](crate::ThreadSource):
//! batches ([`loader`]) of the reactions a [`selection`] picks, with the
//! outputs a spec asks for ([`outputs`]: embedding rows, token ids), normalisation
//! statistics and the normaliser ([`stats`]), split files ([`splits`]),
//! threads as graphs ([`graph`]),
//! token vocabularies ([`vocab`]) and their indices per batch ([`token_ids`]).

pub mod batches;
pub mod graph;
pub mod loader;
pub mod outputs;
pub mod selection;
pub mod splits;
pub mod stats;
pub mod token_ids;
pub mod vocab;
