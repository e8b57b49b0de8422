//! Print a cache as JSON Lines in the RPDNN oracle's format.
//!
//! ```text
//! cargo run --release --example dump -- CACHE_DIR [--retweets] [--extended | --tokens] [--graph]
//! ```
//!
//! This is `socialctx dump` (crates/cli).

fn main() -> std::process::ExitCode {
    socialctx_cli::main_as("dump", socialctx_cli::Context::example())
}
