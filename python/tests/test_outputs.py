"""What the operator set around the package's outputs is kept (issue 44):
every Python writer (``export``, ``describe --html``, a fold's CSV files) x
{mode restricted, group set, symlinked output, a killed run's temporary
file}, and an embedding store moved to another disk and symlinked.

They write through the crate's one routine (``_Replacement``), the one the
command's ``--report`` and ``stats --save`` use (tests/it/operator_edges.rs
runs the same table over those). The group case needs root (only root may
give a file a group it is not in) and is skipped otherwise, saying so."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import socialctx
from embed_helpers import toy

NOGROUP = 65534


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "socialctx", *args], capture_output=True, text=True, check=False
    )


def export(cache: Path, out: Path) -> None:
    r = run_cli("export", str(cache), str(out))
    assert r.returncode == 0, r.stderr


def describe_html(cache: Path, out: Path) -> None:
    r = run_cli("describe", str(cache), "--html", str(out))
    assert r.returncode == 0, r.stderr


def fold_csv(cache: Path, out: Path) -> None:
    # The fold writes two files into a directory; `out` is the train file.
    fold = socialctx.folds(socialctx.open(cache))[0]
    fold.write_csv(out.parent)


WRITERS: dict[str, tuple[Callable[[Path, Path], None], str]] = {
    "export": (export, "out.parquet"),
    "describe --html": (describe_html, "out.html"),
    "Fold.write_csv": (fold_csv, "all_rnr_train_set_combined.csv"),
}
#: What each writer needs beyond the test extra (the describe extra's
#: packages): without them it skips, naming the module, as test_arrow does.
NEEDS = {"export": ["pyarrow"], "describe --html": ["pandas", "pyarrow", "matplotlib"]}


def temps(d: Path, name: str) -> list[str]:
    return sorted(p.name for p in d.iterdir() if p.name.startswith(f".{name}.tmp-"))


def dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


@pytest.mark.parametrize("case", ["mode", "group", "symlink", "killed"])
@pytest.mark.parametrize("writer", list(WRITERS))
def test_every_writer_keeps_what_the_operator_set(
    built: dict[str, Path], tmp_path: Path, writer: str, case: str
) -> None:
    for module in NEEDS.get(writer, []):
        pytest.importorskip(module)
    write, name = WRITERS[writer]
    cache = built["pheme-veracity"]
    d = tmp_path / "out"
    d.mkdir()
    out = d / name
    if case == "mode":
        # 0600 came back 0644: a rename of a new file with the umask's mode.
        out.write_text("last night")
        out.chmod(0o600)
        write(cache, out)
        assert stat.S_IMODE(out.stat().st_mode) == 0o600
        assert out.read_bytes() != b"last night"
    elif case == "group":
        if os.geteuid() != 0:
            pytest.skip("not root: only root may give a file a group its user is not in")
        out.write_text("last night")
        os.chown(out, -1, NOGROUP)
        out.chmod(0o640)
        write(cache, out)
        st = out.stat()
        assert (st.st_gid, stat.S_IMODE(st.st_mode)) == (NOGROUP, 0o640)
    elif case == "symlink":
        # The link was replaced by a regular file; the shared file it
        # pointed to kept last night's rows.
        shared = tmp_path / "shared"
        shared.mkdir()
        real = shared / name
        real.write_text("last night")
        out.symlink_to(real)
        write(cache, out)
        assert out.is_symlink() and out.resolve() == real.resolve()
        assert real.read_bytes() != b"last night"
        assert temps(shared, name) == []
    else:
        # A killed run's temporary file is removed by the next run; a file
        # of another name is not.
        (d / f".{name}.tmp-{dead_pid()}").write_text("half a")
        (d / f".{name}.tmp-mine").write_text("the user's")
        write(cache, out)
        assert temps(d, name) == [f".{name}.tmp-mine"]
        assert out.stat().st_size > 0


def test_a_killed_export_leaves_a_temp_the_next_export_removes(
    built: dict[str, Path], tmp_path: Path
) -> None:
    # A real kill, mid-write: the export is stopped while pyarrow writes.
    pytest.importorskip("pyarrow")
    out = tmp_path / "out.parquet"
    out.write_text("last night")
    code = (
        "import os, signal, pyarrow.parquet as pq, socialctx\n"
        "from socialctx.describe import write_parquet\n"
        "def die(*a, **k): os.kill(os.getpid(), signal.SIGKILL)\n"
        # export writes row groups as they come, through a ParquetWriter.
        "pq.ParquetWriter.write_table = die\n"
        f"write_parquet(socialctx.open({str(built['golden'])!r}), {str(out)!r})\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, check=False)
    assert r.returncode == -9, r.stderr
    assert out.read_text() == "last night"
    assert len(temps(tmp_path, "out.parquet")) == 1
    export(built["golden"], out)
    assert temps(tmp_path, "out.parquet") == []
    assert out.read_bytes().startswith(b"PAR1")


def test_a_symlinked_store_stays_a_link_and_its_target_is_updated(tmp_path: Path) -> None:
    """A store moved to a bigger disk and linked back (derived/embeddings/r
    -> /big/r) was replaced by the next embed with a real directory on the
    cache's file system; the one on the big disk stayed behind, stale."""
    cache_dir = tmp_path / "cache"
    socialctx.build(socialctx.sample_corpus(), cache_dir, workers=2, progress=False)
    cache = socialctx.open(cache_dir)

    def model(batch: list[list[str]]) -> np.ndarray:
        return np.stack([toy(t) for t in batch])

    socialctx.embed(cache, model, field="reply", name="r", batch_size=16, model_id="toy-1")
    link = Path(cache.derived_dir) / "embeddings" / "r"
    big = tmp_path / "big"
    big.mkdir()
    link.rename(big / "r")
    link.symlink_to(big / "r")
    (big / "r").chmod(0o750)

    def other(batch: list[list[str]]) -> np.ndarray:
        return np.stack([toy(t) * 2 for t in batch])

    socialctx.embed(cache, other, field="reply", name="r", batch_size=16, model_id="toy-2")
    assert link.is_symlink() and link.resolve() == (big / "r").resolve()
    assert stat.S_IMODE((big / "r").stat().st_mode) == 0o750
    assert sorted(p.name for p in big.iterdir()) == ["r"]
    meta = (big / "r" / "meta.json").read_text()
    assert '"toy-2"' in meta, meta
    # Readers find it through the link, verified.
    socialctx.open_store(cache, "r")


