"""Shared fixtures: the repository's corpora, built once per session, and the
Rust example binaries the parity tests compare against (built by the
README's test command before pytest runs)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

import socialctx

REPO = Path(__file__).resolve().parents[2]

# (corpus, oracle output with replies only, oracle output with retweets or None)
CORPORA = {
    "golden": (
        "tests/fixtures/golden/corpus",
        "tests/fixtures/golden/features-replies.jsonl",
        "tests/fixtures/golden/features.jsonl",
    ),
    "sample": (
        "data-samples/corpus",
        "data-samples/expected-replies.jsonl",
        "data-samples/expected.jsonl",
    ),
    "pheme-veracity": (
        "tests/fixtures/real/pheme-veracity/corpus",
        "tests/fixtures/real/pheme-veracity/expected.jsonl",
        None,
    ),
    "pheme-rnr": (
        "tests/fixtures/real/pheme-rnr/corpus",
        "tests/fixtures/real/pheme-rnr/expected.jsonl",
        None,
    ),
    "pheme-journalism": (
        "tests/fixtures/real/pheme-journalism/corpus",
        "tests/fixtures/real/pheme-journalism/expected.jsonl",
        None,
    ),
    "rumoureval2017": (
        "tests/fixtures/real/rumoureval2017/corpus",
        "tests/fixtures/real/rumoureval2017/expected.jsonl",
        None,
    ),
}


# The text oracle's output (rpdnn_tokens.py) for each corpus.
TOKEN_ORACLES = {
    "golden": "tests/fixtures/golden/tokens.jsonl",
    "sample": "data-samples/tokens.jsonl",
    "pheme-veracity": "tests/fixtures/real/pheme-veracity/tokens.jsonl",
    "pheme-rnr": "tests/fixtures/real/pheme-rnr/tokens.jsonl",
    "pheme-journalism": "tests/fixtures/real/pheme-journalism/tokens.jsonl",
    "rumoureval2017": "tests/fixtures/real/rumoureval2017/tokens.jsonl",
}


def target_dir() -> Path:
    """Cargo's target directory: $CARGO_TARGET_DIR (a relative one is relative to
    the repository root, where the test command runs cargo), else target/."""
    return REPO / os.environ.get("CARGO_TARGET_DIR", "target")


def binary(name: str) -> Path:
    """A Rust binary of this repository (example or workspace tool)."""
    release = target_dir() / "release"
    for p in (release / "examples" / name, release / name):
        if p.is_file():
            return p
    raise AssertionError(
        f"{name} is not built in {release}: run `cargo build --release --examples --bins` "
        "(the README's test command builds them)"
    )


def jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    """Every fixture corpus built once with the Python binding."""
    root = tmp_path_factory.mktemp("caches")
    out = {}
    for name, (corpus, _, _) in CORPORA.items():
        out[name] = root / name
        socialctx.build(REPO / corpus, out[name], workers=2, progress=False)
    yield out
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def big_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A generated corpus big enough for a build to take a while (2,000 threads)."""
    d = tmp_path_factory.mktemp("gen") / "corpus"
    subprocess.run([binary("gen-corpus"), d, "--threads", "2000"], check=True, capture_output=True)
    return d
