//! The batch job: build the feature cache for a PHEME-style corpus.
//!
//! ```text
//! cargo run --release --example precache -- [CORPUS] [CACHE] [--workers N] [--strict] [--report FILE]
//! ```
//!
//! This is `socialctx build` (crates/cli: one definition of the command's
//! options, help and messages); with no arguments it builds the sample
//! corpus shipped in `data-samples/` into `target/socialctx-cache`.

fn main() -> std::process::ExitCode {
    socialctx_cli::main_as("build", socialctx_cli::Context::example())
}
