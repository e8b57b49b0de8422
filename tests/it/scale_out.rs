//! Partitions check only their own threads' files (issue 47, item 1): the
//! hostile cases of that design. A plan is a listing: a content edit after
//! it is read as it is by the thread's partition, and a merge is a single
//! build of the corpus as its partitions read it (a thread changed after
//! its partition ran is held as that partition read it), never a mix; an
//! edit while a partition reads is refused (an in-place one that put the
//! mtime back too); a partition of another plan does not merge.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use crate::common::corpus::{by_source_id as in_plan_order, copy_tree, thread_dirs};
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

/// Plan, all `n` partitions and merge of `corpus` (partitions read from
/// `read_from`, the corpus as mounted there); the merged cache's files, or
/// the first refusal.
fn partitioned(
    plan: &Plan,
    read_from: &Path,
    n: usize,
    out: &Path,
) -> Result<BTreeMap<String, Vec<u8>>, BuildError> {
    let parts: Vec<PathBuf> = (0..n).map(|i| out.join(format!("p{i}"))).collect();
    for (i, p) in parts.iter().enumerate() {
        build_partition(read_from, plan, (i, n), p, 1, &NoProgress)?;
    }
    let merged = out.join("merged");
    merge(&merged, &parts)?;
    Ok(files(&merged))
}

/// Builds each of 3 partitions of `plan` under `out`: the indexes of those
/// that refused as stale, each change list passing `names` and nothing
/// published; any other error fails the test.
fn stale_partitions(
    plan: &Plan,
    corpus: &Path,
    out: &Path,
    names: impl Fn(&str) -> bool,
) -> Vec<usize> {
    let mut refused = Vec::new();
    for i in 0..3 {
        let dir = out.join(format!("p{i}"));
        match build_partition(corpus, plan, (i, 3), &dir, 1, &NoProgress) {
            Ok(_) => {}
            Err(BuildError::PlanStale { changed, .. }) => {
                assert!(changed.iter().any(|c| names(c)), "{changed:?}");
                assert!(!dir.exists(), "published");
                refused.push(i);
            }
            Err(e) => panic!("{e}"),
        }
    }
    refused
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

/// A plan that pins files: an edit made while a partition reads (its
/// first and its last thread, so read before and after the edit) is
/// refused and nothing published: a check before the read let it through,
/// with the plan's rumour index and the new files in one cache.
#[test]
fn an_edit_during_a_partitions_read_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let (corpus, _) = corpus(tmp.path());
    let plan = Plan::create_pinned(&corpus, &opts()).unwrap();
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

/// Edits a reply of `thread` in place (the same size) when the first
/// thread of the partition is written, and puts its mtime back.
struct EditInPlaceWhileReading<'a> {
    thread: &'a Path,
    done: Cell<bool>,
}

impl Progress for EditInPlaceWhileReading<'_> {
    fn thread_done(&self, _: u64) {
        if !self.done.replace(true) {
            let f = &replies(self.thread)[0];
            let mtime = fs::metadata(f).unwrap().modified().unwrap();
            let mut text = fs::read(f).unwrap();
            let at = text.iter().position(u8::is_ascii_digit).unwrap();
            text[at] = if text[at] == b'9' { b'8' } else { text[at] + 1 };
            // The change time has the file system's clock tick.
            std::thread::sleep(std::time::Duration::from_millis(20));
            fs::write(f, &text).unwrap();
            fs::File::options()
                .write(true)
                .open(f)
                .unwrap()
                .set_modified(mtime)
                .unwrap();
        }
    }
}

