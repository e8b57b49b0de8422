//! The definition of the `socialctx` command: every subcommand, option,
//! help text and usage error (clap's derive). `lib.rs` runs it.

use std::path::{Path, PathBuf};

use clap::{Args, Parser, Subcommand};
use serde::{Serialize, Serializer};

/// A path handed to Python: a string, or `{"os_bytes": [...]}` when it is
/// not UTF-8 (a name Python's own argv holds as surrogate escapes; cli.py
/// decodes it with `os.fsdecode`). serde's own refuses such a path.
fn os_path<S: Serializer>(p: &Path, s: S) -> Result<S::Ok, S::Error> {
    match p.to_str() {
        Some(text) => s.serialize_str(text),
        None => {
            #[derive(Serialize)]
            struct OsBytes<'a> {
                os_bytes: &'a [u8],
            }
            OsBytes {
                os_bytes: p.as_os_str().as_encoded_bytes(),
            }
            .serialize(s)
        }
    }
}

fn os_path_opt<S: Serializer>(p: &Option<PathBuf>, s: S) -> Result<S::Ok, S::Error> {
    match p {
        Some(p) => os_path(p, s),
        None => s.serialize_none(),
    }
}

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
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Subcommand, Debug)]
pub(crate) enum Command {
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
        "one `socialctx build` writes. The plan finds the thread folders without listing their ",
        "tweet folders (partitions are balanced by thread count), and a thread in a rumours or ",
        "non-rumours folder by its name and its source folder alone (its partition lists it and ",
        "refuses a wrong guess; a thread nested inside it needs --pin-files), unless --pin-files, ",
        "which lists every thread and tweet folder. ",
        exit_status!()
    ))]
    Plan(PlanArgs),
    /// Build one partition of a plan
    #[command(long_about = concat!(
        "Build partition I of N of PLAN_FILE into the cache directory OUT (I from 0; ",
        "contiguous source-id ranges; lists and reads no other partition's threads). ",
        "Content options come from the plan. The corpus's threads must be as planned: a thread ",
        "added, gone or moved since is refused by every partition; a change inside a thread ",
        "folder that discovery sees (its folders, a rumour source's author or time) by the ",
        "partition that reads it, naming it. Tweet files are read as they are, unless the plan ",
        "was made with --pin-files: then a file added to or removed from a thread since the ",
        "plan, or one edited during the partition's read, is refused too. ",
        "Slurm: --partition ",
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
        exit_status!(
            "the command stops; it writes nothing but its output"
        )
    ))]
    Dump(DumpArgs),
    /// The 28 features' statistics (for normalisation)
    #[command(long_about = concat!(
        "Per-feature count, mean, population std (ddof 0), min and max over the cache's replies ",
        "(or replies and retweets), optionally only the threads of RPDNN split CSVs; what ",
        "normalised training uses (socialctx.FeatureStats.load reads the saved file). The file ",
        "records the definition digest of the values and the cache generation: a Loader refuses ",
        "it for values of another definition (recompute it after an upgrade) and takes it for ",
        "another generation of the same definition (last night's statistics). ",
        exit_status!(
            "the command stops; a --save file is written whole or not at all"
        )
    ))]
    Stats(StatsArgs),
    /// The commands Python runs (cli.py): parsed here, run there.
    #[command(flatten)]
    Python(PyCommand),
}

