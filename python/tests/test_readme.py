"""The README's Python example runs as written (from the repository root)."""

from __future__ import annotations

import os
import re

from conftest import REPO


def _has_torch() -> bool:
    if os.environ.get("SOCIALCTX_REQUIRE_TORCH"):
        return True
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def test_readme_python_examples_run():
    """The examples, in order, in one scope (each continues the one before);
    the PyTorch one where torch is installed (CI requires it)."""
    text = (REPO / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert len(blocks) == 4, "the README has four Python examples"
    cwd = os.getcwd()
    os.chdir(REPO)
    scope: dict[str, object] = {}
    try:
        exec(compile(blocks[0], "README.md", "exec"), scope)
        assert len(scope["cache"]) == 38  # type: ignore[arg-type]
        assert scope["summary"].threads == 38  # type: ignore[attr-defined]
        assert scope["batch"].size > 0  # type: ignore[attr-defined]
        exec(compile(blocks[1], "README.md", "exec"), scope)
        if _has_torch():
            exec(compile(blocks[2], "README.md", "exec"), scope)
            assert scope["state"]["batches_done"] == len(scope["ds"])  # type: ignore[index,arg-type]
            assert scope["rows"].shape[-1] == 4  # type: ignore[attr-defined]
            exec(compile(blocks[3], "README.md", "exec"), scope)
            graph, ids = scope["graph"], scope["ids"]
            assert graph.num_nodes > 32 and len(graph.ptr) == 33  # type: ignore[attr-defined]
            assert ids.shape[0] == 32 and ids.shape[2] == 30 and ids.max() > 1  # type: ignore[attr-defined]
            assert len(scope["indptr"]) == graph.num_nodes + 1  # type: ignore[arg-type,attr-defined]
            tested = sum(len(f.test) for f in scope["folds"])  # type: ignore[attr-defined]
            assert tested == int((scope["cache"].labels >= 0).sum())  # type: ignore[attr-defined]
    finally:
        os.chdir(cwd)
    batch = scope["batch"]
    for name in ("reply", "desc"):
        emb = batch.embeddings[name]  # type: ignore[attr-defined]
        assert emb.shape[:2] == batch.features.shape[:2] and emb.shape[2] == 4  # type: ignore[attr-defined]
        assert emb.any(), name