/// A plan that pins files: the same-size edit with its mtime put back,
/// made while a partition reads, is refused by the change time (the two pins are taken on one
/// machine: inode numbers and change times count), naming the thread.
#[test]
fn an_in_place_edit_with_the_mtime_put_back_during_a_read_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let (corpus, _) = corpus(tmp.path());
    let plan = Plan::create_pinned(&corpus, &opts()).unwrap();
    let all = in_plan_order(&corpus);
    let range = plan.partition_range(0, 2);
    for thread in [&all[range.start], &all[range.end - 1]] {
        let out = tmp.path().join("part");
        let progress = EditInPlaceWhileReading {
            thread,
            done: Cell::new(false),
        };
        let err = build_partition(&corpus, &plan, (0, 2), &out, 1, &progress).unwrap_err();
        let BuildError::PlanStale { changed, .. } = &err else {
            panic!("{err}")
        };
        let rel = thread.strip_prefix(&corpus).unwrap().to_string_lossy();
        assert!(
            changed
                .iter()
                .any(|c| c.contains(&*rel) && c.contains("while this partition read")),
            "{changed:?}"
        );
        assert!(!out.exists(), "published");
    }
}

/// A thread of partition 0 edited after partition 0 was built: the other
/// partitions do not see it (they check their own threads), and the merge
/// is exactly the planned corpus's single build. The same edit before
/// partition 0 (the same names, other content) is read as it is (issue 47:
/// the plan is a listing): partition 0 built again, merged with the
/// others, is the single build of the edited corpus.
#[test]
fn an_edit_after_its_partition_gives_the_planned_corpus_never_a_mix() {
    let tmp = tempfile::tempdir().unwrap();
    let (corpus, planned) = corpus(tmp.path());
    let plan = Plan::create(&corpus, &opts()).unwrap();
    let all = in_plan_order(&corpus);
    let first = &all[plan.partition_range(0, 3).start];
    let parts: Vec<PathBuf> = (0..3).map(|i| tmp.path().join(format!("p{i}"))).collect();
    build_partition(&corpus, &plan, (0, 3), &parts[0], 1, &NoProgress).unwrap();
    // A value changed: a word more in the reply's text.
    let reply = replies(first).pop().unwrap();
    let text = fs::read_to_string(&reply).unwrap();
    let at = text.find("\"text\":").unwrap();
    let at = at + text[at + 7..].find('"').unwrap() + 8;
    fs::write(&reply, format!("{}edited {}", &text[..at], &text[at..])).unwrap();
    for (i, out) in parts.iter().enumerate().skip(1) {
        build_partition(&corpus, &plan, (i, 3), out, 1, &NoProgress).unwrap();
    }
    let merged = tmp.path().join("merged");
    merge(&merged, &parts).unwrap();
    assert!(files(&merged) == planned, "merged != the planned corpus");

    build_partition(&corpus, &plan, (0, 3), &parts[0], 1, &NoProgress).unwrap();
    let edited = tmp.path().join("edited");
    build(&corpus, &edited, &opts(), &NoProgress).unwrap();
    let again = tmp.path().join("again");
    merge(&again, &parts).unwrap();
    assert!(
        files(&again) == files(&edited),
        "merged != the edited corpus"
    );
    assert!(files(&again) != planned, "the edit is in the cache");
}

