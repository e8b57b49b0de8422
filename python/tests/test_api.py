"""The Python API's shape: typed results, the `workers=` keyword (and its
deprecated name), keyword options checked by name, and runtime signatures
that match the type stubs."""

from __future__ import annotations

import ast
import inspect
import pickle
import pydoc
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import socialctx
from conftest import REPO

GOLDEN = REPO / "tests/fixtures/golden/corpus"
STUBS = Path(socialctx.__file__).with_name("_socialctx.pyi")


def test_build_returns_a_typed_summary(tmp_path):
    summary = socialctx.build(GOLDEN, tmp_path / "c", workers=1, progress=False)
    assert isinstance(summary, socialctx.BuildSummary)
    cache = socialctx.open(tmp_path / "c")
    m = cache.manifest
    assert summary.cache_dir == str(tmp_path / "c")
    assert (summary.threads, summary.reactions) == (len(cache), m["reactions"])
    assert (summary.replies, summary.retweets) == (m["replies"], m["retweets"])
    assert (summary.skipped, summary.shards) == (m["skipped"], len(m["shards"]))
    assert summary.workers == 1 and summary.seconds > 0
    assert summary.incremental is None and summary.plan_id is None
    assert summary.partitions is None
    text = repr(summary)
    assert text.startswith("socialctx.BuildSummary(cache_dir=") and f"threads={len(cache)}" in text
    with pytest.raises(AttributeError):
        summary.threads = 0  # type: ignore[misc]
    # Results cross processes (Dask tasks return them).
    again = pickle.loads(pickle.dumps(summary))
    assert repr(again) == text


def test_dict_style_reads_still_work_with_a_deprecation_warning(tmp_path):
    summary = socialctx.build(GOLDEN, tmp_path / "c", progress=False)
    with pytest.warns(DeprecationWarning, match=r"BuildSummary\.threads"):
        assert summary["threads"] == summary.threads
    with pytest.warns(DeprecationWarning), pytest.raises(KeyError):
        summary["nothing"]
    planned = socialctx.plan(GOLDEN, tmp_path / "plan.json")
    assert isinstance(planned, socialctx.PlanSummary) and len(planned.id) == 16
    assert repr(planned) == f"socialctx.PlanSummary(threads={planned.threads}, id={planned.id!r})"
    assert repr(pickle.loads(pickle.dumps(planned))) == repr(planned)
    with pytest.warns(DeprecationWarning, match=r"PlanSummary\.id"):
        assert planned["id"] == planned.id


def test_report_entries_are_typed(built):
    report = socialctx.open(built["sample"]).report
    assert report and all(isinstance(r, socialctx.BadInput) for r in report)
    first = report[0]
    assert repr(first) == f"socialctx.BadInput(path={first.path!r}, reason={first.reason!r})"
    with pytest.warns(DeprecationWarning):
        assert first["reason"] == first.reason


def test_threads_keyword_is_a_deprecated_name_of_workers(tmp_path):
    with pytest.warns(DeprecationWarning, match="workers="):
        summary = socialctx.build(GOLDEN, tmp_path / "c", threads=1, progress=False)
    assert summary.workers == 1
    with pytest.raises(ValueError, match="workers= only"):
        socialctx.build(GOLDEN, tmp_path / "c", threads=1, workers=1, progress=False)
    with pytest.raises(ValueError, match="workers must be at least 1"):
        socialctx.build(GOLDEN, tmp_path / "c", workers=0, progress=False)
    with pytest.warns(DeprecationWarning):
        socialctx.plan(GOLDEN, tmp_path / "plan.json", threads=1)
    with pytest.warns(DeprecationWarning):
        part = socialctx.build_partition(
            GOLDEN, tmp_path / "plan.json", 0, 1, tmp_path / "p", threads=1
        )
    assert part.partitions == 1 and part.workers == 1


def test_keyword_options_are_checked_by_name(tmp_path, built):
    with pytest.raises(TypeError, match="unexpected keyword argument 'strickt'"):
        socialctx.build(GOLDEN, tmp_path / "c", strickt=True)
    assert not (tmp_path / "c").exists()
    cache = socialctx.open(built["sample"])
    with pytest.raises(TypeError, match="unexpected keyword argument 'max_ctx'"):
        socialctx.Loader(cache, max_ctx=5)
    with pytest.raises(TypeError, match="'max_cxt'"):
        socialctx.Loader(cache, max_cxt="five")
    loader = socialctx.Loader(cache, max_cxt=5, pad="longest", pad_multiple=4)
    assert loader.max_cxt == 5 and loader.pad == "longest"
    with pytest.raises(TypeError, match="unexpected keyword argument 'ranks'"):
        loader.plan(range(len(cache)), 4, ranks=1)
    batches = loader.plan(np.arange(len(cache)), 4, seed=1, world_size=2, rank=1)
    assert sum(len(b) for b in batches) > 0


