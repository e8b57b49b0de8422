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
//! Adding a subcommand: a variant of `Command`, its `Args` struct, and its
//! arm in [`run`] (one file); a Python-run one also gets its function in
//! `python/socialctx/cli.py`.

use std::ffi::OsString;
use std::io::{BufWriter, ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use clap::error::ErrorKind as UsageKind;
use clap::{Args, CommandFactory, Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use socialctx as sc;

/// The exit status of a command that was interrupted (128 + SIGINT).
pub const EXIT_INTERRUPTED: u8 = 130;

macro_rules! exit_status {
    ($interrupted:literal) => {
        concat!(
            "Exit status: 0 on success, 1 on error, 2 on bad usage, 130 when interrupted (SIGINT or SIGTERM: ",
            $interrupted,
            ")."
        )
    };
    () => {
        exit_status!("the build stops between threads, nothing is published")
    };
}

/// Build and inspect socialctx feature caches.
#[derive(Parser, Debug)]
#[command(
    name = "socialctx",
    bin_name = "socialctx",
    version,
    propagate_version = true,
    subcommand_value_name = "COMMAND",
    long_about = concat!(
        "Build and inspect socialctx feature caches: the RPDNN social-context features of ",
        "PHEME-style Twitter corpora, computed once into a memory-mapped cache. ",
        "`socialctx COMMAND --help` says more about each command. ",
        exit_status!()
    )
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Build the feature cache of a corpus (the precache example)
    #[command(long_about = concat!(
        "Walk CORPUS for thread directories (an all-digit name with a source-tweets/ or ",
        "source-tweet/ folder; replies in reactions/ or replies/, retweets in retweets/), compute ",
        "the 28 features of every reply and retweet (and, unless --no-extended, the extended ",
        "features: structure.json depth, persistence, follow relations, user reliability, ",
        "annotation labels, retweets.json) and write a memory-mappable cache to CACHE, replacing ",
        "any cache there atomically (a directory that is not a cache is never replaced). Files ",
        "that cannot be used are skipped and listed in the report (report.jsonl in the cache); ",
        "the build still succeeds. Shows a progress bar on a terminal and ends with a summary. ",
        "The precache example runs this command; without CORPUS and CACHE it builds the sample ",
        "corpus in data-samples/corpus into target/socialctx-cache. ",
        exit_status!()
    ), override_usage = "socialctx build [OPTIONS] (CORPUS | --sample) CACHE")]
    Build(BuildArgs),
    /// Walk a corpus once into the plan of a partitioned build
    #[command(long_about = concat!(
        "Walk CORPUS once and write the plan of a partitioned build to PLAN_FILE (paths ",
        "relative to the corpus root). Then build its partitions anywhere the corpus is mounted ",
        "(`socialctx build-partition`) and join them (`socialctx merge`): byte for byte what ",
        "one `socialctx build` writes. ",
        exit_status!()
    ))]
    Plan(PlanArgs),
    /// Build one partition of a plan
    #[command(long_about = concat!(
        "Build partition I of N of PLAN_FILE into the cache directory OUT (I from 0; ",
        "contiguous source-id ranges balanced by file count; reads no other partition's files). ",
        "Content options come from the plan. The corpus must be as planned: a thread ",
        "added, gone, moved or edited since is refused, naming it. Slurm: --partition ",
        "$SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT; Kubernetes Indexed Job: --partition ",
        "$JOB_COMPLETION_INDEX/N. ",
        exit_status!()
    ))]
    BuildPartition(PartitionArgs),
    /// Join the partition caches of a plan into one cache
    #[command(long_about = concat!(
        "Merge the partition caches of one plan (every partition, each once, in any order) into ",
        "CACHE, published atomically; byte-identical to a single build of the whole corpus. A ",
        "missing, repeated, damaged or foreign partition is an error and nothing is published. ",
        exit_status!()
    ))]
    Merge(MergeArgs),
    /// Print a cache as JSON Lines in the oracle's format
    #[command(long_about = concat!(
        "Print CACHE as JSON Lines in the format of rpdnn_oracle.py: one line per thread in ",
        "source-id order, {\"source_id\", \"label\", \"reactions\": [{\"id\", \"kind\", ",
        "\"created_at\", \"features\"}]}; replies only unless --retweets. Every file is ",
        "validated first. ",
        exit_status!()
    ))]
    Dump(DumpArgs),
    /// The 28 features' statistics (for normalisation)
    #[command(long_about = concat!(
        "Per-feature count, mean, population std (ddof 0), min and max over the cache's replies ",
        "(or replies and retweets), optionally only the threads of RPDNN split CSVs; what ",
        "normalised training uses (socialctx.FeatureStats.load reads the saved file). ",
        exit_status!()
    ))]
    Stats(StatsArgs),
    /// What a cache holds: format, counts, content id, derived stores
    #[command(long_about = concat!(
        "Print CACHE's format version, counts, build options, content id and what derived/ ",
        "holds (embedding stores and incremental-build fingerprints, each marked current or ",
        "stale against the content id). Reads only the manifest and derived/. ",
        exit_status!()
    ))]
    Info(InfoArgs),
    /// Embed a text field's distinct inputs with your model into a store
    #[command(long_about = concat!(
        "Run MODEL once per batch of the distinct non-empty inputs of --field in CACHE and ",
        "write the embedding store derived/embeddings/NAME (what Loader(embeddings=[NAME]) ",
        "and socialctx.torch.EmbeddingTable read). MODEL is `module:callable`, importable ",
        "from the current directory or PYTHONPATH: called with a list of token lists, it ",
        "returns a [len, dim] array. With --model-id, a store of the cache's previous ",
        "content (after `socialctx build --incremental`) gives back the rows of every input ",
        "it already has, and MODEL runs only for the new ones. Resumes after an ",
        "interruption. Shows a progress bar on a terminal and ends with a summary. ",
        "Runs in the Python package's command. ",
        exit_status!(
            "the embed stops between batches; the store is not published, and the next embed resumes from the rows already computed"
        )
    ))]
    Embed(EmbedArgs),
    /// The dataset table (per event and in total) and, with --html, the figures
    #[command(long_about = concat!(
        "Print the dataset table of CACHE that PHEME papers show, per event and in total: ",
        "threads, rumours and non-rumours, veracity where annotated, replies, retweets, ",
        "distinct users (authors of sources and reactions) and source authors, thread size, ",
        "propagation depth, time to the first and to the median reply (socialctx.describe; ",
        "needs pandas and pyarrow, and matplotlib for --html: pip install ",
        "'socialctx[describe]'). ",
        exit_status!()
    ))]
    Describe(DescribeArgs),
    /// Write a cache's reactions or threads as a Parquet file
    #[command(long_about = concat!(
        "Write CACHE as Parquet (Cache.to_arrow: one row per reaction, or per thread with ",
        "--level threads) to OUT, whole or not at all (needs pyarrow). ",
        exit_status!()
    ))]
    Export(ExportArgs),
}

