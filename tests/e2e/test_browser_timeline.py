"""The inversion timeline in a real browser: the story view, a picked request's story, the view in
the link, and a 10k-request run that stays fluent."""

from __future__ import annotations

import re
import time

import pytest
from playwright.sync_api import expect

from tests.support.browser import full_shot, open_app, wait_idle

pytestmark = pytest.mark.browser


def test_the_story_view_shows_who_got_in_ahead(page, app_url, shots):
    open_app(page, f"{app_url}/timeline?preset=classic-inversion")
    plot = page.locator(".st-key-tl_fig .js-plotly-plot")
    expect(plot).to_have_count(1)
    expect(plot.locator(".ytick").first).to_contain_text("P0")  # top-priority lanes first, labelled
    expect(plot.get_by_text("P1 admitted ahead", exact=False)).to_have_count(1)
    expect(plot.get_by_text("#24 P2 · held up to 1,635 blocks", exact=False)).to_have_count(1)  # a document holding KV
    for name in ("inversion: a lower-priority request admitted", "admitted ahead (connector)", "waited on (KV holder)",
                 "P0 running", "waiting: kv_short"):
        expect(plot.locator(".legendtext", has_text=name)).to_have_count(1)
    expect(plot.get_by_text("Inversion over time", exact=False)).to_have_count(1)
    full_shot(page, shots / "timeline_story.png")


def test_a_picked_request_tells_its_story_and_the_link_keeps_it(page, app_url, shots):
    open_app(page, f"{app_url}/timeline?preset=classic-inversion&tl_req=48")
    story = page.get_by_test_id("stMain").get_by_text("Meanwhile", exact=False).first
    expect(story).to_contain_text("admitted ahead of it")
    named = re.compile(r"#25 P1 at 9\.24 s \(needed 13 blocks; this one needed 375\)")
    expect(page.get_by_text(named)).to_have_count(1)
    expect(page.get_by_text("biggest holders #24 P2 (1635 blocks)", exact=False)).to_have_count(1)
    expect(page).to_have_url(re.compile("tl_req=48"))
    full_shot(page, shots / "timeline_story_48.png")


def test_a_10k_request_run_stays_fluent(page, app_url, shots):
    """~8k requests, overloaded: hundreds of thousands of inversion episodes; the lanes are capped."""
    url = f"{app_url}/timeline?policy=backfill&p0_rate=10&p1_rate=80&p2_rate=1"
    t0 = time.monotonic()
    open_app(page, url)
    first = time.monotonic() - t0
    expect(page.get_by_text(re.compile(r"Showing the first 60 of [\d,]+ top-priority requests"))).to_have_count(1)
    page.get_by_text("All requests").click()
    t1 = time.monotonic()
    wait_idle(page)
    print(f"\n10k-request timeline: open (incl. simulating) {first:.1f} s; "
          f"switch to all requests {time.monotonic() - t1:.2f} s")
    expect(page.get_by_text(re.compile(r"Showing 300 of [\d,]+ requests"))).to_have_count(1)
    expect(page.get_by_test_id("stException")).to_have_count(0)
    full_shot(page, shots / "timeline_10k_all.png")
