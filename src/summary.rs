//! The text the command-line tools print after a build, a merge or a
//! statistics run: the `precache`, `merge` and `stats` examples and the
//! Python package's `socialctx` command print the same lines from here, so
//! that they cannot drift apart.
//!
//! It is the repository's command-line glue, not a library API: hidden from
//! the documentation, and its text may change with the tools.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

pub use crate::ingest::Tally;
use crate::{BadInput, BuildSummary, FeatureStats, LoadError, ThreadSource};

impl Tally {
    /// The threads of `cache` counted per label code, per event and per
    /// event and label: what its build's summary counted as it wrote them
    /// (`labels`, `events`).
    pub fn of(cache: &dyn ThreadSource) -> Result<Tally, LoadError> {
        let mut tally = Tally::default();
        for i in 0..cache.len() {
            if let Some(t) = cache.thread(i)? {
                tally.add(t.label_code(), t.event());
            }
        }
        Ok(tally)
    }
}

/// What the command-line tools call a label code.
pub fn label_name(code: i8) -> &'static str {
    match code {
        1 => "rumour",
        0 => "non-rumour",
        _ => "unknown",
    }
}

/// The summary of a build of `corpus` into `cache`: counts, skipped inputs by
/// kind of reason, labels, events, shards, seconds per phase and the rate,
/// one `name       value` line each, ending with a newline.
pub fn build_summary(summary: &BuildSummary, corpus: &Path, cache: &Path) -> String {
    let mut s = String::new();
    // Writing to a String cannot fail.
    let _ = write_build(&mut s, summary, corpus, cache);
    s
}

fn write_build(
    s: &mut String,
    summary: &BuildSummary,
    corpus: &Path,
    cache: &Path,
) -> std::fmt::Result {
    let m = &summary.manifest;
    let secs = summary.elapsed.as_secs_f64();
    writeln!(s, "cache      {}", cache.display())?;
    writeln!(s, "corpus     {}", corpus.display())?;
    writeln!(
        s,
        "threads    {} (source tweets with their context)",
        m.threads
    )?;
    writeln!(s, "workers    {}", summary.workers)?;
    if let Some(note) = &summary.incremental {
        writeln!(s, "build      {note}")?;
    }
    writeln!(s, "files read {}", summary.files_read)?;
    match source_copies(cache) {
        Some((reply_copies, retweet_copies)) => writeln!(
            s,
            "reactions  {} ({} replies, {} retweets, {} copies of the source tweet)",
            m.reactions,
            m.replies.saturating_sub(reply_copies),
            m.retweets.saturating_sub(retweet_copies),
            reply_copies + retweet_copies
        )?,
        None => writeln!(
            s,
            "reactions  {} ({} stored as replies, {} as retweets)",
            m.reactions, m.replies, m.retweets
        )?,
    }
    writeln!(
        s,
        "skipped    {} (files or threads; see report.jsonl in the cache)",
        m.skipped
    )?;
    for (reason, n) in by_reason(&summary.report) {
        writeln!(s, "  {n:>8}  {reason}")?;
    }
    let mut labels: Vec<(&str, u64)> = summary
        .labels
        .iter()
        .map(|(code, n)| (label_name(*code), *n))
        .collect();
    labels.sort();
    let line = |items: Vec<String>| items.join(", ");
    writeln!(
        s,
        "labels     {}",
        line(labels.iter().map(|(k, n)| format!("{k} {n}")).collect())
    )?;
    writeln!(
        s,
        "events     {}",
        line(
            summary
                .events
                .iter()
                .map(|(k, n)| format!("{k} {n}"))
                .collect()
        )
    )?;
    writeln!(s, "shards     {}", m.shards.len())?;
    let p = &summary.phases;
    writeln!(
        s,
        "seconds    {secs:.3} (discover {:.3}, process {:.3}, publish {:.3})",
        p.discover.as_secs_f64(),
        p.process.as_secs_f64(),
        p.publish.as_secs_f64()
    )?;
    writeln!(
        s,
        "rate       {:.0} reactions/s",
        m.reactions as f64 / secs.max(1e-9)
    )
}

/// The reactions of the published `cache` that are their thread's source
/// tweet stored again (PHEME's `reactions/` folders hold it for many
/// threads), stored as replies and as retweets: no reply to itself, so the
/// summary counts them apart, as `describe` and `to_arrow`'s threads level
/// do (the manifest's `replies` counts what is stored). None when the cache
/// does not open (the line then says what is stored). Reads only the
/// numbers, in milliseconds for a PHEME-sized cache.
fn source_copies(cache: &Path) -> Option<(u64, u64)> {
    let c = crate::LazyCache::open(cache).ok()?;
    let (mut replies, mut retweets) = (0u64, 0u64);
    for i in 0..c.len() {
        let t = c.numbers(i).ok()??;
        let source = t.source_id();
        for r in t.reaction_records().filter(|r| r.id == source) {
            match r.kind {
                crate::ReactionKind::Reply => replies += 1,
                crate::ReactionKind::Retweet => retweets += 1,
            }
        }
    }
    Some((replies, retweets))
}