/// A thread added or removed after the plan: every partition refuses (the
/// thread listing is checked everywhere, not only where the thread would
/// land), naming it; with either kind of plan. A thread's tweet folder
/// removed (its folders, which discovery sees): with a plan that lists
/// thread folders (`--pin-files`), the partition that reads it refuses and
/// the others do not list it (issue 47); with the default plan, which took
/// the thread unlisted, its partition reads it as it is, like any change
/// inside one thread, and the merge is the single build of the changed
/// corpus.
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
    for pinned in [false, true] {
        for (what, change) in changes {
            let corpus = tmp.path().join(format!("{what}-{pinned}"));
            copy_tree(&base, &corpus);
            let plan = if pinned {
                Plan::create_pinned(&corpus, &opts()).unwrap()
            } else {
                Plan::create(&corpus, &opts()).unwrap()
            };
            let named = change(&corpus);
            let owner = (0..3).find(|&i| {
                plan.partition_range(i, 3).any(|k| {
                    in_plan_order(&corpus)
                        .get(k)
                        .is_some_and(|t| t.ends_with(&named))
                })
            });
            for i in 0..3 {
                let out = tmp.path().join(format!("{what}-{pinned}-{i}"));
                let built = build_partition(&corpus, &plan, (i, 3), &out, 1, &NoProgress);
                match built {
                    Err(BuildError::PlanStale { changed, .. }) => {
                        assert!(
                            changed.iter().any(|c| c.contains(&named)),
                            "{what}: {changed:?}"
                        );
                        refused += 1;
                    }
                    Ok(_) if what == "emptied" && (owner != Some(i) || !pinned) => {}
                    other => panic!("{what}: partition {i}: {:?}", other.map(|_| ())),
                }
            }
            if what == "emptied" && !pinned {
                let parts: Vec<PathBuf> = (0..3)
                    .map(|i| tmp.path().join(format!("{what}-{pinned}-{i}")))
                    .collect();
                let (m, s) = (tmp.path().join("emptied-m"), tmp.path().join("emptied-s"));
                merge(&m, &parts).unwrap();
                build(&corpus, &s, &opts(), &NoProgress).unwrap();
                assert!(files(&m) == files(&s), "merged != the changed corpus");
            }
        }
    }
    assert_eq!(refused, 6 + 7);
}

