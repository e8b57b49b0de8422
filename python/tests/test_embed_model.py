"""Model identity of embedding stores (issue 42, item 3): an interrupted embed
resumes only under a model identity known to be the same (an explicit
``model_id``, the callable's ``model_id`` attribute, or one the command
derives), a nightly embed never appends rows of another model, ``info``
shows each store's model, and a Loader or dataset can require one."""

from __future__ import annotations

import re
import shutil

import numpy as np
import pytest

import socialctx
from embed_helpers import Interrupt, toy


@pytest.fixture()
def golden(built, tmp_path) -> socialctx.Cache:
    """A private copy of the golden cache (stores are written beside it)."""
    out = tmp_path / "cache"
    shutil.copytree(built["golden"], out)
    return socialctx.open(out)


def scaled(scale: float):
    """A model of width 4 whose rows are the toy rows times ``scale``."""
    return lambda batch: np.stack([toy(t) * scale for t in batch])


def stopped_at_third_call(model):
    """``model``, interrupted (as a Ctrl-C would) during its third call."""
    calls = 0

    def fn(batch):
        nonlocal calls
        calls += 1
        if calls == 3:
            raise Interrupt
        return model(batch)

    return fn


def _rows_are(cache: socialctx.Cache, name: str, model) -> None:
    unique = cache.unique_texts("reply")
    want = model([unique[i] for i in range(len(unique))])
    got = np.asarray(socialctx.open_store(cache, name).vectors)
    assert np.array_equal(got, want), "the store holds rows of another model"


def test_another_model_without_model_id_starts_over_instead_of_mixing(golden):
    """The defect: without a model_id, a resume under another model of the
    same width kept the first two batches of the first model."""
    with pytest.raises(Interrupt):
        socialctx.embed(golden, stopped_at_third_call(scaled(1)), name="m", batch_size=16)
    with pytest.warns(UserWarning, match="no model id") as warned:
        result = socialctx.embed(golden, scaled(2), name="m", batch_size=16)
    assert warned[0].filename == __file__
    assert result.resumed == 0 and result.restarted is not None
    assert "no model id" in result.restarted and ".m.partial" in result.restarted
    _rows_are(golden, "m", scaled(2))
    assert socialctx.open_store(golden, "m").meta["model_id"] is None


def test_the_same_model_id_resumes_and_another_starts_over(golden):
    with pytest.raises(Interrupt):
        socialctx.embed(
            golden, stopped_at_third_call(scaled(1)), name="m", batch_size=16, model_id="a"
        )
    resumed = socialctx.embed(golden, scaled(1), name="m", batch_size=16, model_id="a")
    assert resumed.resumed == 2 and resumed.restarted is None and resumed.model_id == "a"
    _rows_are(golden, "m", scaled(1))
    with pytest.raises(Interrupt):
        socialctx.embed(
            golden, stopped_at_third_call(scaled(1)), name="n", batch_size=16, model_id="a"
        )
    with pytest.warns(UserWarning, match='made by model "a", not by model "b"'):
        other = socialctx.embed(golden, scaled(2), name="n", batch_size=16, model_id="b")
    assert other.resumed == 0 and other.reused == 0 and '"a"' in (other.restarted or "")
    _rows_are(golden, "n", scaled(2))


@pytest.mark.parametrize(
    "change, why",
    [
        ({"batch_size": 8}, "the batch size changed (16 → 8)"),
        ({"dtype": "float16"}, "the dtype changed (float32 → float16)"),
        ({"field": "description"}, "the field changed (reply → description)"),
    ],
)
def test_an_interrupted_embed_of_other_options_says_why_it_starts_over(golden, change, why):
    """Red team D7: an interrupted embed thrown away because of another
    batch size, field or dtype said nothing (the model id's case did)."""
    with pytest.raises(Interrupt):
        socialctx.embed(
            golden, stopped_at_third_call(scaled(1)), name="m", batch_size=16, model_id="a"
        )
    opts = {"name": "m", "batch_size": 16, "model_id": "a", **change}
    with pytest.warns(UserWarning, match=re.escape(why)) as warned:
        result = socialctx.embed(golden, scaled(1), **opts)
    assert warned[0].filename == __file__
    assert result.resumed == 0 and why in (result.restarted or ""), result.restarted
    assert ".m.partial" in (result.restarted or "")


class Named:
    """A model that says which it is (e.g. from its weights' hash)."""

    def __init__(self, model_id: str, scale: float) -> None:
        self.model_id = model_id
        self.fn = scaled(scale)

    def __call__(self, batch):
        return self.fn(batch)


