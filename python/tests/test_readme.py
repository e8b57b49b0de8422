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
