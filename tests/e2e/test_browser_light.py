"""A lighter first page: the Playground draws one chart (KV above the queue, thinned to at most
`ui.charts.figures.MAX_POINTS` points a series) and leaves its table of every per-class number undrawn until
it is opened; a rerun that leaves the chart's figure unchanged does not touch the chart; a slider's
key steps make one run when the key is released (`ui/frame/slider_keys.js`).
`python tests/e2e/browser_cost.py --first-only` measures what that saves (README: Speed)."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.support.browser import open_app, wait_idle

pytestmark = pytest.mark.browser
WATCH = """() => { window.__chartMutations = 0;
  new MutationObserver(ms => { for (const m of ms) if (m.target.closest && m.target.closest('.js-plotly-plot'))
    window.__chartMutations++; }).observe(document.body, {subtree: true, childList: true, attributes: true}); }"""


def test_one_chart_a_closed_table_and_no_redraw_of_an_unchanged_chart(page, app_url):
    open_app(page, f"{app_url}/")
    expect(page.locator(".js-plotly-plot")).to_have_count(1)
    expect(page.get_by_test_id("stDataFrame")).to_have_count(0)  # the closed table is not drawn
    page.wait_for_timeout(1000)
    page.evaluate(WATCH)
    page.get_by_text("Every per-class number").click()  # a rerun: the table is drawn, the chart is the same
    wait_idle(page)
    expect(page.get_by_test_id("stDataFrame")).to_have_count(1)
    page.wait_for_timeout(1000)
    assert page.evaluate("window.__chartMutations") == 0
    page.locator(".st-key-policy").click()  # a rerun that changes the chart redraws it
    page.get_by_role("option", name="priority", exact=True).click()
    wait_idle(page)
    page.wait_for_timeout(1000)
    assert page.evaluate("window.__chartMutations") > 0


# Counts the "rerun" messages the page really sends (BackMsg.rerun_script: first byte 0x5A), below
# anything the app installs (an init script runs before the page's own).
COUNT_RERUNS = """(() => { window.__rerunsSent = 0; const send = WebSocket.prototype.send;
  WebSocket.prototype.send = function (d) {
    const b = d instanceof ArrayBuffer ? new Uint8Array(d, 0, 1) : new Uint8Array(d.buffer, d.byteOffset, 1);
    if (b[0] === 0x5a) window.__rerunsSent++;
    return send.call(this, d); }; })();"""


def test_slider_key_steps_make_one_run_and_the_url_follows(page, app_url):
    page.add_init_script(COUNT_RERUNS)
    # one seed: the cards' baseline (the same without remedies) is one run that every reserve shares,
    # so no fragment polls for other seeds and every rerun counted is the slider's
    open_app(page, f"{app_url}/?policy=priority&seeds=1")
    page.wait_for_selector("[class*='st-key-pg_numbers_all']", state="attached", timeout=60_000)
    wait_idle(page)
    thumb = page.locator(".st-key-reserve").get_by_role("slider")
    thumb.focus()
    before = page.evaluate("window.__rerunsSent")
    for _ in range(4):  # a held key: four steps (the browser's auto-repeat), one release
        page.keyboard.down("ArrowRight")
        page.wait_for_timeout(40)
    page.keyboard.up("ArrowRight")
    wait_idle(page)
    expect(page).to_have_url(re.compile(r"[?&]reserve=256"))
    assert page.evaluate("window.__rerunsSent") - before == 1
    before = page.evaluate("window.__rerunsSent")
    for _ in range(3):  # three quick taps
        page.keyboard.press("ArrowLeft")
    wait_idle(page)
    expect(page).to_have_url(re.compile(r"[?&]reserve=64"))
    assert page.evaluate("window.__rerunsSent") - before == 1
    expect(page.locator(".st-key-reserve").get_by_test_id("stSliderThumbValue")).to_have_text("64")
