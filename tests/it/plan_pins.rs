//! A plan pins the corpus's listing and rumour index (issue 35, defect 1;
//! issue 47: a listing, not every file's metadata): partitions of a corpus
//! whose listing changed since planning, or whose rumour sources did, are
//! refused, naming what changed, so a merge is never a cache of neither
//! the old corpus nor the new one; and a property test: random changes
//! between planning and the partition builds (and upgrades of the library:
//! issue 42), after which the merge either is refused or equals a full
//! build, by this library, of the corpus as its partitions read it (each
//! thread as it was when its own partition read it), never a mix.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use crate::common::corpus::{by_source_id as in_plan_order, copy_tree, thread_dirs};
use crate::common::example;
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};
use socialctx::{BuildError, BuildOptions, NoProgress, Plan, build, build_partition, merge};

fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let bytes = if e.path().is_file() {
                fs::read(e.path()).unwrap()
            } else {
                Vec::new()
            };
            (e.file_name().into_string().unwrap(), bytes)
        })
        .collect()
}

/// The JSON files of a thread (source first, then reactions), sorted.
fn tweet_files(thread: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for sub in ["source-tweets", "source-tweet", "reactions"] {
        if let Ok(rd) = fs::read_dir(thread.join(sub)) {
            let mut v: Vec<_> = rd.map(|e| e.unwrap().path()).collect();
            v.sort();
            out.extend(v);
        }
    }
    out
}

fn opts() -> BuildOptions {
    BuildOptions::default().threads(2).shard_bytes(64 << 10)
}

/// The source tweet's own `created_at` (its last one: the user object's
/// comes first) moved a year back: the same size, another rumour-source
/// time.
fn edit_created_at(file: &Path) {
    let text = fs::read_to_string(file).unwrap();
    let at = text.rfind("\"created_at\":\"").unwrap();
    let end = at + text[at..].find(" +0000 ").unwrap() + " +0000 ".len();
    let year: u32 = text[end..end + 4].parse().unwrap();
    let edited = format!("{}{}{}", &text[..end], year - 1, &text[end + 4..]);
    fs::write(file, edited).unwrap();
}

