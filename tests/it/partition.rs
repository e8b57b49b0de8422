//! Partitioned builds: plan once, build partitions separately, merge; the
//! merged cache is byte-identical to a single build of the same corpus.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use crate::common::corpus::thread_dirs;
use crate::common::*;
use socialctx::ThreadSource;
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
    // A partition that does not exist is refused by what it is, before
    // anything is written.
    for (i, n) in [(3, 3), (7, 3), (0, 0)] {
        let out = tmp.path().join(format!("x-{i}-{n}"));
        match build_partition(&corpus, &plan, (i, n), &out, 1, &NoProgress) {
            Err(BuildError::PartitionOutOfRange { index, count }) => {
                assert_eq!((index, count), (i, n));
            }
            other => panic!("partition {i} of {n}: {other:?}"),
        }
        assert!(!out.exists());
    }
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
    // Replies to replies (parents that are not the source) go through the merge.
    let cache = socialctx::Cache::open(&single).unwrap();
    let deep = cache
        .iter()
        .flat_map(|t| t.reactions().map(|r| r.parent()).collect::<Vec<_>>())
        .filter(|&p| p != socialctx::ReactionNum::PARENT_SOURCE)
        .count();
    assert!(deep > 500, "{deep} replies to replies");
    drop(cache);
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

