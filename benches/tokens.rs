//! Reply-text tokenizer cost (RPDNN's `preprocessing_tweet_text` and nltk's
//! `TweetTokenizer().tokenize`), per text.
//!
//! ```text
//! cargo bench --bench tokens [-- --quick]
//! ```
//!
//! The texts are those of the parity fixtures (`tests/fixtures/tokens/real.jsonl`:
//! every distinct tweet text of the real corpora; `synthetic.jsonl`: the
//! adversarial branch/boundary cases), loaded into memory first. One iteration
//! tokenizes every text of a set once with one reused `Tokenizer`; criterion's
//! throughput is in texts (elements) per second, and the setup line on stderr
//! gives the count. Pattern compilation is done before timing and reported
//! separately.

use std::hint::black_box;
use std::path::Path;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use pycompat::{Tokenizer, Tokens, warm_up};

fn texts(name: &str) -> Vec<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/tokens")
        .join(name);
    let raw = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    raw.lines()
        .filter(|l| !l.is_empty())
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("fixture line");
            v["text"].as_str().expect("text").to_owned()
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let (fast, exact) = warm_up();
    eprintln!(
        "tokens: pattern compile {:.1} ms (exact variant, first needed by e-mail-like or 256+ char texts: {:.1} ms)",
        fast.as_secs_f64() * 1e3,
        exact.as_secs_f64() * 1e3
    );
    for set in ["real.jsonl", "synthetic.jsonl"] {
        let texts = texts(set);
        eprintln!("tokens: {set}: {} texts", texts.len());
        let mut group = c.benchmark_group(format!("tokens/{}", set.trim_end_matches(".jsonl")));
        group.throughput(Throughput::Elements(texts.len() as u64));
        let mut tok = Tokenizer::new();
        let mut out = Tokens::default();
        group.bench_function("reply_tokens", |b| {
            b.iter(|| {
                let mut n = 0;
                for t in &texts {
                    tok.reply_tokens(black_box(t), &mut out);
                    n += out.len();
                }
                n
            })
        });
        group.bench_function("tweet_tokenize", |b| {
            b.iter(|| {
                let mut n = 0;
                for t in &texts {
                    tok.tweet_tokenize(black_box(t), &mut out);
                    n += out.len();
                }
                n
            })
        });
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
