"""Real-browser checks of issue 8: live P99 curves, truthful controls, bad links, a fresh server's
first request, and no request to the internet at page load.

Timings are printed (run with -s), never asserted: the benchmark figures in the README come from
`python tests/e2e/p99_bench.py`.
"""

from __future__ import annotations

import re
import time

import pytest
from playwright.sync_api import expect

from tests.support.browser import full_shot, open_app, pick, streamlit_server, wait_idle

pytestmark = pytest.mark.browser

SWEEP = "[class*='st-key-sweep_']"  # the sweep's caption: which sweep (its fingerprint) and how far (its stage)
CHART = ".st-key-p99_sweep .js-plotly-plot"
# a sweep other than `old` at `stage`, and a chart drawing that very sweep (its figure's meta names it)
NEW_SWEEP = """([old, stage]) => [...document.querySelectorAll("[class*='st-key-sweep_']")].some(e => {
    const m = e.className.match(/st-key-sweep_([0-9a-f]+)_(\\w+)/);
    return m && m[1] !== old && new RegExp('^(' + stage + ')$').test(m[2])
      && [...document.querySelectorAll('.st-key-p99_sweep .js-plotly-plot')].some(gd =>
           gd._fullLayout && gd._fullLayout.meta && gd._fullLayout.meta.sweep === m[1]
           && gd.querySelector('.scatterlayer .trace')); })"""


def sweep_id(page) -> str:
    cls = page.locator(SWEEP).first.get_attribute("class")
    return re.search(r"st-key-sweep_([0-9a-f]+)_", cls).group(1)


def wait_sweep_done(page, timeout_ms: int = 120_000) -> None:
    page.wait_for_selector(f"{SWEEP}[class*='_full']", state="attached", timeout=timeout_ms)


def test_p99_curves_follow_the_sidebar_until_complete(page, app_url, shots):
    open_app(page, f"{app_url}/p99?sw_pts=5&seeds=2")
    expect(page.get_by_role("button", name=re.compile("sweep", re.I))).to_have_count(0)  # no button
    wait_sweep_done(page)
    expect(page.get_by_test_id("stException")).to_have_count(0)
    old = sweep_id(page)
    pick(page, "policy", "priority")  # a sidebar change: a new sweep starts by itself
    t0 = time.monotonic()
    page.wait_for_function(NEW_SWEEP, arg=[old, "partial|full"], polling=20, timeout=120_000)
    first = time.monotonic() - t0
    page.wait_for_function(NEW_SWEEP, arg=[old, "full"], polling=20, timeout=120_000)
    full = time.monotonic() - t0
    print(f"\nP99 (5 settings × 2 seeds, policy change): first curve {first:.2f} s, full sweep {full:.2f} s")
    wait_idle(page)
    expect(page.get_by_test_id("stException")).to_have_count(0)
    expect(page.get_by_text("CacheReplayClosureError")).to_have_count(0)
    plot = page.locator(CHART)
    for title in ("P0 · P99 time to first token (s)", "P2 · P99 time to first token (s)",
                  "On the same axis: served rate"):
        expect(plot.get_by_text(title, exact=False)).to_have_count(1)
    expect(plot.get_by_text("SLO 1 s")).to_have_count(1)
    full_shot(page, shots / "p99_live.png")


def test_while_a_long_sweep_computes_every_poll_keeps_the_chart_and_raises_nothing(page, app_url):
    """A sweep of 80 slow runs: the fragment polls many times, and a milestone arrives in a poll.
    Each poll must redraw the chart (Streamlit clears what a fragment's rerun does not draw) and
    write only where it may (a fragment cannot fill a slot outside it that it left empty in the full
    run: an exception on the first milestone)."""
    open_app(page, f"{app_url}/p99?dur=600&seeds=5&sw_pts=16")
    page.wait_for_selector(SWEEP, state="attached", timeout=60_000)
    chart, shown, stages = page.locator(CHART), [], set()
    for _ in range(60):  # 6 s: about 12 polls
        shown.append(chart.count() > 0)
        stages.add(re.search(r"st-key-sweep_[0-9a-f]+_(\w+)", page.locator(SWEEP).first.get_attribute("class")
                             or "").group(1))
        assert page.get_by_test_id("stException").count() == 0
        page.wait_for_timeout(100)
    assert "partial" in stages, stages  # curves were drawn while polls went on (and milestones came)
    assert sum(shown) >= 54, shown  # (a sample may fall between a poll's clear and its redraw)


def test_a_second_session_gets_the_same_sweep_from_the_shared_pool(browser, app_url):
    url = f"{app_url}/p99?sw_knob=cap&sw_pts=3&seeds=1"
    first = browser.new_page(viewport={"width": 1280, "height": 1000})
    try:
        open_app(first, url)
        wait_sweep_done(first)
    finally:
        first.close()
    second = browser.new_page(viewport={"width": 1280, "height": 1000})
    try:
        t0 = time.monotonic()
        open_app(second, url)
        wait_sweep_done(second, timeout_ms=30_000)
        print(f"\nsecond session, same sweep: complete {time.monotonic() - t0:.2f} s after opening")
        expect(second.get_by_test_id("stException")).to_have_count(0)
        expect(second.get_by_text("3 runs:", exact=False)).to_have_count(1)
    finally:
        second.close()