/// Rewrites the partition record of `part` with `edit`, wherever this
/// version keeps it (a `partition.json` beside the cache, or the
/// manifest's `partition`), as a user or a script with a text editor would.
fn edit_partition_record(part: &Path, edit: impl Fn(&mut serde_json::Value)) {
    let side = part.join("partition.json");
    if side.exists() {
        let mut v: serde_json::Value = serde_json::from_slice(&fs::read(&side).unwrap()).unwrap();
        edit(&mut v);
        fs::write(&side, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
    }
    let manifest = part.join("manifest.json");
    let mut m: serde_json::Value = serde_json::from_slice(&fs::read(&manifest).unwrap()).unwrap();
    if let Some(p) = m.get_mut("partition") {
        edit(p);
        fs::write(&manifest, serde_json::to_vec_pretty(&m).unwrap()).unwrap();
    }
}

/// Issue 25, defect 1: a stale or edited partition record must never make a
/// merge publish fewer threads than the corpus has, with success.
#[test]
fn a_stale_or_edited_partition_record_never_loses_threads() {
    let tmp = tempfile::tempdir().unwrap();
    let corpus = tmp.path().join("corpus");
    let mut gen_opts = gen_corpus::Options::new(300);
    gen_opts.seed = 1;
    gen_corpus::generate(&corpus, &gen_opts).unwrap();
    // Plans that pin files: replies added move the partitions' cuts.
    let plan_a = Plan::create_pinned(&corpus, &opts()).unwrap();
    let parts = partitions(&corpus, &plan_a, 3, tmp.path());
    let whole = |dir: &Path| socialctx::Cache::open(dir).unwrap().len();
    let out = tmp.path().join("out");
    let refused = |set: &[PathBuf], what: &str| {
        match merge(&out, set) {
            Err(BuildError::BadPartition { .. }) => {}
            Ok(_) => panic!(
                "{what}: merge published {} threads of 300 with success",
                whole(&out)
            ),
            Err(e) => panic!("{what}: expected a bad partition, got {e}"),
        }
        assert!(!out.exists(), "{what}: nothing published");
    };

    // "count": 1 edited into partition 0's record: alone it is not the plan.
    edit_partition_record(&parts[0], |v| v["count"] = 1.into());
    refused(&parts[..1], "count edited to 1");
    refused(&parts, "count edited to 1, all three given");
    let part0 = partitions(&corpus, &plan_a, 3, tmp.path());
    assert_eq!(part0[0], parts[0]);

    // 60 replies added, a new plan B; partition 1 rebuilt from plan B but
    // its record from plan A kept (its write failed, or a killed rebuild).
    for t in thread_dirs(&corpus).iter().take(20) {
        let dir = t.join("reactions");
        let mut files: Vec<_> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        for k in 0..3 {
            fs::copy(&files[0], dir.join(format!("99999999999999999{k}.json"))).unwrap();
        }
    }
    let plan_b = Plan::create_pinned(&corpus, &opts()).unwrap();
    assert_ne!(plan_a.partition_range(1, 3), plan_b.partition_range(1, 3));
    let side = parts[1].join("partition.json");
    let stale = fs::read(&side).ok();
    build_partition(&corpus, &plan_b, (1, 3), &parts[1], 1, &NoProgress).unwrap();
    if let Some(stale) = stale {
        fs::write(&side, stale).unwrap();
    }
    refused(&parts, "a partition of plan B among plan A's");
}

/// Issue 25, defect 2b: an edited or stale plan (threads swapped, one
/// listed twice, a folder not named by a source id, a path leaving the
/// corpus) is refused by `Plan::load`, and a valid cache in the output
/// directory stays as it was.
#[test]
fn edited_plans_are_refused_and_the_old_cache_kept() {
    let corpus = repo("tests/fixtures/golden/corpus");
    let tmp = tempfile::tempdir().unwrap();
    let plan_file = tmp.path().join("plan.json");
    Plan::create(&corpus, &opts())
        .unwrap()
        .save(&plan_file)
        .unwrap();
    let good = fs::read(&plan_file).unwrap();
    let out = tmp.path().join("part");
    let plan = Plan::load(&plan_file).unwrap();
    build_partition(&corpus, &plan, (0, 1), &out, 1, &NoProgress).unwrap();
    let before = files(&out);
    let json = || -> serde_json::Value { serde_json::from_slice(&good).unwrap() };
    let refused = |v: serde_json::Value, reseal: bool, what: &str, why: &str| {
        let mut bytes = serde_json::to_vec(&v).unwrap();
        if reseal {
            bytes = Plan::reseal(&bytes).expect("still plan-shaped");
        }
        fs::write(&plan_file, bytes).unwrap();
        match Plan::load(&plan_file) {
            Ok(p) => {
                let r = build_partition(&corpus, &p, (0, 1), &out, 1, &NoProgress);
                panic!("{what}: the plan loaded; the partition build gave {r:?}");
            }
            Err(e) => {
                let msg = e.to_string();
                assert!(
                    msg.contains("plan.json") && msg.contains(why),
                    "{what}: {msg}"
                );
            }
        }
        assert_eq!(files(&out), before, "{what}: the old cache is kept");
    };
    // The edit: the first two threads swapped.
    let mut v = json();
    v["threads"].as_array_mut().unwrap().swap(0, 1);
    refused(v.clone(), false, "swapped", "checksum");
    refused(v, true, "swapped, checksum redone", "out of order");
    let mut v = json();
    let first = v["threads"][0].clone();
    v["threads"].as_array_mut().unwrap().insert(0, first);
    refused(v, true, "listed twice", "repeated");
    let mut v = json();
    let rel = v["threads"][0]["rel"].as_str().unwrap().to_string();
    let (dir, _) = rel.rsplit_once('/').unwrap();
    // A plan holds no source id apart from the folder's name (version 7).
    v["threads"][0]["rel"] = format!("{dir}/1x").into();
    refused(v, true, "folder not a source id", "not by a source id");
    let mut v = json();
    let id = rel.rsplit('/').next().unwrap().to_string();
    v["threads"][0]["rel"] = format!("../elsewhere/{id}").into();
    refused(v, true, "outside the corpus", "inside the corpus");
    // A thread's layout is stored only when it is not the first (PHEME
    // plans read as before); one this build does not know is refused
    // rather than indexed past the registry.
    assert!(json()["threads"][0].get("layout").is_none());
    let mut v = json();
    v["threads"][0]["layout"] = 200.into();
    refused(v, true, "unknown layout", "layout 200");
    // A plan of the previous version (per-thread fingerprints, one rumour
    // index, no listing): refused as that version, not as a damaged file
    // ("missing field").
    let mut v = json();
    v["version"] = 4.into();
    v["rumour_index"] = serde_json::json!([]);
    for t in v["threads"].as_array_mut().unwrap() {
        let t = t.as_object_mut().unwrap();
        t.remove("listing");
        t.insert("fingerprint".into(), "0123456789abcdef".into());
    }
    refused(v, false, "version 4", "version 4, expected");
    // A rumour entry in a plan without the extended features.
    let mut v = json();
    v["extended"] = false.into();
    v["threads"][0]["rumour"] = serde_json::json!([1, 2]);
    refused(v, true, "rumour entry, not extended", "rumour entry");
    fs::write(&plan_file, &good).unwrap();
    assert!(Plan::load(&plan_file).is_ok());
}

/// The writer refuses threads out of source-id order before anything is
/// published (a cache in that order would not open).
#[test]
fn the_writer_refuses_out_of_order_source_ids() {
    use socialctx::internals::{CacheWriter, ThreadData, ThreadRecord, ThreadText, WriterOptions};
    let tmp = tempfile::tempdir().unwrap();
    let target = tmp.path().join("cache");
    build(
        repo("tests/fixtures/golden/corpus"),
        &target,
        &opts(),
        &NoProgress,
    )
    .unwrap();
    let before = files(&target);
    let thread = |id: u64| ThreadData {
        record: ThreadRecord {
            source_id: id,
            source_created_at: 0,
            first_reaction: 0,
            reaction_count: 0,
            label_code: 1,
        },
        text: ThreadText::default(),
        reactions: Vec::new(),
        text_arena: String::new(),
        reaction_texts: Vec::new(),
        features: Vec::new(),
        reaction_extra: Vec::new(),
        thread_extra: [f32::NAN; socialctx::Manifest::THREAD_COLUMNS.len()],
        inputs: Vec::new(),
    };
    let mut w = CacheWriter::create(&target, WriterOptions::default()).unwrap();
    w.push(thread(20), "e/rumours/20").unwrap();
    let err = w
        .push(thread(10), "e/rumours/10")
        .expect_err("out of order");
    assert!(err.to_string().contains("e/rumours/10"), "{err}");
    assert!(err.to_string().contains("order"), "{err}");
    drop(w);
    assert_eq!(files(&target), before);
    let mut w = CacheWriter::create(&target, WriterOptions::default()).unwrap();
    w.push(thread(20), "e/rumours/20").unwrap();
    assert!(w.push(thread(20), "e/rumours/20").is_err(), "repeated");
    drop(w);
    assert_eq!(files(&target), before);
    assert_eq!(
        fs::read_dir(tmp.path()).unwrap().count(),
        2,
        "the cache and its lock, no staging directory"
    );
}

/// The rule behind linking (`starts_shard` in src/ingest/writer.rs): one
/// thread in 2,048, by a hash of its source id, starts a shard whatever
/// the shard before it holds.
fn starts_shard(source_id: u64) -> bool {
    xxhash_rust::xxh3::xxh3_64(&source_id.to_le_bytes()).is_multiple_of(2048)
}

/// A merge links every shard a partition wrote exactly as the single build
/// writes it, and copies the others: partition 0's shards (it starts where
/// the single build does) and every partition's from its first thread that
/// starts a shard on, but for a last shard the next partition does not
/// start a shard after. Counted from the single build's own shards, so the
/// rule is checked, not its output; and the copy (a file system without
/// hard links, or a link that fails) writes the same bytes.
#[test]
fn a_merge_links_the_shards_partitions_cut_as_a_single_build() {
    use std::os::unix::fs::MetadataExt;
    let tmp = tempfile::tempdir().unwrap();
    let corpus = tmp.path().join("corpus");
    let mut gen_opts = gen_corpus::Options::new(5000);
    gen_opts.seed = 3;
    gen_corpus::generate(&corpus, &gen_opts).unwrap();
    let opts = BuildOptions::default().threads(2).shard_bytes(1 << 20);
    let single = tmp.path().join("single");
    build(&corpus, &single, &opts, &NoProgress).unwrap();
    let want = files(&single);

    // The single build's shards, as ranges of thread positions, and the
    // threads that start a shard whatever it holds.
    let cache = socialctx::Cache::open(&single).unwrap();
    let ids: Vec<u64> = cache.iter().map(|t| t.source_id()).collect();
    let n = ids.len();
    let mut shards = Vec::new();
    let mut at = 0;
    for s in &cache.manifest().shards {
        shards.push(at..at + s.threads as usize);
        at += s.threads as usize;
    }
    assert_eq!(at, n);
    let plan_file = tmp.path().join("plan.json");
    Plan::create(&corpus, &opts)
        .unwrap()
        .save(&plan_file)
        .unwrap();
    let plan = Plan::load(&plan_file).unwrap();
    let count = 3;
    let ranges: Vec<_> = (0..count).map(|i| plan.partition_range(i, count)).collect();
    // Partition `p` cuts as the single build from `aligned[p]` on: its start
    // (partition 0, or a first thread that starts a shard), else its first
    // thread that starts a shard.
    let expected = shards
        .iter()
        .filter(|s| {
            let Some(r) = ranges.iter().find(|r| r.contains(&s.start)) else {
                return false;
            };
            let aligned = (r.start..r.end)
                .find(|&i| i == 0 || starts_shard(ids[i]))
                .unwrap_or(r.end);
            s.start >= aligned
                && s.end <= r.end
                && (s.end < r.end || r.end == n || starts_shard(ids[r.end]))
        })
        .count();
    let parts = partitions(&corpus, &plan, count, tmp.path());
    let part_inodes: std::collections::BTreeSet<(u64, u64)> = parts
        .iter()
        .flat_map(|p| fs::read_dir(p).unwrap())
        .map(|e| fs::metadata(e.unwrap().path()).unwrap())
        .map(|m| (m.dev(), m.ino()))
        .collect();
    let linked = |dir: &Path| {
        (0..shards.len())
            .filter(|k| {
                let m = |name: String| fs::metadata(dir.join(name)).unwrap();
                let (a, b) = (
                    m(format!("shard-{k:05}.rkyv")),
                    m(format!("text-{k:05}.rkyv")),
                );
                let shared = |m: &fs::Metadata| part_inodes.contains(&(m.dev(), m.ino()));
                assert_eq!(shared(&a), shared(&b), "shard {k}: one file linked");
                shared(&a)
            })
            .count()
    };
    let out = tmp.path().join("merged");
    merge(&out, &parts).unwrap();
    assert_eq!(files(&out), want);
    assert!(
        expected > shards.len() / 2 && expected < shards.len(),
        "{expected} of {} shards linkable: the test needs both kinds",
        shards.len()
    );
    assert_eq!(linked(&out), expected, "of {} shards", shards.len());

    // Where links cannot be made, every shard is written: the same bytes.
    let copied = tmp.path().join("copied");
    let status = crate::common::example("merge")
        .env("SOCIALCTX_TEST_PUBLISH_FAULT", "no-link")
        .arg(&copied)
        .args(&parts)
        .status()
        .unwrap();
    assert!(status.success());
    assert_eq!(files(&copied), want);
    assert_eq!(linked(&copied), 0);

    // Every link step failing, or the merge killed just before it: a
    // failed link is copied instead (the same bytes, published); a kill
    // publishes nothing, leaves the partitions as they were, and the next
    // merge publishes the single build and leaves no temporary directory.
    let part_files: Vec<_> = parts.iter().map(|p| files(p)).collect();
    let run = |out: &Path, fault: &str| {
        crate::common::example("merge")
            .env("SOCIALCTX_TEST_PUBLISH_FAULT", fault)
            .arg(out)
            .args(&parts)
            .output()
            .unwrap()
    };
    let traced = run(&tmp.path().join("traced"), "trace");
    assert!(traced.status.success());
    let link_steps: Vec<u64> = String::from_utf8_lossy(&traced.stderr)
        .lines()
        .filter_map(|l| l.strip_prefix("publish step "))
        .filter_map(|l| l.split_once(": link "))
        .map(|(n, _)| n.parse().unwrap())
        .collect();
    assert_eq!(link_steps.len(), 2 * expected);
    for n in link_steps {
        let out = tmp.path().join(format!("fault-{n}"));
        let failed = run(&out, &format!("{n}:error"));
        assert!(failed.status.success(), "step {n}: a failed link is copied");
        assert_eq!(files(&out), want, "step {n}");
        assert_eq!(linked(&out), expected - 1, "step {n}: that shard copied");
        let out = tmp.path().join(format!("kill-{n}"));
        let killed = run(&out, &format!("{n}:kill"));
        assert!(!killed.status.success(), "step {n}: killed");
        assert!(!out.exists(), "step {n}: nothing published");
        let again = run(&out, "");
        assert!(again.status.success(), "step {n}: the next merge");
        assert_eq!(files(&out), want, "step {n}: the next merge");
        let left: Vec<_> = fs::read_dir(tmp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|name| name.contains(".tmp-"))
            .collect();
        assert!(left.is_empty(), "step {n}: left {left:?}");
        fs::remove_dir_all(&out).unwrap();
        fs::remove_dir_all(tmp.path().join(format!("fault-{n}"))).unwrap();
    }
    for (p, before) in parts.iter().zip(&part_files) {
        assert_eq!(&files(p), before, "{}: untouched", p.display());
    }
}

/// A merge reads only the shards it copies: the ones it links are checked
/// against their records (size, footer) and their bytes by every reader,
/// against the checksums the partition wrote, so damage is never laundered
/// into a cache that opens. The summary's tally comes from the partitions'
/// records, or, for records of earlier versions (none), from the threads.
#[test]
fn a_merge_reads_what_it_copies_and_damage_never_opens() {
    use std::os::unix::fs::MetadataExt;
    let corpus = repo("data-samples/corpus");
    let tmp = tempfile::tempdir().unwrap();
    let single = tmp.path().join("single");
    let want_summary = build(&corpus, &single, &opts(), &NoProgress).unwrap();
    let want = files(&single);
    let plan = Plan::create(&corpus, &opts()).unwrap();
    let parts = partitions(&corpus, &plan, 3, tmp.path());
    let out = tmp.path().join("merged");
    let summary = merge(&out, &parts).unwrap();
    assert_eq!(files(&out), want);
    assert_eq!(
        (&summary.labels, &summary.events),
        (&want_summary.labels, &want_summary.events)
    );
    let merged_inodes: std::collections::BTreeSet<u64> = fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().ino())
        .collect();
    let shard_files = |p: &Path| -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = fs::read_dir(p)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|f| f.extension().is_some_and(|x| x == "rkyv"))
            .collect();
        v.sort();
        v
    };
    let is_linked = |f: &Path| merged_inodes.contains(&fs::metadata(f).unwrap().ino());
    let linked: Vec<PathBuf> = parts
        .iter()
        .flat_map(|p| shard_files(p))
        .filter(|f| is_linked(f))
        .collect();
    let copied: Vec<PathBuf> = parts
        .iter()
        .flat_map(|p| shard_files(p))
        .filter(|f| !is_linked(f))
        .collect();
    assert!(!linked.is_empty() && !copied.is_empty());

    // Partitions recorded without their tally (as earlier versions wrote
    // them): the merge counts the threads, the same summary.
    let fresh = |name: &str| -> Vec<PathBuf> {
        let root = tmp.path().join(name);
        parts
            .iter()
            .map(|p| {
                let to = root.join(p.file_name().unwrap());
                crate::common::corpus::copy_tree(p, &to);
                to
            })
            .collect()
    };
    let old = fresh("old");
    for p in &old {
        let path = p.join("manifest.json");
        let mut m: socialctx::Manifest = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
        let rec = m.partition.as_mut().unwrap();
        assert!(!rec.threads_by_event.is_empty());
        rec.threads_by_event.clear();
        let sum = m.partition_checksum().unwrap();
        m.partition.as_mut().unwrap().xxh3 = sum;
        m.seal();
        fs::write(&path, m.to_bytes().unwrap()).unwrap();
    }
    let out = tmp.path().join("merged-old");
    let s = merge(&out, &old).unwrap();
    assert_eq!(files(&out), want);
    assert_eq!((&s.labels, &s.events), (&summary.labels, &summary.events));

    // The options, counts and columns a merge takes from a manifest are
    // under the partition record's checksum: edited (and the manifest
    // sealed again), refused.
    type Edit = (&'static str, fn(&mut socialctx::Manifest));
    let edits: [Edit; 4] = [
        ("shard_bytes", |m| m.options.shard_bytes *= 2),
        ("replies", |m| {
            m.replies -= 1;
            m.retweets += 1
        }),
        ("strict", |m| m.options.strict = !m.options.strict),
        ("columns", |m| {
            m.reaction_columns.pop();
        }),
    ];
    for (what, edit) in edits {
        let set = fresh(&format!("edited-{what}"));
        for p in &set {
            let path = p.join("manifest.json");
            let mut m: socialctx::Manifest =
                serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
            edit(&mut m);
            m.seal();
            fs::write(&path, m.to_bytes().unwrap()).unwrap();
        }
        let out = tmp.path().join(format!("out-{what}"));
        match merge(&out, &set) {
            // Columns this library does not write are refused as such.
            Err(BuildError::BadPartition { reason, .. }) => assert!(
                reason.contains("checksum") || what == "columns",
                "{what}: {reason}"
            ),
            other => panic!("{what}: {:?}", other.map(|_| ())),
        }
    }

    // A partition shard whose mode (or owner) is not what a file the merge
    // writes gets is copied, not linked: the cache's files stay alike.
    {
        use std::os::unix::fs::PermissionsExt;
        let set = fresh("modes");
        let l = &linked[0];
        let k = parts.iter().position(|p| l.starts_with(p)).unwrap();
        let odd = set[k].join(l.file_name().unwrap());
        fs::set_permissions(&odd, fs::Permissions::from_mode(0o600)).unwrap();
        let out = tmp.path().join("out-modes");
        merge(&out, &set).unwrap();
        assert_eq!(files(&out), want);
        let ino = fs::metadata(&odd).unwrap().ino();
        let mut modes = std::collections::BTreeSet::new();
        for e in fs::read_dir(&out).unwrap() {
            let m = e.unwrap().metadata().unwrap();
            assert_ne!(m.ino(), ino, "the file of another mode was linked");
            modes.insert(m.mode() & 0o7777);
        }
        assert_eq!(modes.len(), 1, "{modes:?}");
    }

    // Damage: a byte flipped in the middle of any shard file, or one cut
    // short. The merge refuses, or the merged cache does not open; never a
    // cache that opens with other values.
    let mut cases = 0;
    for (k, victim) in linked.iter().chain(&copied).enumerate() {
        for cut in [false, true] {
            let set = fresh(&format!("damaged-{k}-{cut}"));
            let p = parts.iter().position(|p| victim.starts_with(p)).unwrap();
            let file = set[p].join(victim.file_name().unwrap());
            let mut bytes = fs::read(&file).unwrap();
            if cut {
                bytes.truncate(bytes.len() - 7);
            } else {
                let mid = bytes.len() / 2;
                bytes[mid] ^= 0x55;
            }
            fs::write(&file, bytes).unwrap();
            let out = tmp.path().join(format!("out-{k}-{cut}"));
            match merge(&out, &set) {
                Err(e) => {
                    assert!(matches!(e, BuildError::BadPartition { .. }), "{e}");
                    assert!(!out.exists());
                }
                Ok(_) => {
                    assert!(!cut, "{}: a file cut short is refused", file.display());
                    // It linked the damaged file, and the merged cache
                    // names it.
                    let ino = fs::metadata(&file).unwrap().ino();
                    let name = fs::read_dir(&out)
                        .unwrap()
                        .map(|e| e.unwrap())
                        .find(|e| e.metadata().unwrap().ino() == ino)
                        .map(|e| e.file_name().to_string_lossy().into_owned())
                        .expect("merged without refusing, so it linked the file");
                    let e = socialctx::Cache::open(&out).unwrap_err().to_string();
                    assert!(e.contains(&name), "{e}");
                }
            }
            cases += 1;
        }
    }
    assert!(cases >= 4);
}