/// Partitions of two plans of one corpus (pinning files, made before and
/// after a reply was added) do not merge, whichever partitions come from
/// which plan.
#[test]
fn partitions_of_two_plans_do_not_merge() {
    let tmp = tempfile::tempdir().unwrap();
    let (corpus, _) = corpus(tmp.path());
    let old = Plan::create_pinned(&corpus, &opts()).unwrap();
    let unpinned = Plan::create(&corpus, &opts()).unwrap();
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
    // A content edit leaves the plan as it was (a listing); a reply added
    // makes another plan.
    let last = in_plan_order(&corpus)
        .into_iter()
        .rev()
        .find(|t| t.join("reactions").is_dir())
        .unwrap();
    append(&replies(&last)[0]);
    assert_eq!(
        Plan::create_pinned(&corpus, &opts()).unwrap().id(),
        old.id()
    );
    fs::copy(&replies(&last)[1], last.join("reactions/1.json")).unwrap();
    let new = Plan::create_pinned(&corpus, &opts()).unwrap();
    assert_ne!(old.id(), new.id());
    // A plan that does not pin files lists no tweet folder: the same plan.
    assert_eq!(Plan::create(&corpus, &opts()).unwrap().id(), unpinned.id());
    assert_ne!(unpinned.id(), old.id(), "the kinds of plan differ");
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

/// A plan edited by hand and sealed again (its checksum redone): a
/// thread's rumour entry moved a day back. The partition holding that
/// thread refuses (its entry, read from its source, is not the plan's), so
/// no merge can hold an index that disagrees with the sources read; the
/// other partitions build.
#[test]
fn a_resealed_plan_with_an_edited_rumour_entry_is_refused_by_its_partition() {
    let tmp = tempfile::tempdir().unwrap();
    let (corpus, _) = corpus(tmp.path());
    let plan = Plan::create(&corpus, &opts()).unwrap();
    let mut v = serde_json::to_value(&plan).unwrap();
    let k = v["threads"]
        .as_array()
        .unwrap()
        .iter()
        .position(|t| t.get("rumour").is_some())
        .expect("a rumour source");
    let at = v["threads"][k]["rumour"][1].as_i64().unwrap();
    v["threads"][k]["rumour"][1] = (at - 86_400).into();
    let rel = v["threads"][k]["rel"].as_str().unwrap().to_owned();
    let sealed = Plan::reseal(&serde_json::to_vec(&v).unwrap()).unwrap();
    let edited: Plan = serde_json::from_slice(&sealed).unwrap();
    let owner = (0..3)
        .find(|&i| edited.partition_range(i, 3).contains(&k))
        .unwrap();
    for i in 0..3 {
        let out = tmp.path().join(format!("p{i}"));
        let built = build_partition(&corpus, &edited, (i, 3), &out, 1, &NoProgress);
        if i != owner {
            built.unwrap();
            continue;
        }
        match built {
            Err(BuildError::PlanStale { changed, .. }) => assert!(
                changed
                    .iter()
                    .any(|c| c.contains(&rel) && c.contains("rumour-index entry")),
                "{changed:?}"
            ),
            other => panic!("partition {i}: {:?}", other.map(|_| ())),
        }
        assert!(!out.exists(), "published");
    }
}

/// A plan that does not pin files (the default): a reply added to a thread
/// after the plan, and a reply edited, are read as they are by the
/// thread's partition; the merge is the single build of the changed corpus.
#[test]
fn files_added_after_a_plan_that_does_not_pin_them_are_read_as_they_are() {
    let tmp = tempfile::tempdir().unwrap();
    let (corpus, planned) = corpus(tmp.path());
    let plan = Plan::create(&corpus, &opts()).unwrap();
    assert!(!plan.pins_files());
    let all = in_plan_order(&corpus);
    for t in [&all[0], &all[all.len() / 2], &all[all.len() - 1]] {
        let r = replies(t);
        let last = r.last().unwrap();
        fs::copy(last, last.with_file_name("1.json")).unwrap();
        append(&r[0]);
    }
    let merged = partitioned(&plan, &corpus, 3, tmp.path()).unwrap();
    let single = tmp.path().join("changed");
    build(&corpus, &single, &opts(), &NoProgress).unwrap();
    assert!(merged == files(&single), "merged != the changed corpus");
    assert!(merged != planned, "the changes are in the cache");
}

/// A partition does not list another partition's thread folders, except
/// one with a planned thread below it: with a plan that lists every thread
/// folder (`--pin-files`), a thread nested in another partition's thread
/// is found by its own partition (and by the others as planned), and the
/// merge is the single build. A plan that takes threads in label folders
/// unlisted (the default) does not see it: the partition that lists the
/// outer thread refuses, naming the nested one and the remedy; the others
/// build.
#[test]
fn a_thread_nested_in_another_partitions_thread_is_found() {
    let tmp = tempfile::tempdir().unwrap();
    let (corpus, _) = corpus(tmp.path());
    let all = in_plan_order(&corpus);
    let (outer, inner) = (&all[0], &all[all.len() - 1]);
    let nested = outer.join("more").join(inner.file_name().unwrap());
    fs::create_dir_all(nested.parent().unwrap()).unwrap();
    fs::rename(inner, &nested).unwrap();
    let single = tmp.path().join("nested-single");
    build(&corpus, &single, &opts(), &NoProgress).unwrap();
    let c = socialctx::Cache::open(&single).unwrap();
    assert_eq!(socialctx::ThreadSource::len(&c), all.len());
    let plan = Plan::create(&corpus, &opts()).unwrap();
    assert_eq!(
        plan.len(),
        all.len() - 1,
        "the nested thread is not planned"
    );
    let rel = |p: &Path| {
        p.strip_prefix(&corpus)
            .unwrap()
            .to_string_lossy()
            .into_owned()
    };
    let (inner, outer) = (rel(&nested), rel(outer));
    let refused = stale_partitions(&plan, &corpus, &tmp.path().join("u"), |c| {
        c.contains(&inner) && c.contains(&outer) && c.contains("--pin-files")
    });
    assert_eq!(
        refused.len(),
        1,
        "refused by the outer thread's partition only"
    );
    let plan = Plan::create_pinned(&corpus, &opts()).unwrap();
    let merged = partitioned(&plan, &corpus, 3, &tmp.path().join("nested")).unwrap();
    assert!(merged == files(&single), "merged != the single build");
}

/// What discovery reports inside a thread's folder (here a folder named as
/// a side file). A plan that lists thread folders (`--pin-files`) holds
/// it, and the partition that reads the thread compares it, refusing when
/// it changed; the others do not list it and build. A plan that takes the
/// thread unlisted (the default) holds nothing of it: the thread's
/// partition reports it as it finds it, and the merge is the single build
/// of the corpus as it was read, before and after the change.
#[test]
fn a_report_inside_a_thread_is_compared_by_its_own_partition() {
    let tmp = tempfile::tempdir().unwrap();
    let (corpus, _) = corpus(tmp.path());
    let all = in_plan_order(&corpus);
    let t = &all[all.len() / 2];
    let odd = t.join("annotation.json");
    let rel = odd
        .strip_prefix(&corpus)
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let make_odd = || {
        let _ = fs::remove_file(&odd);
        fs::create_dir(&odd).unwrap();
    };
    let all_parts = |plan: &Plan, tag: &str| -> Vec<PathBuf> {
        (0..3)
            .map(|i| {
                let out = tmp.path().join(format!("{tag}{i}"));
                build_partition(&corpus, plan, (i, 3), &out, 1, &NoProgress).unwrap();
                out
            })
            .collect()
    };
    let merged_is_single = |parts: &[PathBuf], tag: &str| {
        let (m, s) = (
            tmp.path().join(format!("{tag}-m")),
            tmp.path().join(format!("{tag}-s")),
        );
        merge(&m, parts).unwrap();
        build(&corpus, &s, &opts(), &NoProgress).unwrap();
        assert!(files(&m) == files(&s), "{tag}: merged != the single build");
        fs::read_to_string(m.join("report.jsonl")).unwrap()
    };

    make_odd();
    let plan = Plan::create(&corpus, &opts()).unwrap();
    let json = serde_json::to_string(&plan).unwrap();
    assert!(!json.contains(&rel), "an unlisted thread: {json}");
    let report = merged_is_single(&all_parts(&plan, "u"), "unlisted, odd");
    assert!(report.contains(&rel), "{report}");
    fs::remove_dir(&odd).unwrap();
    let report = merged_is_single(&all_parts(&plan, "v"), "unlisted, fixed");
    assert!(!report.contains(&rel), "{report}");

    make_odd();
    let plan = Plan::create_pinned(&corpus, &opts()).unwrap();
    let json = serde_json::to_string(&plan).unwrap();
    assert!(json.contains(&rel), "the plan reports {rel}: {json}");
    let owner = (0..3)
        .find(|&i| plan.partition_range(i, 3).contains(&(all.len() / 2)))
        .unwrap();
    // As planned: every partition builds.
    merged_is_single(&all_parts(&plan, "a"), "listed, odd");
    fs::remove_dir(&odd).unwrap();
    for i in 0..3 {
        let out = tmp.path().join(format!("b{i}"));
        match build_partition(&corpus, &plan, (i, 3), &out, 1, &NoProgress) {
            Ok(_) => assert_ne!(i, owner, "the owner built"),
            Err(BuildError::PlanStale { changed, .. }) => {
                assert_eq!(i, owner);
                assert!(changed.iter().any(|c| c.contains(&rel)), "{changed:?}");
            }
            Err(e) => panic!("{e}"),
        }
    }
}

/// A rumour thread's source folder holding a second source file that
/// sorts after `<id>.json` (which a build reads: the last name) with
/// another author: the plan, which read `<id>.json` without listing the
/// folder, has another rumour entry than the build's rule gives; the
/// partition that lists the thread refuses, naming it, and the others
/// build. A plan that lists threads (`--pin-files`) reads it as a build
/// does, and its merge is the single build.
#[test]
fn a_wrong_guess_of_a_rumour_source_is_refused_by_its_partition() {
    let tmp = tempfile::tempdir().unwrap();
    let corpus = tmp.path().join("corpus");
    gen_corpus::generate(&corpus, &gen_corpus::Options::new(30)).unwrap();
    let all = in_plan_order(&corpus);
    let t = all
        .iter()
        .find(|t| {
            t.parent().unwrap().ends_with("rumours")
                && !t.parent().unwrap().ends_with("non-rumours")
        })
        .expect("a rumour thread");
    let id = t.file_name().unwrap().to_string_lossy().into_owned();
    let src = t.join("source-tweets").join(format!("{id}.json"));
    let text = fs::read_to_string(&src).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let author = v["user"]["id_str"].as_str().unwrap().to_owned();
    fs::write(
        t.join("source-tweets/zz.json"),
        text.replace(&format!("\"{author}\""), "\"777\""),
    )
    .unwrap();
    let single = tmp.path().join("single");
    build(&corpus, &single, &opts(), &NoProgress).unwrap();

    let plan = Plan::create(&corpus, &opts()).unwrap();
    let k = all.iter().position(|x| x == t).unwrap();
    let rel = t
        .strip_prefix(&corpus)
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let refused = stale_partitions(&plan, &corpus, tmp.path(), |c| {
        c.contains(&rel) && c.contains("rumour-index entry")
    });
    let owner = (0..3).find(|&i| plan.partition_range(i, 3).contains(&k));
    assert_eq!(refused, Vec::from_iter(owner), "refused by its owner only");
    let pinned = Plan::create_pinned(&corpus, &opts()).unwrap();
    let got = partitioned(&pinned, &corpus, 3, &tmp.path().join("pinned")).unwrap();
    assert!(got == files(&single), "merged != the single build");
}

/// All-digit folders in label folders that are no threads (a year folder
/// holding threads, an empty one) are listed by the plan as any folder is
/// (it takes a folder unlisted only where it has a source folder), so the
/// threads below them are planned; and a corpus whose root is a label
/// folder (threads one folder deep: their label and event lie outside
/// the corpus and are stored in the plan) merges to the single build,
/// also when the partitions read a copy of it at another path (under
/// folders of the same names).
#[test]
fn folders_that_are_not_threads_and_shallow_roots_plan_as_a_build_reads_them() {
    let tmp = tempfile::tempdir().unwrap();
    let corpus = tmp.path().join("corpus");
    gen_corpus::generate(&corpus, &gen_corpus::Options::new(30)).unwrap();
    let all = in_plan_order(&corpus);
    let mut moved = 0;
    for t in all.iter().step_by(3) {
        let year = t.parent().unwrap().join("2015");
        fs::create_dir_all(&year).unwrap();
        fs::rename(t, year.join(t.file_name().unwrap())).unwrap();
        moved += 1;
    }
    fs::create_dir_all(all[1].parent().unwrap().join("2016")).unwrap();
    let check = |root: &Path, tag: &str, threads: usize| {
        let single = tmp.path().join(format!("{tag}-single"));
        build(root, &single, &opts(), &NoProgress).unwrap();
        let plan = Plan::create(root, &opts()).unwrap();
        assert_eq!(plan.len(), threads, "{tag}");
        for n in [1, 3] {
            let got = partitioned(&plan, root, n, &tmp.path().join(format!("{tag}-{n}"))).unwrap();
            assert!(
                got == files(&single),
                "{tag}, {n} partitions: merged != single"
            );
        }
        // The plan saved and loaded; the partitions on a copy elsewhere.
        let file = tmp.path().join(format!("{tag}.json"));
        plan.save(&file).unwrap();
        let loaded = Plan::load(&file).unwrap();
        // Ending in the same two folders: a thread less than three
        // folders deep is labelled by folders above the corpus root.
        let mut copy = tmp.path().join(format!("{tag}-copy"));
        for up in [2, 1] {
            copy.push(root.components().rev().nth(up - 1).unwrap());
        }
        copy_tree(root, &copy);
        let got = partitioned(&loaded, &copy, 2, &tmp.path().join(format!("{tag}-c"))).unwrap();
        assert!(got == files(&single), "{tag}, a copy: merged != single");
        fs::read_to_string(&file).unwrap()
    };
    check(&corpus, "years", all.len());
    assert!(moved > 0);
    // A label folder as the corpus root: label and event are stored.
    let label = all
        .iter()
        .map(|t| t.parent().unwrap())
        .find(|p| p.ends_with("rumours") && !p.ends_with("non-rumours"))
        .unwrap();
    let n = fs::read_dir(label)
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().join("source-tweets").is_dir())
        .count()
        + fs::read_dir(label.join("2015"))
            .map(|d| d.count())
            .unwrap_or(0);
    let json = check(label, "label-root", n);
    assert!(json.contains("\"label\":\"rumours\""), "{json}");
    assert!(json.contains("\"event\":"), "{json}");
}