/// `-j`/`--workers`: every command that builds.
#[derive(Args, Debug)]
struct Workers {
    /// Worker threads [default: available cores]; the cache is byte-identical for any N
    // `--threads`, the former name, is a hidden alias: a cache's "threads"
    // are conversation threads.
    #[arg(short = 'j', long, alias = "threads", value_name = "N",
          value_parser = clap::value_parser!(u16).range(1..))]
    workers: Option<u16>,
}

/// Options that shape the cache's content (a plan records them). Options,
/// not defaults, so that a partition build can tell what was given.
#[derive(Args, Debug)]
struct Content {
    /// Stop at the first bad input (exit 1; any existing cache is left
    /// untouched); without it, bad files are skipped and reported
    #[arg(long)]
    strict: bool,
    /// Skip tweet files larger than this [default: 16777216]
    #[arg(long, value_name = "BYTES")]
    max_file_bytes: Option<u64>,
    /// Cap on one shard file, in MiB (1 to 1024) [default: 16]
    #[arg(long, value_name = "MIB", value_parser = clap::value_parser!(u64).range(1..=1024))]
    shard_mib: Option<u64>,
    /// Only the reference's 28 features: skip structure.json, annotation.json,
    /// who-follows-whom.dat and retweets.json (the extended features)
    #[arg(long)]
    no_extended: bool,
}

