//! The `socialctx` command, defined once: every subcommand, option, help text
//! and usage error is the clap definition below. Three front ends run it:
//!
//! - the `socialctx` binary of this crate (`cargo install --path crates/cli`);
//! - the examples `precache`, `merge` and `dump` (`socialctx build`,
//!   `merge`, `dump`, through [`main_as`]), so a clone's commands read the
//!   same;
//! - the Python package's `socialctx` entry point (the binding's
//!   `_socialctx`), which runs the Rust commands here and itself runs only
//!   what needs Python (`embed` imports the user's model; `describe` and
//!   `export` need pandas, pyarrow, matplotlib; `info`), handed over as
//!   [`Outcome::Python`] with the arguments clap parsed.
//!
//! Exit status: 0 on success, 1 on error (one `error: ...` line), 2 on bad
//! usage, 130 when interrupted.
//!
//! Adding a subcommand: a variant of `Command` and its `Args` struct
//! (`args.rs`), and its arm in [`run`] (here); one that Python runs is a
//! variant of `PyCommand` (`args.rs`) and its function in
//! `python/socialctx/cli.py`.

use std::ffi::OsString;
use std::io::{BufWriter, ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use clap::error::ErrorKind as UsageKind;
use clap::{CommandFactory, Parser};
use indicatif::{ProgressBar, ProgressStyle};
use socialctx as sc;

mod args;
use args::*;

/// The exit status of a command that was interrupted (128 + SIGINT).
pub const EXIT_INTERRUPTED: u8 = 130;

/// Where the command runs: what differs between the binary, the examples
/// and the Python package.
#[derive(Debug, Default)]
pub struct Context {
    /// Set to stop a build between threads (SIGINT, SIGTERM).
    pub cancel: Arc<AtomicBool>,
    /// Set `cancel` from SIGINT and SIGTERM while a build runs (the binary,
    /// the examples). The Python package checks Python's signals instead.
    pub signals: bool,
    /// The corpus `build --sample` builds.
    pub sample_corpus: Option<PathBuf>,
    /// The precache example's defaults: CORPUS the sample corpus, CACHE
    /// `target/socialctx-cache` (relative to the working directory, the
    /// repository root for `cargo run`).
    pub default_paths: bool,
}

impl Context {
    /// The `socialctx` binary: signals stop a build; `--sample` is
    /// `data-samples/corpus` when run from a clone's root.
    pub fn binary() -> Self {
        Context {
            signals: true,
            sample_corpus: Some(PathBuf::from("data-samples/corpus")),
            ..Context::default()
        }
    }

    /// The examples of a clone: the binary, with the precache defaults.
    pub fn example() -> Self {
        Context {
            default_paths: true,
            ..Context::binary()
        }
    }
}

/// How a command ended.
#[derive(Debug)]
pub enum Outcome {
    /// Done: the process's exit status (what to say was said).
    Exit(u8),
    /// A command the Python package runs (`info`, `embed`, `describe`,
    /// `export`), with its parsed arguments as a JSON object.
    Python {
        command: String,
        args: serde_json::Value,
    },
}

/// Runs the `socialctx` command on the process's arguments: the binary's
/// `main`. The commands Python runs say that they need the Python package.
pub fn main(ctx: Context) -> ExitCode {
    exit(run(std::env::args_os(), &ctx))
}

/// Runs `socialctx SUBCOMMAND ARGS...` with the process's arguments as ARGS:
/// the examples (`precache` is `socialctx build`), so that their usage
/// errors and help are the command's.
pub fn main_as(subcommand: &str, ctx: Context) -> ExitCode {
    let argv = ["socialctx".into(), subcommand.into()]
        .into_iter()
        .chain(std::env::args_os().skip(1));
    exit(run(argv, &ctx))
}

fn exit(outcome: Outcome) -> ExitCode {
    match outcome {
        Outcome::Exit(code) => ExitCode::from(code),
        Outcome::Python { command, .. } => {
            eprintln!(
                "error: `socialctx {command}` runs Python code: use the command of the Python package (pip install socialctx)"
            );
            ExitCode::FAILURE
        }
    }
}

/// Parses `argv` (the program name first) and runs the command: its output
/// on stdout, messages on stderr (`error: ...` naming the file and the
/// reason; clap's usage errors and help).
pub fn run<I, T>(argv: I, ctx: &Context) -> Outcome
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match Cli::try_parse_from(argv) {
        Ok(cli) => cli,
        Err(e) => return Outcome::Exit(report_usage(&e)),
    };
    let result = match cli.command {
        Command::Build(a) => build(a, ctx),
        Command::Plan(a) => {
            let opts = options(&a.workers, &a.content);
            plan(&a.corpus, &a.plan, &opts, a.pin.pin_files)
        }
        Command::BuildPartition(a) => {
            let opts = options(&a.workers, &Content::none());
            let job = Job::Partition(a.plan.clone(), a.partition, None);
            run_build(ctx, &a.corpus, &a.out, &a.run, &opts, job)
        }
        Command::Merge(a) => merge(&a),
        Command::Dump(a) => dump(&a),
        Command::Stats(a) => stats(&a),
        Command::Python(c) => return python(&c),
    };
    match result {
        Ok(code) => Outcome::Exit(code),
        Err(message) => {
            eprintln!("error: {message}");
            Outcome::Exit(1)
        }
    }
}