fn rel(corpus: &Path, p: &Path) -> String {
    p.strip_prefix(corpus)
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

/// Each change of the issue, made after planning: a partition build
/// is refused with `PlanStale`, naming the changed thread.
#[test]
fn partitions_of_a_corpus_changed_since_planning_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("base");
    gen_corpus::generate(&base, &gen_corpus::Options::new(40)).unwrap();
    let mut donor_opts = gen_corpus::Options::new(3);
    donor_opts.seed = 99;
    let donor = tmp.path().join("donor");
    gen_corpus::generate(&donor, &donor_opts).unwrap();

    type Change = fn(&Path, &Path) -> String;
    let changes: Vec<(&str, Change)> = vec![
        ("a rumour source's created_at edited", |c, _| {
            let t = thread_dirs(c)
                .into_iter()
                .find(|t| t.to_string_lossy().contains("/rumours/"))
                .unwrap();
            edit_created_at(&tweet_files(&t)[0]);
            rel(c, &t)
        }),
        ("a rumour thread deleted", |c, _| {
            let t = thread_dirs(c)
                .into_iter()
                .find(|t| t.to_string_lossy().contains("/rumours/"))
                .unwrap();
            fs::remove_dir_all(&t).unwrap();
            rel(c, &t)
        }),
        ("a rumour thread moved to non-rumours/", |c, _| {
            let t = thread_dirs(c)
                .into_iter()
                .find(|t| t.to_string_lossy().contains("/rumours/"))
                .unwrap();
            let to = t
                .parent()
                .unwrap()
                .with_file_name("non-rumours")
                .join(t.file_name().unwrap());
            fs::create_dir_all(to.parent().unwrap()).unwrap();
            fs::rename(&t, &to).unwrap();
            rel(c, &t)
        }),
        ("a thread added", |c, donor| {
            let d = &thread_dirs(donor)[0];
            let to = c.join(rel(donor, d));
            copy_tree(d, &to);
            rel(c, &to)
        }),
        // Its content is read as it is (issue 47): a file added is a
        // listing change of its thread in a plan that pins files.
        ("a reply added", |c, _| {
            let t = thread_dirs(c).into_iter().last().unwrap();
            let f = tweet_files(&t).into_iter().last().unwrap();
            fs::copy(&f, f.with_file_name("1.json")).unwrap();
            rel(c, &t)
        }),
    ];
    for (what, change, pinned) in changes
        .iter()
        .flat_map(|(w, c)| [(*w, *c, false), (*w, *c, true)])
    {
        let corpus = tmp.path().join("corpus");
        let _ = fs::remove_dir_all(&corpus);
        copy_tree(&base, &corpus);
        let plan = if pinned {
            Plan::create_pinned(&corpus, &opts()).unwrap()
        } else {
            Plan::create(&corpus, &opts()).unwrap()
        };
        let changed = change(&corpus, &donor);
        let mut parts = Vec::new();
        for i in 0..3 {
            let out = tmp.path().join(format!("part-{i}"));
            let _ = fs::remove_dir_all(&out);
            match build_partition(&corpus, &plan, (i, 3), &out, 1, &NoProgress) {
                Err(BuildError::PlanStale { changed: paths, .. }) => {
                    assert!(
                        paths.iter().any(|p| p.contains(&changed)),
                        "{what}: {changed} not among {paths:?}"
                    );
                    let msg = BuildError::PlanStale {
                        corpus: corpus.clone(),
                        changed: paths,
                    }
                    .to_string();
                    assert!(
                        msg.contains(&changed) && msg.contains("make the plan again"),
                        "{msg}"
                    );
                    assert!(!out.exists(), "{what}: partition {i} published");
                }
                Ok(_) => parts.push(out),
                Err(e) => panic!("{what}: partition {i}: {e}"),
            }
        }
        // A partition checks the listing of threads (every partition
        // refuses a thread added, gone or moved) and only its own threads'
        // files and rumour entries (the one holding a thread with a file
        // added or a rumour source edited refuses): either way no full set
        // to merge (before issue 35's fix: rc 0, user_reliability of the
        // old index).
        // A reply added to a plan that does not pin files is read as it is.
        let listing = !what.contains("edited") && !what.contains("reply added");
        let built = match (listing, what.contains("reply added") && !pinned) {
            (_, true) => 3,
            (true, _) => 0,
            (false, _) => 2,
        };
        assert_eq!(parts.len(), built, "{what} (pinned: {pinned})");
    }

    // A plan of corpus A used on corpus B.
    let plan = Plan::create(&base, &opts()).unwrap();
    let err = build_partition(&donor, &plan, (0, 3), tmp.path().join("b0"), 1, &NoProgress)
        .expect_err("a plan of another corpus");
    assert!(matches!(err, BuildError::PlanStale { .. }), "{err}");
}

/// Options given to `--partition` that differ from the plan's are refused
/// (issue 35, item 5); the plan's own values, or none, are accepted.
#[test]
fn partition_options_that_differ_from_the_plan_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let corpus = tmp.path().join("corpus");
    gen_corpus::generate(&corpus, &gen_corpus::Options::new(6)).unwrap();
    let plan = tmp.path().join("plan.json");
    let run = |args: &[&str]| {
        let o = example("precache")
            .arg(&corpus)
            .arg(tmp.path().join("p"))
            .args(["-q", "--plan"])
            .arg(&plan)
            .args(args)
            .output()
            .unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    assert_eq!(run(&["--shard-mib", "2"]).0, Some(0));
    for (args, names) in [
        (&["--no-extended"][..], "--no-extended"),
        (&["--max-file-bytes", "1000"][..], "--max-file-bytes"),
        (&["--shard-mib", "3"][..], "--shard-mib"),
        (&["--strict"][..], "--strict"),
    ] {
        let mut a = vec!["--partition", "0/2"];
        a.extend_from_slice(args);
        let (code, err) = run(&a);
        assert_eq!(code, Some(1), "{args:?}: {err}");
        assert!(
            err.contains(names) && err.contains("plan"),
            "{args:?}: {err}"
        );
        assert!(!tmp.path().join("p").exists());
    }
    let (code, err) = run(&["--partition", "0/2", "--shard-mib", "2"]);
    assert_eq!(code, Some(0), "{err}");
}

