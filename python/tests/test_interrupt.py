"""Ctrl-C during `build`: KeyboardInterrupt within a second, the old cache
intact, no temporary directory left."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import socialctx
from conftest import REPO

CHILD = textwrap.dedent(
    """
    import sys, time, socialctx
    print("started", flush=True)
    try:
        socialctx.build(sys.argv[1], sys.argv[2], workers=1, progress=False)
    except KeyboardInterrupt as e:
        print("interrupted", time.monotonic(), e, flush=True)
        sys.exit(3)
    print("finished", flush=True)
    """
)


def _default_sigint() -> None:
    # Python installs its KeyboardInterrupt handler only where SIGINT is not
    # inherited as ignored, as it is when the suite runs in the background
    # of a non-interactive shell (`bash scripts/test-all.sh &`).
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_sigint_cancels_a_build_and_keeps_the_old_cache(big_corpus, tmp_path):
    out = tmp_path / "cache"
    socialctx.build(REPO / "data-samples/corpus", out, progress=False)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    # A build of big_corpus takes a few tenths of a second at one worker: on a
    # loaded machine this process may send the signal after it ended. Such an
    # attempt shows nothing about cancelling; it is run again.
    for _attempt in range(5):
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(big_corpus), str(out)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=_default_sigint,
        )
        assert child.stdout is not None and child.stdout.readline().strip() == "started"
        # Into the build: once its staging directory exists.
        deadline = time.monotonic() + 30
        while not [n for n in os.listdir(tmp_path) if ".tmp-" in n] and child.poll() is None:
            assert time.monotonic() < deadline, "the build never started"
            time.sleep(0.005)
        sent = time.monotonic()
        child.send_signal(signal.SIGINT)
        stdout, stderr = child.communicate(timeout=30)
        if stdout == "finished\n" or "after the build finished" in stdout:
            assert child.returncode in (0, 3), (stdout, stderr)
            socialctx.build(REPO / "data-samples/corpus", out, progress=False)
            continue
        assert child.returncode == 3, (stdout, stderr)
        word, caught, _ = stdout.split(" ", 2)
        assert word == "interrupted", stdout
        # Until the KeyboardInterrupt (CLOCK_MONOTONIC is the system's): the
        # interpreter's exit after it is no part of the claim, and takes
        # seconds on a loaded machine.
        took = float(caught) - sent
        assert took < 1.0, took
        break
    else:
        raise AssertionError("every build finished before the signal reached it")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    leftovers = [n for n in os.listdir(tmp_path) if ".tmp-" in n]
    assert leftovers == []
    assert len(socialctx.open(out)) == 38
