#!/usr/bin/env python3
"""Python's preprocessing_tweet_text (RPDNN, nltk 3.10.4) vs the Rust port, same
texts, same run: prints µs/text of both and the ratio.

Usage (from the crate root; needs nltk 3.10.4 and regex, e.g. /tmp/tokvenv):

    /tmp/tokvenv/bin/python benches/tokens_vs_python.py [FIXTURE.jsonl]

FIXTURE defaults to tests/fixtures/tokens/real.jsonl (every distinct tweet text
of the real corpora). The Rust side is the `timing` helper of tests/it/tokens.rs
(`cargo test --release --test it -- --ignored --nocapture tokens::timing`, one
thread, a reused Tokenizer, patterns compiled before timing), fed the same file
through TOKENS_TIMING_FILE. Both sides time single-threaded loops over all
texts (Python: best of 3 rounds; Rust: 20 rounds after one warm-up round).
"""
import json
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "fixtures", "tokens"))
from make_cases import TOK, preprocessing_tweet_text  # noqa: E402


def main():
    path = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                           os.path.join(ROOT, "tests", "fixtures", "tokens", "real.jsonl"))
    texts = [json.loads(l)["text"] for l in open(path, encoding="utf-8") if l.strip()]
    preprocessing_tweet_text("warm up the pattern cache")
    best_reply = best_tok = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for t in texts:
            preprocessing_tweet_text(t)
        best_reply = min(best_reply, time.perf_counter() - t0)
        t0 = time.perf_counter()
        for t in texts:
            TOK.tokenize(t)
        best_tok = min(best_tok, time.perf_counter() - t0)
    py_reply = best_reply * 1e6 / len(texts)
    py_tok = best_tok * 1e6 / len(texts)

    env = dict(os.environ, TOKENS_TIMING_FILE=path)
    env.setdefault("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    res = subprocess.run(
        ["cargo", "test", "--release", "--test", "it", "--", "--ignored", "--nocapture", "--exact", "tokens::timing"],
        cwd=ROOT, env=env, capture_output=True, text=True)
    rust = [l for l in res.stdout.splitlines() if l.startswith("RUST")]
    if res.returncode != 0 or not rust:
        sys.stderr.write(res.stdout + res.stderr)
        sys.exit("the Rust timing helper failed")
    m = re.search(r"reply_tokens_us=([0-9.]+) tweet_tokenize_us=([0-9.]+)", rust[-1])
    rs_reply, rs_tok = float(m.group(1)), float(m.group(2))
    print(f"texts: {len(texts)} ({path})")
    for l in rust:
        print(l)
    print(f"preprocessing_tweet_text: python {py_reply:8.2f} us/text   rust {rs_reply:6.3f} us/text   "
          f"ratio {py_reply / rs_reply:5.1f}x")
    print(f"TweetTokenizer.tokenize : python {py_tok:8.2f} us/text   rust {rs_tok:6.3f} us/text   "
          f"ratio {py_tok / rs_tok:5.1f}x")


if __name__ == "__main__":
    main()
