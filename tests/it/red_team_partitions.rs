//! Red team of issue 47 (partitions that list only their own threads):
//! sweeps of corpus changes made after the plan (before every partition,
//! or before partition k) where a merge must be refused or equal the
//! single build of the corpus as its partitions read it (never a mix, a
//! panic, or output left behind), and the cases found on the way. The
//! sweeps run a reduced matrix; `RED_FULL=1` runs all counts and feature
//! sets (minutes), `RED_ALL=1 -- --nocapture` prints every case.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use crate::common::corpus::{by_source_id as by_id, copy_tree, thread_dirs};
use socialctx::{BuildOptions, NoProgress, Plan, build, build_partition, merge};

fn opts() -> BuildOptions {
    BuildOptions::default().threads(1).shard_bytes(64 << 10)
}

/// Every file under a cache directory, by relative path.
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(root: &Path, d: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for e in fs::read_dir(d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
                out.insert(rel, fs::read(&p).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

/// A merged cache's files, or why the merge failed.
type Merged = Result<BTreeMap<String, Vec<u8>>, String>;

/// Builds every partition of `plan` (`count` of them) and merges them:
/// per partition, its error if any; the merged cache's files if all built.
fn partitions(
    corpus: &Path,
    plan: &Plan,
    count: usize,
    tmp: &Path,
) -> (Vec<Option<String>>, Option<Merged>) {
    let mut errs = Vec::new();
    let mut parts = Vec::new();
    for i in 0..count {
        let out = tmp.join(format!("part{i}of{count}"));
        let _ = fs::remove_dir_all(&out);
        match build_partition(corpus, plan, (i, count), &out, 1, &NoProgress) {
            Ok(_) => errs.push(None),
            Err(e) => {
                assert!(!out.exists(), "partition {i} refused but left {out:?}");
                errs.push(Some(e.to_string()))
            }
        }
        parts.push(out);
    }
    if errs.iter().any(Option::is_some) {
        return (errs, None);
    }
    let merged = tmp.join(format!("merged{count}"));
    let _ = fs::remove_dir_all(&merged);
    let m = merge(&merged, &parts)
        .map(|_| files(&merged))
        .map_err(|e| e.to_string());
    (errs, Some(m))
}

fn single(
    corpus: &Path,
    tmp: &Path,
    o: &BuildOptions,
) -> Result<BTreeMap<String, Vec<u8>>, String> {
    let out = tmp.join("single");
    let _ = fs::remove_dir_all(&out);
    build(corpus, &out, o, &NoProgress)
        .map(|_| files(&out))
        .map_err(|e| e.to_string())
}

type Mutation = (&'static str, fn(&Path, &[PathBuf]));

fn mv(a: &Path, b: &Path) {
    fs::create_dir_all(b.parent().unwrap()).unwrap();
    fs::rename(a, b).unwrap();
}

fn set_author(thread: &Path, id: &str) {
    let src = fs::read_dir(thread.join("source-tweets").as_path())
        .or_else(|_| fs::read_dir(thread.join("source-tweet")))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let mut v: serde_json::Value = serde_json::from_slice(&fs::read(&src).unwrap()).unwrap();
    v["user"]["id_str"] = serde_json::Value::String(id.into());
    v["user"]["id"] = serde_json::json!(id.parse::<u64>().unwrap());
    fs::write(&src, serde_json::to_vec(&v).unwrap()).unwrap();
}

fn rumours(t: &[PathBuf]) -> Vec<&PathBuf> {
    t.iter()
        .filter(|t| t.parent().unwrap().file_name().unwrap() == "rumours")
        .collect()
}

fn author(thread: &Path) -> String {
    let src = fs::read_dir(thread.join("source-tweets"))
        .or_else(|_| fs::read_dir(thread.join("source-tweet")))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let v: serde_json::Value = serde_json::from_slice(&fs::read(&src).unwrap()).unwrap();
    v["user"]["id_str"].as_str().unwrap().to_owned()
}

const MUTATIONS: &[Mutation] = &[
    ("none", |_, _| {}),
    ("new thread nested in first thread", |_, t| {
        copy_tree(&t[t.len() - 1], &t[0].join("extra").join("9"));
    }),
    ("new thread nested in last thread", |_, t| {
        copy_tree(&t[1], &t[t.len() - 1].join("x/y").join("1"));
    }),
    ("first thread moved into last thread", |_, t| {
        mv(
            &t[0],
            &t[t.len() - 1].join("sub").join(t[0].file_name().unwrap()),
        );
    }),
    ("last thread moved into first thread", |_, t| {
        let n = t.len() - 1;
        mv(&t[n], &t[0].join("sub").join(t[n].file_name().unwrap()));
    }),
    ("duplicate of first in a new event (sorts first)", |c, t| {
        copy_tree(
            &t[0],
            &c.join("aaa/rumours").join(t[0].file_name().unwrap()),
        );
    }),
    ("duplicate of first in a new event (sorts last)", |c, t| {
        copy_tree(
            &t[0],
            &c.join("zzz/rumours").join(t[0].file_name().unwrap()),
        );
    }),
    ("duplicate of last inside the first thread", |_, t| {
        let n = t.len() - 1;
        copy_tree(&t[n], &t[0].join("aaa").join(t[n].file_name().unwrap()));
    }),
    ("duplicate of first inside the last thread", |_, t| {
        let n = t.len() - 1;
        copy_tree(&t[0], &t[n].join("aaa").join(t[0].file_name().unwrap()));
    }),
    ("thread folder replaced by a file", |_, t| {
        fs::remove_dir_all(&t[0]).unwrap();
        fs::write(&t[0], b"x").unwrap();
    }),
    ("source-tweets removed", |_, t| {
        let _ = fs::remove_dir_all(t[0].join("source-tweets"));
        let _ = fs::remove_dir_all(t[0].join("source-tweet"));
    }),
    ("source-tweets replaced by a file", |_, t| {
        let n = t.len() - 1;
        let _ = fs::remove_dir_all(t[n].join("source-tweets"));
        let _ = fs::remove_dir_all(t[n].join("source-tweet"));
        fs::write(t[n].join("source-tweets"), b"x").unwrap();
    }),
    ("dir named structure.json", |_, t| {
        fs::create_dir(t[0].join("structure.json")).unwrap();
    }),
    ("dir named annotation.json", |_, t| {
        let n = t.len() - 1;
        fs::create_dir(t[n].join("annotation.json")).unwrap();
    }),
    ("fifo named structure.json", |_, t| {
        let _ = fs::remove_file(t[0].join("structure.json"));
        rustix::fs::mknodat(
            rustix::fs::CWD,
            t[0].join("structure.json"),
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o644),
            0,
        )
        .unwrap();
    }),
    ("thread folder replaced by a symlink", |c, t| {
        let away = c.parent().unwrap().join("away");
        mv(&t[0], &away);
        std::os::unix::fs::symlink(&away, &t[0]).unwrap();
    }),
    ("reactions replaced by a symlink to a copy", |c, t| {
        let away = c.parent().unwrap().join("away-reactions");
        let n = t.len() - 1;
        if t[n].join("reactions").exists() {
            mv(&t[n].join("reactions"), &away);
            std::os::unix::fs::symlink(&away, t[n].join("reactions")).unwrap();
        }
    }),
    ("symlink to a dir inside a thread", |c, t| {
        std::os::unix::fs::symlink(c, t[0].join("loop")).unwrap();
    }),
    ("broken symlink inside a thread", |_, t| {
        std::os::unix::fs::symlink("/nonexistent/x", t[0].join("broken")).unwrap();
    }),
    ("hidden copy of a thread", |_, t| {
        copy_tree(&t[1], &t[1].parent().unwrap().join(".hidden").join("7"));
    }),
    ("thread renamed to a new id", |_, t| {
        mv(&t[0], &t[0].parent().unwrap().join("7"));
    }),
    ("thread renamed to a new id (last)", |_, t| {
        let n = t.len() - 1;
        mv(&t[n], &t[n].parent().unwrap().join("99999999999999999999"));
    }),
    ("thread moved between labels", |_, t| {
        let n = t.len() - 1;
        let lab = t[n].parent().unwrap();
        let other = if lab.ends_with("rumours") && !lab.ends_with("non-rumours") {
            "non-rumours"
        } else {
            "rumours"
        };
        mv(
            &t[n],
            &lab.parent()
                .unwrap()
                .join(other)
                .join(t[n].file_name().unwrap()),
        );
    }),
    ("thread moved between events", |c, t| {
        mv(
            &t[0],
            &c.join("newevent-all-rnr-threads/rumours")
                .join(t[0].file_name().unwrap()),
        );
    }),
    ("empty digit folder in a label", |_, t| {
        fs::create_dir(t[0].parent().unwrap().join("123")).unwrap();
    }),
    ("digit non-thread folder holding a thread copy", |_, t| {
        copy_tree(&t[2], &t[0].parent().unwrap().join("123/inner/5"));
    }),
    ("digit folder inside a thread", |_, t| {
        fs::create_dir_all(t[0].join("extra/123")).unwrap();
    }),
    ("source-tweet added beside source-tweets", |_, t| {
        let n = t.len() - 1;
        fs::create_dir_all(t[n].join("source-tweet")).unwrap();
        fs::create_dir_all(t[n].join("source-tweets")).unwrap();
    }),
    ("rumour source author changed (first)", |_, t| {
        set_author(rumours(t)[0], "424242")
    }),
    ("rumour source author changed (last)", |_, t| {
        set_author(rumours(t).last().unwrap(), "424242")
    }),
    (
        "rumour source author changed to another source's",
        |_, t| {
            let r = rumours(t);
            let other = author(r[0]);
            set_author(r.last().unwrap(), &other)
        },
    ),
    ("annotation.json added to a non-rumour", |_, t| {
        let nr = t
            .iter()
            .find(|t| t.parent().unwrap().ends_with("non-rumours"))
            .unwrap();
        fs::write(
            nr.join("annotation.json"),
            br#"{"is_rumour": "rumour", "misinformation": "1", "true": "0", "category": "x"}"#,
        )
        .unwrap();
    }),
    ("reactions removed", |_, t| {
        let _ = fs::remove_dir_all(t[0].join("reactions"));
    }),
    ("reply added", |_, t| {
        let n = t.len() - 1;
        fs::create_dir_all(t[n].join("reactions")).unwrap();
        let src = fs::read_dir(t[n].join("source-tweets"))
            .or_else(|_| fs::read_dir(t[n].join("source-tweet")))
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        fs::copy(src, t[n].join("reactions/1.json")).unwrap();
    }),
    ("unreadable thread folder (root: nothing)", |_, t| {
        let _ = t;
    }),
];

/// Each change of `MUTATIONS` after the plan, before every partition.
#[test]
fn sweep() {
    sweep_on(|_| {});
}

/// The sweep on a corpus with threads nested in threads of other
/// partitions at planning time.
#[test]
fn sweep_nested() {
    sweep_on(|c| {
        let t = by_id(c);
        let n = t.len() - 1;
        // The last thread inside the first (other partitions).
        mv(&t[n], &t[0].join("sub").join(t[n].file_name().unwrap()));
        // The second inside the second last, two levels down.
        mv(
            &t[1],
            &t[n - 1].join("a/rumours").join(t[1].file_name().unwrap()),
        );
    });
}

fn sweep_on(setup: fn(&Path)) {
    let base = tempfile::tempdir().unwrap();
    let orig = base.path().join("orig");
    gen_corpus::generate(&orig, &gen_corpus::Options::new(8)).unwrap();
    setup(&orig);
    let only: Option<String> = std::env::var("RED_ONLY").ok();
    // The whole matrix with RED_FULL set (minutes); by default two counts
    // and the extended features.
    let full = std::env::var("RED_FULL").is_ok();
    let counts: &[usize] = if full { &[1, 2, 3, 5, 9] } else { &[3] };
    let exts: &[bool] = if full { &[true, false] } else { &[true] };
    let mut failures = Vec::new();
    for (name, m) in MUTATIONS {
        if only.as_ref().is_some_and(|o| !name.contains(o.as_str())) {
            continue;
        }
        for pinned in [false, true] {
            for &ext in exts {
                let tmp = tempfile::tempdir().unwrap();
                let corpus = tmp.path().join("corpus");
                copy_tree(&orig, &corpus);
                let o = opts()
                    .extended(ext)
                    .strict(std::env::var("RED_STRICT").is_ok());
                let plan = if pinned {
                    Plan::create_pinned(&corpus, &o)
                } else {
                    Plan::create(&corpus, &o)
                }
                .unwrap();
                let t = by_id(&corpus);
                m(&corpus, &t);
                let want = single(&corpus, tmp.path(), &o);
                for &count in counts {
                    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        partitions(&corpus, &plan, count, tmp.path())
                    }));
                    let verdict = match r {
                        Err(_) => "PANIC".to_string(),
                        Ok((errs, merged)) => {
                            let refused: Vec<usize> = errs
                                .iter()
                                .enumerate()
                                .filter(|(_, e)| e.is_some())
                                .map(|(i, _)| i)
                                .collect();
                            match merged {
                                None => format!(
                                    "refused by {refused:?} of {count}: {}",
                                    errs.iter()
                                        .flatten()
                                        .next()
                                        .unwrap()
                                        .split("plan (")
                                        .nth(1)
                                        .unwrap_or("?")
                                        .chars()
                                        .take(140)
                                        .collect::<String>()
                                ),
                                Some(Err(e)) => format!("merge refused: {e}"),
                                Some(Ok(f)) => match &want {
                                    Ok(w) if *w == f => "merged == single".into(),
                                    Ok(w) => format!(
                                        "BAD merged != single ({} vs {} files; differing: {:?})",
                                        f.len(),
                                        w.len(),
                                        f.keys()
                                            .filter(|k| w.get(*k) != f.get(*k))
                                            .collect::<Vec<_>>()
                                    ),
                                    Err(e) => format!("BAD merged but single fails: {e}"),
                                },
                            }
                        }
                    };
                    let line = format!("[{name}] pinned={pinned} ext={ext} n={count}: {verdict}");
                    if verdict.contains("BAD") || verdict.contains("PANIC") {
                        failures.push(line);
                    } else if std::env::var("RED_ALL").is_ok() {
                        println!("{line}");
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// All partitions of `plan` built in order (`before(i)` called before
/// partition `i`), then merged: the merged cache's files, or the first error.
fn run_all(
    corpus: &Path,
    plan: &Plan,
    count: usize,
    tmp: &Path,
    mut before: impl FnMut(usize),
) -> Result<BTreeMap<String, Vec<u8>>, String> {
    let mut parts = Vec::new();
    for i in 0..count {
        before(i);
        let out = tmp.join(format!("p{i}of{count}"));
        build_partition(corpus, plan, (i, count), &out, 1, &NoProgress)
            .map_err(|e| format!("partition {i}: {e}"))?;
        parts.push(out);
    }
    let merged = tmp.join(format!("merged-{count}"));
    merge(&merged, &parts).map_err(|e| format!("merge: {e}"))?;
    Ok(files(&merged))
}

/// Changes a rumour source's author when discovery is done (after the
/// partition checked the rumour entries, before it reads the threads).
struct AuthorOnDiscovered<'a> {
    thread: &'a Path,
    to: String,
}

impl socialctx::Progress for AuthorOnDiscovered<'_> {
    fn discovered(&self, _: u64) {
        set_author(self.thread, &self.to);
    }
}

/// A rumour source's author changed after the partition checked the
/// rumour entries, before it read the thread: the merge is the single
/// build with the same change at the same moment, or the clean one.
#[test]
fn a_rumour_author_changed_after_the_walk_gives_a_build_of_one_state() {
    let tmp = tempfile::tempdir().unwrap();
    let corpus = tmp.path().join("corpus");
    gen_corpus::generate(&corpus, &gen_corpus::Options::new(6)).unwrap();
    let t = by_id(&corpus);
    let rs = rumours(&t);
    let r = rs[0].clone();
    let to = author(rs[1]);
    let keep = tmp.path().join("keep");
    copy_tree(&corpus, &keep);
    // Single build with the same change at the same moment.
    let s = tmp.path().join("s-racy");
    build(
        &corpus,
        &s,
        &opts(),
        &AuthorOnDiscovered {
            thread: &r,
            to: to.clone(),
        },
    )
    .unwrap();
    let racy_single = files(&s);
    let clean_single = single(&corpus, tmp.path(), &opts()).unwrap();
    fs::remove_dir_all(&corpus).unwrap();
    copy_tree(&keep, &corpus);
    let plan = Plan::create(&corpus, &opts()).unwrap();
    let mut parts = Vec::new();
    for i in 0..2 {
        let out = tmp.path().join(format!("q{i}"));
        let res = build_partition(
            &corpus,
            &plan,
            (i, 2),
            &out,
            1,
            &AuthorOnDiscovered {
                thread: &r,
                to: to.clone(),
            },
        );
        res.unwrap();
        parts.push(out);
    }
    let m = tmp.path().join("m");
    merge(&m, &parts).unwrap();
    let got = files(&m);
    assert!(
        got == clean_single || got == racy_single,
        "a build of neither state"
    );
}

/// The same corpus given as another path (a link to the root, a trailing
/// slash) or a `cp -a` copy, with both kinds of plan: the merge is the
/// single build. Partitions of two kinds of plan, or of two counts, do not
/// merge; 20 partitions of 9 threads (some empty) do; plans edited and
/// sealed again (a thread dropped, a rumour entry changed) are refused.
#[test]
fn paths_copies_and_mixed_partitions() {
    let tmp = tempfile::tempdir().unwrap();
    let corpus = tmp.path().join("corpus");
    gen_corpus::generate(&corpus, &gen_corpus::Options::new(9)).unwrap();
    let want = single(&corpus, tmp.path(), &opts()).unwrap();
    let link = tmp.path().join("link");
    std::os::unix::fs::symlink(&corpus, &link).unwrap();
    let slash = PathBuf::from(format!("{}/", corpus.display()));
    let copy = tmp.path().join("copy");
    assert!(
        std::process::Command::new("cp")
            .arg("-a")
            .arg(&corpus)
            .arg(&copy)
            .status()
            .unwrap()
            .success()
    );
    for (pname, pc) in [("corpus", &corpus), ("link", &link), ("slash", &slash)] {
        for pinned in [false, true] {
            let plan = if pinned {
                Plan::create_pinned(pc, &opts())
            } else {
                Plan::create(pc, &opts())
            }
            .unwrap();
            for (bname, bc) in [
                ("corpus", &corpus),
                ("link", &link),
                ("slash", &slash),
                ("copy", &copy),
            ] {
                let d = tmp.path().join(format!("{pname}-{bname}-{pinned}"));
                let got = run_all(bc, &plan, 3, &d, |_| {});
                assert!(
                    got.as_ref().is_ok_and(|g| *g == want),
                    "plan on {pname} pinned={pinned}, built on {bname}: {:?}",
                    got.map(|_| "another cache")
                );
            }
        }
    }
    // Mixed kinds.
    let a = Plan::create(&corpus, &opts()).unwrap();
    let b = Plan::create_pinned(&corpus, &opts()).unwrap();
    let p0 = tmp.path().join("mix0");
    let p1 = tmp.path().join("mix1");
    build_partition(&corpus, &a, (0, 2), &p0, 1, &NoProgress).unwrap();
    build_partition(&corpus, &b, (1, 2), &p1, 1, &NoProgress).unwrap();
    assert!(
        merge(tmp.path().join("mixm"), &[&p0, &p1]).is_err(),
        "mixed kinds"
    );
    // Same plan kind, different counts of one plan.
    let q0 = tmp.path().join("c0");
    let q1 = tmp.path().join("c1");
    build_partition(&corpus, &a, (0, 3), &q0, 1, &NoProgress).unwrap();
    build_partition(&corpus, &a, (1, 2), &q1, 1, &NoProgress).unwrap();
    assert!(
        merge(tmp.path().join("cm"), &[&q0, &q1]).is_err(),
        "mixed counts"
    );
    // Empty partitions.
    let d = tmp.path().join("many");
    assert_eq!(
        run_all(&corpus, &a, 20, &d, |_| {}).map(|g| g == want),
        Ok(true)
    );
    // A plan with one thread dropped, resealed.
    let pf = tmp.path().join("plan.json");
    a.save(&pf).unwrap();
    let mut v: serde_json::Value = serde_json::from_slice(&fs::read(&pf).unwrap()).unwrap();
    v["threads"].as_array_mut().unwrap().remove(4);
    fs::write(&pf, Plan::reseal(&serde_json::to_vec(&v).unwrap()).unwrap()).unwrap();
    let edited = Plan::load(&pf).unwrap();
    for n in [1, 2, 3] {
        let d = tmp.path().join(format!("edited{n}"));
        let got = run_all(&corpus, &edited, n, &d, |_| {});
        assert!(got.is_err(), "plan without thread 4, {n} partitions merged");
    }
    // A plan with a thread's rumour entry edited, resealed.
    let mut v: serde_json::Value =
        serde_json::from_slice(&serde_json::to_vec(&a).unwrap()).unwrap();
    for t in v["threads"].as_array_mut().unwrap() {
        if t.get("rumour").is_some() {
            t["rumour"][0] = serde_json::json!(12345);
            break;
        }
    }
    fs::write(&pf, Plan::reseal(&serde_json::to_vec(&v).unwrap()).unwrap()).unwrap();
    let edited = Plan::load(&pf).unwrap();
    for n in [1, 2, 3] {
        let d = tmp.path().join(format!("rum{n}"));
        let got = run_all(&corpus, &edited, n, &d, |_| {});
        assert!(got.is_err(), "a rumour entry edited, {n} partitions merged");
    }
    // A plan with a report added inside a thread, resealed.
    let mut v: serde_json::Value =
        serde_json::from_slice(&serde_json::to_vec(&a).unwrap()).unwrap();
    let rel = v["threads"][2]["rel"].as_str().unwrap().to_owned();
    v["bad"] = serde_json::json!([{"path": format!("{rel}/zz"), "reason": "made up"}]);
    fs::write(&pf, Plan::reseal(&serde_json::to_vec(&v).unwrap()).unwrap()).unwrap();
    // (Refused when loaded is as good.)
    if let Ok(edited) = Plan::load(&pf) {
        for n in [1, 2, 3] {
            let d = tmp.path().join(format!("bad{n}"));
            let got = run_all(&corpus, &edited, n, &d, |_| {});
            assert!(got.is_err(), "a made-up report, {n} partitions merged");
        }
    }
}

/// A generated corpus of `n` threads under `tmp`, its thread folders by
/// source id.
fn generated(tmp: &Path, n: u64) -> (PathBuf, Vec<PathBuf>) {
    let corpus = tmp.join("corpus");
    gen_corpus::generate(&corpus, &gen_corpus::Options::new(n)).unwrap();
    let t = by_id(&corpus);
    (corpus, t)
}

/// A partition lists every folder but the other partitions' planned
/// threads, each of which (and everything below it) its own partition
/// lists. So a thread added inside partition 0's thread after partition 0
/// ran is seen by no partition, as a thread added anywhere after every
/// partition ran: the merge is the corpus as each place's partition read
/// it (the single build of the planned corpus). The same thread added
/// beside the others is refused by partition 1.
#[test]
fn a_thread_added_inside_another_partitions_thread_is_its_partitions_to_see() {
    let tmp = tempfile::tempdir().unwrap();
    let (corpus, t) = generated(tmp.path(), 6);
    let planned = single(&corpus, tmp.path(), &opts()).unwrap();
    let plan = Plan::create(&corpus, &opts()).unwrap();
    assert_eq!(plan.partition_range(0, 2), 0..3);
    let p0 = tmp.path().join("p0");
    build_partition(&corpus, &plan, (0, 2), &p0, 1, &NoProgress).unwrap();
    copy_tree(&t[5], &t[0].join("extra/9"));
    let beside = t[0].parent().unwrap().join("9");
    copy_tree(&t[5], &beside);
    let p1 = tmp.path().join("p1");
    assert!(build_partition(&corpus, &plan, (1, 2), &p1, 1, &NoProgress).is_err());
    assert!(!p1.exists());
    fs::remove_dir_all(&beside).unwrap();
    build_partition(&corpus, &plan, (1, 2), &p1, 1, &NoProgress).unwrap();
    let merged = tmp.path().join("merged");
    merge(&merged, &[&p0, &p1]).unwrap();
    assert!(
        files(&merged) == planned,
        "the corpus as its partitions read it"
    );
    // Before partition 0 ran, partition 0 (which lists its thread) refuses.
    let p0 = tmp.path().join("p0-again");
    assert!(build_partition(&corpus, &plan, (0, 2), &p0, 1, &NoProgress).is_err());
}

/// A thread under a folder whose name is not UTF-8: a plan holds paths as
/// text, so the thread would be planned under a lossy path and read by no
/// partition (every partition and the merge succeeded, the thread missing).
/// The plan is refused, naming the thread's folder.
#[test]
fn a_thread_under_a_non_utf8_folder_is_refused_by_the_plan() {
    use std::os::unix::ffi::OsStrExt;
    let tmp = tempfile::tempdir().unwrap();
    let (corpus, t) = generated(tmp.path(), 4);
    let ev = corpus.join(std::ffi::OsStr::from_bytes(b"ev\xff/rumours"));
    mv(&t[0], &ev.join(t[0].file_name().unwrap()));
    for pinned in [false, true] {
        let made = if pinned {
            Plan::create_pinned(&corpus, &opts())
        } else {
            Plan::create(&corpus, &opts())
        };
        let e = made.expect_err("a plan with a lossy path").to_string();
        let name = t[0].file_name().unwrap().to_string_lossy().into_owned();
        assert!(e.contains(&name) && e.contains("not UTF-8"), "{e}");
    }
}

/// The duplicate form: after partition 0 ran, a copy of partition 1's
/// thread put inside partition 0's first thread, where it sorts first (a
/// single build of the corpus now keeps the copy). That place is partition
/// 0's, which read it before: partition 1 builds its thread where planned,
/// and the merge is the planned corpus's single build, never a thread twice.
#[test]
fn a_duplicate_added_inside_another_partitions_thread_is_its_partitions_to_see() {
    let tmp = tempfile::tempdir().unwrap();
    let (corpus, t) = generated(tmp.path(), 6);
    let planned = single(&corpus, tmp.path(), &opts()).unwrap();
    let plan = Plan::create(&corpus, &opts()).unwrap();
    assert_eq!(plan.partition_range(1, 2), 3..6);
    let x = t[3..]
        .iter()
        .find(|x| *x > &t[0])
        .expect("a later path")
        .clone();
    let p0 = tmp.path().join("p0");
    build_partition(&corpus, &plan, (0, 2), &p0, 1, &NoProgress).unwrap();
    copy_tree(&x, &t[0].join("a").join(x.file_name().unwrap()));
    let p1 = tmp.path().join("p1");
    build_partition(&corpus, &plan, (1, 2), &p1, 1, &NoProgress).unwrap();
    let merged = tmp.path().join("merged");
    merge(&merged, &[&p0, &p1]).unwrap();
    assert!(
        files(&merged) == planned,
        "the corpus as its partitions read it"
    );
    // Partition 0 built now sees the copy (a thread not planned): refused.
    let again = tmp.path().join("p0-again");
    assert!(build_partition(&corpus, &plan, (0, 2), &again, 1, &NoProgress).is_err());
}

/// Each change made just before partition `k` (after the earlier ones
/// ran): a merge is never neither the corpus's single build before the
/// change nor after it (a mix). (A thread added inside an earlier
/// partition's thread is accepted, as the corpus as read: see
/// `a_thread_added_inside_another_partitions_thread_is_its_partitions_to_see`.)
#[test]
fn sweep_timed() {
    let base = tempfile::tempdir().unwrap();
    let orig = base.path().join("orig");
    gen_corpus::generate(&orig, &gen_corpus::Options::new(8)).unwrap();
    if std::env::var("RED_NESTED").is_ok() {
        let t = by_id(&orig);
        let n = t.len() - 1;
        mv(&t[n], &t[0].join("sub").join(t[n].file_name().unwrap()));
        mv(
            &t[1],
            &t[n - 1].join("a/rumours").join(t[1].file_name().unwrap()),
        );
    }
    let mut mixes = Vec::new();
    let full = std::env::var("RED_FULL").is_ok();
    let kinds: &[bool] = if full { &[false, true] } else { &[false] };
    let counts: &[usize] = if full { &[2, 3] } else { &[2] };
    // By default every third change (the whole list with RED_FULL): the
    // suite's time is kept for CI's limit.
    let step = if full { 1 } else { 3 };
    for (name, m) in MUTATIONS.iter().step_by(step) {
        for &pinned in kinds {
            for &count in counts {
                for k in 1..count {
                    let tmp = tempfile::tempdir().unwrap();
                    let corpus = tmp.path().join("corpus");
                    copy_tree(&orig, &corpus);
                    let o = opts();
                    let plan = if pinned {
                        Plan::create_pinned(&corpus, &o)
                    } else {
                        Plan::create(&corpus, &o)
                    }
                    .unwrap();
                    let before = single(&corpus, tmp.path(), &o);
                    let set_before = thread_dirs(&corpus);
                    let mut after = None;
                    let mut set_after = Vec::new();
                    let got = run_all(&corpus, &plan, count, tmp.path(), |i| {
                        if i == k {
                            let t = by_id(&corpus);
                            m(&corpus, &t);
                            after = Some(single(&corpus, tmp.path(), &o));
                            set_after = thread_dirs(&corpus);
                        }
                    });
                    let after = after.unwrap();
                    let verdict = match &got {
                        Err(e) => format!("refused: {}", e.chars().take(120).collect::<String>()),
                        Ok(g) => {
                            let eb = before.as_ref().ok() == Some(g);
                            let ea = after.as_ref().ok() == Some(g);
                            if !eb && !ea {
                                "MIX: merged is neither build".into()
                            } else if set_before != set_after {
                                format!("SET-CHANGE-ACCEPTED (== before {eb}, == after {ea})")
                            } else {
                                format!("ok (== before {eb}, == after {ea})")
                            }
                        }
                    };
                    let line = format!(
                        "[{name}] pinned={pinned} n={count} before partition {k}: {verdict}"
                    );
                    if verdict.contains("MIX") {
                        mixes.push(line);
                    } else if std::env::var("RED_ALL").is_ok() {
                        println!("{line}");
                    }
                }
            }
        }
    }
    assert!(mixes.is_empty(), "{mixes:#?}");
}