#[derive(Clone, Debug)]
enum Change {
    /// A tweet file rewritten with one more byte.
    Edit {
        thread: usize,
        file: usize,
    },
    /// A source tweet's time moved (same size), its mtime put back.
    EditSameSize {
        thread: usize,
    },
    /// A donor thread copied in.
    Add {
        donor: usize,
    },
    Delete {
        thread: usize,
    },
    /// Between rumours/ and non-rumours/.
    Move {
        thread: usize,
    },
    /// A reply copied in under a new name.
    AddReply {
        thread: usize,
    },
    /// Its reactions folder removed (a change discovery sees).
    Empty {
        thread: usize,
    },
    /// The mtime set to another time, the bytes unchanged.
    Touch {
        thread: usize,
        file: usize,
    },
    /// The code changed (issue 42): the library is upgraded, so the plan
    /// and the partitions made so far are of another definition (simulated
    /// in this process by editing the digest they record, see `upgrade`).
    Upgrade,
}

fn change() -> impl Strategy<Value = Change> {
    prop_oneof![
        (any::<usize>(), any::<usize>()).prop_map(|(thread, file)| Change::Edit { thread, file }),
        any::<usize>().prop_map(|thread| Change::EditSameSize { thread }),
        any::<usize>().prop_map(|donor| Change::Add { donor }),
        any::<usize>().prop_map(|thread| Change::Delete { thread }),
        any::<usize>().prop_map(|thread| Change::Move { thread }),
        (any::<usize>(), any::<usize>()).prop_map(|(thread, file)| Change::Touch { thread, file }),
        any::<usize>().prop_map(|thread| Change::AddReply { thread }),
        any::<usize>().prop_map(|thread| Change::Empty { thread }),
        Just(Change::Upgrade),
    ]
}

/// The plan and the partitions `parts` as an older version of the library
/// made them: their recorded definition digest another (each file sealed
/// again, so that only the definition check can refuse them).
fn upgrade(plan: &mut Plan, parts: &[PathBuf]) {
    const OLDER: &str = "00000000000000a1";
    let mut json = serde_json::to_value(&*plan).unwrap();
    json["definition"] = OLDER.into();
    let sealed = Plan::reseal(&serde_json::to_vec(&json).unwrap()).unwrap();
    *plan = serde_json::from_slice(&sealed).unwrap();
    for p in parts {
        let mut m = serde_json::to_value(socialctx::ThreadSource::manifest(
            &socialctx::Cache::open(p).unwrap(),
        ))
        .unwrap();
        m["definition"] = OLDER.into();
        crate::common::write_manifest(&p.join("manifest.json"), m);
    }
}

fn apply(c: &Change, corpus: &Path, donor: &Path) {
    let threads = thread_dirs(corpus);
    let pick = |k: usize| threads[k % threads.len()].clone();
    match *c {
        Change::Edit { thread, file } => {
            let files = tweet_files(&pick(thread));
            let f = &files[file % files.len()];
            let mut bytes = fs::read(f).unwrap();
            bytes.push(b'\n');
            fs::write(f, bytes).unwrap();
        }
        Change::EditSameSize { thread } => {
            let f = &tweet_files(&pick(thread))[0];
            let mtime = fs::metadata(f).unwrap().modified().unwrap();
            edit_created_at(f);
            fs::File::options()
                .write(true)
                .open(f)
                .unwrap()
                .set_modified(mtime)
                .unwrap();
        }
        Change::Add { donor: k } => {
            let donors = thread_dirs(donor);
            let d = &donors[k % donors.len()];
            let to = corpus.join(d.strip_prefix(donor).unwrap());
            if !to.exists() {
                copy_tree(d, &to);
            }
        }
        Change::Delete { thread } if threads.len() > 1 => {
            fs::remove_dir_all(pick(thread)).unwrap();
        }
        Change::Delete { .. } => {}
        Change::Move { thread } => {
            let t = pick(thread);
            let folder = t.parent().unwrap();
            let other = if folder.ends_with("non-rumours") {
                "rumours"
            } else {
                "non-rumours"
            };
            let to = folder.with_file_name(other).join(t.file_name().unwrap());
            fs::create_dir_all(to.parent().unwrap()).unwrap();
            fs::rename(&t, &to).unwrap();
        }
        Change::AddReply { thread } => {
            let t = pick(thread);
            let f = tweet_files(&t).pop().unwrap();
            let to = t.join("reactions").join("1.json");
            fs::create_dir_all(to.parent().unwrap()).unwrap();
            if !to.exists() {
                fs::copy(&f, &to).unwrap();
            }
        }
        Change::Empty { thread } => {
            let _ = fs::remove_dir_all(pick(thread).join("reactions"));
        }
        // The runner's own (`upgrade`): nothing in the corpus changes.
        Change::Upgrade => {}
        Change::Touch { thread, file } => {
            let files = tweet_files(&pick(thread));
            let f = &files[file % files.len()];
            let t =
                std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_400_000_000);
            fs::File::options()
                .write(true)
                .open(f)
                .unwrap()
                .set_modified(t)
                .unwrap();
        }
    }
}

