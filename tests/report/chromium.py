"""Headless Chromium driven over the Chrome DevTools protocol, for the report's browser tests.

Debian's ``chromium`` package (``.ci/run`` installs it) is started with
``--remote-debugging-pipe``: the protocol's JSON messages, each ended by a NUL
byte, go in on the child's file descriptor 3 and come out on 4, so no websocket
library and no downloaded driver are needed. ``Page`` opens one URL and records
what a test must see: every network request, every JavaScript dialog (an
injected ``alert`` would open one), every uncaught exception.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import signal
import tempfile
import time
from pathlib import Path
from typing import Any, Self

BROWSERS = ("chromium", "chromium-browser")


def find_chromium() -> str | None:
    """The Chromium executable on the PATH, or None."""
    return next((path for name in BROWSERS if (path := shutil.which(name))), None)


class ProtocolError(RuntimeError):
    """Chromium answered a command with an error, or stopped answering."""


class Page:
    """One headless Chromium with one page; use as a context manager.

    Attributes:
        requests: the URL of every request the page made.
        dialogs: the message of every JavaScript dialog it opened.
        exceptions: the text of every uncaught JavaScript exception.
    """

    def __init__(self, executable: str, width: int = 1400, height: int = 1000,
                 timeout_s: float = 30.0):
        self.timeout_s = timeout_s
        self.requests: list[str] = []
        self.dialogs: list[str] = []
        self.exceptions: list[str] = []
        self._profile = tempfile.mkdtemp(prefix="report-chromium-")
        to_child_read, self._to_child = _high_pipe()
        self._from_child, from_child_write = _high_pipe()
        quiet = [(os.POSIX_SPAWN_OPEN, fd, os.devnull, os.O_RDWR, 0) for fd in (0, 1, 2)]
        self._pid = os.posix_spawn(  # the protocol on the child's descriptors 3 and 4
            executable,
            [executable, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-dev-shm-usage", "--hide-scrollbars", "--remote-debugging-pipe",
             f"--user-data-dir={self._profile}", f"--window-size={width},{height}"],
            os.environ, file_actions=[*quiet, (os.POSIX_SPAWN_DUP2, to_child_read, 3),
                                      (os.POSIX_SPAWN_DUP2, from_child_write, 4)])
        self._exit: int | None = None
        os.close(to_child_read)
        os.close(from_child_write)
        self._buffer = b""
        self._next_id = 0
        target = self._call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self._session = self._call("Target.attachToTarget",
                                   {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Network"):
            self.call(f"{domain}.enable")
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the browser and delete its profile."""
        for fd in (self._to_child, self._from_child):
            try:
                os.close(fd)
            except OSError:
                pass
        if self._running():
            os.kill(self._pid, signal.SIGTERM)
            deadline = time.monotonic() + 10
            while self._running() and time.monotonic() < deadline:
                time.sleep(0.05)
            if self._running():
                os.kill(self._pid, signal.SIGKILL)
                os.waitpid(self._pid, 0)
        shutil.rmtree(self._profile, ignore_errors=True)

    def _running(self) -> bool:
        if self._exit is None:
            pid, status = os.waitpid(self._pid, os.WNOHANG)
            if pid:
                self._exit = os.waitstatus_to_exitcode(status)
        return self._exit is None

    # COMMANDS

    def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Send a command to the page; its result."""
        return self._call(method, params, self._session)

    def open(self, url: str, ready: str) -> None:
        """Load ``url`` and wait until the JavaScript expression ``ready`` is true."""
        self.call("Page.navigate", {"url": url})
        deadline = time.monotonic() + self.timeout_s
        probe = f"(() => {{ try {{ return Boolean({ready}); }} catch (e) {{ return false; }} }})()"
        while not self.evaluate(probe):  # false, too, while the new document is loading
            if time.monotonic() > deadline:
                raise ProtocolError(f"{url} was not ready ({ready}) after {self.timeout_s} s; "
                                    f"exceptions: {self.exceptions}")
            time.sleep(0.05)

    def evaluate(self, expression: str, awaited: bool = False) -> Any:
        """The value of a JavaScript expression in the page (``awaited``: of its promise)."""
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                "awaitPromise": awaited})
        if "exceptionDetails" in result:
            raise ProtocolError(f"{expression!r} threw: {result['exceptionDetails']}")
        return result["result"].get("value")

    def screenshot(self, path: Path, full_page: bool = False) -> bytes:
        """Save a PNG of the page (``full_page``: all of it, not just the viewport)."""
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            size = self.call("Page.getLayoutMetrics")["cssContentSize"]
            params.update(captureBeyondViewport=True, clip={
                "x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1})
        data = base64.b64decode(self.call("Page.captureScreenshot", params)["data"])
        path.write_bytes(data)
        return data

    # PROTOCOL

    def _call(self, method: str, params: dict[str, Any] | None = None,
              session: str | None = None) -> dict[str, Any]:
        self._next_id += 1
        wanted = self._next_id
        message: dict[str, Any] = {"id": wanted, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        data = json.dumps(message).encode() + b"\0"
        while data:
            data = data[os.write(self._to_child, data):]
        deadline = time.monotonic() + self.timeout_s
        while True:
            reply = self._read(deadline)
            if reply.get("id") == wanted:
                if "error" in reply:
                    raise ProtocolError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self._event(reply)

    def _event(self, event: dict[str, Any]) -> None:
        method, params = event.get("method"), event.get("params", {})
        if method == "Network.requestWillBeSent":
            self.requests.append(params["request"]["url"])
        elif method == "Page.javascriptDialogOpening":
            self.dialogs.append(params.get("message", ""))
            # answer it, or the page stays blocked; a message, not a reply we wait for
            self._next_id += 1
            data = json.dumps({"id": self._next_id, "method": "Page.handleJavaScriptDialog",
                               "params": {"accept": True},
                               "sessionId": event.get("sessionId")}).encode() + b"\0"
            os.write(self._to_child, data)
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            self.exceptions.append(details.get("exception", {}).get("description")
                                   or details.get("text", ""))

    def _read(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not self._running():
                raise ProtocolError(f"chromium stopped answering (exit status {self._exit})")
            if not select.select([self._from_child], [], [], min(left, 1.0))[0]:
                continue
            chunk = os.read(self._from_child, 1 << 20)
            if not chunk:
                raise ProtocolError("chromium closed its protocol pipe")
            self._buffer += chunk
        message, _, self._buffer = self._buffer.partition(b"\0")
        return json.loads(message)


def _high_pipe() -> tuple[int, int]:
    """A pipe whose two ends are numbered 10 or above, so wiring them to 3 and 4 in the child
    never overwrites one with the other."""
    read, write = os.pipe()
    high = (fcntl.fcntl(read, fcntl.F_DUPFD, 10), fcntl.fcntl(write, fcntl.F_DUPFD, 10))
    os.close(read)
    os.close(write)
    return high
