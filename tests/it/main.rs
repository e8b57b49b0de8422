//! The integration tests, one module per former test file, linked into one
//! binary (as ripgrep's `tests/` are): the crate and its dependencies are
//! linked once instead of once per file. `cargo test --release --test it
//! MODULE::` runs one module. `tests/lock.rs` stays a binary of its own (it
//! says why).

mod common;

mod bad_input;
mod batch_spec;
mod build_edges;
mod cache;
mod cache_damage;
mod cli;
mod damage_sweep;
mod definition;
mod edge_cases;
mod embeddings;
mod extended;
mod fuzz_regressions;
mod incremental;
mod incremental_changed;
mod interrupt;
mod loader;
mod manifest_bytes;
mod operator_edges;
mod parity;
mod partition;
mod permissions;
mod plan_pins;
mod publish_faults;
mod red_team_partitions;
mod scale_out;
mod store_nightly;
mod store_verified;
mod token_ids;
mod tokens;
mod tokens_parity;
mod unique_texts;