fn python(c: &PyCommand) -> Outcome {
    // `{"command": NAME, "args": {...}}`, serde's adjacently tagged enum.
    let mut tagged = match serde_json::to_value(c) {
        Ok(serde_json::Value::Object(o)) => o,
        // A path that is not UTF-8.
        Err(e) => {
            eprintln!("error: {e}");
            return Outcome::Exit(1);
        }
        Ok(other) => {
            eprintln!("error: cannot hand {other} to Python");
            return Outcome::Exit(1);
        }
    };
    match (tagged.remove("command"), tagged.remove("args")) {
        (Some(serde_json::Value::String(command)), Some(args)) => Outcome::Python { command, args },
        _ => {
            eprintln!("error: cannot hand {c:?} to Python");
            Outcome::Exit(1)
        }
    }
}

/// Prints clap's message (help and version on stdout, usage errors on
/// stderr) and returns its exit status.
fn report_usage(e: &clap::Error) -> u8 {
    let _ = e.print();
    u8::try_from(e.exit_code()).unwrap_or(2)
}

/// A usage error of `subcommand` found after parsing, worded and shown as
/// clap's own.
fn usage_error(subcommand: &str, kind: UsageKind, message: String) -> u8 {
    let mut cmd = Cli::command();
    cmd.build();
    let e = match cmd.find_subcommand_mut(subcommand) {
        Some(sub) => sub.error(kind, message),
        None => Cli::command().error(kind, message),
    };
    report_usage(&e)
}

type Done = Result<u8, String>;

impl Content {
    fn none() -> Self {
        Content {
            strict: false,
            max_file_bytes: None,
            shard_mib: None,
            no_extended: false,
        }
    }
}

fn options(workers: &Workers, c: &Content) -> sc::BuildOptions {
    let mut opts = sc::BuildOptions::default()
        .strict(c.strict)
        .shard_bytes((c.shard_mib.unwrap_or(16) * 1024 * 1024) as usize)
        .extended(!c.no_extended);
    if let Some(b) = c.max_file_bytes {
        opts = opts.max_file_bytes(b);
    }
    if let Some(n) = workers.workers {
        opts = opts.threads(usize::from(n));
    }
    opts
}

/// What a build command builds.
enum Job {
    Full,
    Incremental,
    /// The plan file, the partition, and the content options given (to
    /// refuse those that differ from the plan's).
    Partition(PathBuf, (usize, usize), Option<Content>),
}

fn build(a: BuildArgs, ctx: &Context) -> Done {
    let only_plan = a.plan.is_some() && a.partition.is_none();
    let missing = |what: &str| {
        usage_error(
            "build",
            UsageKind::MissingRequiredArgument,
            format!("the following required arguments were not provided:\n  {what}"),
        )
    };
    let sample = || -> Result<PathBuf, String> {
        match &ctx.sample_corpus {
            Some(p) if p.is_dir() => Ok(p.clone()),
            Some(p) => Err(format!(
                "{}: the sample corpus is not here (run from a clone's root, or use the Python package's command)",
                p.display()
            )),
            None => Err("no sample corpus comes with this command".into()),
        }
    };
    let default_cache = || PathBuf::from("target/socialctx-cache");
    let (corpus, cache) = if a.sample {
        if a.cache.is_some() {
            return Ok(usage_error(
                "build",
                UsageKind::ArgumentConflict,
                "--sample takes the place of CORPUS: give only CACHE".into(),
            ));
        }
        let cache = match a.corpus {
            Some(c) => c,
            None if ctx.default_paths => default_cache(),
            None => return Ok(missing("<CACHE>")),
        };
        (sample()?, cache)
    } else {
        let corpus = match a.corpus {
            Some(c) => c,
            None if ctx.default_paths => sample()?,
            None => return Ok(missing("<CORPUS>\n  <CACHE>")),
        };
        let cache = match a.cache {
            Some(c) => c,
            None if ctx.default_paths || only_plan => default_cache(),
            None => return Ok(missing("<CACHE>")),
        };
        (corpus, cache)
    };
    let mut opts = options(&a.workers, &a.content);
    if let Some(d) = a.io_depth {
        opts = opts.io_depth(usize::from(d));
    }
    opts = opts.verify(a.verify).changed(a.changed);
    let job = match (a.plan, a.partition) {
        (Some(plan_file), None) => return plan(&corpus, &plan_file, &opts, a.pin_files),
        (Some(plan_file), Some(part)) => Job::Partition(plan_file, part, Some(a.content)),
        (None, _) if a.incremental => Job::Incremental,
        (None, _) => Job::Full,
    };
    run_build(ctx, &corpus, &cache, &a.run, &opts, job)
}

