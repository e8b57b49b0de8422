"""The README's Python example runs as written (from the repository root)."""

from __future__ import annotations

import os
import re

from conftest import REPO


def test_readme_python_examples_run():
    """Both examples, in order, in one scope (the second continues the first)."""
    text = (REPO / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert len(blocks) == 2, "the README has two Python examples"
    cwd = os.getcwd()
    os.chdir(REPO)
    scope: dict[str, object] = {}
    try:
        exec(compile(blocks[0], "README.md", "exec"), scope)
        assert len(scope["cache"]) == 38  # type: ignore[arg-type]
        assert scope["batch"].size > 0  # type: ignore[attr-defined]
        exec(compile(blocks[1], "README.md", "exec"), scope)
    finally:
        os.chdir(cwd)
    batch = scope["batch"]
    for name in ("reply", "desc"):
        emb = batch.embeddings[name]  # type: ignore[attr-defined]
        assert emb.shape[:2] == batch.features.shape[:2] and emb.shape[2] == 4  # type: ignore[attr-defined]
        assert emb.any(), name
