"""Every fenced Python and shell block of the README and the guides runs as
pasted, alone: each in a fresh interpreter (or a fresh bash), in an empty
directory unless it is a command for a clone (it names `cargo` or a path of
the repository: then in the repository root), with the installed package's
`bin/` first on PATH. Blocks that cannot run here are listed in NOT_RUN with
the reason; the Rust blocks are doctests (src/lib.rs includes README.md and
GUIDE.md). benches/README.md's commands are benchmarks (minutes to hours) and
are not run."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

DOCS = ("README.md", "GUIDE.md", "python/README.md")
SHELLS = ("sh", "bash", "shell")

# First line of a block that is not run here -> why.
NOT_RUN = {
    "python3 -m venv .venv && . .venv/bin/activate": "installs the package, which CI installs "
    "before this test runs (scripts/test-all.sh; scripts/smoke-wheel.sh installs the wheel "
    "into a venv without cargo)",
    "python3 -m venv socialctx-env && . socialctx-env/bin/activate": "needs a wheel: "
    "test_cli.py::test_readme_install_section_verbatim runs it where one is built (CI)",
    "bash scripts/test-all.sh": "the test command itself, which runs this test (.ci/run runs it)",
    "#SBATCH --array=0-15": "a Slurm job script: test_cli.py::test_readme_partitioned_recipes_run "
    "runs it with a two-task array's environment",
}

# A line of a block -> code run after the block, in its interpreter: what the
# block made must be right, not just not fail.
PYTHON_CHECKS = {
    "for batch in loader.epoch(positions, 32, seed=0, labels=cache.labels[positions]):": """
assert len(cache) == 38, len(cache)
assert batch.features.shape[2] == 28 and batch.labels.min() >= 0
""",
    'summary = socialctx.build(corpus, "sample-cache")': """
assert summary.threads == 38 and len(cache) == 38
assert batch.features.shape[1:] == (200, 28) and batch.mask.any()
""",
    'batch.embeddings["desc"]': """
for name in ("reply", "desc"):
    emb = batch.embeddings[name]
    assert emb.shape[:2] == batch.features.shape[:2] and emb.shape[2] == 4, name
    assert emb.any(), name
assert unique.counts.sum() > len(unique.counts)
""",
    "rows = table(item)": """
assert state["epoch"] == 1 and state["batches_done"] == len(ds), (state, len(ds))
assert rows.shape[-1] == 4
""",
    "fold.event, fold.train, fold.test, fold.leakage": """
assert graph.num_nodes > 32 and len(graph.ptr) == 33
assert ids.shape[0] == 32 and ids.shape[2] == 30 and ids.max() > 1
assert len(indptr) == graph.num_nodes + 1
assert sum(len(f.test) for f in folds) == int((cache.labels >= 0).sum())
""",
    "ds.load_state_dict(state)  # the rest of the epoch, by source id": """