fn plan(corpus: &Path, plan_file: &Path, opts: &sc::BuildOptions, pin_files: bool) -> Done {
    let plan = if pin_files {
        sc::Plan::create_pinned(corpus, opts)
    } else {
        sc::Plan::create(corpus, opts)
    }
    .map_err(|e| e.to_string())?;
    plan.save(plan_file).map_err(|e| e.to_string())?;
    out(&sc::summary::plan_summary(&plan, plan_file));
    Ok(0)
}

/// Threads on the bar, reactions in the message; the flag a signal sets.
struct Bar {
    bar: ProgressBar,
    reactions: AtomicU64,
    cancel: Arc<AtomicBool>,
}

impl sc::Progress for Bar {
    fn discovered(&self, threads: u64) {
        self.bar.set_length(threads);
        self.bar.set_message("threads");
        self.bar.set_style(
            ProgressStyle::with_template(
                "{spinner} {elapsed_precise} {wide_bar} {pos}/{len} {msg}, eta {eta}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
    }
    fn cancelled(&self) -> bool {
        self.cancel.load(Ordering::Relaxed)
    }
    fn thread_done(&self, reactions: u64) {
        let total = self.reactions.fetch_add(reactions, Ordering::Relaxed) + reactions;
        self.bar.inc(1);
        if self.bar.position().is_multiple_of(64) {
            self.bar.set_message(format!("threads, {total} reactions"));
        }
    }
}

/// A build that writes `cache`: the progress bar, SIGINT/SIGTERM, the
/// report file, the summary.
fn run_build(
    ctx: &Context,
    corpus: &Path,
    cache: &Path,
    run: &RunOptions,
    opts: &sc::BuildOptions,
    job: Job,
) -> Done {
    let cannot_write = |path: &Path, e: &dyn std::fmt::Display| {
        format!("cannot write the report to {}: {e}", path.display())
    };
    // Outputs are checked before anything is replaced: an unwritable
    // --report fails now, not after the cache was swapped.
    // The report replaces FILE whole (atomically, keeping its mode, group
    // and links): its temporary file is made now.
    let report_file = match &run.report {
        Some(path) => {
            Some(sc::internals::Replacement::begin(path).map_err(|e| cannot_write(path, &e))?)
        }
        None => None,
    };
    let bar = if run.quiet {
        ProgressBar::hidden()
    } else {
        // indicatif draws nothing when stderr is not a terminal.
        ProgressBar::new_spinner().with_message("discovering threads")
    };
    // A spinner while the corpus is walked; `discovered` switches to a bar.
    bar.set_style(
        ProgressStyle::with_template("{spinner} {elapsed_precise} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    bar.enable_steady_tick(Duration::from_millis(120));
    let progress = Bar {
        bar: bar.clone(),
        reactions: AtomicU64::new(0),
        cancel: Arc::clone(&ctx.cancel),
    };
    if ctx.signals {
        // SIGINT/SIGTERM: stop between threads, remove the staging
        // directory, keep any existing cache. (A second handler cannot be
        // set in one process: the first one sets the same flag.)
        let cancel = Arc::clone(&ctx.cancel);
        let _ = ctrlc::set_handler(move || cancel.store(true, Ordering::Relaxed));
    }
    let result = match job {
        Job::Full => sc::build(corpus, cache, opts, &progress),
        Job::Incremental => sc::build_incremental(corpus, cache, opts, &progress),
        Job::Partition(plan_file, part, given) => {
            let plan = sc::Plan::load(&plan_file).map_err(|e| e.to_string())?;
            // A partition is built with its plan's options: refuse others
            // rather than ignore them.
            let given = given.unwrap_or_else(Content::none);
            let differ = plan.differing_options(
                given.strict.then_some(true),
                given.max_file_bytes,
                given.shard_mib.map(|m| m * 1024 * 1024),
                given.no_extended.then_some(false),
            );
            if !differ.is_empty() {
                bar.finish_and_clear();
                let (s, them) = if differ.len() == 1 {
                    ("s", "it")
                } else {
                    ("", "them")
                };
                return Err(format!(
                    "{} differ{s} from the plan {}: a partition is built with its plan's options; leave {them} out, or make the plan again with {them}",
                    differ.join(", "),
                    plan_file.display(),
                ));
            }
            sc::build_partition(corpus, &plan, part, cache, opts.threads, &progress)
        }
    };
    bar.finish_and_clear();
    let summary = match result {
        // Too late to stop: the build published before it saw the flag.
        // Still stop (the user asked to), but say so.
        Ok(_) if ctx.cancel.load(Ordering::Relaxed) => {
            eprintln!(
                "interrupted: the build finished before it saw the signal: the new cache at {} is published",
                cache.display()
            );
            return Ok(EXIT_INTERRUPTED);
        }
        Ok(s) => s,
        Err(sc::BuildError::Cancelled) => {
            eprintln!(
                "interrupted: nothing was published; {} is as it was",
                cache.display()
            );
            return Ok(EXIT_INTERRUPTED);
        }
        Err(e) => return Err(e.to_string()),
    };
    out(&sc::summary::build_summary(&summary, corpus, cache));
    // Published: success, whatever failed after the swap (the report
    // too: the old one stays whole, and the cache's report.jsonl has it).
    let mut warnings = summary.warnings.clone();
    if let (Some(path), Some(mut file)) = (&run.report, report_file) {
        let written = {
            let mut w = BufWriter::new(file.file());
            sc::internals::write_jsonl(&mut w, &summary.report)
        };
        if let Err(e) = written.and_then(|()| file.commit()) {
            warnings.push(format!(
                "{}; the cache is published, and its report.jsonl holds the same lines",
                cannot_write(path, &e)
            ));
        }
    }
    for w in &warnings {
        eprintln!("warning: {w}");
    }
    Ok(0)
}

fn merge(a: &MergeArgs) -> Done {
    let s = sc::merge(&a.cache, &a.parts).map_err(|e| e.to_string())?;
    out(&sc::summary::merge_summary(&s, &a.cache));
    for w in &s.warnings {
        eprintln!("warning: {w}");
    }
    Ok(0)
}

fn dump(a: &DumpArgs) -> Done {
    let cache = sc::Cache::open(&a.cache).map_err(|e| e.to_string())?;
    let opts = sc::dump::DumpOptions::default()
        .retweets(a.retweets)
        .extended(a.extended)
        .graph(a.graph)
        .tokens(a.tokens);
    let mut stdout = BufWriter::new(std::io::stdout().lock());
    match sc::dump::write_cache(&mut stdout, &cache, &opts).and_then(|()| stdout.flush()) {
        Ok(()) => Ok(0),
        // `dump | head` is fine.
        Err(e) if e.kind() == ErrorKind::BrokenPipe => Ok(0),
        Err(e) => Err(format!("writing output: {e}")),
    }
}

fn stats(a: &StatsArgs) -> Done {
    let cache = sc::Cache::open(&a.cache).map_err(|e| e.to_string())?;
    let (s, notes) =
        sc::summary::split_stats(&cache, &a.split, a.retweets).map_err(|e| e.to_string())?;
    for note in notes {
        eprintln!("{note}");
    }
    try_out(&sc::summary::stats_table(&s))?;
    if let Some(path) = &a.save {
        s.save(path).map_err(|e| e.to_string())?;
        // The file records what it was computed over: a Loader refuses it
        // for values of another definition.
        match &s.computed_over {
            Some(o) => eprintln!(
                "saved {} (values of definition {}, cache generation {})",
                path.display(),
                if o.definition.is_empty() {
                    "not recorded"
                } else {
                    &o.definition
                },
                o.content_id
            ),
            None => eprintln!("saved {}", path.display()),
        }
    }
    Ok(0)
}

/// Prints to stdout; a reader that went away (`| head`) is not an error,
/// output that cannot be written (a full disk) is.
fn try_out(text: &str) -> Done {
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Err(e) if e.kind() != ErrorKind::BrokenPipe => Err(format!("writing output: {e}")),
        _ => Ok(0),
    }
}

/// The summary of a command whose work is done (published, saved): output
/// that cannot be written is a warning, not a failure of the work.
fn out(text: &str) {
    if let Err(e) = try_out(text) {
        eprintln!("warning: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    /// The commands that build nothing said, in their --help, what an
    /// interrupted build does ("the build stops between threads, nothing is
    /// published"); each says what it does itself.
    #[test]
    fn only_building_commands_describe_an_interrupted_build() {
        let mut cli = Cli::command();
        for name in ["describe", "export", "info", "dump", "stats"] {
            let sub = cli.find_subcommand_mut(name).unwrap();
            let help = sub.render_long_help().to_string();
            assert!(!help.contains("the build stops"), "{name}: {help}");
            assert!(help.contains("the command stops"), "{name}: {help}");
        }
        let build = cli.find_subcommand_mut("build").unwrap();
        assert!(
            build
                .render_long_help()
                .to_string()
                .contains("the build stops")
        );
    }

    #[test]
    fn the_help_states_the_default_max_file_bytes() {
        assert_eq!(sc::internals::parse::DEFAULT_MAX_FILE_BYTES, 16777216);
    }
}
