//! The `socialctx` command (`cargo install --path crates/cli`).

fn main() -> std::process::ExitCode {
    socialctx_cli::main(socialctx_cli::Context::binary())
}
