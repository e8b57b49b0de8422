//! Parity of `pycompat`'s tokenizer with Python 3.11 + nltk 3.10.4 (fixtures written by
//! tests/fixtures/tokens/make_cases.py), and no panics on arbitrary input.
//!
//! `TOKENS_FIXTURES=DIR cargo test --release --test it -- --ignored tokens::parity_extra`
//! checks every `*.jsonl` fixture of DIR (e.g. `make_cases.py --full DIR`, or
//! `make_cases.py --corpus CORPUS DIR/corpus.jsonl`).
//! `cargo test --release --test it -- --ignored --nocapture tokens::timing` prints µs/text.

use std::path::{Path, PathBuf};

use pycompat::{Tokenizer, Tokens};

#[derive(serde::Deserialize)]
struct Case {
    text: String,
    reply_tokens: Vec<String>,
    tweet_tokenize: Vec<String>,
}

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tokens")
}

fn load(path: &Path) -> Vec<Case> {
    let raw = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    raw.lines()
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{}: {e}: {l}", path.display())))
        .collect()
}

fn got(out: &Tokens) -> Vec<String> {
    out.iter().map(str::to_owned).collect()
}

/// Checks every case; returns (cases, differences) and prints the first ones.
fn check(path: &Path) -> (usize, usize) {
    let cases = load(path);
    let mut tok = Tokenizer::new();
    let mut out = Tokens::default();
    let mut bad = 0;
    for c in &cases {
        tok.reply_tokens(&c.text, &mut out);
        let r = got(&out);
        tok.tweet_tokenize(&c.text, &mut out);
        let w = got(&out);
        if r != c.reply_tokens || w != c.tweet_tokenize {
            bad += 1;
            if bad <= 8 {
                let short: String = c.text.chars().take(300).collect();
                eprintln!(
                    "{}: text {short:?} ({} chars)",
                    path.display(),
                    c.text.chars().count()
                );
                if w != c.tweet_tokenize {
                    eprintln!(
                        "  tweet_tokenize: rust   {w:?}\n                  python {:?}",
                        c.tweet_tokenize
                    );
                }
                if r != c.reply_tokens {
                    eprintln!(
                        "  reply_tokens:   rust   {r:?}\n                  python {:?}",
                        c.reply_tokens
                    );
                }
            }
        }
    }
    eprintln!(
        "{}: {} cases, {bad} differences",
        path.display(),
        cases.len()
    );
    (cases.len(), bad)
}

fn check_named(name: &str) {
    let (n, bad) = check(&fixture_dir().join(name));
    assert!(n > 0, "{name}: no cases");
    assert_eq!(bad, 0, "{name}: {bad} of {n} cases differ from Python");
}

#[test]
fn parity_real() {
    check_named("real.jsonl");
}

#[test]
fn parity_synthetic() {
    check_named("synthetic.jsonl");
}

#[test]
fn parity_codepoints() {
    check_named("codepoints.jsonl");
}

/// Entities decoding to lone surrogates: Python's tokens with U+FFFD in place
/// of the surrogate (the documented difference).
#[test]
fn parity_surrogates_as_replacement_char() {
    check_named("surrogates.jsonl");
}

#[test]
#[ignore]
fn parity_extra() {
    let dir = std::env::var("TOKENS_FIXTURES").expect("TOKENS_FIXTURES=DIR");
    let mut total = (0, 0);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let s = p.to_string_lossy();
            s.ends_with(".jsonl") || s.ends_with(".surrogates")
        })
        .collect();
    files.sort();
    for p in files {
        let (n, bad) = check(&p);
        total.0 += n;
        total.1 += bad;
    }
    eprintln!("total: {} cases, {} differences", total.0, total.1);
    assert_eq!(total.1, 0);
}

