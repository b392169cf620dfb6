"""Open a report in headless Chromium and look at it as a person would.

`look(path)` starts Debian's `chromium` headless with a fresh profile,
speaks the DevTools protocol to it over a WebSocket on 127.0.0.1
(websocket-client), loads the page from disk, waits (bounded) until the
page says every chart was drawn, and returns a full-page PNG screenshot,
where each chart sits on it, and every console error and uncaught
exception the page produced. The browser and its children are stopped by
the process group of the PID started here, whatever happens.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from lbparse.errors import OperationalError
from lbparse.extras import need

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
    "--mute-audio",
    "--remote-debugging-address=127.0.0.1",
    "--remote-debugging-port=0",
)
WIDTH = 1400
START_TIMEOUT = 30.0
RENDER_TIMEOUT = 90.0
CHART_BOXES = """JSON.stringify(Array.from(document.querySelectorAll('[data-chart]')).map(e => {
  const r = e.getBoundingClientRect();
  return {id: e.dataset.chart, x: r.left + window.scrollX, y: r.top + window.scrollY,
          width: r.width, height: r.height,
          marks: e.querySelectorAll('canvas, svg').length};
}))"""


class BrowserError(OperationalError):
    """Chromium could not be started, or did not answer in time."""

    KINDS: ClassVar[frozenset[str]] = frozenset({"missing", "failed", "timed_out"})


@dataclass
class Look:
    """What the browser saw.

    Attributes:
        png: The full-page screenshot, PNG bytes.
        rendered: The page's own verdict: "ok" or "error: ..." (or "timeout: ..."
            if it did not finish drawing in time).
        charts: One dict per chart: id, x, y, width, height (CSS pixels on the
            PNG) and marks (its canvas/svg elements).
        errors: Console errors and uncaught exceptions, as text.
        empty_notes: How many "no data" notes the page shows.
        requests: Every URL the page asked for.
        text: The page's text as shown (document.body.innerText).
    """

    png: bytes
    rendered: str  # the page's own verdict: "ok" or "error: ..."
    charts: list[dict[str, Any]]  # id, x, y, width, height (CSS pixels on the PNG), marks
    errors: list[str] = field(default_factory=list)  # console errors, exceptions
    empty_notes: int = 0
    requests: list[str] = field(default_factory=list)  # every URL the page asked for
    text: str = ""  # the page's text as shown (document.body.innerText)


def chromium() -> str | None:
    """The Chromium to use: $LBPARSE_CHROMIUM, else Debian's `chromium` on PATH.

    Returns:
        The executable's path, or None if there is none.
    """
    env = os.environ.get("LBPARSE_CHROMIUM")
    if env:
        return env
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return None


class _Cdp:
    """The DevTools protocol over one WebSocket: commands and the events between them."""

    def __init__(self, url: str, timeout: float) -> None:
        # websocket-client, the report extra: here, not at the top, since
        # `lbparse report` imports this module without it (no --screenshot)
        self.ws = need("websocket").create_connection(url, timeout=timeout, suppress_origin=True)
        self.next_id = 0
        self.events: list[dict[str, Any]] = []

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        my = self.next_id
        self.ws.send(json.dumps({"id": my, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == my:
                if "error" in msg:
                    raise BrowserError("failed", f"{method}: {msg['error']}")
                return dict(msg.get("result", {}))
            if "method" in msg:
                self.events.append(msg)

    def close(self) -> None:
        self.ws.close()


def _errors(events: list[dict[str, Any]]) -> list[str]:
    out = []
    for e in events:
        p = e.get("params", {})
        if e["method"] == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            out.append(
                "exception: " + str(d.get("exception", {}).get("description") or d.get("text"))
            )
        elif e["method"] == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            out.append(
                "console.error: "
                + " ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", []))
            )
        elif e["method"] == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
            entry = p["entry"]
            out.append(f"log ({entry.get('source')}): {entry.get('text')} {entry.get('url', '')}")
    return out


def _wait_port(profile: Path, proc: subprocess.Popen[bytes]) -> int:
    deadline = time.monotonic() + START_TIMEOUT
    port_file = profile / "DevToolsActivePort"
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise BrowserError(
                "failed", f"chromium exited with status {proc.returncode} before it listened"
            )
        try:
            first = port_file.read_text().split("\n", 1)[0]
            if first.strip().isdigit():
                return int(first)
        except OSError:
            pass
        time.sleep(0.1)
    raise BrowserError(
        "timed_out", f"chromium did not open its DevTools port within {START_TIMEOUT:.0f} s"
    )


def _page_socket(port: int) -> str:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=5) as r:
            targets = json.loads(r.read())
        pages = [t for t in targets if t.get("type") == "page" and t.get("webSocketDebuggerUrl")]
        if pages:
            return str(pages[0]["webSocketDebuggerUrl"])
        time.sleep(0.1)
    raise BrowserError("failed", "chromium opened no page")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Chromium and its helper processes: the process group we started."""
    for sig, wait in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
        if proc.poll() is not None:
            break
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
    try:  # helpers of an exited browser may linger a moment
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def look(page: str | os.PathLike[str], width: int = WIDTH) -> Look:
    """Load `page` (an HTML file) in headless Chromium; screenshot and findings.

    Args:
        page: The HTML file to load.
        width: The window's width in CSS pixels (the height follows the page).

    Returns:
        What the browser saw: screenshot, verdict, chart boxes, errors, requests.

    Raises:
        BrowserError: No Chromium was found, it could not be started, or it did
            not answer in time.
    """
    exe = chromium()
    if exe is None:
        raise BrowserError(
            "missing",
            "no Chromium found: install Debian's `chromium` (make install-system) "
            "or set LBPARSE_CHROMIUM",
        )
    profile = Path(tempfile.mkdtemp(prefix="lbparse-chromium-"))
    proc = subprocess.Popen(
        [exe, *FLAGS, f"--user-data-dir={profile}", f"--window-size={width},900", "about:blank"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        cdp = _Cdp(_page_socket(_wait_port(profile, proc)), timeout=RENDER_TIMEOUT)
        try:
            return _look(cdp, Path(page).resolve().as_uri(), width)
        finally:
            cdp.close()
    finally:
        _stop(proc)
        shutil.rmtree(profile, ignore_errors=True)


def _evaluate(cdp: _Cdp, expression: str) -> Any:
    res = cdp.call("Runtime.evaluate", expression=expression, returnByValue=True)
    return res.get("result", {}).get("value")


def _look(cdp: _Cdp, url: str, width: int) -> Look:
    for domain in ("Page", "Runtime", "Log", "Network"):
        cdp.call(f"{domain}.enable")
    cdp.call(
        "Emulation.setDeviceMetricsOverride",
        width=width,
        height=900,
        deviceScaleFactor=1,
        mobile=False,
    )
    cdp.call("Page.navigate", url=url)
    deadline = time.monotonic() + RENDER_TIMEOUT
    rendered = ""
    while time.monotonic() < deadline:
        rendered = (
            _evaluate(cdp, "document.body ? (document.body.dataset.rendered || '') : ''") or ""
        )
        if rendered:
            break
        time.sleep(0.2)
    if not rendered:
        rendered = f"timeout: the page did not finish drawing within {RENDER_TIMEOUT:.0f} s"
    height = int(_evaluate(cdp, "document.documentElement.scrollHeight") or 900)
    cdp.call(
        "Emulation.setDeviceMetricsOverride",
        width=width,
        height=height,
        deviceScaleFactor=1,
        mobile=False,
    )
    time.sleep(0.5)  # charts sized to their container redraw after the resize
    charts = json.loads(_evaluate(cdp, CHART_BOXES) or "[]")
    empty = int(_evaluate(cdp, "document.querySelectorAll('[data-empty]').length") or 0)
    shot = cdp.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
    requests = [
        e["params"]["request"]["url"]
        for e in cdp.events
        if e["method"] == "Network.requestWillBeSent"
    ]
    text = _evaluate(cdp, "document.body ? document.body.innerText : ''") or ""
    return Look(
        base64.b64decode(shot["data"]), rendered, charts, _errors(cdp.events), empty, requests, text
    )