/// The commands that need Python (`embed` imports the user's model;
/// `describe` and `export` need pandas, pyarrow, matplotlib; `info`): their
/// parsed arguments go to python/socialctx/cli.py as
/// `{"command": NAME, "args": {FIELD: VALUE}}`. A new one is a variant here
/// and its function in cli.py.
#[derive(Subcommand, Debug, Serialize)]
#[serde(tag = "command", content = "args", rename_all = "kebab-case")]
pub(crate) enum PyCommand {
    /// What a cache holds: format, counts, content id, derived stores
    #[command(long_about = concat!(
        "Print CACHE's format version, counts, build options, content id and what derived/ ",
        "holds (embedding stores and incremental-build fingerprints, each marked current or ",
        "stale against the content id). Validates every shard (checksums and structure) ",
        "and says so: a damaged cache is named with its damaged file. ",
        exit_status!(
            "the command stops; it writes nothing but its output"
        )
    ))]
    Info(InfoArgs),
    /// Embed a text field's distinct inputs with your model into a store
    #[command(long_about = concat!(
        "Run MODEL once per batch of the distinct non-empty inputs of --field in CACHE and ",
        "write the embedding store derived/embeddings/NAME (what Loader(embeddings=[NAME]) ",
        "and socialctx.torch.EmbeddingTable read). MODEL is `module:callable`, importable ",
        "from the current directory or PYTHONPATH: called with a list of token lists, it ",
        "returns a [len, dim] array. With --model-id, a store of the cache's previous ",
        "content (after `socialctx build --incremental`) made under the same id gives back ",
        "the rows of every input it already has, and MODEL runs only for the new ones. ",
        "Resumes after an interruption under the same model id; without --model-id, the id ",
        "is derived from MODULE:CALLABLE and a hash of its source files (an edit of the ",
        "model's code starts over; a derived id never reuses a previous store's rows). Rows ",
        "of two models are never mixed: the summary says when it started over and why. ",
        "Shows a progress bar on a terminal and ends with a summary. ",
        "Runs in the Python package's command. ",
        exit_status!(
            "the embed stops between batches; the store is not published, and the next embed of the same model resumes from the rows already computed"
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
        exit_status!(
            "the command stops; an --html file is written whole or not at all: the old one stays until the new one is complete"
        )
    ))]
    Describe(DescribeArgs),
    /// Write a cache's reactions or threads as a Parquet file
    #[command(long_about = concat!(
        "Write CACHE as Parquet (Cache.to_arrow: one row per reaction, or per thread with ",
        "--level threads) to OUT, whole or not at all (needs pyarrow). ",
        exit_status!(
            "the command stops; OUT is written whole or not at all: the old file stays until the new one is complete"
        )
    ))]
    Export(ExportArgs),
}

/// The most worker or prefetch threads a build may start.
const MAX_THREADS: i64 = 1024;

/// `-j`/`--workers`: every command that builds.
#[derive(Args, Debug)]
pub(crate) struct Workers {
    /// Worker threads [default: available cores]; the cache is byte-identical for any N
    // `--threads`, the former name, is a hidden alias: a cache's "threads"
    // are conversation threads.
    // Bounded: each is an OS thread, and far past the cores the build
    // aborted when one could not get its stack.
    #[arg(short = 'j', long, alias = "threads", value_name = "N",
          value_parser = clap::value_parser!(u16).range(1..=MAX_THREADS))]
    pub(crate) workers: Option<u16>,
}

/// Options that shape the cache's content (a plan records them). Options,
/// not defaults, so that a partition build can tell what was given.
#[derive(Args, Debug)]
pub(crate) struct Content {
    /// Stop at the first bad input (exit 1; any existing cache is left
    /// untouched); without it, bad files are skipped and reported
    #[arg(long)]
    pub(crate) strict: bool,
    /// Skip tweet files larger than this [default: 16777216]
    #[arg(long, value_name = "BYTES")]
    pub(crate) max_file_bytes: Option<u64>,
    /// Cap on one shard file, in MiB (1 to 1024) [default: 16]
    #[arg(long, value_name = "MIB", value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub(crate) shard_mib: Option<u64>,
    /// Only the reference's 28 features: skip structure.json, annotation.json,
    /// who-follows-whom.dat and retweets.json (the extended features)
    #[arg(long)]
    pub(crate) no_extended: bool,
}

