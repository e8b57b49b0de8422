//! Partitions check only their own threads' files (issue 47, item 1): the
//! hostile cases of that design. A merge may be of the planned corpus when
//! a thread changed after its partition checked it (stale), never a mix;
//! an edit while a partition reads is refused; a partition of another plan
//! does not merge.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use crate::common::corpus::{copy_tree, thread_dirs};
use socialctx::{
    BuildError, BuildOptions, NoProgress, Plan, Progress, build, build_partition, merge,
};

fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fs::read_dir(dir)
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().is_file())
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().into_string().unwrap(),
                fs::read(e.path()).unwrap(),
            )
        })
        .collect()
}

fn opts() -> BuildOptions {
    BuildOptions::default().threads(2).shard_bytes(64 << 10)
}

/// A thread's tweet files (source first, then reactions), sorted.
fn replies(thread: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for sub in ["source-tweets", "reactions"] {
        if let Ok(rd) = fs::read_dir(thread.join(sub)) {
            let mut v: Vec<_> = rd.map(|e| e.unwrap().path()).collect();
            v.sort();
            out.extend(v);
        }
    }
    out
}

/// The thread folders in a plan's order (by source id).
fn in_plan_order(corpus: &Path) -> Vec<PathBuf> {
    let mut all = thread_dirs(corpus);
    all.sort_by_key(|t| {
        t.file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .parse::<u64>()
            .unwrap()
    });
    all
}

fn append(file: &Path) {
    let mut bytes = fs::read(file).unwrap();
    bytes.push(b'\n');
    fs::write(file, bytes).unwrap();
}

/// A corpus of 30 generated threads under `tmp`, and the single build of it.
fn corpus(tmp: &Path) -> (PathBuf, BTreeMap<String, Vec<u8>>) {
    let corpus = tmp.join("corpus");
    gen_corpus::generate(&corpus, &gen_corpus::Options::new(30)).unwrap();
    let single = tmp.join("single");
    build(&corpus, &single, &opts(), &NoProgress).unwrap();
    (corpus, files(&single))
}

/// Edits a reply of `thread` when the first thread of the partition is
/// written: after the partition started reading, before it publishes.
struct EditWhileReading<'a> {
    thread: &'a Path,
    done: Cell<bool>,
}

impl Progress for EditWhileReading<'_> {
    fn thread_done(&self, _: u64) {
        if !self.done.replace(true) {
            append(&replies(self.thread)[0]);
        }
    }
}

/// An edit made while a partition reads (its first and its last thread,
/// so read before and after the edit) is refused and nothing published: a
/// check before the read let it through, with the plan's rumour index and
/// the new files in one cache.
#[test]
fn an_edit_during_a_partitions_read_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let (corpus, _) = corpus(tmp.path());
    let plan = Plan::create(&corpus, &opts()).unwrap();
    let all = in_plan_order(&corpus);
    let range = plan.partition_range(0, 2);
    let mut n = 0;
    for thread in [&all[range.start], &all[range.end - 1]] {
        let out = tmp.path().join("part");
        let progress = EditWhileReading {
            thread,
            done: Cell::new(false),
        };
        let err = build_partition(&corpus, &plan, (0, 2), &out, 1, &progress).unwrap_err();
        let BuildError::PlanStale { changed, .. } = &err else {
            panic!("{err}")
        };
        let rel = thread.strip_prefix(&corpus).unwrap().to_string_lossy();
        assert!(changed.iter().any(|c| c.contains(&*rel)), "{changed:?}");
        assert!(!out.exists(), "published");
        n += 1;
    }
    assert_eq!(n, 2);
}

/// A thread of partition 0 edited after partition 0 was built: the other
/// partitions do not see it (they check their own threads), and the merge
/// is exactly the planned corpus's single build. The same edit before
/// partition 0 is refused by it; partition 1 of the same plan still builds.
#[test]
fn an_edit_after_its_partition_gives_the_planned_corpus_never_a_mix() {
    let tmp = tempfile::tempdir().unwrap();
    let (corpus, planned) = corpus(tmp.path());
    let plan = Plan::create(&corpus, &opts()).unwrap();
    let all = in_plan_order(&corpus);
    let first = &all[plan.partition_range(0, 3).start];
    let parts: Vec<PathBuf> = (0..3).map(|i| tmp.path().join(format!("p{i}"))).collect();
    build_partition(&corpus, &plan, (0, 3), &parts[0], 1, &NoProgress).unwrap();
    append(replies(first).last().unwrap());
    for (i, out) in parts.iter().enumerate().skip(1) {
        build_partition(&corpus, &plan, (i, 3), out, 1, &NoProgress).unwrap();
    }
    let merged = tmp.path().join("merged");
    merge(&merged, &parts).unwrap();
    assert!(files(&merged) == planned, "merged != the planned corpus");

    let err = build_partition(
        &corpus,
        &plan,
        (0, 3),
        tmp.path().join("again"),
        1,
        &NoProgress,
    )
    .unwrap_err();
    assert!(matches!(err, BuildError::PlanStale { .. }), "{err}");
}

