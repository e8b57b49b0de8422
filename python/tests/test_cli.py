"""The installed `socialctx` command (the console script pip puts beside the
interpreter, and `python -m socialctx`): the same bytes, output and exit
codes as the Rust examples it stands in for."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import socialctx
from conftest import REPO, binary

SAMPLE = REPO / "data-samples/corpus"
DESCRIBE_EXTRA = "the describe extra: pip install './python[describe]'"
COMMANDS = ["build", "plan", "build-partition", "merge", "dump", "stats", "info", "embed"]


def script() -> Path:
    """The console script of the installed package, beside this interpreter."""
    p = Path(sys.executable).parent / "socialctx"
    assert p.is_file(), f"{p} is missing: install the package (pip install ./python or the wheel)"
    return p


def run(*args: object, check: bool = True) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(
        [script(), *map(str, args)], capture_output=True, text=True, cwd=REPO, timeout=120
    )
    if check:
        assert r.returncode == 0, (args, r.stdout, r.stderr)
    return r


def files(cache: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(cache.iterdir()) if p.is_file()}


def stable(summary: str) -> list[str]:
    """A summary without what changes from run to run (paths, times)."""
    drop = ("cache ", "seconds ", "rate ")
    return [line for line in summary.splitlines() if not line.startswith(drop)]


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str, str]:
    """The sample corpus built by `socialctx build` and by `precache`."""
    d = tmp_path_factory.mktemp("cli")
    ours = run("build", SAMPLE, d / "ours", "--workers", "2")
    theirs = subprocess.run(
        [binary("precache"), SAMPLE, d / "theirs", "--workers", "2"],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=True,
    )
    return d / "ours", d / "theirs", ours.stdout, theirs.stdout


def test_build_writes_the_same_bytes_and_summary_as_precache(pair):
    ours, theirs, out, expected = pair
    assert files(ours) == files(theirs)
    assert set(files(ours)) >= {"manifest.json", "shard-00000.rkyv", "report.jsonl"}
    assert stable(out) == stable(expected)
    assert out.splitlines()[0] == f"cache      {ours}"
    assert "threads    38 (source tweets with their context)" in out


@pytest.mark.parametrize(
    "flags", [[], ["--retweets"], ["--retweets", "--extended"], ["--tokens", "--retweets"]]
)
def test_dump_prints_what_the_dump_example_prints(pair, flags):
    ours, _, _, _ = pair
    expected = subprocess.run(
        [binary("dump"), ours, *flags], capture_output=True, check=True
    ).stdout
    got = subprocess.run([script(), "dump", ours, *flags], capture_output=True, check=True).stdout
    assert got == expected and len(got.splitlines()) == 38


def test_dump_into_a_closed_pipe_is_quiet(pair):
    ours, _, _, _ = pair
    r = subprocess.run(
        f"'{script()}' dump '{ours}' --retweets --extended | head -c 10",
        shell=True,
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0 and len(r.stdout) == 10
    assert r.stderr == ""
    # `| head -1`, the case (1 of 5 printed "Broken pipe"): every time.
    for _ in range(5):
        r = subprocess.run(
            f"set -o pipefail; '{script()}' dump '{ours}' --retweets | head -1",
            shell=True,
            executable="/bin/bash",
            capture_output=True,
            text=True,
        )
        assert (r.returncode, r.stderr, len(r.stdout.splitlines())) == (0, "", 1), r


def test_stats_prints_the_stats_table_and_saves_it(pair, tmp_path):
    ours, _, _, _ = pair
    r = run("stats", ours, "--retweets", "--save", tmp_path / "stats.json")
    expected = subprocess.run(
        [binary("stats"), ours, "--retweets"], capture_output=True, text=True, check=True
    )
    assert r.stdout == expected.stdout and r.stdout.startswith("38 threads, 420 reactions\n")
    saved = socialctx.FeatureStats.load(tmp_path / "stats.json")
    computed = socialctx.FeatureStats.compute(socialctx.open(ours), kinds="both")
    # What the file was computed over is said as it is recorded.
    assert r.stderr == (
        f"saved {tmp_path / 'stats.json'} (values of definition {saved.definition}, "
        f"cache generation {computed.content_id})\n"
    )
    assert saved.kinds == "both" and saved.content_id == computed.content_id
    assert np.array_equal(saved.mean, computed.mean)
    # With split CSVs (ids that are not in the sample cache: a note each).
    splits = sorted((REPO / "tests/fixtures/splits").glob("*/all_rnr_test_set_combined.csv"))[:2]
    flags = [x for c in splits for x in ("--split", c)]
    expected = subprocess.run([binary("stats"), ours, *flags], capture_output=True, text=True)
    r = run("stats", ours, *flags, check=False)
    assert (r.returncode, r.stdout, r.stderr) == (
        expected.returncode,
        expected.stdout,
        expected.stderr,
    )


def test_plan_partitions_and_merge_give_the_single_build(pair, tmp_path):
    ours, _, _, _ = pair
    plan = tmp_path / "plan.json"
    r = run("plan", SAMPLE, plan)
    assert r.stdout.startswith(f"plan       {plan} (")
    for i in range(3):
        r = run(
            "build-partition",
            SAMPLE,
            tmp_path / f"part-{i}",
            "--plan",
            plan,
            "--partition",
            f"{i}/3",
        )
        assert r.stdout.startswith(f"cache      {tmp_path / f'part-{i}'}\n")
    r = run("merge", tmp_path / "merged", *(tmp_path / f"part-{i}" for i in (2, 0, 1)))
    assert r.stdout.splitlines()[1:4] == ["threads    38", "reactions  420", "skipped    17"]
    assert files(tmp_path / "merged") == files(ours)
    # A missing partition: an error, nothing published.
    r = run("merge", tmp_path / "bad", tmp_path / "part-0", check=False)
    assert r.returncode == 1 and r.stderr.startswith("error: ")
    assert not (tmp_path / "bad").exists()


def test_incremental_build_and_info(tmp_path):
    cache = tmp_path / "cache"
    run("build", SAMPLE, cache, "--quiet")
    r = run("build", SAMPLE, cache, "--incremental")
    assert "build      incremental" in r.stdout or "build      " in r.stdout
    c = socialctx.open(cache)

    def model(batch: list[list[str]]) -> np.ndarray:
        return np.stack([np.full(3, len(tokens), np.float32) for tokens in batch])

    socialctx.embed(c, model, field="reply", name="reply")
    (Path(c.derived_dir) / "notes.txt").write_text("mine")
    d = json.loads(run("info", cache, "--json").stdout)
    assert d["format_version"] == socialctx.FORMAT_VERSION
    assert (d["threads"], d["reactions"], d["skipped"]) == (38, 420, 17)
    assert d["content_id"] == c.content_id
    assert [(s["name"], s["field"], s["dim"], s["current"]) for s in d["embeddings"]] == [
        ("reply", "reply", 3, True)
    ]
    assert [f["current"] for f in d["fingerprints"]] == [True]
    assert d["other"] == ["notes.txt"]
    text = run("info", cache).stdout
    assert f"content id {c.content_id}" in text
    assert f"format     socialctx-feature-cache version {socialctx.FORMAT_VERSION}" in text
    assert "embeddings/reply: field reply, float32 x 3" in text and "current" in text
    # A rebuild with other content: the store is kept but stale.
    run("build", SAMPLE, cache, "--no-extended", "-q")
    d = json.loads(run("info", cache, "--json").stdout)
    assert [s["current"] for s in d["embeddings"]] == [False]


def test_report_file_and_strict(tmp_path):
    report = tmp_path / "report.jsonl"
    run("build", SAMPLE, tmp_path / "c", "--report", report)
    lines = [json.loads(x) for x in report.read_text().splitlines()]
    assert len(lines) == 17 and set(lines[0]) == {"path", "reason"}
    r = run("build", SAMPLE, tmp_path / "strict", "--strict", check=False)
    assert r.returncode == 1
    assert r.stderr.startswith("error: ") and len(r.stderr.splitlines()) == 1
    assert not (tmp_path / "strict").exists()
    r = run(
        "build", SAMPLE, tmp_path / "c2", "--report", tmp_path / "no/such/dir/r.jsonl", check=False
    )
    assert r.returncode == 1
    assert (
        r.stderr
        == f"error: cannot write the report to {tmp_path / 'no/such/dir/r.jsonl'}: No such file or directory (os error 2)\n"
    )
    assert not (tmp_path / "c2").exists()


@pytest.mark.parametrize(
    "args, needle",
    [
        (["dump", "/no/such/cache"], "/no/such/cache"),
        (["stats", "/no/such/cache"], "/no/such/cache"),
        (["info", "/no/such/cache"], "/no/such/cache"),
        (["build", "/no/such/corpus", "/tmp/socialctx-never"], "/no/such/corpus"),
        (["plan", "/no/such/corpus", "/tmp/socialctx-never.json"], "/no/such/corpus"),
        (
            [
                "build-partition",
                SAMPLE,
                "/tmp/x",
                "--plan",
                "/no/such/plan.json",
                "--partition",
                "0/2",
            ],
            "/no/such/plan.json",
        ),
    ],
)
def test_errors_are_one_line_naming_the_file(args, needle):
    r = run(*args, check=False)
    assert r.returncode == 1, r
    assert r.stderr.startswith("error: ") and str(needle) in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.splitlines()) == 1


def test_python_commands_take_paths_that_are_not_utf8(pair, tmp_path):
    """A directory name with a byte that is not UTF-8 (a Latin-1 name on an
    old file server): the Rust commands took it, the ones Python runs said
    only "error: path contains invalid UTF-8 characters"."""
    ours, _, _, _ = pair
    odd = Path(os.fsdecode(bytes(tmp_path) + b"/caf\xe9 cache"))
    shutil.copytree(ours, odd)

    def sc(*args: object) -> subprocess.CompletedProcess[bytes]:
        argv = [os.fsencode(script()), *(os.fsencode(a) for a in args)]
        return subprocess.run(argv, capture_output=True, cwd=REPO, timeout=120)

    r = sc("info", odd, "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["threads"] == 38
    r = sc("info", odd)
    assert r.returncode == 0 and b"threads" in r.stdout, r.stderr
    # A missing one is still the one-line error naming it.
    r = sc("info", Path(os.fsdecode(bytes(tmp_path) + b"/n\xe9ant")))
    assert r.returncode == 1 and r.stderr.startswith(b"error: no cache at"), r.stderr
    assert b"Traceback" not in r.stderr
    # export and describe need the describe extra, which the `test` extra
    # does not install: the README's test command failed here on a fresh
    # clone. They skip without it, naming it, as the other optional suites do.
    missing = [m for m in ("pandas", "pyarrow") if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"export, describe: {', '.join(missing)} not installed ({DESCRIBE_EXTRA})")
    out = Path(os.fsdecode(bytes(tmp_path) + b"/r\xe9actions.parquet"))
    r = sc("export", odd, out)
    assert r.returncode == 0 and out.is_file(), r.stderr
    r = sc("describe", odd, "--json")
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize(
    "argv,package,what",
    [
        (["export", "{cache}", "{out}"], "pyarrow", "writing Parquet (socialctx export)"),
        (["describe", "{cache}"], "pandas", "socialctx.describe"),
        (["describe", "{cache}", "--html", "{out}"], "matplotlib", "socialctx.describe (figures)"),
    ],
)
def test_a_missing_optional_package_is_one_line_with_a_hint_that_fits(
    pair, tmp_path, argv, package, what
):
    """Without the describe extra, `export` said "socialctx.describe needs
    pyarrow" and every hint was `pip install 'socialctx[describe]'`, a
    package not on PyPI. The hint now fits how this package was installed
    (a wheel: its path with the extra; a clone: the packages' names), and
    names the command. The package is hidden from the child (sys.modules[m]
    = None makes its import fail), so this runs with and without it."""
    ours, _, _, _ = pair
    out = tmp_path / "out.file"
    args = [a.format(cache=ours, out=out) for a in argv]
    hidden = ["pandas", "pyarrow", "matplotlib"]
    if package == "matplotlib":
        # The table first: pandas and pyarrow must be there.
        if any(importlib.util.find_spec(m) is None for m in ("pandas", "pyarrow")):
            pytest.skip(f"describe --html: pandas, pyarrow not installed ({DESCRIBE_EXTRA})")
        hidden = ["matplotlib"]
    code = (
        f"import sys; sys.modules.update(dict.fromkeys({hidden!r}))\n"
        "from socialctx.cli import main\n"
        f"sys.exit(main({args!r}))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, r
    assert r.stderr.startswith(f"error: {what} needs {package}: pip install "), r.stderr
    assert len(r.stderr.splitlines()) == 1 and "Traceback" not in r.stderr, r.stderr
    assert "socialctx[describe]" not in r.stderr or "'socialctx[describe]'" in r.stderr
    hint = r.stderr.split(": pip install ", 1)[1]
    from importlib import metadata

    direct = metadata.distribution("socialctx").read_text("direct_url.json") or ""
    if '"archive_info"' in direct:
        # A wheel: its own path, which exists, with the extra.
        wheel = hint.split("'")[1].removesuffix("[describe]")
        assert Path(wheel).is_file() and wheel.endswith(".whl"), hint
    else:
        # A clone (pip install ./python, maturin develop): the names.
        assert hint.startswith("pandas pyarrow matplotlib"), hint
    assert not out.exists()


@pytest.mark.parametrize("command", ["info", "dump", "stats"])
def test_a_closed_stdout_is_not_a_traceback(pair, command):
    """`socialctx info CACHE >&-`: Python sets a stream it finds closed to
    None; the command ran into it with a traceback."""
    ours, _, _, _ = pair
    r = subprocess.run(
        f"'{script()}' {command} '{ours}' >&-",
        shell=True,
        executable="/bin/bash",
        capture_output=True,
        text=True,
    )
    assert "Traceback" not in r.stderr and "panicked" not in r.stderr, r.stderr
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("command", ["info", "dump", "stats"])
def test_output_to_a_full_disk_is_an_error(pair, command):
    """`socialctx stats CACHE > table.txt` on a full disk exited 0 with an
    empty file."""
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full here")
    ours, _, _, _ = pair
    with open("/dev/full", "w") as full:
        r = subprocess.run(
            [script(), command, ours], stdout=full, stderr=subprocess.PIPE, text=True
        )
    assert r.returncode == 1, r.stderr
    assert r.stderr.startswith("error: ") and "No space left" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("command", [None, *COMMANDS])
def test_every_help_works(command):
    r = run(*([command] if command else []), "--help")
    prog = f"Usage: socialctx {command}" if command else "Usage: socialctx <COMMAND>"
    assert f"\n\n{prog}" in r.stdout, r.stdout
    text = " ".join(r.stdout.split())
    assert "Exit status: 0 on success, 1 on error, 2 on bad usage" in text
    if command == "embed":  # its own interruption, not the build's (issue 35)
        assert "the embed stops between batches" in text and "between threads" not in text
    if command is None:
        for c in COMMANDS:
            assert c in r.stdout


def test_python_dash_m_and_version():
    r = subprocess.run(
        [sys.executable, "-m", "socialctx", "--version"], capture_output=True, text=True, check=True
    )
    assert r.stdout.strip() == f"socialctx {socialctx.__version__}"
    r = subprocess.run(
        [sys.executable, "-m", "socialctx", "build", "--help"], capture_output=True, text=True
    )
    assert r.returncode == 0 and "--incremental" in r.stdout


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["frobnicate"],
        ["build"],
        ["build", SAMPLE],
        ["build", SAMPLE, "/tmp/x", "--workers", "0"],
        ["build", SAMPLE, "/tmp/x", "--workers", "many"],
        ["build", SAMPLE, "/tmp/x", "--threads", "0"],
        ["build", SAMPLE, "/tmp/x", "--shard-mib", "0"],
        # Past any machine: aborted starting threads (exit 134, a Rust backtrace).
        ["build", SAMPLE, "/tmp/x", "--io-depth", "100000000"],
        ["build", SAMPLE, "/tmp/x", "--workers", "65535"],
        ["build", SAMPLE, "/tmp/x", "--verify"],
        ["build", SAMPLE, "/tmp/x", "--bogus"],
        ["build-partition", SAMPLE, "/tmp/x", "--plan", "p.json"],
        ["build-partition", SAMPLE, "/tmp/x", "--plan", "p.json", "--partition", "2/2"],
        ["build-partition", SAMPLE, "/tmp/x", "--plan", "p.json", "--partition", "1"],
        ["merge", "/tmp/x"],
        ["dump", "/tmp/x", "--extended", "--tokens"],
        ["stats"],
        ["info"],
    ],
)
def test_bad_usage_exits_2(args):
    r = run(*args, check=False)
    assert r.returncode == 2, r
    if args:
        assert r.stderr.startswith("error: ") and "try '--help'" in r.stderr, r.stderr
    else:  # no command: the list of commands
        assert "Usage: socialctx <COMMAND>" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    assert not Path("/tmp/x").exists()


# Bad pieces of a `build` command line, each a usage error on its own (so any
# mix of them is one, wherever the paths go): values out of range or not
# numbers, a flag without the one it needs, conflicting flags, unknown
# options, a missing value, three paths. `socialctx build` (the wheel's entry point) and `precache` must say
# the same for each mix: the one definition in crates/cli.
BAD_BUILD_PIECES = [
    *(["--workers", v] for v in ("0", "-1", "many", "65536", "")),
    ["-j", "0"],
    ["--threads", "0"],
    *(["--shard-mib", v] for v in ("0", "1025", "x")),
    *(["--max-file-bytes", v] for v in ("-5", "x")),
    ["--io-depth", "-1"],
    ["--verify"],
    *(["--partition", v] for v in ("0/2", "2/2", "1", "x/y")),
    ["--incremental", "--plan", "p.json"],
    ["--sample", "--plan", "p.json"],
    ["--bogus"],
    ["--report", "--quiet"],
    ["one", "two", "three"],
]


def _usage(argv: list[str]) -> tuple[tuple[int, str, str], tuple[int, str, str]]:
    ours = run("build", *argv, check=False)
    theirs = subprocess.run(
        [binary("precache"), *argv], capture_output=True, text=True, cwd=REPO, timeout=60
    )
    return (ours.returncode, ours.stdout, ours.stderr), (
        theirs.returncode,
        theirs.stdout,
        theirs.stderr,
    )


@settings(max_examples=30, deadline=None, derandomize=True)
@given(
    pieces=st.lists(st.sampled_from(BAD_BUILD_PIECES), min_size=1, max_size=3),
    at=st.integers(0, 2),
    paths=st.sampled_from([[], ["CORPUS"], ["CORPUS", "CACHE"], ["--sample", "CACHE"]]),
)
def test_build_and_precache_give_the_same_usage_errors(pieces, at, paths):
    never = "/tmp/socialctx-never-built"
    paths = [{"CORPUS": str(SAMPLE), "CACHE": never}.get(p, p) for p in paths]
    flags = [x for piece in pieces for x in piece]
    argv = [*paths[:at], *flags, *paths[at:]]
    ours, theirs = _usage(argv)
    assert ours == theirs, argv
    assert ours[0] == 2 and ours[1] == "" and ours[2].startswith("error: "), (argv, ours)
    assert "Traceback" not in ours[2] and not Path(never).exists()


def test_build_and_precache_give_the_same_help():
    for flag in ("--help", "-h"):
        ours, theirs = _usage([flag])
        assert ours == theirs and ours[0] == 0 and "--incremental" in ours[1]
    # The hidden former name of --workers stays hidden.
    assert "--threads" not in ours[1]


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


# `ignored`: SIGINT inherited as ignored, as by `socialctx build ... &` from a
# non-interactive script (issue 35: `kill -INT` did nothing).
@pytest.mark.parametrize(
    "sig, ignored", [(signal.SIGINT, False), (signal.SIGTERM, False), (signal.SIGINT, True)]
)
def test_a_signal_stops_the_build_and_keeps_the_old_cache(big_corpus, tmp_path, sig, ignored):
    out = tmp_path / "cache"
    run("build", SAMPLE, out, "-q")
    before = files(out)
    child = subprocess.Popen(
        [script(), "build", big_corpus, out, "--workers", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_ignore_sigint if ignored else None,
    )
    # Into the build (seconds at one thread): once its staging directory exists.
    deadline = time.monotonic() + 30
    while not [n for n in os.listdir(tmp_path) if ".tmp-" in n]:
        assert child.poll() is None and time.monotonic() < deadline, child.communicate()
        time.sleep(0.01)
    child.send_signal(sig)
    stdout, stderr = child.communicate(timeout=30)
    assert child.returncode == 130, (stdout, stderr)
    assert stderr == f"interrupted: nothing was published; {out} is as it was\n"
    assert files(out) == before
    assert [n for n in os.listdir(tmp_path) if ".tmp-" in n] == []


def test_no_cargo_needed(tmp_path):
    """The command runs with a PATH that has only the venv's bin (no cargo, no rustc)."""
    env = {"PATH": str(Path(sys.executable).parent), "HOME": str(tmp_path)}
    assert shutil.which("cargo", path=env["PATH"]) is None
    r = subprocess.run(
        [script(), "build", SAMPLE, tmp_path / "c", "-q"], env=env, capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr
    assert len(socialctx.open(tmp_path / "c")) == 38


# The README: its install section followed verbatim, and the recipes it gives
# for servers (cron, Slurm, Kubernetes) run with the installed command.


def readme_section(title: str) -> str:
    """A section of the README, or of GUIDE.md (the README's longer half)."""
    for doc in ("README.md", "GUIDE.md"):
        text = (REPO / doc).read_text()
        start = text.find(f"\n## {title}")
        if start >= 0:
            end = text.find("\n## ", start + 1)
            return text[start:end]
    raise AssertionError(f"no section {title!r} in README.md or GUIDE.md")


def fenced(section: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", section, flags=re.S)


def shell(code: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """`code` in bash (-e, -u, pipefail) with the installed command on PATH."""
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    r = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", code],
        cwd=cwd,
        env={**os.environ, "PATH": path, **env},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, (code, r.stdout, r.stderr)
    return r


def test_readme_install_section_verbatim(tmp_path):
    """The wheel block as written, in a directory holding the wheel, with a PATH
    that has no cargo (CI sets SOCIALCTX_WHEEL to the wheel it built)."""
    blocks = fenced(readme_section("Install"), "sh")
    (source,) = [b for b in blocks if "pip install './python" in b]
    (wheel_block,) = [b for b in blocks if ".whl" in b]
    blocks = [wheel_block, source]
    # From source: the package the test command (scripts/test-all.sh) installs.
    assert '"${pip[@]}" "./python[test]"' in (REPO / "scripts/test-all.sh").read_text()
    wheel = os.environ.get("SOCIALCTX_WHEEL")
    if not wheel:
        pytest.skip("SOCIALCTX_WHEEL is not set (CI sets it to the wheel it built)")
    shutil.copy(wheel, tmp_path)
    path = [d for d in os.environ["PATH"].split(os.pathsep) if d and not Path(d, "cargo").exists()]
    env = {**os.environ, "PATH": os.pathsep.join(path)}
    env.pop("VIRTUAL_ENV", None)
    r = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", blocks[0]],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert "Usage: socialctx <COMMAND>" in r.stdout
    installed = tmp_path / "socialctx-env/bin/socialctx"
    b = subprocess.run(
        [installed, "build", SAMPLE, tmp_path / "cache", "-q"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert b.returncode == 0, b.stderr
    assert "threads    38 (source tweets with their context)" in b.stdout


def test_readme_cron_lines_run(tmp_path):
    """The nightly job as the README's two crontab lines: the incremental
    build, then the embed (with a toy model in place of ELMo)."""
    blocks = fenced(readme_section("Nightly rebuilds"), "crontab")
    assert len(blocks) == 2
    (models := tmp_path / "models").mkdir()
    (models / "elmo_rpdnn.py").write_text(TOY_MODEL)

    def command(block: str, minute: str) -> str:
        (line,) = [x for x in block.splitlines() if x]
        fields = line.split(None, 5)
        assert fields[:5] == [minute, "2", "*", "*", "*"]
        return (
            fields[5]
            .replace("/opt/socialctx/bin/socialctx", str(script()))
            .replace("/opt/models", str(models))
            .replace("/data/pheme", str(SAMPLE))
            .replace("/data/socialctx-cache", str(tmp_path / "cache"))
            .replace("/var/log/socialctx-nightly.log", str(tmp_path / "log"))
        )

    build, embed = command(blocks[0], "30"), command(blocks[1], "45")
    assert "--incremental" in build and "--model-id" in embed
    for _ in range(2):
        shell(build, tmp_path)
        shell(embed, tmp_path)
    log = (tmp_path / "log").read_text()
    assert log.count("threads    38 (source tweets with their context)") == 2
    assert "build      incremental" in log.split("cache      ")[-1], log
    # The second night's cache is unchanged: every row is reused.
    assert log.count("new        0 (embedded now, 0 model calls)") == 1, log


def test_readme_partitioned_recipes_run(tmp_path, pair):
    """The four-step example, the Slurm array (two tasks) and the Kubernetes
    command, each merged into a cache equal to a single build."""
    ours, _, _, _ = pair
    section = readme_section("Partitioned builds")
    steps, slurm = fenced(section, "sh")
    d = tmp_path / "steps"
    d.mkdir()
    shell(steps, d)  # as pasted: it builds the sample corpus the package ships
    assert files(d / "merged-cache") == files(ours)

    d = tmp_path / "slurm"
    d.mkdir()
    env = {"CORPUS": str(SAMPLE), "CACHE": "cache"}
    shell('socialctx plan "$CORPUS" plan.json', d, **env)
    task, merge = slurm.split("# then, once: ")
    for i in range(2):
        shell(task, d, SLURM_ARRAY_TASK_ID=str(i), SLURM_ARRAY_TASK_COUNT="2", **env)
    shell(merge, d, **env)
    assert files(d / "cache") == files(ours)

    d = tmp_path / "k8s"
    d.mkdir()
    (k8s,) = re.findall(r"`(socialctx build-partition [^`]*JOB_COMPLETION_INDEX[^`]*)`", section)
    k8s = " ".join(k8s.split()).replace("/16", "/2")
    shell('socialctx plan "$CORPUS" plan.json', d, **env)
    for i in range(2):
        shell(k8s, d, JOB_COMPLETION_INDEX=str(i), **env)
    shell('socialctx merge "$CACHE" parts/part-*', d, **env)
    assert files(d / "cache") == files(ours)


TOY_MODEL = """
import numpy as np

def embed(batch):
    return np.stack([np.array([len(t), sum(map(len, t)) % 97, 1.0], np.float32) for t in batch])
"""


def test_an_interrupted_embed_says_so(pair, tmp_path):
    """Ctrl-C during `socialctx embed` printed "interrupted: " and nothing
    more (a KeyboardInterrupt has no message)."""
    ours, _, _, _ = pair
    (tmp_path / "stopper.py").write_text(
        "import os, signal\n"
        "def model(batch):\n"
        "    os.kill(os.getpid(), signal.SIGINT)\n"
        "    raise AssertionError('the signal did not stop the embed')\n"
    )
    r = subprocess.run(
        [script(), "embed", ours, "--model", "stopper:model", "--name", "stopped", "-q"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert r.returncode == 130, r.stderr
    assert r.stderr == "interrupted: stopped\n", r.stderr


def test_nightly_recipe_one_command_per_stage(tmp_path):
    """The README's nightly job: an incremental build, then an embed that
    runs the model only for the night's new inputs."""
    corpus = tmp_path / "corpus"
    shutil.copytree(REPO / "data-samples/corpus", corpus)
    (tmp_path / "toymodel.py").write_text(TOY_MODEL)
    cache = tmp_path / "cache"

    def cli(*args: object) -> str:
        r = subprocess.run(
            [script(), *map(str, args)],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            timeout=120,
        )
        assert r.returncode == 0, (args, r.stdout, r.stderr)
        return r.stdout

    embed = ("embed", cache, "--model", "toymodel:embed", "--name", "r", "--model-id", "toy-1")
    cli("build", corpus, cache, "-q")
    first = cli(*embed)
    assert "reused     0 " in first
    reply = sorted(corpus.rglob("reactions/*.json"))[0]
    tweet = json.loads(reply.read_text())
    tweet["text"] = tweet["full_text"] = "tonight's only new reply to the sample corpus"
    reply.write_text(json.dumps(tweet))
    cli("build", corpus, cache, "--incremental", "-q")
    night = cli(*embed)
    assert "new        1 (embedded now, 1 model calls)" in night, night
    # The night's row is a second segment until --compact rewrites the store as one.
    assert "in 2 segments" in cli("info", cache)
    compacted = cli(*embed, "--compact")
    assert "new        0 " in compacted and "removed: compacted" in compacted, compacted
    info = json.loads(cli("info", cache, "--json"))["embeddings"][0]
    assert (info["segments"], info["rows"]) == (1, info["unique"]), info
    bad = subprocess.run(
        [script(), "embed", cache, "--model", "nosuchmodule:f", "--name", "x"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert bad.returncode == 1 and bad.stderr.startswith("error: ") and "nosuchmodule" in bad.stderr