def test_an_embed_overlapping_a_publish_says_so(tmp_path: Path) -> None:
    """An embed whose staging files a publishing build moved (it carries the
    old cache's derived/ into its new cache) failed with a bare "No such
    file or directory" on its own staging files."""
    cache_dir = tmp_path / "cache"
    socialctx.build(socialctx.sample_corpus(), cache_dir, workers=2, progress=False)
    cache = socialctx.open(cache_dir)
    parked = tmp_path / f".cache.tmp-{dead_pid()}"
    calls = 0

    def model(batch: list[list[str]]) -> np.ndarray:
        nonlocal calls
        calls += 1
        if calls == 2:
            # What a build does before its swap: derived/ into its staging.
            parked.mkdir()
            (cache_dir / "derived").rename(parked / "derived")
        return np.stack([toy(t) for t in batch])

    with pytest.raises(socialctx.EmbeddingError, match="a build published this cache") as e:
        socialctx.embed(cache, model, field="reply", name="r", batch_size=16)
    assert "No such file or directory" in str(e.value)


def test_info_validates_the_shards_and_says_so(built: dict[str, Path], tmp_path: Path) -> None:
    """``info`` said "current" of a store or fingerprints read from the
    manifest alone, whatever the shards held."""
    import shutil

    cache = tmp_path / "cache"
    shutil.copytree(built["golden"], cache)
    r = run_cli("info", str(cache))
    assert r.returncode == 0 and "checked    every shard's checksum" in r.stdout, r.stdout
    shard = sorted(cache.glob("shard-*.rkyv"))[0]
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF
    shard.write_bytes(bytes(data))
    r = run_cli("info", str(cache))
    assert r.returncode == 0, r.stderr
    assert "checked    damaged: " in r.stdout and shard.name in r.stdout, r.stdout
    assert ", current" not in r.stdout, r.stdout


def test_writer_errors_read_as_messages_naming_the_file(tmp_path: Path) -> None:
    """Red team D9: a writer's error without an errno read
    ``[Errno None] cannot write ...``: a symlink loop, a path that names
    no file, an error the writing callback raised."""
    from socialctx._output import write_output

    loop_a, loop_b = tmp_path / "a", tmp_path / "b"
    loop_a.symlink_to(loop_b)
    loop_b.symlink_to(loop_a)
    with pytest.raises(OSError) as e:
        write_output(loop_a, lambda f: f.write(b"x"))
    assert e.value.errno == 40 and "Errno None" not in str(e.value)
    assert str(e.value).endswith(f"cannot write {loop_a}: Too many levels of symbolic links")
    dots = tmp_path / "x" / ".."
    with pytest.raises(OSError) as e:
        write_output(dots, lambda f: f.write(b"x"))
    assert e.value.errno == 22 and str(e.value).endswith(f"cannot write {dots}: not a file name")

    def broken(f: object) -> None:
        raise OSError("the device went away")

    with pytest.raises(OSError) as e:
        write_output(tmp_path / "ok.html", broken)
    assert str(e.value) == f"cannot write {tmp_path / 'ok.html'}: the device went away"
    assert not (tmp_path / "ok.html").exists()
    # The command says the same, on one line.
    r = run_cli("describe", str(tmp_path / "none"), "--html", str(loop_a))
    assert r.returncode != 0 and "Errno None" not in r.stderr
