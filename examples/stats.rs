//! Print (and save) the 28 features' global statistics.
//!
//! ```text
//! cargo run --release --example stats -- CACHE_DIR [--split CSV ...] [--retweets] [--save FILE]
//! ```
//!
//! This is `socialctx stats` (crates/cli).

fn main() -> std::process::ExitCode {
    socialctx_cli::main_as("stats", socialctx_cli::Context::example())
}