/// Random changes before the partition builds and between them; the merge
/// is refused or equals a full build of the corpus as its partitions read
/// it: each thread as it was when its own partition ran (the model copies
/// the corpus before each partition and takes that partition's threads
/// from its copy). A content edit after the plan is read as it is; a
/// change to a thread whose partition was already built is not seen, and
/// the merge holds that thread as its partition read it, never a mix (an
/// index of one state and sources of another: a rumour source whose entry
/// changed is refused by its partition). A fixed budget and seed
/// (`PLAN_PROPTEST_SEED` to try another), printed on failure with the
/// shrunk case.
#[test]
fn merge_refuses_or_equals_a_full_build_of_the_planned_corpus() {
    let seed: u64 = std::env::var("PLAN_PROPTEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(35);
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("base");
    gen_corpus::generate(&base, &gen_corpus::Options::new(10)).unwrap();
    let mut donor_opts = gen_corpus::Options::new(3);
    donor_opts.seed = 7;
    let donor = tmp.path().join("donor");
    gen_corpus::generate(&donor, &donor_opts).unwrap();

    let mut seed_bytes = [0u8; 32];
    seed_bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let config = Config {
        cases: 24,
        failure_persistence: None,
        ..Config::default()
    };
    let mut runner = TestRunner::new_with_rng(
        config,
        TestRng::from_seed(RngAlgorithm::ChaCha, &seed_bytes),
    );
    let strategy = (
        proptest::collection::vec(change(), 0..3),
        proptest::collection::vec(change(), 0..2),
        1usize..4,
        // An upgrade between the partition builds and the merge.
        proptest::bool::weighted(0.2),
        // A plan that pins files, or one that does not.
        proptest::bool::ANY,
    );
    let (refused, merged) = (std::cell::Cell::new(0u32), std::cell::Cell::new(0u32));
    let result = runner.run(
        &strategy,
        |(before, between, n, upgrade_before_merge, pin)| {
            let corpus = tmp.path().join("corpus");
            let _ = fs::remove_dir_all(&corpus);
            copy_tree(&base, &corpus);
            let mut plan = if pin {
                Plan::create_pinned(&corpus, &opts()).unwrap()
            } else {
                Plan::create(&corpus, &opts()).unwrap()
            };
            let mut parts = Vec::new();
            // Whether the plan or a partition is of another definition: then
            // nothing may merge (the values would be equal here, as the
            // simulation edits only the digest, so the bytes cannot tell).
            let has_upgrade = |v: &[Change]| v.iter().any(|c| matches!(c, Change::Upgrade));
            let upgraded =
                upgrade_before_merge || has_upgrade(&before) || (n > 1 && has_upgrade(&between));
            for c in &before {
                apply(c, &corpus, &donor);
                if let Change::Upgrade = c {
                    upgrade(&mut plan, &parts);
                }
            }
            let mut stale = false;
            // The corpus as each partition found it.
            let mut seen: Vec<PathBuf> = Vec::new();
            for i in 0..n {
                if i == 1 {
                    for c in &between {
                        apply(c, &corpus, &donor);
                        if let Change::Upgrade = c {
                            upgrade(&mut plan, &parts);
                        }
                    }
                }
                let copy = tmp.path().join(format!("seen-{i}"));
                let _ = fs::remove_dir_all(&copy);
                copy_tree(&corpus, &copy);
                seen.push(copy);
                let out = tmp.path().join(format!("part-{i}"));
                let _ = fs::remove_dir_all(&out);
                match build_partition(&corpus, &plan, (i, n), &out, 1, &NoProgress) {
                    Ok(_) => parts.push(out),
                    Err(BuildError::PlanStale { .. } | BuildError::DefinitionChanged { .. }) => {
                        stale = true
                    }
                    Err(e) => return Err(TestCaseError::fail(format!("partition {i}: {e}"))),
                }
            }
            let out = tmp.path().join("merged");
            let _ = fs::remove_dir_all(&out);
            if stale {
                refused.set(refused.get() + 1);
                return Ok(());
            }
            if upgrade_before_merge {
                upgrade(&mut plan, &parts);
            }
            match merge(&out, &parts) {
                Err(BuildError::BadPartition { .. }) => {
                    refused.set(refused.get() + 1);
                    Ok(())
                }
                Err(e) => Err(TestCaseError::fail(format!("merge: {e}"))),
                Ok(_) => {
                    prop_assert!(!upgraded, "artifacts of another definition merged");
                    // Every partition found the planned listing: the same
                    // threads in each copy, in source-id order; partition i's
                    // threads from copy i.
                    let model = tmp.path().join("model");
                    let _ = fs::remove_dir_all(&model);
                    copy_tree(&seen[n - 1], &model);
                    for (i, copy) in seen.iter().enumerate() {
                        let threads = in_plan_order(copy);
                        for t in &threads[plan.partition_range(i, n)] {
                            let to = model.join(t.strip_prefix(copy).unwrap());
                            fs::remove_dir_all(&to).unwrap();
                            copy_tree(t, &to);
                        }
                    }
                    let single = tmp.path().join("single");
                    let _ = fs::remove_dir_all(&single);
                    build(&model, &single, &opts(), &NoProgress).unwrap();
                    let (m, f) = (files(&out), files(&single));
                    let names = |x: &BTreeMap<String, Vec<u8>>| {
                        x.iter()
                            .map(|(n, b)| format!("{n} ({} bytes)", b.len()))
                            .collect::<Vec<_>>()
                    };
                    prop_assert!(
                        m == f,
                        "merged {:?} != a full build of the corpus as read {:?}",
                        names(&m),
                        names(&f)
                    );
                    merged.set(merged.get() + 1);
                    Ok(())
                }
            }
        },
    );
    if let Err(e) = result {
        panic!("seed {seed} (PLAN_PROPTEST_SEED={seed} to rerun): {e}");
    }
    let (refused, merged) = (refused.get(), merged.get());
    eprintln!("seed {seed}: {refused} refused, {merged} merged equal to the corpus as read");
    assert!(
        refused > 0 && merged > 0,
        "both outcomes seen ({refused}, {merged})"
    );
}

/// `merge OUT p0 p1 ...` with OUT one of the inputs (or a link to one) is
/// refused and the partition kept (issue 35, item 6: it was replaced).
#[test]
fn merging_into_one_of_the_inputs_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let corpus = tmp.path().join("corpus");
    gen_corpus::generate(&corpus, &gen_corpus::Options::new(6)).unwrap();
    let plan = Plan::create(&corpus, &opts()).unwrap();
    let parts: Vec<PathBuf> = (0..2)
        .map(|i| {
            let out = tmp.path().join(format!("part-{i}"));
            build_partition(&corpus, &plan, (i, 2), &out, 1, &NoProgress).unwrap();
            out
        })
        .collect();
    let before = files(&parts[1]);
    let link = tmp.path().join("link");
    std::os::unix::fs::symlink(&parts[1], &link).unwrap();
    for out in [&parts[1], &link] {
        match merge(out, &parts) {
            Err(BuildError::BadPartition { reason, .. }) => {
                assert!(reason.contains("merge into another directory"), "{reason}")
            }
            other => panic!("{}: {other:?}", out.display()),
        }
        assert!(files(&parts[1]) == before, "the partition was replaced");
    }
    merge(tmp.path().join("merged"), &parts).unwrap();
}