assert fold.missing.tolist() == [int(gone)]
r = ds.resumed
assert r["dropped"] + r["deleted_trained"] == 1 and r["added"] == 0, r
assert len(rest) == len(set(rest)) == r["remaining"], (len(rest), r)
assert r["trained"] + r["remaining"] == len(fold.train), r
""",
}

# A line of a shell block -> text its output must contain.
SHELL_CHECKS = {
    "cargo run --release --example precache": "threads    38",
    "socialctx dump sample-cache | head -c 300": '"source_id"',
    "socialctx build --sample sample-cache --incremental": "threads    38",
    "socialctx merge merged-cache part-0 part-1": "threads    38",
}


def _blocks() -> list[tuple[str, int, str, str]]:
    """(doc, line, language, code) of every Python and shell block."""
    out = []
    for doc in DOCS:
        text = (REPO / doc).read_text()
        for m in re.finditer(r"^```([\w,]*)\n(.*?)^```$", text, flags=re.S | re.M):
            lang = m.group(1).split(",")[0]
            if lang == "python" or lang in SHELLS:
                line = text.count("\n", 0, m.start()) + 1
                out.append((doc, line, lang, m.group(2)))
    return out


BLOCKS = _blocks()


def _describe_missing() -> bool:
    """The describe extra (pandas, pyarrow, matplotlib) is absent: the
    blocks of `socialctx describe`/`export` and `to_arrow` skip, except in
    CI, which installs it and requires the optional suites."""
    if os.environ.get("SOCIALCTX_REQUIRE_TORCH") or os.environ.get("SOCIALCTX_REQUIRE_CHROMIUM"):
        return False
    import importlib.util

    return any(importlib.util.find_spec(m) is None for m in ("pandas", "pyarrow", "matplotlib"))


DESCRIBE_SKIP = "the describe extra is not installed (pip install './python[describe]')"


def _torch_missing() -> bool:
    if os.environ.get("SOCIALCTX_REQUIRE_TORCH"):
        return False
    try:
        import torch  # noqa: F401
    except ImportError:
        return True
    return False


def _checks(code: str, checks: dict[str, str]) -> list[str]:
    return [check for line, check in checks.items() if line in code]


def test_every_doc_has_runnable_blocks_and_the_not_run_list_is_current() -> None:
    firsts = {code.splitlines()[0] for _, _, _, code in BLOCKS}
    for doc in DOCS:
        assert any(b[0] == doc for b in BLOCKS), f"{doc} has no Python or shell block"
    stale = [line for line in NOT_RUN if line not in firsts]
    assert not stale, f"NOT_RUN names blocks that no doc has: {stale}"
    for checks in (PYTHON_CHECKS, SHELL_CHECKS):
        unused = [k for k in checks if not any(k in code for _, _, _, code in BLOCKS)]
        assert not unused, f"checks for blocks that no doc has: {unused}"


@pytest.mark.parametrize("doc,line,lang,code", BLOCKS, ids=[f"{d}:{n}" for d, n, _, _ in BLOCKS])
def test_block_runs_alone(doc: str, line: int, lang: str, code: str, tmp_path: Path) -> None:
    first = code.splitlines()[0]
    if first in NOT_RUN:
        # Not a skip: the reason is on record, and CI runs it elsewhere.
        return
    env = dict(os.environ)
    # The installed package's `socialctx` and `python` first, as in its venv.
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    in_clone = "cargo " in code or re.search(r"\b(scripts|data-samples|target)/", code)
    cwd = REPO if in_clone else tmp_path
    where = f"{doc}:{line}"
    if lang == "python":
        if ("torch" in code) and _torch_missing():
            pytest.skip("torch is not installed (pip install './python[torch,pyg,dask]')")
        if ("to_arrow" in code or "describe(" in code) and _describe_missing():
            pytest.skip(DESCRIBE_SKIP)
        checks = _checks(code, PYTHON_CHECKS)
        program = code + "".join(checks)
        r = subprocess.run(
            [sys.executable, "-c", program],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert r.returncode == 0, f"{where} failed:\n{r.stdout}\n{r.stderr}"
    else:
        if re.search(r"socialctx (describe|export)", code) and _describe_missing():
            pytest.skip(DESCRIBE_SKIP)
        # -e: a failing command fails the block (a pipeline's last command
        # counts, as in an interactive shell, so `| head` is fine).
        r = subprocess.run(
            ["bash", "-eu", "-c", code],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert r.returncode == 0, f"{where} failed:\n{r.stdout}\n{r.stderr}"
        for expected in _checks(code, SHELL_CHECKS):
            assert expected in r.stdout + r.stderr, f"{where}: no {expected!r} in\n{r.stdout}"
    if not in_clone:
        assert not list(REPO.glob("sample-cache")), "a block wrote into the repository"


# The docs' claims that can be checked without running a block: the paths
# they name, what each `--incremental` line's comment says it prints, the
# options of the commands they show, and the set-up times they quote.

CLAIM_DOCS = (*DOCS, "FEATURES.md")
_TOP = "(?:src|tests|python|scripts|benches|crates|data-samples|tools|fuzz|examples|\\.ci)"


def _named_paths(text: str) -> list[str]:
    """Repository paths in code spans: a file with a known extension, or a
    path under a top-level folder of the repository. Placeholders (``<x>``,
    ``NNNNN``, ``*``, ``$``), absolute paths and URLs are not paths here."""
    out = []
    for m in re.finditer(r"`([^`\s]+/[^`\s]*)`", text):
        p = m.group(1).rstrip(".,:;")
        if re.search(r"[*{}<>$()\[\]]|NNNNN|^[a-z]+:|^/|^~|::|^\.\.?/", p):
            continue
        if re.search(r"\.(py|pyi|rs|md|sh|toml|jsonl|json|csv|txt|yml|yaml)$", p) or re.match(
            _TOP + "/", p
        ):
            out.append(p)
    return out


@pytest.mark.parametrize("doc", CLAIM_DOCS)
def test_paths_the_docs_name_exist(doc: str) -> None:
    """FEATURES.md named `oracle/rpdnn_oracle.py` "beside this file" (it is
    in tests/fixtures/oracle/) and GUIDE.md `src/features/user.rs`. A path
    is looked up from the repository root and from the doc's folder."""
    text = (REPO / doc).read_text()
    named = _named_paths(text)
    assert named, f"{doc} names no path: the pattern is wrong"
    gone = [p for p in named if not any((b / p).exists() for b in (REPO, (REPO / doc).parent))]
    assert not gone, f"{doc} names paths that do not exist: {gone}"