/// A source id found in two places (the same thread in two events, or
/// `000123` beside `123`): a build keeps the first by path and reports the
/// others, and so does a plan. Every partition takes a reported duplicate
/// of another partition's thread as the plan says (that partition lists
/// both and compares the report), so the merge is the single build, with
/// either kind of plan; a duplicate made after the plan is refused.
#[test]
fn duplicate_source_ids_merge_to_the_single_build() {
    let tmp = tempfile::tempdir().unwrap();
    let corpus = tmp.path().join("corpus");
    gen_corpus::generate(&corpus, &gen_corpus::Options::new(30)).unwrap();
    let all = in_plan_order(&corpus);
    let other_event = |t: &Path| -> PathBuf {
        let label = t.parent().unwrap();
        let event = label.parent().unwrap();
        corpus
            .join(format!(
                "{}-again",
                event.file_name().unwrap().to_string_lossy()
            ))
            .join(label.file_name().unwrap())
            .join(t.file_name().unwrap())
    };
    // Duplicates of a thread in each third, one also under a zero-padded name.
    for k in [1, all.len() / 2, all.len() - 2] {
        copy_tree(&all[k], &other_event(&all[k]));
    }
    let padded = all[3].with_file_name(format!(
        "000{}",
        all[3].file_name().unwrap().to_string_lossy()
    ));
    copy_tree(&all[3], &padded);
    let single = tmp.path().join("single");
    build(&corpus, &single, &opts(), &NoProgress).unwrap();
    let report = fs::read_to_string(single.join("report.jsonl")).unwrap();
    assert_eq!(report.matches("duplicate source id").count(), 4, "{report}");
    for (tag, plan) in [
        ("unlisted", Plan::create(&corpus, &opts()).unwrap()),
        ("pinned", Plan::create_pinned(&corpus, &opts()).unwrap()),
    ] {
        for n in [2, 3] {
            let got =
                partitioned(&plan, &corpus, n, &tmp.path().join(format!("{tag}{n}"))).unwrap();
            assert!(
                got == files(&single),
                "{tag}, {n} partitions: merged != single"
            );
        }
    }
    // A duplicate made after the plan: refused by every partition.
    let plan = Plan::create(&corpus, &opts()).unwrap();
    let late = other_event(&all[all.len() / 3]);
    copy_tree(&all[all.len() / 3], &late);
    let rel = late
        .strip_prefix(&corpus)
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let refused = stale_partitions(&plan, &corpus, &tmp.path().join("late"), |c| {
        c.contains(&rel)
    });
    assert_eq!(refused, [0, 1, 2]);
}

