//! Partitioned builds: plan once, build partitions separately, merge; the
//! merged cache is byte-identical to a single build of the same corpus.

mod common;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use common::*;
use socialctx::{BuildError, BuildOptions, NoProgress, Plan, build, build_partition, merge};

fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fs::read_dir(dir)
        .unwrap()
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
    // Small shards, so that the merge has to re-pack across partitions.
    BuildOptions::default().threads(2).shard_bytes(64 << 10)
}

fn partitions(corpus: &Path, plan: &Plan, n: usize, root: &Path) -> Vec<PathBuf> {
    (0..n)
        .map(|i| {
            let dir = root.join(format!("part-{i}-of-{n}"));
            build_partition(corpus, plan, (i, n), &dir, 1, &NoProgress).unwrap();
            dir
        })
        .collect()
}

#[test]
fn merged_partitions_equal_a_single_build() {
    for corpus in [
        "tests/fixtures/golden/corpus",
        "data-samples/corpus",
        "tests/fixtures/real/pheme-journalism/corpus",
    ] {
        let corpus = repo(corpus);
        let tmp = tempfile::tempdir().unwrap();
        let single = tmp.path().join("single");
        build(&corpus, &single, &opts(), &NoProgress).unwrap();
        let want = files(&single);
        assert!(want.keys().filter(|n| n.starts_with("shard-")).count() >= 2);

        let plan_file = tmp.path().join("plan.json");
        Plan::create(&corpus, &opts())
            .unwrap()
            .save(&plan_file)
            .unwrap();
        let plan = Plan::load(&plan_file).unwrap();
        for n in [1, 3, 7] {
            // The ranges cover every thread once, in order.
            let ranges: Vec<_> = (0..n).map(|i| plan.partition_range(i, n)).collect();
            assert_eq!(ranges[0].start, 0);
            assert_eq!(ranges[n - 1].end, plan.len());
            assert!(ranges.windows(2).all(|w| w[0].end == w[1].start));
            let parts = partitions(&corpus, &plan, n, tmp.path());
            let out = tmp.path().join(format!("merged-{n}"));
            let mut shuffled = parts.clone();
            shuffled.reverse();
            merge(&out, &shuffled).unwrap();
            assert_eq!(
                files(&out),
                want,
                "{} with {n} partitions",
                corpus.display()
            );
        }
    }
}

#[test]
fn bad_partition_sets_are_refused_and_nothing_is_published() {
    let corpus = repo("tests/fixtures/golden/corpus");
    let tmp = tempfile::tempdir().unwrap();
    let plan = Plan::create(&corpus, &opts()).unwrap();
    let parts = partitions(&corpus, &plan, 3, tmp.path());
    let out = tmp.path().join("out");
    let refused = |set: &[PathBuf], what: &str| {
        match merge(&out, set) {
            Err(BuildError::BadPartition { reason, .. }) => {
                assert!(reason.contains(what), "{reason}")
            }
            other => panic!("expected a bad partition ({what}), got {other:?}"),
        }
        assert!(!out.exists(), "nothing published");
    };
    refused(&parts[..2], "missing");
    refused(
        &[parts[0].clone(), parts[1].clone(), parts[1].clone()],
        "twice",
    );
    // A partition of another plan (other options: another id).
    let other = Plan::create(&corpus, &opts().shard_bytes(1 << 20)).unwrap();
    let foreign = tmp.path().join("foreign");
    build_partition(&corpus, &other, (2, 3), &foreign, 1, &NoProgress).unwrap();
    refused(&[parts[0].clone(), parts[1].clone(), foreign], "plan");
    // Not a partition at all.
    let plain = tmp.path().join("plain");
    build(&corpus, &plain, &opts(), &NoProgress).unwrap();
    refused(&[plain], "not a partition");
    // A damaged partition.
    let shard = parts[1].join("shard-00000.rkyv");
    let mut bytes = fs::read(&shard).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    fs::write(&shard, bytes).unwrap();
    refused(&parts, "checksum");
    assert!(matches!(
        build_partition(&corpus, &plan, (3, 3), tmp.path().join("x"), 1, &NoProgress),
        Err(BuildError::Io { .. })
    ));
}

/// The same through the command line, each partition its own process, as a
/// Slurm array or a Kubernetes Indexed Job would run them.
#[test]
fn separate_processes_and_the_merge_example_give_the_single_build() {
    let corpus = repo("tests/fixtures/real/pheme-veracity/corpus");
    let tmp = tempfile::tempdir().unwrap();
    let run = |cmd: &mut std::process::Command| {
        let o = cmd.output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let single = tmp.path().join("single");
    run(example("precache")
        .arg(&corpus)
        .arg(&single)
        .args(["-q", "--shard-mib", "1"]));
    let plan = tmp.path().join("plan.json");
    let out = run(example("precache")
        .arg(&corpus)
        .args(["-q", "--shard-mib", "1", "--plan"])
        .arg(&plan));
    assert!(out.starts_with("plan "), "{out}");
    for n in [1, 3, 7] {
        let parts: Vec<PathBuf> = (0..n)
            .map(|i| tmp.path().join(format!("n{n}-part-{i}")))
            .collect();
        let children: Vec<_> = parts
            .iter()
            .enumerate()
            .map(|(i, dir)| {
                example("precache")
                    .arg(&corpus)
                    .arg(dir)
                    .args(["-q", "--threads", "1", "--plan"])
                    .arg(&plan)
                    .arg("--partition")
                    .arg(format!("{i}/{n}"))
                    .spawn()
                    .unwrap()
            })
            .collect();
        for mut c in children {
            assert!(c.wait().unwrap().success());
        }
        let merged = tmp.path().join(format!("merged-{n}"));
        run(example("merge").arg(&merged).args(&parts));
        assert_eq!(files(&merged), files(&single), "{n} partitions");
    }
    let parts: Vec<PathBuf> = (0..3)
        .map(|i| tmp.path().join(format!("n3-part-{i}")))
        .collect();
    // A partition killed mid-build is rebuilt alone; the others are reused.
    let killed = &parts[1];
    let mut child = example("precache")
        .arg(&corpus)
        .arg(killed)
        .args(["-q", "--threads", "1", "--plan"])
        .arg(&plan)
        .args(["--partition", "1/3"])
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(15));
    let _ = child.kill();
    let _ = child.wait();
    run(example("precache")
        .arg(&corpus)
        .arg(killed)
        .args(["-q", "--threads", "1", "--plan"])
        .arg(&plan)
        .args(["--partition", "1/3"]));
    let merged = tmp.path().join("merged-after-kill");
    run(example("merge").arg(&merged).args(&parts));
    assert_eq!(files(&merged), files(&single));
    // Bad usage is refused with the option named.
    let o = example("precache")
        .arg(&corpus)
        .arg(tmp.path().join("x"))
        .args(["--plan"])
        .arg(&plan)
        .args(["--partition", "3/3"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--partition"));
}