/// Options of any build that writes a cache.
#[derive(Args, Debug)]
struct RunOptions {
    /// Also write the bad-input report to FILE as JSON Lines ({"path": ...,
    /// "reason": ...}, paths relative to the corpus); checked for writing
    /// before anything is replaced
    #[arg(long, value_name = "FILE")]
    report: Option<PathBuf>,
    /// Do not show a progress bar on a terminal
    #[arg(short, long)]
    quiet: bool,
}

#[derive(Args, Debug)]
struct BuildArgs {
    /// The corpus root
    #[arg(value_name = "CORPUS")]
    corpus: Option<PathBuf>,
    /// The cache directory to write
    #[arg(value_name = "CACHE")]
    cache: Option<PathBuf>,
    /// Build the sample corpus that ships with the package (38 threads)
    /// instead of CORPUS: `socialctx build --sample CACHE`
    #[arg(long)]
    sample: bool,
    #[command(flatten)]
    workers: Workers,
    #[command(flatten)]
    content: Content,
    #[command(flatten)]
    run: RunOptions,
    /// Re-read only the threads whose files changed since the cache in CACHE
    /// was built (by size, mtime, ctime, inode) and take the others from it;
    /// byte-identical to a full build. Falls back to a full build, and says
    /// why, when reuse is not safe
    #[arg(long, conflicts_with = "plan")]
    incremental: bool,
    /// With --incremental: also compare file contents (xxh3), for file
    /// systems with coarse or unreliable timestamps (reads every file)
    #[arg(long, requires = "incremental")]
    verify: bool,
    /// Prefetch threads that keep reads in flight when the corpus is not in
    /// the page cache (0 = none) [default: 32; 0 under `ulimit -v`]
    #[arg(long, value_name = "N")]
    io_depth: Option<usize>,
    /// Partitioned builds as the precache example takes them: without
    /// --partition, walk CORPUS once and write the plan to PLAN_FILE (what
    /// `socialctx plan` does); with it, the plan to build a partition of
    #[arg(long, value_name = "PLAN_FILE", conflicts_with = "sample")]
    plan: Option<PathBuf>,
    /// Build partition I of N of --plan into CACHE (what `socialctx
    /// build-partition` does); options that shape the cache come from the
    /// plan, and differing ones are refused
    #[arg(long, value_name = "I/N", value_parser = parse_partition, requires = "plan")]
    partition: Option<(usize, usize)>,
}

#[derive(Args, Debug)]
struct PlanArgs {
    /// The corpus root
    #[arg(value_name = "CORPUS")]
    corpus: PathBuf,
    /// Where to write the plan (JSON)
    #[arg(value_name = "PLAN_FILE")]
    plan: PathBuf,
    #[command(flatten)]
    workers: Workers,
    #[command(flatten)]
    content: Content,
}

#[derive(Args, Debug)]
struct PartitionArgs {
    /// The corpus root
    #[arg(value_name = "CORPUS")]
    corpus: PathBuf,
    /// The partition cache directory to write
    #[arg(value_name = "OUT")]
    out: PathBuf,
    /// The plan (from `socialctx plan`)
    #[arg(long, value_name = "PLAN_FILE")]
    plan: PathBuf,
    /// Which partition to build: I of N, 0 <= I < N
    #[arg(long, value_name = "I/N", value_parser = parse_partition)]
    partition: (usize, usize),
    #[command(flatten)]
    workers: Workers,
    #[command(flatten)]
    run: RunOptions,
}

#[derive(Args, Debug)]
struct MergeArgs {
    /// The cache directory to write
    #[arg(value_name = "CACHE")]
    cache: PathBuf,
    /// The partition caches
    #[arg(value_name = "PART", required = true)]
    parts: Vec<PathBuf>,
}