/// The summary of a merge into `cache`, ending with a newline.
pub fn merge_summary(summary: &BuildSummary, cache: &Path) -> String {
    let m = &summary.manifest;
    format!(
        "cache      {}\nthreads    {}\nreactions  {}\nskipped    {}\nshards     {}\nseconds    {:.3}\n",
        cache.display(),
        m.threads,
        m.reactions,
        m.skipped,
        m.shards.len(),
        summary.elapsed.as_secs_f64()
    )
}

/// The line a plan prints: where it went, its threads and its id.
pub fn plan_summary(plan: &crate::Plan, plan_file: &Path) -> String {
    let mut s = format!(
        "plan       {} ({} threads, id {})\n",
        plan_file.display(),
        plan.len(),
        plan.id()
    );
    s += if plan.pins_files() {
        "files      pinned (partitions refuse a thread with files added, removed or edited during their read)\n"
    } else {
        "files      read as they are by each partition (--pin-files to refuse changes)\n"
    };
    // What the walk skipped, which the merged cache's report will list: a
    // plan that silently dropped threads looked like a smaller corpus.
    let skipped = plan.skipped();
    if !skipped.is_empty() {
        s += &format!(
            "skipped    {} (folders or threads; the plan's \"bad\", the merged cache's report.jsonl)\n",
            skipped.len()
        );
        for (reason, n) in by_reason(skipped) {
            s += &format!("  {n:>8}  {reason}\n");
        }
    }
    s
}

/// What the `stats` tools compute: statistics of the replies (and, with
/// `retweets`, the retweets) of the threads in any of the `splits` (RPDNN
/// split files; every thread when none), and one note line per split with
/// ids the cache does not hold.
pub fn split_stats(
    cache: &crate::Cache,
    splits: &[std::path::PathBuf],
    retweets: bool,
) -> crate::Result<(FeatureStats, Vec<String>)> {
    let mut notes = Vec::new();
    let positions: Vec<usize> = if splits.is_empty() {
        (0..cache.len()).collect()
    } else {
        let mut all = Vec::new();
        for csv in splits {
            let r = crate::Split::read(csv)?.resolve(cache)?;
            if !r.missing.is_empty() {
                notes.push(format!(
                    "note: {}: {} of {} ids are not in the cache",
                    csv.display(),
                    r.missing.len(),
                    r.missing.len() + r.positions.len()
                ));
            }
            all.extend(r.positions);
        }
        all.sort_unstable();
        all.dedup();
        all
    };
    let selection = crate::Selection {
        kinds: if retweets {
            crate::Kinds::Both
        } else {
            crate::Kinds::Replies
        },
        window: None,
        max_cxt: usize::MAX,
    };
    Ok((FeatureStats::compute(cache, &positions, &selection)?, notes))
}

/// The table the `stats` example prints: threads and reactions counted,
/// then per feature its mean, std, min and max.
pub fn stats_table(s: &FeatureStats) -> String {
    let mut table = format!("{} threads, {} reactions\n", s.threads, s.count);
    table += &format!(
        "{:>3}  {:<22} {:>14} {:>14} {:>14} {:>14}\n",
        "#", "feature", "mean", "std", "min", "max"
    );
    for (i, name) in s.feature_names.iter().enumerate() {
        table += &format!(
            "{i:>3}  {name:<22} {:>14.6} {:>14.6} {:>14.6} {:>14.6}\n",
            s.mean[i], s.std[i], s.min[i], s.max[i]
        );
    }
    table
}

/// Skipped inputs counted by kind of reason, most frequent first: the
/// reason without its file names, line numbers and quoted values.
fn by_reason(report: &[BadInput]) -> Vec<(String, usize)> {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for b in report {
        *counts.entry(reason_kind(&b.reason)).or_default() += 1;
    }
    let mut v: Vec<_> = counts.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    v
}

fn reason_kind(reason: &str) -> String {
    let mut r = reason;
    let mut prefix = "";
    if let Some(rest) = r.strip_prefix("source tweet ") {
        prefix = "source tweet: ";
        r = rest.split_once(": ").map_or(rest, |(_, tail)| tail);
    }
    if let Some(rest) = r.strip_prefix("line ")
        && let Some((n, tail)) = rest.split_once(": ")
        && n.bytes().all(|b| b.is_ascii_digit())
    {
        r = tail;
    }
    let end = r.find([':', '"']).unwrap_or(r.len());
    format!("{prefix}{}", r[..end].trim())
}

#[cfg(test)]
mod tests {
    use super::reason_kind;

    #[test]
    fn reasons_lose_their_specifics() {
        assert_eq!(reason_kind("not valid JSON: x"), "not valid JSON");
        assert_eq!(
            reason_kind("source tweet 12.json: missing field \"id\""),
            "source tweet: missing field"
        );
        assert_eq!(reason_kind("line 3: too long"), "too long");
    }
}
