//! Deterministic generator of PHEME-shaped Twitter corpora, for socialctx's
//! tests and benchmarks.
//!
//! ```no_run
//! let mut opts = gen_corpus::Options::new(300);
//! opts.retweets = 0.3;
//! let stats = gen_corpus::generate("/tmp/corpus", &opts)?;
//! println!("{}", stats.to_json());
//! # Ok::<(), gen_corpus::Error>(())
//! ```
//!
//! or, with the `gen-corpus` binary of this package:
//!
//! ```text
//! cargo run --release -p gen-corpus -- OUT_DIR --threads N [--seed S] [--retweets FRACTION] [--force]
//! ```
//!
//! [`generate`] writes [`Options::threads`] conversation threads in the layout
//! of the PHEME veracity release (figshare 6392078):
//!
//! ```text
//! OUT_DIR/<event>-all-rnr-threads/<rumours|non-rumours>/<source_id>/
//!     source-tweets/<source_id>.json     (source-tweet/ in about 1 thread in 5)
//!     reactions/<tweet_id>.json          replies (absent in about 1 thread in 10)
//!     retweets/<tweet_id>.json           only with a retweet fraction F > 0
//! ```
//!
//! Every file is one compact Twitter API v1.1 status object shaped like the
//! real PHEME files: the same key set and key order, a full user object,
//! `\/`-escaped slashes and `\uXXXX` escapes (surrogate pairs for emoji) for
//! all non-ASCII text, about half the files ending with a newline. The mix
//! follows the measured PHEME rates: media (`extended_entities`) on about 9%
//! of tweets, links on about 12%, non-ASCII text (German, French, Spanish,
//! Japanese, emoji) on about 12%, `\n` on about 5%, HTML entities on about 4%,
//! user descriptions empty in about 15% and null in about 1 in 5,000, the 9
//! PHEME events with their thread and rumour counts (scaled to the number of
//! threads), and heavy-tailed reply counts (a discretized log-normal, mean
//! about 15 replies per thread, a few threads with hundreds). Ids are 18-digit
//! snowflakes that encode the creation time, so they increase with time inside
//! a thread; all tweet ids are unique. Reactions come minutes to days after
//! their source.
//!
//! Every tweet is valid for the feature contract (`FEATURES.md`): building
//! the corpus reports no bad inputs. [`PHEME_THREADS`] (6,425) threads give a
//! PHEME-sized corpus: about 99k replies and 280 MB. File sizes follow the
//! real files kind by kind (plain reply about 2.5 KB, with a photo about 4 KB,
//! 2-6.5 KB overall; mean about 2.6 KB).
//!
//! The output is byte-identical for the same options on any machine and for
//! any number of worker threads (the rayon global pool, sized by
//! `RAYON_NUM_THREADS`): each conversation thread is drawn from its own
//! xoshiro256** stream seeded from (seed, thread index), and no platform math
//! library is used. Retweets use a stream of their own, so the replies are the
//! same whatever [`Options::retweets`] is. [`Options::threads`] counts
//! conversation threads, not workers. [`generate`] returns the [`Stats`] of
//! what it wrote; [`Stats::to_json`] is the one line the binary prints:
//! `{"threads": .., "replies": .., "retweets": .., "files": .., "bytes": ..}`.
//! A non-empty output directory is refused unless [`Options::force`].

use std::path::Path;
use std::{fs, io};

use rayon::prelude::*;

mod compose;
mod data;
mod error;
mod ids;
mod json;
mod model;
mod render;
mod rng;
mod thread;

pub use error::{Error, ErrorKind};

use thread::{Ctx, gen_thread, make_dir};

/// The largest [`Options::threads`]: thread indices are stored in the low 22
/// bits of every tweet id.
pub const MAX_THREADS: u64 = 1 << 22;

/// The largest [`Options::retweets`].
pub const MAX_RETWEETS: f64 = 1000.0;

/// The number of threads of the PHEME veracity release; this many threads
/// reproduce its event mix exactly.
pub const PHEME_THREADS: u64 = 6425;

/// What to generate.
///
/// Build it with [`Options::new`] and set the other fields as needed:
///
/// ```
/// let mut opts = gen_corpus::Options::new(50);
/// opts.seed = 7;
/// assert_eq!((opts.retweets, opts.force), (0.0, false));
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Options {
    /// Conversation threads (source tweets) to generate, 1 to [`MAX_THREADS`];
    /// [`PHEME_THREADS`] is PHEME-sized. Not worker threads: those are the
    /// rayon global pool's (`RAYON_NUM_THREADS`).
    pub threads: u64,
    /// Seed of the generator; the same seed and options give the same bytes.
    /// Default [`Options::DEFAULT_SEED`].
    pub seed: u64,
    /// Also write about `retweets` × (replies of the thread) retweets into each
    /// thread's `retweets/` folder; 0 to [`MAX_RETWEETS`], default 0 (none).
    pub retweets: f64,
    /// Write into a non-empty output directory: files with the same names are
    /// overwritten, others are left alone. Default `false`.
    pub force: bool,
}