# A phrase of an `--incremental` line's comment -> what its `build` line says.
INCREMENTAL_CLAIMS = {
    "nothing changed": "build      incremental: nothing changed",
    "full build": "build      full build: ",
    "re-read": "build      incremental: ",
}


def test_incremental_examples_print_what_their_comment_says(tmp_path: Path) -> None:
    """GUIDE.md's `socialctx build --sample sample-cache --incremental   #
    nothing changed: the cache is kept` printed "full build: the old cache
    has no fingerprints" after the plain build before it. Each block with
    such a line runs line by line, and each commented `--incremental` line's
    output must say what its comment does."""
    env = {**os.environ}
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    seen = 0
    for doc, line, lang, code in BLOCKS:
        if lang not in SHELLS or not re.search(r"--incremental\b.*#", code):
            continue
        where = tmp_path / f"{doc.replace('/', '_')}-{line}"
        where.mkdir()
        for cmd in code.splitlines():
            command, _, comment = cmd.partition("#")
            if not command.strip():
                continue
            r = subprocess.run(
                ["bash", "-eu", "-c", command],
                cwd=where,
                env=env,
                capture_output=True,
                text=True,
                timeout=300,
            )
            assert r.returncode == 0, f"{doc}:{line}: {command}\n{r.stderr}"
            if "--incremental" not in command or not comment.strip():
                continue
            claims = [said for phrase, said in INCREMENTAL_CLAIMS.items() if phrase in comment]
            assert claims, f"{doc}:{line}: no known claim in {comment!r} (INCREMENTAL_CLAIMS)"
            assert claims[0] in r.stdout, f"{doc}:{line}: {cmd!r} printed\n{r.stdout}"
            seen += 1
    assert seen >= 2


def _doc_commands() -> list[tuple[str, str, list[str]]]:
    """(doc, subcommand, its options) for every `socialctx SUBCOMMAND ...`
    in the docs' code (blocks and spans)."""
    out = []
    for doc in DOCS:
        text = (REPO / doc).read_text()
        for m in re.finditer(r"socialctx ([a-z][a-z-]+)((?: +[^\s`|#>]+)*)", text):
            options = re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", m.group(2))
            out.append((doc, m.group(1), options))
    return out


def test_the_docs_command_options_are_in_their_help() -> None:
    """Every `socialctx SUBCOMMAND --option` the docs show is an option
    that `socialctx SUBCOMMAND --help` lists."""
    import shutil

    exe = shutil.which("socialctx", path=os.path.dirname(sys.executable))
    assert exe, "the installed package's command is missing"
    commands = set(
        re.findall(
            r"^  ([a-z][a-z-]+) ",
            subprocess.run([exe, "--help"], capture_output=True, text=True).stdout,
            re.M,
        )
    )
    helps: dict[str, str] = {}
    wrong = []
    checked = 0
    for doc, sub, options in _doc_commands():
        if sub not in commands:
            continue  # prose ("socialctx command"), not a subcommand
        if sub not in helps:
            helps[sub] = subprocess.run([exe, sub, "--help"], capture_output=True, text=True).stdout
        for o in options:
            checked += 1
            if not re.search(rf"(?<![\w-]){re.escape(o)}(?![\w-])", helps[sub]):
                wrong.append((doc, sub, o))
    assert checked > 20, checked
    assert not wrong, f"options the help does not list: {wrong}"


def test_the_readme_quotes_the_set_up_table() -> None:
    """The README said 65 s and 4 minutes; the table it links said 4 min
    25 s and 7 min 3 s. Every time in the README's "Two commands" section
    is the benches' set-up table's."""
    readme = (REPO / "README.md").read_text()
    start = readme.index("\n## Two commands")
    section = readme[start : readme.index("\n## ", start + 1)]
    benches = (REPO / "benches/README.md").read_text()
    start = benches.index("\n## Set-up time")
    table = benches[start : benches.index("\n## ", start + 1)]
    times = re.findall(r"\d+(?:\.\d+)? (?:min \d+ s|s|min)\b", section)
    assert len(times) >= 5, times
    missing = [t for t in times if t not in table]
    assert not missing, f"README times not in benches/README.md's set-up table: {missing}"