def test_a_control_change_that_cannot_run_is_refused_at_the_control(page, app_url):
    open_app(page, f"{app_url}/")
    page.get_by_test_id("stSidebar").get_by_text("P1 · priority 1").click()
    box = page.locator(".st-key-p1_rate input")
    box.fill("9000")
    box.press("Enter")
    wait_idle(page)
    expect(box).to_have_value("3")
    refused = re.compile(r"9000 cannot run: .*the scenario implies about .* more than the 50,000 allowed")
    expect(page.get_by_text(refused)).to_have_count(1)
    expect(page).not_to_have_url(re.compile("p1_rate"))
    expect(page.get_by_text("from the link", exact=False)).to_have_count(0)


def test_a_link_value_that_cannot_run_falls_back_with_a_link_note(page, app_url):
    open_app(page, f"{app_url}/?p1_rate=9000")
    expect(page.get_by_text("Some settings from the link were not used")).to_have_count(1)
    expect(page).not_to_have_url(re.compile("p1_rate"))
    page.get_by_test_id("stSidebar").get_by_text("P1 · priority 1").click()
    expect(page.locator(".st-key-p1_rate input")).to_have_value("3")


@pytest.mark.parametrize("query, key", [("kvres=inf", "kvres"), ("seqs=1e400", "seqs"), ("p0_rate=nan", "p0_rate"),
                                        ("reserve=1e99999", "reserve"), ("p2_pin=%3Cb%3Ex%3C%2Fb%3E", "p2_pin")])
def test_bad_link_values_get_one_note_leave_the_url_and_reset_works(page, app_url, query, key):
    open_app(page, f"{app_url}/?{query}")
    expect(page.get_by_test_id("stException")).to_have_count(0)
    notes = page.get_by_test_id("stAlert").filter(has_text="from the link")
    expect(notes).to_have_count(1)
    expect(notes.locator("li")).to_have_count(1)
    expect(notes).to_contain_text(f"“{key}”")
    expect(page.locator("[data-testid='stMain'] b", has_text="x")).to_have_count(0)  # no HTML rendered
    expect(page).not_to_have_url(re.compile(f"{key}="))
    expect(page.get_by_test_id("stMetric").first).to_be_visible()  # the page is there, not blank
    page.get_by_role("button", name="Reset", exact=True).click()
    wait_idle(page)
    expect(page.get_by_test_id("stException")).to_have_count(0)


def test_a_repeated_key_is_named_and_its_last_value_kept(page, app_url):
    open_app(page, f"{app_url}/?reserve=512&reserve=1024&policy=priority")
    expect(page.get_by_test_id("stAlert").filter(has_text="appears 2 times")).to_have_count(1)
    expect(page).to_have_url(re.compile(r"reserve=1024"))
    expect(page).not_to_have_url(re.compile(r"reserve=512"))
    expect(page.locator(".st-key-reserve [data-testid='stSliderThumbValue']")).to_have_text("1024")


@pytest.mark.parametrize("path, title", [("p99", "P99 curves"), ("timeline", "Inversion timeline")])
def test_the_first_request_of_a_fresh_server_opens_the_asked_page(browser, path, title):
    """A `pages/` folder makes Streamlit's legacy multipage path handle a fresh server's first request."""
    with streamlit_server() as url:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        try:
            open_app(page, f"{url}/{path}")
            page.wait_for_timeout(500)
            expect(page.get_by_text("Page not found")).to_have_count(0)
            expect(page.locator("h1")).to_have_text(title)
            expect(page.get_by_test_id("stException")).to_have_count(0)
            nav = page.get_by_role("link", name="Timeline", exact=True)  # the app's own top navigation
            expect(nav).to_have_count(1)
            thumb = page.locator(".st-key-reserve").get_by_role("slider")
            thumb.focus()
            thumb.press("ArrowRight")
            wait_idle(page)
            expect(page).to_have_url(re.compile(rf"/{path}\?reserve=64"))
            expect(page.locator("h1")).to_have_text(title)
        finally:
            page.close()


def test_no_request_leaves_the_machine_at_page_load(page, app_url):
    seen: list[str] = []
    page.on("request", lambda r: seen.append(r.url))
    for path in ("", "p99", "timeline"):
        open_app(page, f"{app_url}/{path}")
        page.wait_for_timeout(500)
    host = re.escape(app_url)
    outside = [u for u in seen if not re.match(host, u) and not u.startswith(("data:", "blob:"))]
    assert outside == []
    icon = page.locator("link[rel~='icon']").first.get_attribute("href") or ""
    assert icon.startswith(("/", app_url, "./")) and "gstatic" not in icon