impl Options {
    /// The default [`Options::seed`] (the `--seed` default of the binary).
    pub const DEFAULT_SEED: u64 = 2015;

    /// Options for `threads` conversation threads, with the default seed, no
    /// retweets and no `force`.
    pub fn new(threads: u64) -> Self {
        Options {
            threads,
            seed: Self::DEFAULT_SEED,
            retweets: 0.0,
            force: false,
        }
    }

    /// Checks the ranges: `threads` in 1..=[`MAX_THREADS`], `retweets` a
    /// finite number in 0..=[`MAX_RETWEETS`]. [`generate`] calls this first.
    ///
    /// # Errors
    ///
    /// An [`ErrorKind::InvalidOptions`] error naming the offending value.
    pub fn validate(&self) -> Result<(), Error> {
        if !(1..=MAX_THREADS).contains(&self.threads) {
            return Err(Error::threads(self.threads));
        }
        if !(self.retweets.is_finite() && (0.0..=MAX_RETWEETS).contains(&self.retweets)) {
            return Err(Error::retweets(self.retweets));
        }
        Ok(())
    }
}

/// What [`generate`] wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stats {
    /// Conversation threads, one source tweet each.
    pub threads: u64,
    /// Replies (files under `reactions/`).
    pub replies: u64,
    /// Retweets (files under `retweets/`).
    pub retweets: u64,
    /// Files written: sources, replies and retweets.
    pub files: u64,
    /// Total size of the files written, in bytes.
    pub bytes: u64,
}

impl Stats {
    const ZERO: Stats = Stats {
        threads: 0,
        replies: 0,
        retweets: 0,
        files: 0,
        bytes: 0,
    };

    fn add(self, o: Stats) -> Stats {
        Stats {
            threads: self.threads + o.threads,
            replies: self.replies + o.replies,
            retweets: self.retweets + o.retweets,
            files: self.files + o.files,
            bytes: self.bytes + o.bytes,
        }
    }

    /// The one-line JSON summary the binary prints, without a newline:
    ///
    /// ```
    /// let s = gen_corpus::Stats { threads: 2, replies: 30, retweets: 0, files: 32, bytes: 83_000 };
    /// assert_eq!(
    ///     s.to_json(),
    ///     r#"{"threads": 2, "replies": 30, "retweets": 0, "files": 32, "bytes": 83000}"#
    /// );
    /// ```
    pub fn to_json(&self) -> String {
        format!(
            "{{\"threads\": {}, \"replies\": {}, \"retweets\": {}, \"files\": {}, \"bytes\": {}}}",
            self.threads, self.replies, self.retweets, self.files, self.bytes
        )
    }
}

/// Writes the corpus described by `opts` into `dir`, and returns what it wrote.
///
/// `dir` is created (with its parents) if absent; an existing `dir` must be an
/// empty directory unless [`Options::force`]. The threads are generated in
/// parallel on the rayon global pool; the bytes do not depend on it.
///
/// # Errors
///
/// - [`ErrorKind::InvalidOptions`] if [`Options::validate`] fails;
/// - [`ErrorKind::NotEmpty`] if `dir` is not empty and `force` is not set;
/// - [`ErrorKind::Io`] if `dir` cannot be read or created, or a file cannot
///   be written (the error names the path; files already written stay).
///
/// Nothing is written in the first two cases.
pub fn generate(dir: impl AsRef<Path>, opts: &Options) -> Result<Stats, Error> {
    let out = dir.as_ref();
    opts.validate()?;
    prepare(out, opts.force)?;
    let ctx = Ctx {
        out: out.to_path_buf(),
        n: opts.threads,
        seed: opts.seed,
        retweets: opts.retweets,
        v: data::Vocab::new(),
    };
    (0..ctx.n)
        .into_par_iter()
        .map_init(json::JsonWriter::default, |j, idx| gen_thread(&ctx, idx, j))
        .try_reduce(|| Stats::ZERO, |a, b| Ok(a.add(b)))
}

/// Creates `out`, or checks that it is an empty directory (unless `force`).
fn prepare(out: &Path, force: bool) -> Result<(), Error> {
    match fs::read_dir(out) {
        Ok(mut entries) => {
            if !force && entries.next().is_some() {
                return Err(Error::not_empty(out));
            }
            Ok(())
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => make_dir(out),
        Err(e) => Err(Error::output_dir(out, e)),
    }
}