def test_the_callables_model_id_attribute_names_the_model(golden):
    with pytest.raises(Interrupt):
        socialctx.embed(golden, stopped_at_third_call(Named("w1", 1)), name="m", batch_size=16)
    # The wrapper has no attribute: the model is unknown, so no resume.
    with pytest.warns(UserWarning, match="no model id"):
        socialctx.embed(golden, Named("w1", 1), name="m", batch_size=16)
    assert socialctx.open_store(golden, "m").meta["model_id"] == "w1"
    with pytest.raises(Interrupt):
        socialctx.embed(
            golden, stopped_at_third_call(scaled(1)), name="o", batch_size=16, model_id="w1"
        )
    assert socialctx.embed(golden, Named("w1", 1), name="o", batch_size=16).resumed == 2
    with pytest.raises(Interrupt):
        socialctx.embed(
            golden, stopped_at_third_call(scaled(1)), name="n", batch_size=16, model_id="w1"
        )
    with pytest.warns(UserWarning, match='"w1", not by model "w2"'):
        r = socialctx.embed(golden, Named("w2", 2), name="n", batch_size=16)
    assert r.resumed == 0 and r.model_id == "w2"
    _rows_are(golden, "n", scaled(2))


# --- The nightly embed over a store of another model ------------------------


@pytest.mark.parametrize(
    ("first", "then", "why"),
    [
        ("toy-1", "toy-2", 'made by model "toy-1", not by model "toy-2"'),
        (None, "toy-2", "no model id"),
        ("toy-1", None, None),
    ],
    ids=["another-id", "first-without-id", "now-without-id"],
)
def test_a_nightly_embed_never_appends_to_a_store_of_another_model(tmp_path, first, then, why):
    from embed_helpers import REPO

    corpus = tmp_path / "corpus"
    shutil.copytree(REPO / "data-samples/corpus", corpus)
    out = tmp_path / "cache"
    socialctx.build(corpus, out, progress=False)
    socialctx.embed(socialctx.open(out), scaled(1), name="r", batch_size=16, model_id=first)
    reply = sorted(corpus.rglob("reactions/*.json"))[0]
    reply.write_text(reply.read_text().replace('"text": "', '"text": "tonight: ', 1))
    socialctx.build(corpus, out, progress=False, incremental=True)
    cache = socialctx.open(out)
    if why is None:
        night = socialctx.embed(cache, scaled(2), name="r", batch_size=16, model_id=then)
    else:
        with pytest.warns(UserWarning, match=why):
            night = socialctx.embed(cache, scaled(2), name="r", batch_size=16, model_id=then)
        assert why in (night.not_reused or "")
    assert night.reused == 0 and night.new == night.unique and night.compacted
    _rows_are(cache, "r", scaled(2))
    store = socialctx.open_store(cache, "r")
    assert len(store.segments) == 1 and store.meta["model_id"] == then


# --- A reader can require a model --------------------------------------------


def test_a_loader_refuses_a_store_of_another_model(golden):
    socialctx.embed(golden, scaled(1), name="r", batch_size=64, model_id="elmo-2024")
    socialctx.embed(golden, scaled(1), name="anon", batch_size=64)
    ok = socialctx.Loader(golden, embeddings={"r": "elmo-2024", "anon": None})
    assert ok.embeddings == ["r", "anon"]
    batch = ok.new_batch(4)
    ok.fill(range(4), batch)
    plain = socialctx.Loader(golden, embeddings=["r", "anon"])
    other = plain.new_batch(4)
    plain.fill(range(4), other)
    assert np.array_equal(batch.embeddings["r"], other.embeddings["r"])
    store = str(golden.derived_dir) + "/embeddings/r"
    with pytest.raises(socialctx.EmbeddingError) as e:
        socialctx.Loader(golden, embeddings={"r": "elmo-2025"})
    assert store in str(e.value) and '"elmo-2024"' in str(e.value)
    assert '"elmo-2025" is required' in str(e.value)
    with pytest.raises(socialctx.EmbeddingError, match="no model id"):
        socialctx.Loader(golden, embeddings={"anon": "elmo-2024"})
    with pytest.raises(socialctx.EmbeddingError, match='"elmo-2025" is required'):
        socialctx.open_store(golden, "r", model_id="elmo-2025")
    assert socialctx.open_store(golden, "r", model_id="elmo-2024").meta["model_id"] == "elmo-2024"
    for bad in ({"r": 3}, {1: "elmo-2024"}, "r"):
        with pytest.raises(TypeError, match="'embeddings'"):
            socialctx.Loader(golden, embeddings=bad)


def test_a_dataset_passes_the_requirement_to_its_loader(golden):
    torch_ds = pytest.importorskip("socialctx.torch")
    socialctx.embed(golden, scaled(1), name="r", batch_size=64, model_id="elmo-2024")
    positions = np.arange(8)
    ds = torch_ds.CacheDataset(golden, positions, 4, embeddings={"r": "elmo-2024"})
    assert ds.embeddings == ["r"]
    with pytest.raises(socialctx.EmbeddingError, match='"elmo-2024", but model "x"'):
        torch_ds.CacheDataset(golden, positions, 4, embeddings={"r": "x"})


def test_info_shows_each_stores_model(golden):
    from socialctx.cli import info, info_text

    socialctx.embed(golden, scaled(1), name="a", batch_size=64, model_id="elmo-2024")
    socialctx.embed(golden, scaled(1), name="b", batch_size=64)
    d = info(golden.path)
    assert [(s["name"], s["model_id"]) for s in d["embeddings"]] == [
        ("a", "elmo-2024"),
        ("b", None),
    ]
    text = info_text(d)
    assert "embeddings/a: field reply" in text and 'model "elmo-2024"' in text
    assert "model unknown (no model id)" in text


