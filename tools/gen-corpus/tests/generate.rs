//! End-to-end tests of `generate` and the `gen-corpus` binary, on small corpora.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use gen_corpus::{ErrorKind, MAX_RETWEETS, MAX_THREADS, Options, Stats, generate};

/// Every file under `root`, by path relative to `root`, with its bytes.
fn tree(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
        for entry in fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(root, &path, out);
            } else {
                let rel = path.strip_prefix(root).unwrap().to_path_buf();
                out.insert(rel, fs::read(&path).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

/// Files whose parent folder is `folder`.
fn count_in(tree: &BTreeMap<PathBuf, Vec<u8>>, folder: &str) -> u64 {
    tree.keys()
        .filter(|p| p.parent().and_then(Path::file_name) == Some(folder.as_ref()))
        .count() as u64
}

fn opts(threads: u64, seed: u64, retweets: f64) -> Options {
    let mut o = Options::new(threads);
    o.seed = seed;
    o.retweets = retweets;
    o
}

#[test]
fn two_runs_give_identical_trees() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let o = opts(25, 11, 0.5);
    let sa = generate(a.path(), &o).unwrap();
    let sb = generate(b.path(), &o).unwrap();
    assert_eq!(sa, sb);
    let (ta, tb) = (tree(a.path()), tree(b.path()));
    assert!(!ta.is_empty());
    assert_eq!(ta.keys().collect::<Vec<_>>(), tb.keys().collect::<Vec<_>>());
    assert!(ta == tb, "same options, different bytes");

    let c = tempfile::tempdir().unwrap();
    generate(c.path(), &opts(25, 12, 0.5)).unwrap();
    assert!(tree(c.path()) != ta, "another seed gives another corpus");
}

#[test]
fn stats_match_the_files_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let stats = generate(dir.path(), &opts(40, 5, 0.4)).unwrap();
    let t = tree(dir.path());
    let sources = count_in(&t, "source-tweets") + count_in(&t, "source-tweet");
    assert_eq!(
        stats,
        Stats {
            threads: 40,
            replies: count_in(&t, "reactions"),
            retweets: count_in(&t, "retweets"),
            files: t.len() as u64,
            bytes: t.values().map(|b| b.len() as u64).sum(),
        }
    );
    assert_eq!(sources, 40);
    assert_eq!(stats.files, sources + stats.replies + stats.retweets);
    assert!(stats.replies > 0 && stats.retweets > 0);
    for (path, bytes) in &t {
        assert_eq!(path.extension(), Some("json".as_ref()));
        assert!(bytes.starts_with(b"{\"contributors\":null,"), "{path:?}");
        assert!(
            bytes.is_ascii(),
            "{path:?}: non-ASCII bytes are \\u-escaped"
        );
    }
}

#[test]
fn retweets_leave_the_replies_alone() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let without = generate(a.path(), &opts(15, 3, 0.0)).unwrap();
    let with = generate(b.path(), &opts(15, 3, 2.0)).unwrap();
    assert_eq!(without.retweets, 0);
    assert!(with.retweets > 0);
    assert_eq!(without.replies, with.replies);
    let mut tb = tree(b.path());
    tb.retain(|p, _| !p.components().any(|c| c.as_os_str() == "retweets"));
    assert!(tree(a.path()) == tb);
}

#[test]
fn a_non_empty_dir_is_refused_unless_force() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("keep.txt"), "mine").unwrap();
    let err = generate(dir.path(), &Options::new(3)).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotEmpty);
    assert_eq!(err.path(), Some(dir.path()));
    assert_eq!(
        err.to_string(),
        format!(
            "{} is not empty (pass --force to write into it anyway)",
            dir.path().display()
        )
    );
    assert_eq!(tree(dir.path()).len(), 1, "nothing written");

    let mut o = Options::new(3);
    o.force = true;
    let stats = generate(dir.path(), &o).unwrap();
    let t = tree(dir.path());
    assert_eq!(t.len() as u64, stats.files + 1);
    assert_eq!(t[Path::new("keep.txt")], b"mine");
}

#[test]
fn bad_options_are_rejected_before_writing() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("never");
    let bad = [
        opts(0, 1, 0.0),
        opts(MAX_THREADS + 1, 1, 0.0),
        opts(u64::MAX, 1, 0.0),
        opts(1, 1, -0.5),
        opts(1, 1, MAX_RETWEETS + 0.5),
        opts(1, 1, f64::NAN),
        opts(1, 1, f64::INFINITY),
    ];
    for o in &bad {
        assert!(o.validate().is_err(), "{o:?}");
        let err = generate(&out, o).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidOptions, "{o:?}");
        assert!(err.path().is_none() && err.io_error().is_none());
        let msg = err.to_string();
        assert!(msg.starts_with("invalid "), "{msg}");
    }
    assert!(!out.exists());
    assert_eq!(
        generate(&out, &opts(0, 1, 0.0)).unwrap_err().to_string(),
        "invalid thread count 0: it must be between 1 and 4194304"
    );
    assert_eq!(
        generate(&out, &opts(1, 1, -0.5)).unwrap_err().to_string(),
        "invalid retweet fraction -0.5: it must be between 0 and 1000"
    );
    for o in [opts(1, 1, 0.0), opts(MAX_THREADS, 1, MAX_RETWEETS)] {
        assert!(o.validate().is_ok(), "{o:?}");
    }
}

#[test]
fn an_unusable_output_dir_is_an_io_error_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("a-file");
    fs::write(&file, "").unwrap();
    let err = generate(&file, &Options::new(1)).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Io);
    assert_eq!(err.path(), Some(file.as_path()));
    assert!(err.io_error().is_some());
    let msg = err.to_string();
    assert!(
        msg.starts_with(&format!(
            "cannot use {} as the output directory: ",
            file.display()
        )),
        "{msg}"
    );

    let err = generate(file.join("below"), &Options::new(1)).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Io);
    assert!(
        err.to_string().contains(&file.display().to_string()),
        "{err}"
    );
}

#[test]
fn options_defaults_and_stats_json() {
    let o = Options::new(7);
    assert_eq!(
        (o.threads, o.seed, o.retweets, o.force),
        (7, 2015, 0.0, false)
    );
    let s = Stats {
        threads: 1,
        replies: 2,
        retweets: 3,
        files: 6,
        bytes: 12_345,
    };
    assert_eq!(
        s.to_json(),
        r#"{"threads": 1, "replies": 2, "retweets": 3, "files": 6, "bytes": 12345}"#
    );
}

#[test]
fn the_binary_prints_the_stats_line_and_uses_exit_codes() {
    let bin = env!("CARGO_BIN_EXE_gen-corpus");
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let run = |args: &[&str]| Command::new(bin).args(args).output().unwrap();

    let dir = a.path().to_str().unwrap();
    let out = run(&[dir, "--threads", "6", "--seed", "9", "--retweets", "0.5"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(out.stderr.is_empty());
    let stats = generate(b.path(), &opts(6, 9, 0.5)).unwrap();
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        format!("{}\n", stats.to_json())
    );
    assert!(tree(a.path()) == tree(b.path()));

    let out = run(&[dir, "--threads", "6"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(
        err,
        format!("gen-corpus: error: {dir} is not empty (pass --force to write into it anyway)\n")
    );

    for bad in [
        &[dir][..],
        &[dir, "--threads", "0"],
        &[dir, "--threads", "4194305"],
        &[dir, "--threads", "1", "--retweets", "1001"],
        &[dir, "--threads", "1", "--retweets", "x"],
    ] {
        assert_eq!(run(bad).status.code(), Some(2), "{bad:?}");
    }
}
