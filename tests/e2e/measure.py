"""Browser timings for the README: how fast the P99 curves follow a sidebar change.

    python tests/e2e/measure.py [--rounds N]

Starts `streamlit run app.py`, opens /p99 (default scenario, default sweep: 9 settings × 3 seeds)
in Debian's chromium, and changes the scheduling policy N times. For each change it prints the
time from the change to the first curve (the coarse sweep drawn) and to the full sweep. Not a
test: the numbers depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.support.browser import CHROMIUM, CHROMIUM_ARGS, open_app, pick, streamlit_server  # noqa: E402

NEW_SWEEP = """([old, stage]) => [...document.querySelectorAll("[class*='st-key-sweep_']")].some(e =>
    !e.className.includes(old) && new RegExp('_(' + stage + ')( |$)').test(e.className)
    && e.querySelector('.js-plotly-plot .scatterlayer .trace'))"""


def sweep_id(page) -> str:
    cls = page.locator("[class*='st-key-sweep_']").first.get_attribute("class")
    return re.search(r"st-key-sweep_([0-9a-f]+)_", cls).group(1)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=6)
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    policies = ["priority", "backfill", "preempt"]  # the page opens on fcfs: its sweep is already known
    firsts, fulls = [], []
    with sync_playwright() as pw, streamlit_server() as url:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        t0 = time.monotonic()
        open_app(page, f"{url}/p99")
        page.wait_for_selector("[class*='st-key-sweep_'][class*='_full']", state="attached", timeout=180_000)
        print(f"cold start (server fresh, workers starting): full sweep {time.monotonic() - t0:.2f} s after opening")
        for r in range(args.rounds):
            policy = policies[r % len(policies)]  # after the first round: served from the pool's results
            old = sweep_id(page)
            pick(page, "policy", policy)
            t0 = time.monotonic()
            page.wait_for_function(NEW_SWEEP, arg=[old, "partial|full"], polling=20, timeout=180_000)
            first = time.monotonic() - t0
            page.wait_for_function(NEW_SWEEP, arg=[old, "full"], polling=20, timeout=180_000)
            full = time.monotonic() - t0
            seen = "repeat" if r >= len(policies) else "new"
            print(f"policy → {policy:<9} ({seen:>6}): first curve {first:.2f} s, full sweep (27 runs) {full:.2f} s")
            if r < len(policies):
                firsts.append(first)
                fulls.append(full)
        browser.close()
    print(f"median over {len(firsts)} new sweeps: first curve {statistics.median(firsts):.2f} s, "
          f"full sweep {statistics.median(fulls):.2f} s")


if __name__ == "__main__":
    main()
