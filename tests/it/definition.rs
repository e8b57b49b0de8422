//! Every artifact knows which code computed it (issue 42, items 1 and 2):
//! the upgrade of the issue (one line of a feature function changed,
//! `description_len + 1`) simulated by the test hook
//! `SOCIALCTX_TEST_DEFINITION` in the command's process, with no second
//! build of the crate. An incremental build over an older cache builds in
//! full and equals the new full build byte for byte; a partition build
//! refuses an older plan; a merge refuses partitions of two versions,
//! naming both; exit codes and messages through the command.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::process::Output;

use crate::common::example;
use socialctx::{Cache, Manifest, ThreadSource};

const HOOK: &str = "SOCIALCTX_TEST_DEFINITION";

/// `example` run as library version `version` (0: this one; another: the
/// upgrade simulated by the hook).
fn run(name: &str, version: u32, args: &[&Path]) -> Output {
    let mut c = example(name);
    c.args(args).env_remove(HOOK);
    if name != "merge" {
        c.arg("-q");
    }
    if version != 0 {
        c.env(HOOK, version.to_string());
    }
    c.output().unwrap()
}

fn text(o: &Output) -> (Option<i32>, String, String) {
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// The cache's own files (not `derived/`), by name.
fn cache_files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, fs::read(&p).unwrap())
        })
        .collect()
}

fn definition(cache: &Path) -> String {
    Cache::open(cache).unwrap().manifest().definition.clone()
}

/// Sum of `description_len` over every reaction.
fn description_lens(cache: &Path) -> f64 {
    let c = Cache::open(cache).unwrap();
    let col = socialctx::Feature::DescriptionLen as usize;
    (0..c.len())
        .map(|i| {
            c.numbers(i)
                .unwrap()
                .features()
                .iter()
                .map(|r| f64::from(r[col]))
                .sum::<f64>()
        })
        .sum()
}

fn corpus(dir: &Path, threads: u64) -> std::path::PathBuf {
    let corpus = dir.join("corpus");
    gen_corpus::generate(&corpus, &gen_corpus::Options::new(threads)).unwrap();
    corpus
}

/// The defect 1: `build --incremental` on last night's cache after
/// the upgrade kept the old values in 299 of 300 threads. Now it builds in
/// full, says why, and publishes exactly the new full build; later
/// incremental builds of the same version reuse again.
#[test]
fn an_incremental_build_after_an_upgrade_is_the_new_full_build() {
    let tmp = tempfile::tempdir().unwrap();
    let corpus = corpus(tmp.path(), 12);
    let (cache, full) = (tmp.path().join("cache"), tmp.path().join("full"));
    let inc = Path::new("--incremental");
    // Last night's cache, by the old version.
    let o = run("precache", 0, &[&corpus, &cache, inc]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o).2);
    assert!(!text(&o).2.contains(HOOK), "{}", text(&o).2);
    assert_eq!(definition(&cache), Manifest::current_definition());
    let old_lens = description_lens(&cache);

    // The upgrade.
    let o = run("precache", 1, &[&corpus, &cache, inc]);
    let (code, out, err) = text(&o);
    assert_eq!(code, Some(0), "{err}");
    // The hook is compiled into the binaries users run: a process it
    // changes never says nothing (its values are not this version's).
    assert!(
        err.contains(&format!("warning: {HOOK}=1 is set")),
        "the simulation was silent: {err}"
    );
    let new_def = definition(&cache);
    assert_ne!(new_def, Manifest::current_definition());
    let line = out.lines().find(|l| l.starts_with("build ")).unwrap();
    assert!(
        line.contains("full build: definition changed")
            && line.contains(Manifest::current_definition())
            && line.contains(&new_def),
        "{line}"
    );
    let o = run("precache", 1, &[&corpus, &full]);
    assert_eq!(o.status.code(), Some(0));
    assert!(
        cache_files(&cache) == cache_files(&full),
        "not the new full build"
    );
    // The simulated upgrade did change values: reusing any thread would
    // have shown in the bytes.
    assert!(description_lens(&cache) > old_lens);

    // The same version again: reuse as before.
    let o = run("precache", 1, &[&corpus, &cache, inc]);
    let (code, out, _) = text(&o);
    assert_eq!(code, Some(0));
    assert!(out.contains("nothing changed"), "{out}");
    // And back to the old version (a rollback): a full build again.
    let o = run("precache", 0, &[&corpus, &cache, inc]);
    let (code, out, _) = text(&o);
    assert_eq!(code, Some(0));
    assert!(out.contains("full build: definition changed"), "{out}");
    assert_eq!(definition(&cache), Manifest::current_definition());
    assert_eq!(description_lens(&cache), old_lens);
}