/// Options of any build that writes a cache.
#[derive(Args, Debug)]
pub(crate) struct RunOptions {
    /// Also write the bad-input report to FILE as JSON Lines ({"path": ...,
    /// "reason": ...}, paths relative to the corpus); checked for writing
    /// before anything is replaced
    #[arg(long, value_name = "FILE")]
    pub(crate) report: Option<PathBuf>,
    /// Do not show a progress bar on a terminal
    #[arg(short, long)]
    pub(crate) quiet: bool,
}

#[derive(Args, Debug)]
pub(crate) struct BuildArgs {
    /// The corpus root
    #[arg(value_name = "CORPUS")]
    pub(crate) corpus: Option<PathBuf>,
    /// The cache directory to write
    #[arg(value_name = "CACHE")]
    pub(crate) cache: Option<PathBuf>,
    /// Build the sample corpus that ships with the package (38 threads)
    /// instead of CORPUS: `socialctx build --sample CACHE`
    #[arg(long)]
    pub(crate) sample: bool,
    #[command(flatten)]
    pub(crate) workers: Workers,
    #[command(flatten)]
    pub(crate) content: Content,
    #[command(flatten)]
    pub(crate) run: RunOptions,
    /// Re-read only the threads whose files changed since the cache in CACHE
    /// was built (by size, mtime, ctime, inode) and take the others from it;
    /// byte-identical to a full build. Falls back to a full build, and says
    /// why, when reuse is not safe
    #[arg(long, conflicts_with = "plan")]
    pub(crate) incremental: bool,
    /// With --incremental: also compare file contents (xxh3), for file
    /// systems with coarse or unreliable timestamps (reads every file)
    #[arg(long, requires = "incremental")]
    pub(crate) verify: bool,
    /// With --incremental: FILE lists what changed since the last build,
    /// one path a line (tweet files or thread folders, relative to CORPUS
    /// or absolute; `-`: standard input), as a crawler writes it. Trusted:
    /// the threads it does not name are not looked at (no walk)
    #[arg(long, value_name = "FILE", requires = "incremental")]
    pub(crate) changed: Option<PathBuf>,
    /// Prefetch threads that keep reads in flight when the corpus is not in
    /// the page cache (0 = none) [default: 32; 0 under `ulimit -v`]
    #[arg(long, value_name = "N",
          value_parser = clap::value_parser!(u16).range(0..=MAX_THREADS))]
    pub(crate) io_depth: Option<u16>,
    /// Partitioned builds as the precache example takes them: without
    /// --partition, walk CORPUS once and write the plan to PLAN_FILE (what
    /// `socialctx plan` does); with it, the plan to build a partition of
    #[arg(long, value_name = "PLAN_FILE", conflicts_with = "sample")]
    pub(crate) plan: Option<PathBuf>,
    /// Build partition I of N of --plan into CACHE (what `socialctx
    /// build-partition` does); options that shape the cache come from the
    /// plan, and differing ones are refused
    #[arg(long, value_name = "I/N", value_parser = parse_partition, requires = "plan")]
    pub(crate) partition: Option<(usize, usize)>,
    /// With --plan and no --partition: what `socialctx plan --pin-files`
    /// does
    #[arg(long, requires = "plan", conflicts_with = "partition")]
    pub(crate) pin_files: bool,
}

#[derive(Args, Debug)]
pub(crate) struct PlanArgs {
    /// The corpus root
    #[arg(value_name = "CORPUS")]
    pub(crate) corpus: PathBuf,
    /// Where to write the plan (JSON)
    #[arg(value_name = "PLAN_FILE")]
    pub(crate) plan: PathBuf,
    #[command(flatten)]
    pub(crate) workers: Workers,
    #[command(flatten)]
    pub(crate) content: Content,
    #[command(flatten)]
    pub(crate) pin: PinFiles,
}

/// How strictly a plan's partitions check its threads' files.
#[derive(Args, Debug)]
pub(crate) struct PinFiles {
    /// List every thread's tweet folders into the plan (partitions balanced
    /// by file count) and have each partition refuse a thread of its own
    /// with a file added or removed since the plan, or edited while it read
    /// it (every file `stat`ted before and after its read). Without it, a
    /// partition reads its threads' files as they are (as a build does)
    #[arg(long)]
    pub(crate) pin_files: bool,
}

