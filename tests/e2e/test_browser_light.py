"""A lighter first page: the Playground draws one chart (KV above the queue, thinned to at most
`ui.figures.MAX_POINTS` points a series) and leaves its table of every per-class number undrawn until
it is opened; a rerun that leaves the chart's figure unchanged does not touch the chart.
`python tests/e2e/browser_cost.py --first-only` measures what that saves (README: Speed)."""

from __future__ import annotations

import pytest
from conftest import open_app, wait_idle
from playwright.sync_api import expect

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
