"""Real-browser check of the Playground's figures over seeds: the shown seed's cards come first,
from the page's own run, while the other seeds run in the page workers; then every card is over
all N seeds, without a reload. Timings are printed (run with -s), never asserted: the README's
figures come from `python tests/e2e/measure_seeds.py`.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.support.browser import open_app

pytestmark = pytest.mark.browser

WATCH = """() => { window.__seen = {}; const t0 = performance.now();
  const look = () => {
    for (const stage of ['shown', 'all']) {
      if (!window.__seen[stage] && document.querySelector(
          `[class*='st-key-pg_numbers_${stage}'] [data-testid='stMetric']`)) {
        window.__seen[stage] = {t: performance.now() - t0,
          text: document.querySelector(`[class*='st-key-pg_numbers_${stage}']`).innerText};
      }
    }
  };
  new MutationObserver(look).observe(document, {childList: true, subtree: true}); }"""


def test_the_first_cards_are_the_shown_seed_then_every_figure_is_over_the_seeds(page, app_url):
    page.add_init_script(f"({WATCH})()")
    # a scenario no other test runs, so its seeds are in no cache, and 10 seeds: 19 more runs on two page
    # workers, each ~0.6 s compiled with arrivals for 6,000 s, so several seconds after the first cards
    # (a page that finds every seed in draws them at once, rightly; on the scenario's own 120 s the
    # compiled engine ran the 19 within the browser's first render, and CI's first cards were already
    # over every seed)
    open_app(page, f"{app_url}/?preset=classic-inversion&policy=priority&reserve=320&seeds=10&dur=6000")
    page.wait_for_selector("[class*='st-key-pg_numbers_all'] [data-testid='stMetric']", timeout=120_000)
    expect(page.get_by_test_id("stException")).to_have_count(0)
    seen = page.evaluate("window.__seen")
    assert "shown" in seen and "all" in seen and seen["shown"]["t"] < seen["all"]["t"], seen
    # (the shown container's text is not checked here: read inside the observer's callback it was once
    # already the next render's; the AppTests check what the shown state says)
    done = page.locator("[class*='st-key-pg_numbers_all']").inner_text()
    assert "Every figure is over 10 seeds (7–16)" in done and "10 seeds: " in done
    assert "better on " in done and "of 10 seeds" in done  # the deltas pair seed with seed
    print(f"first card {seen['shown']['t'] / 1000:.2f} s, over 10 seeds {seen['all']['t'] / 1000:.2f} s "
          "(from navigation, in this test's session)")