/// A duplicate inside another partition's thread folder (a plan that lists
/// threads), or inside another id's duplicate, and a link named by a planned
/// id: the partition reading the folder above lists it, so it is never
/// taken unseen. As planned, removed after the plan, or with a thread made
/// inside it, every partitioned build either merges to the single build of
/// the corpus as read or is refused naming the folder.
#[test]
fn a_duplicate_inside_another_partitions_thread_is_never_taken_unseen() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("base");
    gen_corpus::generate(&base, &gen_corpus::Options::new(30)).unwrap();
    let all: Vec<PathBuf> = in_plan_order(&base);
    let name = |t: &PathBuf| t.file_name().unwrap().to_owned();
    type Place = fn(&Path, &[PathBuf]) -> (PathBuf, PathBuf);
    let places: [(&str, Place); 3] = [
        // The first thread's copy inside the last thread's folder.
        ("in a thread", |c, all| {
            (
                all[0].clone(),
                c.join(
                    all[all.len() - 1]
                        .strip_prefix(c.parent().unwrap().join("base"))
                        .unwrap(),
                )
                .join("more"),
            )
        }),
        // The middle thread's copy inside a copy of the last one, itself a
        // duplicate in another event.
        ("in a duplicate", |c, all| {
            let last = all[all.len() - 1]
                .strip_prefix(c.parent().unwrap().join("base"))
                .unwrap();
            (
                all[all.len() / 2].clone(),
                c.join("zz-again").join(last).join("more"),
            )
        }),
        // No copy: a link named by the first thread's id.
        ("a link", |c, _| (PathBuf::new(), c.join("zz-links"))),
    ];
    for (what, place) in places {
        for step in ["as planned", "removed", "a thread inside"] {
            let corpus = tmp.path().join("corpus");
            let _ = fs::remove_dir_all(&corpus);
            copy_tree(&base, &corpus);
            let (copied, into) = place(&corpus, &all);
            let dup = if copied.as_os_str().is_empty() {
                fs::create_dir_all(&into).unwrap();
                let link = into.join(name(&all[0]));
                std::os::unix::fs::symlink(corpus.join(all[0].strip_prefix(&base).unwrap()), &link)
                    .unwrap();
                link
            } else {
                if what == "in a duplicate" {
                    let last = &all[all.len() - 1];
                    copy_tree(
                        last,
                        &corpus
                            .join("zz-again")
                            .join(last.strip_prefix(&base).unwrap()),
                    );
                }
                let dup = into.join(name(&copied));
                copy_tree(&copied, &dup);
                dup
            };
            let rel = dup
                .strip_prefix(&corpus)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            let plan = Plan::create_pinned(&corpus, &opts()).unwrap();
            assert!(
                serde_json::to_string(&plan).unwrap().contains(&rel),
                "{what}: reported"
            );
            match step {
                "removed" if what == "a link" => fs::remove_file(&dup).unwrap(),
                "removed" => fs::remove_dir_all(&dup).unwrap(),
                "a thread inside" if what != "a link" => {
                    let inner = dup.join("y").join("600000000000000001");
                    copy_tree(&all[1], &inner);
                    let src = inner.join("source-tweets");
                    let f = fs::read_dir(&src).unwrap().next().unwrap().unwrap().path();
                    fs::rename(f, src.join("600000000000000001.json")).unwrap();
                }
                _ => {}
            }
            let out = tmp.path().join("out");
            let _ = fs::remove_dir_all(&out);
            match partitioned(&plan, &corpus, 3, &out) {
                Ok(got) => {
                    let single = tmp.path().join("single");
                    let _ = fs::remove_dir_all(&single);
                    build(&corpus, &single, &opts(), &NoProgress).unwrap();
                    assert!(
                        got == files(&single),
                        "{what}, {step}: merged != the single build"
                    );
                }
                Err(BuildError::PlanStale { changed, .. }) => assert!(
                    changed.iter().any(|c| c.contains(&rel)),
                    "{what}, {step}: {changed:?}"
                ),
                Err(e) => panic!("{what}, {step}: {e}"),
            }
        }
    }
}
