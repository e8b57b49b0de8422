"""Opens a page in headless Chromium through the DevTools protocol over a
pipe (``--remote-debugging-pipe``: JSON messages ending in NUL on file
descriptors 3 and 4), so no WebSocket client or Playwright is needed: the
page loads offline, and every console message, exception, log entry and
network request is recorded, with a full-page screenshot."""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any


def chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        p = shutil.which(name)
        if p:
            return p
    return None


class Devtools:
    def __init__(self, exe: str, profile: str) -> None:
        to_browser_r, self._w = os.pipe()
        self._r, from_browser_w = os.pipe()

        def fds() -> None:
            os.dup2(to_browser_r, 3)
            os.dup2(from_browser_w, 4)

        self.proc = subprocess.Popen(
            [
                exe,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--remote-debugging-pipe",
                f"--user-data-dir={profile}",
                "--no-first-run",
                "--no-default-browser-check",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-extensions",
                "--hide-scrollbars",
                "about:blank",
            ],
            pass_fds=(3, 4),
            preexec_fn=fds,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buf = b""
        self._next = 0
        self.events: list[dict[str, Any]] = []

    def _read(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("Chromium did not answer in time")
            ready, _, _ = select.select([self._r], [], [], left)
            if ready:
                chunk = os.read(self._r, 1 << 20)
                if not chunk:
                    raise EOFError("Chromium closed the DevTools pipe")
                self._buf += chunk
        msg, _, self._buf = self._buf.partition(b"\0")
        return json.loads(msg)

    def call(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        session: str | None = None,
        timeout: float = 60,
    ) -> dict[str, Any]:
        self._next += 1
        msg: dict[str, Any] = {"id": self._next, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            m = self._read(deadline)
            if m.get("id") == self._next:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m.get("result", {})
            self.events.append(m)

    def wait_for(self, method: str, timeout: float = 60) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        for e in self.events:
            if e.get("method") == method:
                return e
        while True:
            m = self._read(deadline)
            self.events.append(m)
            if m.get("method") == method:
                return m

    def close(self) -> None:
        try:
            self.call("Browser.close", timeout=10)
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._w)
        os.close(self._r)


def open_page(exe: str, page: Path, screenshot: Path, width: int = 1400) -> dict[str, Any]:
    """Loads ``page`` offline; returns console errors, exceptions, requests,
    and writes a full-page PNG screenshot."""
    with tempfile.TemporaryDirectory() as profile:
        dt = Devtools(exe, profile)
        try:
            targets = dt.call("Target.getTargets")["targetInfos"]
            target = next(t["targetId"] for t in targets if t["type"] == "page")
            session = dt.call("Target.attachToTarget", {"targetId": target, "flatten": True})[
                "sessionId"
            ]
            for domain in ("Page", "Runtime", "Log", "Network"):
                dt.call(f"{domain}.enable", session=session)
            dt.call(
                "Network.emulateNetworkConditions",
                {"offline": True, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1},
                session=session,
            )
            dt.call(
                "Emulation.setDeviceMetricsOverride",
                {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": False},
                session=session,
            )
            url = page.resolve().as_uri()
            dt.events.clear()
            dt.call("Page.navigate", {"url": url}, session=session)
            dt.wait_for("Page.loadEventFired")
            metrics = dt.call("Page.getLayoutMetrics", session=session)
            size = metrics["cssContentSize"]
            shot = dt.call(
                "Page.captureScreenshot",
                {
                    "format": "png",
                    "captureBeyondViewport": True,
                    "clip": {
                        "x": 0,
                        "y": 0,
                        "width": size["width"],
                        "height": size["height"],
                        "scale": 1,
                    },
                },
                session=session,
            )
            screenshot.write_bytes(base64.b64decode(shot["data"]))
            events = list(dt.events)
        finally:
            dt.close()
    requests = [
        e["params"]["request"]["url"]
        for e in events
        if e.get("method") == "Network.requestWillBeSent"
    ]
    console = [
        e["params"]
        for e in events
        if e.get("method") == "Runtime.consoleAPICalled"
        and e["params"].get("type") in ("error", "warning", "assert")
    ]
    exceptions = [e["params"] for e in events if e.get("method") == "Runtime.exceptionThrown"]
    logs = [
        e["params"]["entry"]
        for e in events
        if e.get("method") == "Log.entryAdded"
        and e["params"]["entry"].get("level") in ("error", "warning")
    ]
    return {
        "url": url,
        "requests": requests,
        "console": console,
        "exceptions": exceptions,
        "log": logs,
        "height": size["height"],
    }
