//! The example programs as a user runs them: exit codes, messages, files.

use std::fs;
use std::process::Output;

use crate::common::*;

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn precache_builds_reports_and_dump_prints_oracle_lines() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let report = tmp.path().join("bad.jsonl");
    let o = example("precache")
        .arg(repo("data-samples/corpus"))
        .arg(&cache)
        .args(["--threads", "2", "--quiet", "--report"])
        .arg(&report)
        .output()
        .unwrap();
    let (out, err) = text(&o);
    assert!(o.status.success(), "precache failed: {err}");
    assert!(out.contains("threads    38"), "{out}");
    assert!(out.contains("skipped    17"), "{out}");
    assert!(out.contains("reactions/s"), "{out}");
    // "replies" as `describe` and to_arrow's threads level count them: the
    // 3 source tweets that the sample's reactions/ folders hold again are
    // counted apart (the summary said 346 replies, describe 343).
    assert!(
        out.contains("reactions  420 (343 replies, 74 retweets, 3 copies of the source tweet)"),
        "{out}"
    );
    // Skipped inputs by kind of reason: the counts add up to the total.
    let by_reason: usize = out
        .lines()
        .skip_while(|l| !l.starts_with("skipped"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .map(|l| {
            l.split_whitespace()
                .next()
                .unwrap()
                .parse::<usize>()
                .unwrap()
        })
        .sum();
    assert_eq!(by_reason, 17, "{out}");
    assert!(
        out.contains("  not valid UTF-8") && out.contains("  invalid JSON"),
        "{out}"
    );
    // Threads per label code and per event (the layout's event names).
    assert!(
        out.contains("labels     non-rumour 13, rumour 21, unknown 4"),
        "{out}"
    );
    let events = out
        .lines()
        .find(|l| l.starts_with("events"))
        .expect("events line");
    assert!(
        events.contains("ferguson 7") && !events.contains("-all-rnr-threads"),
        "{events}"
    );
    let lines = jsonl(&fs::read_to_string(&report).unwrap());
    assert_eq!(lines.len(), 17);
    assert!(
        lines
            .iter()
            .all(|l| l["path"].is_string() && l["reason"].is_string())
    );

    let o = example("dump")
        .arg(&cache)
        .arg("--retweets")
        .output()
        .unwrap();
    assert!(o.status.success());
    let ours = jsonl(&text(&o).0);
    let expected = jsonl(&fs::read_to_string(repo("data-samples/expected.jsonl")).unwrap());
    assert_same_features(&ours, &expected, "dump --retweets");
    // The oracle's own spelling, not just the same values.
    let first = text(&o).0.lines().next().unwrap().to_string();
    assert!(first.starts_with("{\"source_id\": \""), "{first}");
}

#[test]
fn strict_fails_with_nonzero_exit_and_keeps_the_cache() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let corpus = repo("data-samples/corpus");
    assert!(
        example("precache")
            .arg(&corpus)
            .arg(&cache)
            .arg("-q")
            .status()
            .unwrap()
            .success()
    );
    let manifest = fs::read(cache.join("manifest.json")).unwrap();
    let o = example("precache")
        .arg(&corpus)
        .arg(&cache)
        .args(["-q", "--strict"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let (_, err) = text(&o);
    assert!(err.contains("bad input (strict mode)"), "{err}");
    assert_eq!(fs::read(cache.join("manifest.json")).unwrap(), manifest);
}

#[test]
fn errors_are_messages_not_panics() {
    let tmp = tempfile::tempdir().unwrap();
    let o = example("precache")
        .arg(tmp.path().join("nope"))
        .arg(tmp.path().join("c"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).1.contains("does not exist"), "{}", text(&o).1);

    let o = example("dump")
        .arg(tmp.path().join("nope"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let err = text(&o).1;
    assert!(err.starts_with("error: no cache at"), "{err}");

    let cache = tmp.path().join("cache");
    build_cache(&repo("tests/fixtures/real/pheme-rnr/corpus"), &cache, 1);
    let shard = cache.join("shard-00000.rkyv");
    let mut bytes = fs::read(&shard).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 1;
    fs::write(&shard, bytes).unwrap();
    let o = example("dump").arg(&cache).output().unwrap();
    assert_eq!(o.status.code(), Some(1));
    let (out, err) = text(&o);
    assert!(out.is_empty(), "nothing printed from a damaged cache");
    assert!(
        err.contains("shard-00000.rkyv") && err.contains("corrupt"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");

    let o = example("precache")
        .arg("--threads")
        .arg("0")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "bad usage");
}

#[test]
fn help_explains_itself() {
    for (name, words) in [
        (
            "precache",
            &[
                "--strict",
                "--report",
                "--workers",
                "CORPUS",
                "sample corpus",
            ][..],
        ),
        ("dump", &["--retweets", "CACHE", "source-id order"][..]),
    ] {
        let o = example(name).arg("--help").output().unwrap();
        assert!(o.status.success());
        let out = text(&o).0;
        for w in words {
            assert!(out.contains(w), "{name} --help mentions {w}: {out}");
        }
        // `--threads` is the hidden former name of `--workers` (the other
        // tests still use it): a cache's threads are conversation threads.
        assert!(!out.contains("--threads"), "{name} --help: {out}");
    }
}

/// Under an address-space limit (`ulimit -v`), asking for many threads must
/// not abort or panic (it did: exit 134 or 101): the build uses as many
/// workers as fit, says how many, and writes the same cache.
#[test]
fn precache_under_an_address_space_limit_uses_fewer_workers_and_the_same_cache() {
    use std::os::unix::process::CommandExt;
    let tmp = tempfile::tempdir().unwrap();
    let free = tmp.path().join("free");
    let o = example("precache")
        .arg(repo("data-samples/corpus"))
        .arg(&free)
        .args(["--threads", "2", "--quiet"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o).1);
    for threads in ["16", "64", "256"] {
        let limited = tmp.path().join(format!("limited-{threads}"));
        let mut cmd = example("precache");
        cmd.arg(repo("data-samples/corpus"))
            .arg(&limited)
            .args(["--threads", threads, "--quiet"]);
        // SAFETY: setrlimit is async-signal-safe; nothing else runs in the child.
        unsafe {
            cmd.pre_exec(|| {
                let lim = libc::rlimit {
                    rlim_cur: 512 << 20,
                    rlim_max: 512 << 20,
                };
                if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let o = cmd.output().unwrap();
        let (out, err) = text(&o);
        assert_eq!(o.status.code(), Some(0), "--threads {threads}: {err}");
        let workers: usize = out
            .lines()
            .find_map(|l| l.strip_prefix("workers"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no workers line: {out}"));
        assert!(
            (1..=threads.parse().unwrap()).contains(&workers),
            "{workers} workers for --threads {threads}"
        );
        for name in [
            "manifest.json",
            "shard-00000.rkyv",
            "text-00000.rkyv",
            "report.jsonl",
        ] {
            assert_eq!(
                fs::read(free.join(name)).unwrap(),
                fs::read(limited.join(name)).unwrap(),
                "{name} differs with --threads {threads} under the limit"
            );
        }
    }
}

/// Settings that cannot mean anything are refused as bad usage (exit 2)
/// with the option named; a file that is not a split says so in words.
#[test]
fn nonsense_options_are_refused_with_clear_messages() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("c");
    build_cache(&repo("data-samples/corpus"), &cache, 2);
    let corpus = repo("data-samples/corpus");
    for (program, input, option) in [
        ("floor", &corpus, "--threads"),
        ("loadbench", &cache, "--max-cxt"),
    ] {
        let o = example(program)
            .arg(input)
            .args([option, "0"])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{program} {option} 0");
        assert!(text(&o).1.contains(option), "{}", text(&o).1);
    }
    let o = example("stats")
        .arg(&cache)
        .arg("--split")
        .arg(repo("README.md"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let err = text(&o).1;
    assert!(
        err.contains("README.md") && err.contains("not an RPDNN split file"),
        "{err}"
    );
    assert!(!err.contains("StringRecord"), "{err}");
}

/// `dump --tokens --retweets` prints exactly the text oracle's bytes for the
/// shipped sample; `--tokens` with `--extended` is a usage error.
#[test]
fn dump_tokens_prints_the_text_oracle_and_refuses_extended() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    build_cache(&repo("data-samples/corpus"), &cache, 2);
    let o = example("dump")
        .arg(&cache)
        .args(["--tokens", "--retweets"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o).1);
    let expected = fs::read_to_string(repo("data-samples/tokens.jsonl")).unwrap();
    assert!(
        text(&o).0 == expected,
        "dump --tokens --retweets differs from data-samples/tokens.jsonl"
    );

    let o = example("dump")
        .arg(&cache)
        .args(["--tokens", "--extended"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).1.contains("--extended"), "{}", text(&o).1);
}

/// Output that cannot be written (stdout a full disk) is an error, not a
/// silent success with an empty file: `stats > table.txt` on a full disk
/// exited 0. A reader that went away (`| head`) stays quiet.
#[test]
fn output_to_a_full_disk_is_an_error() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    build_cache(&repo("data-samples/corpus"), &cache, 1);
    let full = || {
        fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap()
    };
    for name in ["stats", "dump"] {
        let o = example(name).arg(&cache).stdout(full()).output().unwrap();
        let err = text(&o).1;
        assert_eq!(o.status.code(), Some(1), "{name}: {err}");
        assert!(
            err.starts_with("error: writing output") && err.contains("No space left"),
            "{name}: {err}"
        );
        assert!(!err.contains("panicked"), "{name}: {err}");
    }
}

/// `--io-depth 100000000` started prefetch threads until one could not get
/// its stack and the process aborted (a Rust backtrace, exit 134); `-j`
/// near its old bound of 65535 exhausted memory the same way. Both are
/// bounded now: a usage error naming the option, before anything starts.
#[test]
fn thread_counts_past_any_machine_are_usage_errors() {
    let tmp = tempfile::tempdir().unwrap();
    for (option, value) in [("--io-depth", "100000000"), ("--workers", "65535")] {
        let o = example("precache")
            .arg(repo("data-samples/corpus"))
            .arg(tmp.path().join("c"))
            .args(["--quiet", option, value])
            .output()
            .unwrap();
        let err = text(&o).1;
        assert_eq!(o.status.code(), Some(2), "{option} {value}: {err}");
        assert!(err.contains(option) && err.contains("1024"), "{err}");
        assert!(!tmp.path().join("c").exists());
    }
}
