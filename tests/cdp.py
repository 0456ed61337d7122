"""A headless Chromium driven over the Chrome DevTools Protocol (CDP), for the tests that open a page as
a user would: load a URL at a window size, wait for text to appear, evaluate JavaScript in the page,
take a screenshot. Debian's `chromium` package is used (Playwright's own browser download is not
reachable from CI); the protocol goes over a WebSocket with the `websockets` package Prefect installs.
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request

import pytest


def chromium_path() -> str:
    """The Chromium binary; the test skips where there is none, fails where ALBERT_REQUIRE_BROWSER=1."""
    found = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if found:
        return found
    if os.environ.get("ALBERT_REQUIRE_BROWSER") == "1":
        pytest.fail("ALBERT_REQUIRE_BROWSER=1 but no chromium on PATH (apt-get install chromium)")
    pytest.skip("no chromium on PATH (apt-get install chromium)")


class Browser:
    """One headless Chromium with one page. Use as a context manager."""

    def __init__(self, width: int = 1280, height: int = 900):
        self.width, self.height = width, height
        self.profile = tempfile.mkdtemp(prefix="chromium-profile-")
        self.proc = subprocess.Popen(
            [chromium_path(), "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--remote-debugging-port=0", f"--user-data-dir={self.profile}", f"--window-size={width},{height}",
             "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        self.ids = itertools.count(1)
        self.ws = self._connect()

    def _connect(self):
        from websockets.sync.client import connect

        port_file = os.path.join(self.profile, "DevToolsActivePort")
        deadline = time.monotonic() + 60
        while not os.path.exists(port_file) or not open(port_file).read().strip():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"chromium did not start: {self.proc.stderr.read()[-2000:]}")
            time.sleep(0.2)
        port = open(port_file).read().split()[0]
        targets = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list"))
        page = next(t for t in targets if t["type"] == "page")
        ws = connect(page["webSocketDebuggerUrl"], max_size=64 * 2**20, open_timeout=30)
        return ws

    def send(self, method: str, **params) -> dict:
        """One CDP command; its result (events that arrive meanwhile are dropped)."""
        call = next(self.ids)
        self.ws.send(json.dumps({"id": call, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv(timeout=120))
            if message.get("id") == call:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})

    def evaluate(self, expression: str):
        """The JSON value of a JavaScript expression in the page (awaited if it is a promise)."""
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression[:80]}...: {result['exceptionDetails']}")
        return result["result"].get("value")

    def open(self, url: str, wait_for_text: str | None = None, timeout: float = 90) -> None:
        """Load `url` at the window size; wait until the page's text holds `wait_for_text`."""
        self.send("Emulation.setDeviceMetricsOverride", width=self.width, height=self.height,
                  deviceScaleFactor=1, mobile=False)  # fmt: skip
        self.send("Page.navigate", url=url)
        deadline = time.monotonic() + timeout
        while True:
            text = self.evaluate("document.body ? document.body.innerText : ''") or ""
            if self.evaluate("document.readyState") == "complete" and (
                not wait_for_text or wait_for_text in text
            ):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"{url}: {wait_for_text!r} did not appear within {timeout} s; text: {text[:800]}"
                )
            time.sleep(0.5)

    def click_text(self, text: str, wait_for_text: str | None = None, timeout: float = 30) -> None:
        """Click the innermost visible element whose text is exactly `text` (a tab, a button), then wait
        for `wait_for_text` to appear."""
        found = self.evaluate(
            "(() => { const all = Array.from(document.querySelectorAll('body *')).filter(e => "
            f"e.innerText && e.innerText.trim() === {json.dumps(text)} && e.offsetParent !== null); "
            "const el = all[all.length - 1]; if (!el) return false; el.click(); return true; })()"
        )
        if not found:
            raise LookupError(f"nothing to click reads {text!r}")
        deadline = time.monotonic() + timeout
        while wait_for_text and wait_for_text not in self.text():
            if time.monotonic() > deadline:
                raise TimeoutError(f"after clicking {text!r}, {wait_for_text!r} did not appear")
            time.sleep(0.5)

    def text(self) -> str:
        return self.evaluate("document.body.innerText")

    def screenshot(self, path: str, full_page: bool = True) -> str:
        """A PNG of the page (its whole height when full_page) at the window's width."""
        params = {"format": "png"}
        if full_page:
            height = self.evaluate(
                "Math.max(document.body.scrollHeight, document.documentElement.scrollHeight)"
            )
            params["clip"] = {
                "x": 0,
                "y": 0,
                "width": self.width,
                "height": max(height, self.height),
                "scale": 1,
            }
            params["captureBeyondViewport"] = True
        data = self.send("Page.captureScreenshot", **params)["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))
        return path

    def close(self) -> None:
        try:
            self.ws.close()
        finally:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
            shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
