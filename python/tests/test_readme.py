"""The README's Python example runs as written (from the repository root)."""

from __future__ import annotations

import os
import re

from conftest import REPO


def test_readme_python_example_runs():
    text = (REPO / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks, "the README has a Python example"
    cwd = os.getcwd()
    os.chdir(REPO)
    try:
        scope: dict[str, object] = {}
        exec(compile(blocks[0], "README.md", "exec"), scope)
    finally:
        os.chdir(cwd)
    assert len(scope["cache"]) == 38  # type: ignore[arg-type]
    assert scope["batch"].size > 0  # type: ignore[attr-defined]