/// A small deterministic generator (xorshift) for the no-panic loop.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[test]
fn no_panic_on_random_strings() {
    const PIECES: &[&str] = &[
        "a",
        "Z",
        "ſ",
        "K",
        "İ",
        "Σ",
        "σ",
        "0",
        "9",
        "٣",
        "１",
        ".",
        "-",
        "_",
        "@",
        "#",
        "&",
        ";",
        ":",
        "/",
        "(",
        ")",
        "<",
        ">",
        "'",
        "\"",
        "!",
        "?",
        " ",
        "\t",
        "\n",
        "\r",
        "\u{1c}",
        "\u{85}",
        "\u{a0}",
        "\u{200b}",
        "\u{3000}",
        "\u{200d}",
        "🏽",
        "😀",
        "🇺",
        "\u{e0067}",
        "\u{e007f}",
        "🏴",
        "e\u{301}",
        "\u{301}",
        "\u{345}",
        "ß",
        "ﬁ",
        "한",
        "\u{1100}",
        "\u{1161}",
        "\u{11a8}",
        "http",
        "https://",
        "pic.twitter.com",
        ".com",
        "x.",
        "&#",
        "&#x",
        "amp;",
        "555",
        " 1234",
        "+1",
        "...",
        "!!!!",
        "\u{0}",
        "\u{7f}",
        "\u{fffd}",
        "\u{10ffff}",
        "&#xD800;",
        "&#1114112;",
        "&#x9d;",
        "a@b.c",
        "www.",
        "co.uk",
        "::",
        ":)",
        "<3",
        "->",
    ];
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut tok = Tokenizer::new();
    let mut out = Tokens::default();
    let mut s = String::new();
    for i in 0..20_000 {
        s.clear();
        let n = rng.below(if i % 100 == 0 { 400 } else { 40 });
        for _ in 0..n {
            if rng.below(8) == 0 {
                // any scalar value
                let c = char::from_u32((rng.next() % 0x11_0000) as u32).unwrap_or('\u{fffd}');
                s.push(c);
            } else {
                s.push_str(PIECES[rng.below(PIECES.len())]);
            }
        }
        tok.reply_tokens(&s, &mut out);
        tok.tweet_tokenize(&s, &mut out);
        // Every token is non-empty and a piece of the (decoded) text.
        assert!(out.iter().all(|t| !t.is_empty()));
    }
    // Long inputs.
    for piece in [
        "a.", "a-", "&#", "!", "@a", "x.com/", "(", "1 ", "ab.", "\u{301}", "Σ'",
    ] {
        let long = piece.repeat(20_000);
        tok.reply_tokens(&long, &mut out);
        tok.tweet_tokenize(&long, &mut out);
    }
}

/// Prints µs/text of both functions over the fixture texts (used by
/// benches/tokens_vs_python.py): `-- --ignored --nocapture timing`.
#[test]
#[ignore]
fn timing() {
    let (fast, exact) = pycompat::warm_up();
    println!(
        "RUST pattern compile: fast {:.1} ms, exact (first text with an e-mail-like @ or a 256+ char run) {:.1} ms",
        fast.as_secs_f64() * 1e3,
        exact.as_secs_f64() * 1e3
    );
    let file = std::env::var("TOKENS_TIMING_FILE")
        .map(PathBuf::from)
        .unwrap_or_else(|_| fixture_dir().join("real.jsonl"));
    let texts: Vec<String> = load(&file).into_iter().map(|c| c.text).collect();
    let mut tok = Tokenizer::new();
    let mut out = Tokens::default();
    let rounds: usize = std::env::var("TOKENS_TIMING_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    // The first pass of a fresh process (lazy DFA states, cold caches: what
    // a build's workers meet) is timed apart from the steady rounds.
    let t = std::time::Instant::now();
    for t in &texts {
        tok.reply_tokens(t, &mut out);
    }
    let first = t.elapsed().as_secs_f64() * 1e6 / texts.len() as f64;
    println!("RUST first pass (fresh process and Tokenizer) reply_tokens_us={first:.3}");
    let t = std::time::Instant::now();
    let mut n = 0usize;
    for _ in 0..rounds {
        for t in &texts {
            tok.reply_tokens(t, &mut out);
            n += out.len();
        }
    }
    let reply = t.elapsed().as_secs_f64() * 1e6 / (rounds * texts.len()) as f64;
    let t = std::time::Instant::now();
    for _ in 0..rounds {
        for t in &texts {
            tok.tweet_tokenize(t, &mut out);
            n += out.len();
        }
    }
    let tweet = t.elapsed().as_secs_f64() * 1e6 / (rounds * texts.len()) as f64;
    println!(
        "RUST texts={} reply_tokens_us={reply:.3} tweet_tokenize_us={tweet:.3} (tokens {n})",
        texts.len()
    );
}