#[derive(Args, Debug)]
pub(crate) struct PartitionArgs {
    /// The corpus root
    #[arg(value_name = "CORPUS")]
    pub(crate) corpus: PathBuf,
    /// The partition cache directory to write
    #[arg(value_name = "OUT")]
    pub(crate) out: PathBuf,
    /// The plan (from `socialctx plan`)
    #[arg(long, value_name = "PLAN_FILE")]
    pub(crate) plan: PathBuf,
    /// Which partition to build: I of N, 0 <= I < N
    #[arg(long, value_name = "I/N", value_parser = parse_partition)]
    pub(crate) partition: (usize, usize),
    #[command(flatten)]
    pub(crate) workers: Workers,
    #[command(flatten)]
    pub(crate) run: RunOptions,
}

#[derive(Args, Debug)]
pub(crate) struct MergeArgs {
    /// The cache directory to write
    #[arg(value_name = "CACHE")]
    pub(crate) cache: PathBuf,
    /// The partition caches
    #[arg(value_name = "PART", required = true)]
    pub(crate) parts: Vec<PathBuf>,
}

#[derive(Args, Debug)]
pub(crate) struct DumpArgs {
    /// The cache directory
    #[arg(value_name = "CACHE")]
    pub(crate) cache: PathBuf,
    /// Include retweets (the oracle's --retweets; a cache built with the
    /// extended features also holds the retweets of retweets.json files,
    /// which the oracle does not read)
    #[arg(long)]
    pub(crate) retweets: bool,
    /// Add the extended features as extra keys (per thread: event, veracity,
    /// annotated_rumour; per reaction: depth, persistence, follows_source,
    /// followed_by_source, reciprocal_follow, user_reliability; null = unknown)
    #[arg(long)]
    pub(crate) extended: bool,
    /// Print the texts for embedding instead, as rpdnn_tokens.py does:
    /// {"source_id", "reactions": [{"id", "reply_tokens",
    /// "description_tokens"}]} (RPDNN's preprocessing_tweet_text tokens of
    /// each reply, null for retweets; the author's description split on ' ',
    /// null without one)
    #[arg(long, conflicts_with_all = ["extended", "graph"])]
    pub(crate) tokens: bool,
    /// Add each reaction's parent in the propagation tree: "parent" (a tweet
    /// id; the source's for the root's children) and "parent_how"
    /// (in_reply_to, structure or defaulted)
    #[arg(long)]
    pub(crate) graph: bool,
}

#[derive(Args, Debug)]
pub(crate) struct StatsArgs {
    /// The cache directory
    #[arg(value_name = "CACHE")]
    pub(crate) cache: PathBuf,
    /// Only threads listed in this split CSV (repeatable)
    #[arg(long, value_name = "CSV")]
    pub(crate) split: Vec<PathBuf>,
    /// Include retweets (default: replies only, as the reference)
    #[arg(long)]
    pub(crate) retweets: bool,
    /// Save the statistics as JSON
    #[arg(long, value_name = "FILE")]
    pub(crate) save: Option<PathBuf>,
}

// The commands Python runs: their parsed arguments go to it as JSON, keyed
// by these field names (python/socialctx/cli.py reads them).