def _stub_functions() -> dict[str, ast.FunctionDef]:
    tree = ast.parse(STUBS.read_text())
    out: dict[str, ast.FunctionDef] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            out[node.name] = node
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    out[f"{node.name}.{item.name}"] = item
    return out


def _stub_params(fn: ast.FunctionDef) -> list[tuple[str, str, Any]]:
    """(name, kind, default) per parameter, `self` left out."""
    a = fn.args
    positional = [p.arg for p in a.posonlyargs + a.args if p.arg != "self"]
    defaults: list[Any] = [inspect.Parameter.empty] * (len(positional) - len(a.defaults))
    defaults += [ast.literal_eval(d) for d in a.defaults]
    params = [(n, "POSITIONAL_OR_KEYWORD", d) for n, d in zip(positional, defaults)]
    for p, d in zip(a.kwonlyargs, a.kw_defaults):
        params.append(
            (p.arg, "KEYWORD_ONLY", inspect.Parameter.empty if d is None else ast.literal_eval(d))
        )
    return params


def _runtime_params(obj: Any) -> list[tuple[str, str, Any]]:
    sig = inspect.signature(obj)
    return [(p.name, p.kind.name, p.default) for p in sig.parameters.values() if p.name != "self"]


@pytest.mark.parametrize(
    "name",
    [
        "build",
        "plan",
        "build_partition",
        "merge",
        "open",
        "Loader.__init__",
        "Loader.plan",
        "Loader.epoch",
        "Cache.vocabulary",
        "_socialctx",
    ],
)
def test_runtime_signatures_match_the_stubs(name):
    stub = _stub_functions()[name]
    if name == "Loader.__init__":
        runtime: Any = socialctx.Loader
    elif "." in name:
        cls, attr = name.split(".")
        runtime = getattr(getattr(socialctx._socialctx, cls), attr)
    else:
        runtime = getattr(socialctx._socialctx, name)
    assert _runtime_params(runtime) == _stub_params(stub)


def test_help_documents_every_loader_argument():
    text = pydoc.render_doc(socialctx.Loader, renderer=pydoc.plaintext)
    for name, _, _ in _runtime_params(socialctx.Loader):
        assert f"`{name}`" in text, name
    for name in ("kinds='replies'", "max_cxt=200", "pad_multiple=8", "dense=True"):
        assert name in text


def test_embed_returns_a_typed_summary(built, tmp_path):
    import shutil

    shutil.copytree(built["golden"], tmp_path / "c")
    cache = socialctx.open(tmp_path / "c")

    def model(batch: list[list[str]]) -> np.ndarray:
        return np.stack([np.full(2, len(t), np.float32) for t in batch])

    r = socialctx.embed(cache, model, field="reply", name="r")
    assert isinstance(r, socialctx.EmbedSummary)
    assert r.unique == len(cache.unique_texts("reply")) and r.dim == 2 and r.new == r.unique
    assert "EmbedSummary(calls=" in repr(r)
    with pytest.raises(AttributeError):
        r.calls = 0  # type: ignore[misc]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert r["unique"] == r.unique
    assert [w.category for w in caught] == [DeprecationWarning]


def test_a_failure_after_the_swap_is_a_warning_on_the_summary(tmp_path: Path) -> None:
    # Once the new cache is published the build has succeeded; what fails
    # after it (here: removing the replaced cache's first file, through the
    # publish fault hook) was printed by the command but lost to Python
    # callers. It is the summary's `warnings`.
    import json
    import os
    import shutil
    import subprocess
    import sys

    corpus = REPO / "data-samples/corpus"
    cache = tmp_path / "cache"
    assert socialctx.build(corpus, cache, progress=False).warnings == []
    shutil.copytree(cache, tmp_path / "saved")
    script = (
        "import json, sys, socialctx\n"
        "s = socialctx.build(sys.argv[1], sys.argv[2], progress=False)\n"
        "print(json.dumps(s.warnings))\n"
    )

    def run(hook: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "SOCIALCTX_TEST_PUBLISH_FAULT": hook}
        return subprocess.run(
            [sys.executable, "-c", script, str(corpus), str(cache)],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )

    traced = run("trace")
    assert traced.returncode == 0, traced.stderr
    # "publish step N: OP PATH": the first unlink in the swapped-out cache.
    steps = [ln.split(" ", 4)[2:] for ln in traced.stderr.splitlines() if ln.startswith("publish ")]
    (n,) = [n.rstrip(":") for n, op, path in steps if op == "unlink" and ".tmp-" in path][:1]
    shutil.rmtree(cache)
    shutil.copytree(tmp_path / "saved", cache)
    faulted = run(f"{n}:error")
    assert faulted.returncode == 0, faulted.stderr
    warned = json.loads(faulted.stdout)
    assert len(warned) == 1 and "the cache is published" in warned[0], warned
    summary = socialctx.build(corpus, cache, progress=False)
    assert summary.warnings == []
    assert pickle.loads(pickle.dumps(summary)).warnings == []
    assert "warnings=[]" in repr(summary)
