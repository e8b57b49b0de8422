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
    import sys, socialctx
    print("started", flush=True)
    try:
        socialctx.build(sys.argv[1], sys.argv[2], workers=1, progress=False)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
        sys.exit(3)
    print("finished", flush=True)
    """
)


def test_sigint_cancels_a_build_and_keeps_the_old_cache(big_corpus, tmp_path):
    out = tmp_path / "cache"
    socialctx.build(REPO / "data-samples/corpus", out, progress=False)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(big_corpus), str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdout.readline().strip() == "started"
    time.sleep(0.05)  # into the build, far from its end (over a second at one thread)
    sent = time.monotonic()
    child.send_signal(signal.SIGINT)
    stdout, stderr = child.communicate(timeout=30)
    took = time.monotonic() - sent
    assert child.returncode == 3, (stdout, stderr)
    assert "interrupted" in stdout
    assert took < 1.0, took
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    leftovers = [n for n in os.listdir(tmp_path) if ".tmp-" in n]
    assert leftovers == []
    assert len(socialctx.open(out)) == 38
