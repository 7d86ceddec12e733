"""A real browser against `streamlit run app.py`: the server on a free port, Debian chromium and its
flags, and the waits, picks and screenshots the browser tests share (their fixtures:
tests/e2e/conftest.py)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the repository
CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
SHOTS = ROOT / "artifacts" / "screenshots"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_healthy(port: int, proc: subprocess.Popen, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"streamlit exited with code {proc.returncode}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=1) as r:
                if r.read().decode() == "ok":
                    return
        except OSError:
            pass
        time.sleep(0.25)
    raise RuntimeError("streamlit server did not become healthy")


def server_log(url: str) -> Path:
    """The log (stdout and stderr) of the server `streamlit_server` started at `url`."""
    return Path(tempfile.gettempdir()) / f"inversion_lab_e2e_{url.rsplit(':', 1)[1]}.log"


@contextmanager
def streamlit_server(env: dict[str, str] | None = None):
    """`streamlit run app.py` on a free localhost port (`env`: more environment variables); stopped
    by its PID afterwards."""
    port = _free_port()
    log = open(server_log(f"http://127.0.0.1:{port}"), "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"), "--server.headless", "true",
         "--server.address", "127.0.0.1", "--server.port", str(port), "--server.fileWatcherType", "none",
         "--browser.gatherUsageStats", "false", "--global.developmentMode", "false"],
        cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})},
    )
    try:
        _wait_healthy(port, proc)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def wait_idle(page, timeout_ms: int = 60_000) -> None:
    """Streamlit's own idle check (e2e_playwright/conftest.py::wait_for_app_run)."""
    from playwright.sync_api import expect

    page.wait_for_timeout(200)
    page.locator("[data-testid='stApp'][data-test-connection-state='CONNECTED']").wait_for(
        state="attached", timeout=timeout_ms)
    page.locator("[data-testid='stApp'][data-test-script-state='notRunning']").wait_for(
        state="attached", timeout=timeout_ms)
    expect(page.get_by_test_id("stSkeleton")).to_have_count(0, timeout=timeout_ms)


def open_app(page, url: str) -> None:
    page.goto(url)
    page.wait_for_selector("[data-testid='stAppViewContainer']", state="attached", timeout=60_000)
    wait_idle(page)


def pick(page, key: str, option: str) -> None:
    """Choose `option` in the selectbox keyed `key`."""
    page.locator(f".st-key-{key}").click()
    page.get_by_role("option", name=option, exact=True).click()


def full_shot(page, path) -> None:
    """A screenshot of the whole page: Streamlit scrolls inside its own container, so grow the
    viewport to the content's height first."""
    height = page.evaluate("() => document.querySelector('[data-testid=stMain]')?.scrollHeight || 1000")
    width = page.viewport_size["width"]
    page.set_viewport_size({"width": width, "height": min(max(int(height) + 40, 800), 6000)})
    page.wait_for_timeout(300)
    page.screenshot(path=str(path), full_page=True)
    page.set_viewport_size({"width": width, "height": 1000})


TEXT_OVERLAP = """() => {
  const out = [];
  const sel = 'g.xtick text, g.ytick text, g.annotation text, text.bartext, g.g-gtitle text, g.g-xtitle text, '
    + 'g.g-ytitle text';
  for (const plot of document.querySelectorAll('.js-plotly-plot')) {
    const boxes = [...plot.querySelectorAll(sel)].map(t => ({t: t.textContent, b: t.getBoundingClientRect()}))
      .filter(x => x.b.width > 0 && x.t.trim());
    for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
      const a = boxes[i].b, c = boxes[j].b;
      if (a.left < c.right - 1 && c.left < a.right - 1 && a.top < c.bottom - 1 && c.top < a.bottom - 1)
        out.push(boxes[i].t + ' | ' + boxes[j].t);
    }
  }
  for (const t of document.querySelectorAll('[data-testid=stTable]'))
    if (t.scrollWidth > t.clientWidth + 1) out.push('table wider than its column: ' + t.textContent.slice(0, 60));
  return out; }"""


def text_overlaps(page) -> list[str]:
    """Pairs of chart texts (tick labels, annotations and titles, bar labels) that overlap on the
    page as drawn, and static tables wider than their column: what a projector at 1280 px cannot show."""
    return page.evaluate(TEXT_OVERLAP)