#[derive(Args, Debug)]
struct DumpArgs {
    /// The cache directory
    #[arg(value_name = "CACHE")]
    cache: PathBuf,
    /// Include retweets (the oracle's --retweets; a cache built with the
    /// extended features also holds the retweets of retweets.json files,
    /// which the oracle does not read)
    #[arg(long)]
    retweets: bool,
    /// Add the extended features as extra keys (per thread: event, veracity,
    /// annotated_rumour; per reaction: depth, persistence, follows_source,
    /// followed_by_source, reciprocal_follow, user_reliability; null = unknown)
    #[arg(long)]
    extended: bool,
    /// Print the texts for embedding instead, as rpdnn_tokens.py does:
    /// {"source_id", "reactions": [{"id", "reply_tokens",
    /// "description_tokens"}]} (RPDNN's preprocessing_tweet_text tokens of
    /// each reply, null for retweets; the author's description split on ' ',
    /// null without one)
    #[arg(long, conflicts_with_all = ["extended", "graph"])]
    tokens: bool,
    /// Add each reaction's parent in the propagation tree: "parent" (a tweet
    /// id; the source's for the root's children) and "parent_how"
    /// (in_reply_to, structure or defaulted)
    #[arg(long)]
    graph: bool,
}

#[derive(Args, Debug)]
struct StatsArgs {
    /// The cache directory
    #[arg(value_name = "CACHE")]
    cache: PathBuf,
    /// Only threads listed in this split CSV (repeatable)
    #[arg(long, value_name = "CSV")]
    split: Vec<PathBuf>,
    /// Include retweets (default: replies only, as the reference)
    #[arg(long)]
    retweets: bool,
    /// Save the statistics as JSON
    #[arg(long, value_name = "FILE")]
    save: Option<PathBuf>,
}

// The commands Python runs: their parsed arguments go to it as JSON, keyed
// by these field names (python/socialctx/cli.py reads them).

#[derive(Args, Debug, Serialize)]
struct InfoArgs {
    /// The cache directory
    #[arg(value_name = "CACHE")]
    cache: PathBuf,
    /// Print the same as one JSON object
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug, Serialize)]
struct EmbedArgs {
    /// The cache directory
    #[arg(value_name = "CACHE")]
    cache: PathBuf,
    /// The model
    #[arg(long, value_name = "MODULE:CALLABLE")]
    model: String,
    /// The store's name
    #[arg(long)]
    name: String,
    /// RPDNN's reply tokens or the authors' descriptions
    #[arg(long, default_value = "reply", value_parser = ["reply", "description"])]
    field: String,
    /// The model's identity (e.g. a hash of its weights): rows are reused
    /// only under the same id
    #[arg(long, value_name = "ID")]
    model_id: Option<String>,
    /// Inputs per call
    #[arg(long, value_name = "N", default_value_t = 256,
          value_parser = clap::value_parser!(u16).range(1..))]
    batch_size: u16,
    /// The stored rows' type
    #[arg(long, default_value = "float32", value_parser = ["float32", "float16"])]
    dtype: String,
    /// Write the store as one segment without the rows no reaction uses
    /// (otherwise when those exceed a quarter of the rows); byte for byte a
    /// from-scratch embed
    #[arg(long)]
    compact: bool,
    /// Do not show a progress bar on a terminal
    #[arg(short, long)]
    quiet: bool,
}

#[derive(Args, Debug, Serialize)]
struct DescribeArgs {
    /// The cache directory
    #[arg(value_name = "CACHE")]
    cache: PathBuf,
    /// As a Markdown table
    #[arg(long, group = "form")]
    markdown: bool,
    /// As a LaTeX tabular (booktabs)
    #[arg(long, group = "form")]
    latex: bool,
    /// As JSON (times in seconds)
    #[arg(long, group = "form")]
    json: bool,
    /// Also write one self-contained HTML page (table, figures, folds and
    /// leakage audit)
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
}

#[derive(Args, Debug, Serialize)]
struct ExportArgs {
    /// The cache directory
    #[arg(value_name = "CACHE")]
    cache: PathBuf,
    /// The Parquet file to write
    #[arg(value_name = "OUT")]
    out: PathBuf,
    /// One row per reaction or per thread
    #[arg(long, default_value = "reactions", value_parser = ["reactions", "threads"])]
    level: String,
    /// Only these columns, in this order [default: all]
    #[arg(long, value_name = "A,B,...", value_parser = parse_columns)]
    columns: Option<Columns>,
}