/// A thread added, removed, or moved between labels after the plan: every
/// partition refuses (the listing is checked everywhere, not only where the
/// thread would land), naming it.
#[test]
fn listing_changes_are_refused_by_every_partition() {
    let tmp = tempfile::tempdir().unwrap();
    let (base, _) = corpus(tmp.path());
    type Change = fn(&Path) -> String;
    let changes: [(&str, Change); 3] = [
        ("removed", |c| {
            let t = thread_dirs(c).pop().unwrap();
            fs::remove_dir_all(&t).unwrap();
            t.strip_prefix(c).unwrap().to_string_lossy().into_owned()
        }),
        ("added", |c| {
            let t = thread_dirs(c).remove(0);
            let to = t.with_file_name("1");
            copy_tree(&t, &to);
            // Its own source id as its source tweet's name.
            let src = to.join("source-tweets");
            let f = fs::read_dir(&src).unwrap().next().unwrap().unwrap().path();
            fs::rename(f, src.join("1.json")).unwrap();
            to.strip_prefix(c).unwrap().to_string_lossy().into_owned()
        }),
        ("emptied", |c| {
            let t = thread_dirs(c)
                .into_iter()
                .find(|t| t.join("reactions").is_dir())
                .unwrap();
            fs::remove_dir_all(t.join("reactions")).unwrap();
            t.strip_prefix(c).unwrap().to_string_lossy().into_owned()
        }),
    ];
    let mut refused = 0;
    for (what, change) in changes {
        let corpus = tmp.path().join(what);
        copy_tree(&base, &corpus);
        let plan = Plan::create(&corpus, &opts()).unwrap();
        let named = change(&corpus);
        for i in 0..3 {
            let out = tmp.path().join(format!("{what}-{i}"));
            match build_partition(&corpus, &plan, (i, 3), &out, 1, &NoProgress) {
                Err(BuildError::PlanStale { changed, .. }) => {
                    assert!(
                        changed.iter().any(|c| c.contains(&named)),
                        "{what}: {changed:?}"
                    );
                    refused += 1;
                }
                other => panic!("{what}: partition {i}: {:?}", other.map(|_| ())),
            }
        }
    }
    assert_eq!(refused, 9);
}

/// Partitions of two plans of one corpus (made before and after an edit)
/// do not merge, whichever partitions come from which plan.
#[test]
fn partitions_of_two_plans_do_not_merge() {
    let tmp = tempfile::tempdir().unwrap();
    let (corpus, _) = corpus(tmp.path());
    let old = Plan::create(&corpus, &opts()).unwrap();
    let build_all = |plan: &Plan, tag: &str| -> Vec<PathBuf> {
        (0..3)
            .map(|i| {
                let out = tmp.path().join(format!("{tag}{i}"));
                build_partition(&corpus, plan, (i, 3), &out, 1, &NoProgress).unwrap();
                out
            })
            .collect()
    };
    let a = build_all(&old, "a");
    let last = in_plan_order(&corpus).pop().unwrap();
    append(&replies(&last)[0]);
    let new = Plan::create(&corpus, &opts()).unwrap();
    assert_ne!(old.id(), new.id());
    let b = build_all(&new, "b");
    let mut refused = 0;
    for mask in 1..7u32 {
        let mixed: Vec<PathBuf> = (0..3)
            .map(|i| {
                if mask & (1 << i) != 0 {
                    b[i].clone()
                } else {
                    a[i].clone()
                }
            })
            .collect();
        let out = tmp.path().join(format!("m{mask}"));
        match merge(&out, &mixed) {
            Err(BuildError::BadPartition { .. }) => refused += 1,
            other => panic!("mask {mask}: {:?}", other.map(|_| ())),
        }
        assert!(!out.exists());
    }
    assert_eq!(refused, 6);
}

/// The plan's summary says what the walk skipped (it said only the thread
/// count, so a plan that left threads out read as a smaller corpus).
#[test]
fn the_plan_summary_names_what_was_skipped() {
    let tmp = tempfile::tempdir().unwrap();
    let (corpus, _) = corpus(tmp.path());
    let file = tmp.path().join("plan.json");
    let plan = Plan::create(&corpus, &opts()).unwrap();
    let clean = socialctx::summary::plan_summary(&plan, &file);
    assert!(!clean.contains("skipped"), "{clean}");
    // A source id in two places: the second is skipped and reported.
    let t = in_plan_order(&corpus).remove(0);
    let twin = corpus
        .join("other-event/rumours")
        .join(t.file_name().unwrap());
    copy_tree(&t, &twin);
    let plan = Plan::create(&corpus, &opts()).unwrap();
    let s = socialctx::summary::plan_summary(&plan, &file);
    assert!(
        s.contains("skipped    1 (") && s.contains("duplicate source id"),
        "{s}"
    );
}