/// A partition build refuses a plan made by another version (exit 1, both
/// definitions named, nothing written); a plan from before definitions
/// were recorded likewise.
#[test]
fn a_partition_build_refuses_a_plan_of_another_definition() {
    let tmp = tempfile::tempdir().unwrap();
    let corpus = corpus(tmp.path(), 6);
    let plan = tmp.path().join("plan.json");
    let part = tmp.path().join("part");
    let o = run("precache", 0, &[&corpus, &part, Path::new("--plan"), &plan]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o).2);
    let build = |version| {
        run(
            "precache",
            version,
            &[
                &corpus,
                &part,
                Path::new("--plan"),
                &plan,
                Path::new("--partition"),
                Path::new("0/2"),
            ],
        )
    };
    let (code, _, err) = text(&build(1));
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("definition")
            && err.contains(Manifest::current_definition())
            && err.contains("make the plan again"),
        "{err}"
    );
    assert!(!part.exists(), "nothing written");
    let (code, _, err) = text(&build(0));
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(definition(&part), Manifest::current_definition());

    // A plan of an older release, byte for byte as it wrote it: no
    // definition field, sealed over its own fields (the checksum is the
    // xxh3 of the JSON with the checksum empty). It is another version's
    // plan, not a damaged one.
    let ours = String::from_utf8(fs::read(&plan).unwrap()).unwrap();
    let field = format!(",\"definition\":\"{}\"", Manifest::current_definition());
    assert!(ours.contains(&field), "{ours}");
    let at = ours.rfind(",\"checksum\":\"").unwrap();
    let unsealed = format!("{},\"checksum\":\"\"}}", &ours[..at]).replacen(&field, "", 1);
    let sum = format!("{:016x}", xxhash_rust::xxh3::xxh3_64(unsealed.as_bytes()));
    fs::write(
        &plan,
        unsealed.replacen("\"checksum\":\"\"", &format!("\"checksum\":\"{sum}\""), 1),
    )
    .unwrap();
    let _ = fs::remove_dir_all(&part);
    let (code, _, err) = text(&build(0));
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("definition none recorded") && !err.contains("checksum"),
        "an older release's plan read as damaged: {err}"
    );
    assert!(!part.exists());
}

/// `merge` refuses one partition of each version, naming both definitions
/// and both partitions (exit 1, nothing published); partitions of one
/// other version are refused by this one, and merged by theirs into their
/// full build.
#[test]
fn a_merge_of_partitions_of_two_versions_is_refused_naming_both() {
    let tmp = tempfile::tempdir().unwrap();
    let corpus = corpus(tmp.path(), 8);
    let p = |n: &str| tmp.path().join(n);
    let flag = Path::new;
    for (version, plan) in [(0, p("plan0.json")), (1, p("plan1.json"))] {
        let o = run(
            "precache",
            version,
            &[&corpus, &p("x"), flag("--plan"), &plan],
        );
        assert_eq!(o.status.code(), Some(0));
        for i in 0..2 {
            let out = p(&format!("v{version}-part{i}"));
            let spec = format!("{i}/2");
            let o = run(
                "precache",
                version,
                &[
                    &corpus,
                    &out,
                    flag("--plan"),
                    &plan,
                    flag("--partition"),
                    flag(&spec),
                ],
            );
            assert_eq!(o.status.code(), Some(0), "{}", text(&o).2);
        }
    }
    let (old_def, new_def) = (definition(&p("v0-part0")), definition(&p("v1-part0")));
    assert_ne!(old_def, new_def);
    let merged = p("merged");
    for version in [0, 1] {
        let o = run("merge", version, &[&merged, &p("v0-part0"), &p("v1-part1")]);
        let (code, _, err) = text(&o);
        assert_eq!(code, Some(1), "{err}");
        assert!(
            err.contains(&old_def)
                && err.contains(&new_def)
                && err.contains("v0-part0")
                && err.contains("v1-part1")
                && err.contains("never mix"),
            "{err}"
        );
        assert!(!merged.exists());
    }
    let o = run("merge", 0, &[&merged, &p("v1-part0"), &p("v1-part1")]);
    let (code, _, err) = text(&o);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains(&new_def) && err.contains(&old_def), "{err}");
    assert!(!merged.exists());
    let o = run("merge", 1, &[&merged, &p("v1-part0"), &p("v1-part1")]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o).2);
    let o = run("precache", 1, &[&corpus, &p("full")]);
    assert_eq!(o.status.code(), Some(0));
    assert!(cache_files(&merged) == cache_files(&p("full")));
}
