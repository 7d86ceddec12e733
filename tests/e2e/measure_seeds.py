"""Browser timings for the README: how soon the Playground's cards appear (the shown seed's, from
the page's own run) and how soon every figure is over the N seeds (the other seeds from the page
workers), on a new visit and after a sidebar change.

    python tests/e2e/measure_seeds.py [--rounds N]

Starts `streamlit run app.py` and opens it in Debian's chromium. Not a test: the numbers depend on
the machine and its load (time it with nothing else running).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.support.browser import CHROMIUM, CHROMIUM_ARGS, pick, streamlit_server, wait_idle  # noqa: E402

CARD = "[class*='st-key-pg_numbers_'] [data-testid='stMetric']"
ALL = "[class*='st-key-pg_numbers_all'] [data-testid='stMetric']"
CARDS_TEXT = """() => [...document.querySelectorAll("[class*='st-key-pg_numbers_'] [data-testid='stMetric']")]
    .map(e => e.innerText).join('|')"""
CHANGED = """([old, sel]) => { const c = [...document.querySelectorAll(sel)];
    return c.length > 0 && c.map(e => e.innerText).join('|') !== old; }"""


def visit(browser, url: str) -> tuple[float, float, float]:
    """A new session opening `url`: seconds to the page's first widget (the sidebar's preset: the
    browser has loaded Streamlit and the script runs), to the first card, to the cards over all seeds."""
    page = browser.new_page(viewport={"width": 1280, "height": 1000})
    try:
        t0 = time.monotonic()
        page.goto(url)
        page.wait_for_selector(".st-key-preset", state="visible", timeout=120_000)
        shell = time.monotonic() - t0
        page.wait_for_selector(CARD, state="visible", timeout=120_000)
        first = time.monotonic() - t0
        page.wait_for_selector(ALL, state="visible", timeout=180_000)
        return shell, first, time.monotonic() - t0
    finally:
        page.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw, streamlit_server() as url:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        shell, first, full = visit(browser, f"{url}/")
        print(f"cold start (server fresh, workers starting), default: sidebar {shell:.2f} s, first card "
              f"{first:.2f} s, over 5 seeds {full:.2f} s")
        firsts, fulls, after = [], [], []
        for preset in ("classic-inversion", "budget-bound", "no-contention", "doc-burst", "no-alarm"):
            shell, first, full = visit(browser, f"{url}/?preset={preset}")  # a run nobody has made yet
            firsts.append(first)
            fulls.append(full)
            after.append(first - shell)
            print(f"new visit, ?preset={preset:<18}: sidebar {shell:.2f} s, first card {first:.2f} s, over 5 "
                  f"seeds {full:.2f} s")
        print(f"new visits: first card median {statistics.median(firsts):.2f} s (max {max(firsts):.2f}; "
              f"{statistics.median(after):.2f} s after the sidebar), over 5 seeds median "
              f"{statistics.median(fulls):.2f} s")
        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        page.goto(f"{url}/?preset=classic-inversion")
        page.wait_for_selector(ALL, state="visible", timeout=180_000)
        wait_idle(page)
        policies = ["priority", "backfill", "preempt"]
        cf, cfull = [], []
        for r in range(args.rounds):
            policy = policies[r % len(policies)]
            old = page.evaluate(CARDS_TEXT)
            t0 = time.monotonic()
            pick(page, "policy", policy)
            page.wait_for_function(CHANGED, arg=[old, CARD], polling=20, timeout=120_000)
            cf.append(time.monotonic() - t0)
            page.wait_for_function(CHANGED, arg=[old, ALL], polling=20, timeout=180_000)
            cfull.append(time.monotonic() - t0)
            print(f"policy → {policy:<9}: first card {cf[-1]:.2f} s, over 5 seeds (and the baseline's 5) "
                  f"{cfull[-1]:.2f} s")
        browser.close()


if __name__ == "__main__":
    main()
