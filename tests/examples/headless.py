"""Headless Chromium driven over its DevTools protocol on a pipe, for page tests.

`--window-size` cannot go below 500 px wide in headless Chromium, so a phone's 390 px
is set with `Emulation.setDeviceMetricsOverride` instead. `--remote-debugging-pipe`
speaks that protocol as NUL-separated JSON on file descriptors 3 (commands in) and 4
(replies out): no websocket library, no open port, nothing downloaded.
"""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
)


def chromium() -> str | None:
    return (
        shutil.which("chromium")
        or shutil.which("chromium-browser")
        or shutil.which("google-chrome")
    )


class Browser:
    """One Chromium process with one page attached; use as a context manager."""

    def __init__(self, binary: str, profile: Path, timeout: float = 60.0) -> None:
        self._timeout = timeout
        self._next_id = 0
        self._buffer = b""
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()

        def wire_fds() -> None:  # runs in the child: the protocol's fds are 3 and 4
            # Move both ends clear of 3 and 4 first, so neither is overwritten by the other.
            high_r, high_w = os.dup(to_child_r), os.dup(from_child_w)
            os.dup2(high_r, 3)
            os.dup2(high_w, 4)

        self._proc = subprocess.Popen(
            [
                binary,
                *FLAGS,
                f"--user-data-dir={profile}",
                "--remote-debugging-pipe",
                "about:blank",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "HOME": str(profile)},
            close_fds=False,  # our pipe ends are close-on-exec; only the dup2 copies pass
            preexec_fn=wire_fds,  # pytest runs this single-threaded
        )
        os.close(to_child_r)
        os.close(from_child_w)
        targets = self.send("Target.getTargets")["targetInfos"]
        page = next(t["targetId"] for t in targets if t["type"] == "page")
        self._session = self.send("Target.attachToTarget", targetId=page, flatten=True)["sessionId"]

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self._proc.kill()
        self._proc.wait(timeout=30)
        os.close(self._to_child)
        os.close(self._from_child)

    def _read_message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._from_child], [], [], left)[0]:
                raise TimeoutError("chromium did not answer over the DevTools pipe")
            chunk = os.read(self._from_child, 1 << 20)
            if not chunk:
                raise RuntimeError("chromium closed the DevTools pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def send(self, method: str, session: bool = False, **params: Any) -> dict[str, Any]:
        self._next_id += 1
        command: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if session:
            command["sessionId"] = self._session
        os.write(self._to_child, json.dumps(command).encode() + b"\0")
        deadline = time.monotonic() + self._timeout
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})

    def open(self, url: str, width: int, height: int = 900) -> None:
        """Load `url` in a viewport `width` CSS px wide, as a phone or a desktop would."""
        self.send(
            "Emulation.setDeviceMetricsOverride",
            session=True,
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=width < 500,
        )
        self.send("Page.navigate", session=True, url=url)
        # Wait until the document has loaded and laid out (file:// loads fast).
        deadline = time.monotonic() + self._timeout
        while self.evaluate("document.readyState") != "complete":
            if time.monotonic() > deadline:
                raise TimeoutError(f"{url} did not finish loading")
            time.sleep(0.05)

    def evaluate(self, expression: str) -> Any:
        result = self.send(
            "Runtime.evaluate", session=True, expression=expression, returnByValue=True
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"script failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def screenshot(self, path: Path) -> None:
        """The whole page, below the fold included, as a PNG."""
        shot = self.send(
            "Page.captureScreenshot", session=True, format="png", captureBeyondViewport=True
        )
        path.write_bytes(base64.b64decode(shot["data"]))
