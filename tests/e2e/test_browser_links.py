"""Hand-edited links in a real browser: no text from a link becomes a live link (bare URLs are
autolinked by the browser's Markdown however they are escaped), every bad value gets a note that
names it and leaves the address bar, and a value that makes the engine fail leaves it too.

The server runs with `INVERSION_LAB_FAIL_SEED=4242` (`ui/runtime/work.py`): a run with seed 4242 raises
as an engine bug would."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.support.browser import open_app, streamlit_server

pytestmark = pytest.mark.browser
EVIL = "evil.example"


@pytest.fixture(scope="module")
def failing_url(chromium_path):
    with streamlit_server({"INVERSION_LAB_FAIL_SEED": "4242"}) as url:
        yield url


def notes(page) -> str:
    box = page.get_by_test_id("stAlert").filter(has_text="Some settings from the link were not used")
    expect(box).to_have_count(1)
    return box.inner_text()


def no_live_link(page) -> None:
    """Nothing on the page links or points at the link's host, from any source."""
    found = page.eval_on_selector_all(
        "a[href], img[src], iframe[src], [data-testid=stMarkdownContainer] a",
        f"els => els.map(e => e.href || e.src || '').filter(h => h.toLowerCase().includes('{EVIL}'))")
    assert found == []


# (path, what the note must name, parameters that must have left the address bar)
CASES = [
    (f"/?https%3A//{EVIL}/login=1", [f"https:\u2060//{EVIL}/login", "is not a setting"], ["https"]),
    (f"/?policy=https%3A//{EVIL}/x", ["policy", f"https:\u2060//{EVIL}/x"], ["policy"]),
    (f"/?policy=www.{EVIL}", ["policy", f"www\u2060.{EVIL}"], ["policy"]),
    (f"/?p0_rate=ceo@{EVIL}", ["p0_rate", f"ceo@\u2060{EVIL}"], ["p0_rate"]),
    ("/timeline?tl_from=50&tl_to=10", ["tl_from", "50", "tl_to", "10", "start must be below the end"],
     ["tl_from", "tl_to"]),
    ("/p99?sw_from=5000&sw_to=10", ["sw_from", "5000", "sw_to", "10", "start must be below the end"],
     ["sw_from", "sw_to"]),
    ("/workshop?lesson=nope", ["lesson", "nope"], ["lesson"]),
    ("/nonexistent-page?policy=priority", ["/nonexistent-page", "is not a page of this app"], []),
    ("/?seed=4242&policy=priority", ["seed", "4242", "the simulation failed"], ["seed"]),
]


@pytest.mark.parametrize("path, named, gone", CASES, ids=[c[0][:40] for c in CASES])
def test_a_bad_link_gets_a_named_note_and_no_live_link(page, failing_url, path, named, gone):
    open_app(page, failing_url + path)
    expect(page.get_by_test_id("stException")).to_have_count(0)
    text = notes(page)
    for word in named:
        assert word in text, (word, text)
    no_live_link(page)
    query = page.url.split("?", 1)[1] if "?" in page.url else ""
    for key in gone:
        assert not re.search(rf"(^|&){re.escape(key)}", query), page.url
    if "policy=priority" in path:  # the good value stays, and is what the control shows
        assert "policy=priority" in query
        expect(page.locator(".st-key-policy input")).to_have_value("priority")


def test_a_control_the_engine_fails_on_goes_back_and_leaves_the_url(page, failing_url):
    open_app(page, f"{failing_url}/?policy=priority&seed=7")
    page.get_by_test_id("stSidebar").get_by_text("Run", exact=True).click()
    box = page.locator(".st-key-seed input")
    box.fill("4242")
    box.press("Enter")
    expect(page.get_by_test_id("stAlert").filter(has_text="the controls are back")).to_have_count(1, timeout=60_000)
    expect(page).to_have_url(re.compile(r"seed=7"))
    assert "4242" not in page.url
