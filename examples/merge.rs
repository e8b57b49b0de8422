//! Join partition caches into one cache, byte-identical to a single build.
//!
//! ```text
//! cargo run --release --example precache -- CORPUS --plan plan.json
//! cargo run --release --example precache -- CORPUS part-0 --plan plan.json --partition 0/2   # anywhere
//! cargo run --release --example precache -- CORPUS part-1 --plan plan.json --partition 1/2
//! cargo run --release --example merge -- CACHE_DIR part-0 part-1
//! ```
//!
//! This is `socialctx merge` (crates/cli).

fn main() -> std::process::ExitCode {
    socialctx_cli::main_as("merge", socialctx_cli::Context::example())
}
