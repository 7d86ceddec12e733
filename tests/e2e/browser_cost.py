"""Browser CPU of a first page, and of the two things the app does to stay light on a shared
machine (README: Speed).

    python tests/e2e/browser_cost.py [--first-only] [--tries 3]

0. A first page: chromium's CPU from opening a page in a fresh browser context (no cache: what a
   participant's browser spends when the workshop link opens) until the app is idle and its
   charts are drawn, for the Playground and the Timeline (the server has run them once before,
   so the figure is the browser's, not the simulation's).
1. A rerun longer than Streamlit's 0.5 s: the CPU chromium spends on one of about 2.5 s (the
   memory page, `dur=3000`), with the app's one-step dimming (`ui/frame/layout.py::CALM_RERUNS`) and with
   Streamlit's own 1 s fade put back by a style injected into the page.
2. A page waiting on a long P99 sweep (80 slow runs): chromium's CPU over 10 s while the page's
   fragment polls the pool (`ui/runtime/live.py::POLL_S`).
Not a test: the numbers depend on the machine; each figure is the median of three tries.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from load import CpuUsage, wait_idle  # noqa: E402

from tests.support.browser import CHROMIUM, CHROMIUM_ARGS, streamlit_server  # noqa: E402

# Streamlit's own timing back (`html body` outranks the app's rule, which comes later in the page)
STREAMLIT_FADE = ('html body [data-testid="stElementContainer"], html body [data-testid="stExpander"] details, '
                  'html body [data-testid="stExpander"] summary { transition-duration: 1s !important; }')


def chromium_s(usage: CpuUsage) -> float:
    usage.sample()
    return usage.by_group().get("chromium", 0.0)


async def slow_rerun(browser, url: str, usage: CpuUsage, fade: bool, dur: int) -> tuple[float, float]:
    """(chromium CPU-s, wall s) of one slow rerun of the memory page (`dur`: a scenario no earlier
    try has run, so nothing comes from the cache)."""
    page = await (await browser.new_context(viewport={"width": 1280, "height": 900})).new_page()
    await page.goto(f"{url}/memory")
    await wait_idle(page, 120_000)
    if fade:
        await page.add_style_tag(content=STREAMLIT_FADE)
    got = await page.evaluate("getComputedStyle(document.querySelector('[data-testid=stElementContainer]'))"
                              ".transitionDuration")
    assert got == ("1s" if fade else "0s"), got  # the timing this try measures is the one in force
    await page.get_by_test_id("stSidebar").get_by_text("Run", exact=True).click()
    await page.wait_for_timeout(1000)
    box = page.locator(".st-key-dur input")
    c0, t0 = chromium_s(usage), time.monotonic()
    await box.fill(str(dur))
    await box.press("Enter")
    await wait_idle(page, 120_000)
    out = chromium_s(usage) - c0, time.monotonic() - t0
    await page.context.close()
    return out


async def first_page(browser, url: str, usage: CpuUsage, path: str) -> tuple[float, float]:
    """(chromium CPU-s, wall s) of opening `path` in a fresh context until idle, charts drawn."""
    ctx = await browser.new_context(viewport={"width": 1280, "height": 900})
    page = await ctx.new_page()
    await page.goto("about:blank")
    await asyncio.sleep(0.5)
    c0, t0 = chromium_s(usage), time.monotonic()
    await page.goto(url + path)
    await wait_idle(page, 120_000)
    await page.wait_for_function("() => document.querySelectorAll('.js-plotly-plot .main-svg').length > 0",
                                 timeout=60_000, polling=100)
    await asyncio.sleep(1.0)  # whatever the page still lays out or animates after idle counts too
    out = chromium_s(usage) - c0, time.monotonic() - t0
    await ctx.close()
    return out


async def polling(browser, url: str, usage: CpuUsage) -> float:
    """Chromium CPU-s over 10 s of a page whose long sweep is still computing."""
    page = await (await browser.new_context(viewport={"width": 1280, "height": 900})).new_page()
    await page.goto(f"{url}/p99?dur=3000&seeds=5&sw_pts=16")
    await page.wait_for_selector("[class*='st-key-sweep_']", timeout=120_000)
    await page.wait_for_timeout(3000)
    c0 = chromium_s(usage)
    await page.wait_for_timeout(10_000)
    out = chromium_s(usage) - c0
    await page.context.close()
    return out


async def main(first_only: bool = False, tries: int = 3) -> None:
    from playwright.async_api import async_playwright

    usage = CpuUsage()
    with streamlit_server() as url:
        async with async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
            for path in ("/", "/timeline"):
                await first_page(browser, url, usage, path)  # the server runs the scenario once
                got = [await first_page(browser, url, usage, path) for _ in range(tries)]
                print(f"first page {path}: chromium {statistics.median(c for c, _ in got):.2f} CPU-s "
                      f"(min {min(c for c, _ in got):.2f}, max {max(c for c, _ in got):.2f}; wall "
                      f"{statistics.median(w for _, w in got):.2f} s; median of {tries})", flush=True)
            if first_only:
                await browser.close()
                return
            dur = 3000
            for fade, label in ((False, "dimmed in one step (the app)"), (True, "Streamlit's 1 s fade put back")):
                tries = []
                for _ in range(3):
                    dur += 1
                    tries.append(await slow_rerun(browser, url, usage, fade, dur))
                print(f"slow rerun, {label}: chromium {statistics.median(c for c, _ in tries):.2f} CPU-s "
                      f"(wall {statistics.median(w for _, w in tries):.2f} s)", flush=True)
            tries = [await polling(browser, url, usage) for _ in range(3)]
            print(f"a page waiting on a long sweep: chromium {statistics.median(tries):.2f} CPU-s per 10 s")
            await browser.close()


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("--first-only", action="store_true", help="only the first-page figures")
    ap.add_argument("--tries", type=int, default=3)
    a = ap.parse_args()
    asyncio.run(main(a.first_only, a.tries))