# --- The command: a model id derived from --model ----------------------------

MODULE = """
import os, signal
import numpy as np

SCALE = {scale}
calls = 0


def embed(batch):
    global calls
    calls += 1
    if calls == 3 and os.environ.get("STOP_AT_THIRD"):
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C during the third call
    return np.stack([np.array([len(t), sum(map(len, t)) % 97, 1.0], np.float32) * SCALE
                     for t in batch])
"""


def _module_rows(scale: float):
    return lambda batch: np.stack(
        [np.array([len(t), sum(map(len, t)) % 97, 1.0], np.float32) * scale for t in batch]
    )


def _command(cache: socialctx.Cache, cwd, *extra: str, stop: bool = False):
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = dict(os.environ, STOP_AT_THIRD="1" if stop else "")
    exe = Path(sys.executable).parent / "socialctx"
    args = ["embed", cache.path, "--model", "mymodel:embed", "--name", "m", "--batch-size", "16"]
    return subprocess.run(
        [exe, *args, *extra], capture_output=True, text=True, cwd=cwd, env=env, timeout=120
    )


def test_the_command_resumes_only_the_same_model(golden, tmp_path):
    """`socialctx embed` without --model-id, interrupted, then run with a
    one-line edit of the model's module: it starts over and says so. Run
    again unedited after an interruption: it resumes."""
    (tmp_path / "mymodel.py").write_text(MODULE.format(scale=1.0))
    stopped = _command(golden, tmp_path, stop=True)
    assert stopped.returncode == 130, stopped.stderr
    (tmp_path / "mymodel.py").write_text(MODULE.format(scale=2.0))
    swapped = _command(golden, tmp_path)
    assert swapped.returncode == 0, swapped.stderr
    assert "resumed    0 batches" in swapped.stdout
    assert "restarted  " in swapped.stdout and "starting over" in swapped.stdout
    assert swapped.stderr.startswith("warning: ") and "starting over" in swapped.stderr
    assert "model      mymodel:embed@" in swapped.stdout and "derived" in swapped.stdout
    _rows_are(golden, "m", _module_rows(2.0))
    derived = socialctx.open_store(golden, "m").meta["model_id"]
    assert derived.startswith("mymodel:embed@")

    # The same module, interrupted and run again: it resumes.
    shutil.rmtree(golden.derived_dir)
    assert _command(golden, tmp_path, stop=True).returncode == 130
    again = _command(golden, tmp_path)
    assert again.returncode == 0, again.stderr
    assert "resumed    2 batches" in again.stdout and "restarted" not in again.stdout
    _rows_are(golden, "m", _module_rows(2.0))
    assert socialctx.open_store(golden, "m").meta["model_id"] == derived
    # A derived id resumes but never reuses a previous store's rows (the
    # weights a module loads are not in it): every input embedded again.
    rerun = _command(golden, tmp_path)
    assert "reused     0 " in rerun.stdout and "not reused" not in rerun.stdout, rerun.stdout


def test_the_command_with_a_model_id_resumes_and_reuses(golden, tmp_path):
    (tmp_path / "mymodel.py").write_text(MODULE.format(scale=1.0))
    assert _command(golden, tmp_path, "--model-id", "v1", stop=True).returncode == 130
    # Another model under another explicit id: started over.
    (tmp_path / "mymodel.py").write_text(MODULE.format(scale=3.0))
    r = _command(golden, tmp_path, "--model-id", "v3")
    assert r.returncode == 0 and "resumed    0 batches" in r.stdout, r.stderr
    assert 'made by model "v1", not by model "v3"' in r.stdout
    assert "model      v3 (given)" in r.stdout
    _rows_are(golden, "m", _module_rows(3.0))
    again = _command(golden, tmp_path, "--model-id", "v3")
    assert "new        0 " in again.stdout and "reused     " in again.stdout
    # Another id on the same store: nothing reused, and the reason printed.
    (tmp_path / "mymodel.py").write_text(MODULE.format(scale=4.0))
    other = _command(golden, tmp_path, "--model-id", "v4")
    assert 'not reused made by model "v3", not by model "v4": every input' in other.stdout, (
        other.stdout
    )
    _rows_are(golden, "m", _module_rows(4.0))


def test_a_bound_methods_object_names_the_model_and_empty_ids_are_refused(golden):
    class Elmo:
        model_id = "elmo-w7"

        def embed(self, batch):
            return scaled(1)(batch)

    r = socialctx.embed(golden, Elmo().embed, name="m", batch_size=64)
    assert r.model_id == "elmo-w7"
    with pytest.raises(ValueError, match="must not be empty"):
        socialctx.embed(golden, scaled(1), name="m", model_id="")
    assert socialctx.open_store(golden, "m").meta["model_id"] == "elmo-w7"