/// `--columns A,B,...`: the names, blanks dropped.
#[derive(Clone, Debug, Serialize)]
#[serde(transparent)]
struct Columns(Vec<String>);

fn parse_columns(s: &str) -> Result<Columns, String> {
    Ok(Columns(
        s.split(',')
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .map(String::from)
            .collect(),
    ))
}

/// `I/N`, `0 <= I < N`.
fn parse_partition(s: &str) -> Result<(usize, usize), String> {
    let (i, n) = s
        .split_once('/')
        .ok_or_else(|| format!("{s:?} is not I/N (e.g. 0/4)"))?;
    let (i, n): (usize, usize) = (
        i.trim()
            .parse()
            .map_err(|_| format!("{i:?} is not a number"))?,
        n.trim()
            .parse()
            .map_err(|_| format!("{n:?} is not a number"))?,
    );
    if n == 0 || i >= n {
        return Err(format!("partition {i}/{n}: need 0 <= I < N"));
    }
    Ok((i, n))
}

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
        command: &'static str,
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
            plan(&a.corpus, &a.plan, &opts)
        }
        Command::BuildPartition(a) => {
            let opts = options(&a.workers, &Content::none());
            let job = Job::Partition(a.plan.clone(), a.partition, None);
            run_build(ctx, &a.corpus, &a.out, &a.run, &opts, job)
        }
        Command::Merge(a) => merge(&a),
        Command::Dump(a) => dump(&a),
        Command::Stats(a) => stats(&a),
        Command::Info(a) => return python("info", &a),
        Command::Embed(a) => return python("embed", &a),
        Command::Describe(a) => return python("describe", &a),
        Command::Export(a) => return python("export", &a),
    };
    match result {
        Ok(code) => Outcome::Exit(code),
        Err(message) => {
            eprintln!("error: {message}");
            Outcome::Exit(1)
        }
    }
}

fn python(command: &'static str, args: &impl Serialize) -> Outcome {
    match serde_json::to_value(args) {
        Ok(args) => Outcome::Python { command, args },
        // A path that is not UTF-8.
        Err(e) => {
            eprintln!("error: socialctx {command}: {e}");
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
        opts = opts.io_depth(d);
    }
    opts = opts.verify(a.verify);
    let job = match (a.plan, a.partition) {
        (Some(plan_file), None) => return plan(&corpus, &plan_file, &opts),
        (Some(plan_file), Some(part)) => Job::Partition(plan_file, part, Some(a.content)),
        (None, _) if a.incremental => Job::Incremental,
        (None, _) => Job::Full,
    };
    run_build(ctx, &corpus, &cache, &a.run, &opts, job)
}

fn plan(corpus: &Path, plan_file: &Path, opts: &sc::BuildOptions) -> Done {
    let plan = sc::Plan::create(corpus, opts).map_err(|e| e.to_string())?;
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
    let report_file = match &run.report {
        Some(path) => Some(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|e| cannot_write(path, &e))?,
        ),
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
    if let (Some(path), Some(file)) = (&run.report, report_file) {
        file.set_len(0)
            .and_then(|()| {
                sc::internals::write_jsonl(BufWriter::new(file), &summary.report)
                    .map_err(std::io::Error::other)
            })
            .map_err(|e| cannot_write(path, &e))?;
    }
    out(&sc::summary::build_summary(&summary, corpus, cache));
    // Published: success, whatever failed after the swap.
    for w in &summary.warnings {
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
    let go = || -> sc::Result<()> {
        let cache = sc::Cache::open(&a.cache)?;
        let (s, notes) = sc::summary::split_stats(&cache, &a.split, a.retweets)?;
        for note in notes {
            eprintln!("{note}");
        }
        out(&sc::summary::stats_table(&s));
        if let Some(path) = &a.save {
            s.save(path)?;
            eprintln!("saved {}", path.display());
        }
        Ok(())
    };
    go().map(|()| 0).map_err(|e| e.to_string())
}

/// Prints to stdout; a reader that went away (`| head`) is not an error.
fn out(text: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn the_help_states_the_default_max_file_bytes() {
        assert_eq!(sc::internals::parse::DEFAULT_MAX_FILE_BYTES, 16777216);
    }
}
