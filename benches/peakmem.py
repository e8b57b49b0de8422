#!/usr/bin/env python3
"""Run a command and print one JSON line: wall and CPU seconds, and its peak
anonymous and file-backed resident memory.

    python3 benches/peakmem.py [--label NAME] -- COMMAND [ARGS...]

`getrusage`'s maxrss (what `/usr/bin/time -f %M` prints) is one number for
both kinds of pages. A build maps the cache it reads (an incremental build
its old cache, an epoch the whole cache) and those pages count in RSS though
the kernel can drop them at any time; what the build allocates is the
anonymous part. So /proc/PID/status (RssAnon, RssFile) is polled every 5 ms
(`--interval`) and the peaks of each kept; maxrss is printed beside them.
Linux only. The command's own output goes to stderr, so stdout is only the
JSON line; its exit status is passed on.
"""

import argparse
import json
import os
import subprocess
import sys
import time


def status_kib(pid, keys):
    """The given `/proc/PID/status` fields in KiB (absent ones 0)."""
    out = dict.fromkeys(keys, 0)
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in out:
                    out[k] = int(v.split()[0])
    except (OSError, ValueError, IndexError):
        pass
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--label", default="")
    ap.add_argument("--interval", type=float, default=0.005)
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not cmd:
        ap.error("no command")
    keys = ("RssAnon", "RssFile", "RssShmem")
    peak = dict.fromkeys(keys, 0)
    start = time.perf_counter()
    child = subprocess.Popen(cmd, stdout=sys.stderr)
    rusage = None
    while rusage is None:
        now = status_kib(child.pid, keys)
        for k in keys:
            peak[k] = max(peak[k], now[k])
        pid, status, ru = os.wait4(child.pid, os.WNOHANG)
        if pid:
            rusage = (status, ru)
        else:
            time.sleep(a.interval)
    wall = time.perf_counter() - start
    status, ru = rusage
    code = os.waitstatus_to_exitcode(status)
    print(
        json.dumps(
            {
                "label": a.label,
                "wall_s": round(wall, 3),
                "cpu_s": round(ru.ru_utime + ru.ru_stime, 3),
                "anon_mib": round(peak["RssAnon"] / 1024, 1),
                "file_mib": round((peak["RssFile"] + peak["RssShmem"]) / 1024, 1),
                "maxrss_mib": round(ru.ru_maxrss / 1024, 1),
                "exit": code,
            }
        )
    )
    sys.exit(code)


if __name__ == "__main__":
    main()