#[derive(Args, Debug, Serialize)]
pub(crate) struct InfoArgs {
    /// The cache directory
    #[serde(serialize_with = "os_path")]
    #[arg(value_name = "CACHE")]
    pub(crate) cache: PathBuf,
    /// Print the same as one JSON object
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Args, Debug, Serialize)]
pub(crate) struct EmbedArgs {
    /// The cache directory
    #[serde(serialize_with = "os_path")]
    #[arg(value_name = "CACHE")]
    pub(crate) cache: PathBuf,
    /// The model
    #[arg(long, value_name = "MODULE:CALLABLE")]
    pub(crate) model: String,
    /// The store's name
    #[arg(long)]
    pub(crate) name: String,
    /// RPDNN's reply tokens or the authors' descriptions
    #[arg(long, default_value = "reply", value_parser = ["reply", "description"])]
    pub(crate) field: String,
    /// The model's identity (e.g. a hash of its weights): rows are reused,
    /// and an interrupted embed resumed, only under the same id (default:
    /// derived from MODULE:CALLABLE and its source files; resumes only)
    #[arg(long, value_name = "ID")]
    pub(crate) model_id: Option<String>,
    /// Inputs per call
    #[arg(long, value_name = "N", default_value_t = 256,
          value_parser = clap::value_parser!(u16).range(1..))]
    pub(crate) batch_size: u16,
    /// The stored rows' type
    #[arg(long, default_value = "float32", value_parser = ["float32", "float16"])]
    pub(crate) dtype: String,
    /// Write the store as one segment without the rows no reaction uses
    /// (otherwise when those exceed a quarter of the rows); byte for byte a
    /// from-scratch embed
    #[arg(long)]
    pub(crate) compact: bool,
    /// Read and check every segment of the previous store before reusing
    /// it (otherwise only those whose size, mtime, ctime or inode changed
    /// since they were last verified)
    #[arg(long)]
    pub(crate) verify: bool,
    /// Do not show a progress bar on a terminal
    #[arg(short, long)]
    pub(crate) quiet: bool,
}

#[derive(Args, Debug, Serialize)]
pub(crate) struct DescribeArgs {
    /// The cache directory
    #[serde(serialize_with = "os_path")]
    #[arg(value_name = "CACHE")]
    pub(crate) cache: PathBuf,
    /// As a Markdown table
    #[arg(long, group = "form")]
    pub(crate) markdown: bool,
    /// As a LaTeX tabular (booktabs)
    #[arg(long, group = "form")]
    pub(crate) latex: bool,
    /// As JSON (times in seconds)
    #[arg(long, group = "form")]
    pub(crate) json: bool,
    /// Only these columns, in this order: keys as --json names them, or
    /// `all` [default: every column; for --latex, those not zero or empty
    /// in every row]
    #[arg(long, value_name = "A,B,...", value_parser = parse_columns)]
    pub(crate) columns: Option<Columns>,
    /// Also write one self-contained HTML page (table, figures, folds and
    /// leakage audit)
    #[serde(serialize_with = "os_path_opt")]
    #[arg(long, value_name = "FILE")]
    pub(crate) html: Option<PathBuf>,
}

#[derive(Args, Debug, Serialize)]
pub(crate) struct ExportArgs {
    /// The cache directory
    #[serde(serialize_with = "os_path")]
    #[arg(value_name = "CACHE")]
    pub(crate) cache: PathBuf,
    /// The Parquet file to write
    #[serde(serialize_with = "os_path")]
    #[arg(value_name = "OUT")]
    pub(crate) out: PathBuf,
    /// One row per reaction or per thread
    #[arg(long, default_value = "reactions", value_parser = ["reactions", "threads"])]
    pub(crate) level: String,
    /// Only these columns, in this order [default: all]
    #[arg(long, value_name = "A,B,...", value_parser = parse_columns)]
    pub(crate) columns: Option<Columns>,
}

/// `--columns A,B,...`: the names, blanks dropped.
#[derive(Clone, Debug, Serialize)]
#[serde(transparent)]
pub(crate) struct Columns(pub(crate) Vec<String>);

pub(crate) fn parse_columns(s: &str) -> Result<Columns, String> {
    Ok(Columns(
        s.split(',')
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .map(String::from)
            .collect(),
    ))
}

/// `I/N`, `0 <= I < N`.
pub(crate) fn parse_partition(s: &str) -> Result<(usize, usize), String> {
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
