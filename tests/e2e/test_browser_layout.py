"""Layout at 1280 px (nothing cut off), honest numbers and Compare in a real browser, and share links
that reopen the same view. Screenshots go to artifacts/screenshots/ (look at them)."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.support.browser import full_shot, open_app, pick, text_overlaps, wait_idle

pytestmark = pytest.mark.browser

CUT_OFF = """() => {
  const out = [];
  for (const m of document.querySelectorAll('[data-testid=stMetric] [data-testid=stMarkdownContainer]'))
    if (m.scrollWidth > m.clientWidth + 1) out.push('card: ' + m.textContent);
  for (const d of document.querySelectorAll('[data-testid=stDataFrame] .dvn-scroller'))
    if (d.scrollWidth > d.clientWidth + 1)
      out.push('table: ' + d.closest('[data-testid=stDataFrame]').textContent.slice(0, 60));
  for (const p of document.querySelectorAll('.js-plotly-plot'))
    if (p.scrollWidth > p.parentElement.clientWidth + 2) out.push('chart wider than its column');
  return out; }"""


def cut_off(page) -> list[str]:
    return page.evaluate(CUT_OFF)


@pytest.mark.parametrize("path, name", [("/?policy=priority&reserve=1024&p2_cap=4096", "playground"),
                                        ("/memory", "memory"), ("/compare", "compare"),
                                        ("/p99?sw_pts=3&seeds=1", "p99"),
                                        ("/timeline", "timeline")])
def test_nothing_is_cut_off_at_1280_px(page, app_url, shots, path, name):
    open_app(page, f"{app_url}{path}")
    if name == "p99":
        page.wait_for_selector("[class*='st-key-sweep_'][class*='_full']", state="attached", timeout=120_000)
        wait_idle(page)
    for expander in page.get_by_test_id("stMain").get_by_test_id("stExpander").all():
        expander.locator("summary").click()
        wait_idle(page)
    expect(page.get_by_test_id("stException")).to_have_count(0)
    assert cut_off(page) == []
    full_shot(page, shots / f"w1280_{name}.png")


def test_workshop_reveal_fits_at_1280_px(page, app_url, shots):
    open_app(page, f"{app_url}/workshop?lesson=kv-reserve")
    page.get_by_test_id("stRadio").filter(has_text="Predict").get_by_role("radio").first.click(force=True)
    wait_idle(page)
    page.get_by_test_id("stMain").get_by_role("button", name="Run", exact=True).click()
    wait_idle(page)
    expect(page.get_by_test_id("stTable")).to_have_count(1)
    assert cut_off(page) == []
    full_shot(page, shots / "w1280_workshop_reveal.png")


def test_rejected_documents_show_as_rejected_not_as_a_gain(page, app_url):
    open_app(page, f"{app_url}/?p2_cap=4096&seeds=1")  # one seed: its 4 documents
    cards = page.get_by_test_id("stMetric").filter(has_text="P2 · P99 TTFT")
    expect(cards.get_by_test_id("stMetricDelta")).to_have_text(re.compile("4 of 4 rejected"))
    expect(page.get_by_test_id("stMetric").filter(has_text="P2 · Not served")
           .get_by_test_id("stMetricValue")).to_have_text("4")


@pytest.mark.parametrize("preset", ["preempt", "separate-replicas"])
def test_remedy_presets_show_their_effect(page, app_url, preset):
    open_app(page, f"{app_url}/?preset={preset}")
    expect(page.get_by_text("No remedy is on")).to_have_count(0)
    expect(page.get_by_test_id("stMetric").filter(has_text="P0 · P99 TTFT").get_by_test_id("stMetricDelta")) \
        .to_have_count(1)
    expect(page.get_by_text(re.compile("Deltas: against the same traffic"))).to_have_count(1)
    expect(page.get_by_text(re.compile("The classic-inversion traffic"))).to_have_count(1)  # what to look at


def test_compare_follows_the_sidebar_and_refuses_a_duplicate_name(page, app_url, shots):
    open_app(page, f"{app_url}/compare")
    pick(page, "policy", "backfill")
    wait_idle(page)
    expect(page.get_by_test_id("stMain").get_by_text("Policy: backfill", exact=True)).to_have_count(1)
    name = page.locator(".st-key-c3_name input")
    name.fill("Priority")
    name.press("Enter")
    wait_idle(page)
    expect(name).to_have_value("Priority + reserve")
    expect(page.get_by_text("already the name of another column", exact=False)).to_have_count(1)
    full_shot(page, shots / "compare_duplicate.png")


def share_link(page) -> str:
    page.get_by_test_id("stSidebar").get_by_role("button", name="Share").click()
    code = page.get_by_test_id("stPopoverBody").get_by_test_id("stCode").filter(has_text="://")
    expect(code).to_have_count(1)  # (the Workshop shows the same link beside its lesson too)
    return code.inner_text().strip()


@pytest.mark.parametrize("path, key, check", [
    ("/p99?sw_knob=cap&sw_pts=4&seeds=1&policy=priority", "sw_knob", ".st-key-sw_knob"),
    ("/compare?cmp_n=2&c2_name=Buffer&c2_res=2048", "c2_name", ".st-key-c2_name"),
    ("/workshop?lesson=kv-caps", "lesson", ".st-key-lesson"),
    ("/timeline?preset=classic-inversion&tl_show=all&tl_from=10&tl_to=40&tl_req=48", "tl_req", ".st-key-tl_req"),
])
def test_a_share_link_reopens_the_same_view(browser, app_url, path, key, check):
    first = browser.new_page(viewport={"width": 1280, "height": 1000})
    try:
        open_app(first, f"{app_url}{path}")
        link = share_link(first)
        assert f"{key}=" in link and link.split("?")[0].endswith(path.split("?")[0])
        before = first.locator(check).inner_text()
    finally:
        first.close()
    second = browser.new_page(viewport={"width": 1280, "height": 1000})
    try:
        open_app(second, link)
        expect(second.get_by_test_id("stException")).to_have_count(0)
        expect(second.get_by_text("from the link", exact=False)).to_have_count(0)
        assert second.locator(check).inner_text() == before
        expect(second).to_have_url(re.compile(re.escape(key) + "="))
    finally:
        second.close()


def test_a_long_rerun_dims_the_page_in_one_step_not_a_fade(page, app_url):
    """While a rerun runs, Streamlit dims what it has not re-sent yet. The dimming must stay (it tells
    the user the numbers are stale) but come as one step after Streamlit's 0.5 s delay: its 1 s fade
    repainted the whole page every frame (`ui.frame.layout.CALM_RERUNS`)."""
    open_app(page, f"{app_url}/memory")
    stale = "[data-testid=stElementContainer][data-stale=true]"
    durations = page.evaluate("() => [...document.querySelectorAll('[data-testid=stElementContainer]')]"
                              ".map(e => getComputedStyle(e).transitionDuration)")
    assert durations and set(durations) == {"0s"}, set(durations)
    sidebar = page.get_by_test_id("stSidebar")
    sidebar.get_by_text("Run", exact=True).click()
    box = page.locator(".st-key-dur input")
    box.fill("6000")  # a run of a few seconds: long enough to dim
    box.press("Enter")
    page.wait_for_selector(stale, state="attached", timeout=10_000)
    page.wait_for_timeout(700)  # past the 0.5 s delay, well short of the old fade's end
    opacities = page.evaluate(f"() => [...document.querySelectorAll('{stale}')].map(e => getComputedStyle(e).opacity)")
    assert "0.33" in opacities, opacities  # dimmed all the way at once
    assert not [o for o in opacities if 0.34 < float(o) < 0.99], opacities  # nothing half-way through a fade
    wait_idle(page)


LABELS_OVERLAP = """() => {
  const out = [];
  for (const axis of document.querySelectorAll('.js-plotly-plot g.xaxislayer-above')) {
    const boxes = [...axis.querySelectorAll('g.xtick text')].map(t => t.getBoundingClientRect())
      .filter(b => b.width > 0).sort((a, b) => a.left - b.left);
    for (let i = 1; i < boxes.length; i++)
      if (boxes[i - 1].right > boxes[i].left + 1) { out.push('x labels overlap'); break; }
  }
  return out; }"""


def test_every_lessons_reveal_reads_at_1280_px_in_both_languages(page, app_url, shots):
    """Each lesson run in presenter mode, in English and in Chinese: no exception, nothing cut off,
    no chart whose axis labels overlap; a screenshot of each reveal (artifacts/screenshots/)."""
    from ui.teach import lessons

    for n, lesson in enumerate(lessons.all_lessons(), 1):
        for lang, run in (("en", "Run"), ("zh", "运行")):
            open_app(page, f"{app_url}/workshop?lesson={lesson.slug}&present=true&lang={lang}")
            main = page.get_by_test_id("stMain")
            main.get_by_role("button", name=run, exact=True).click()
            wait_idle(page, 180_000)
            expect(page.get_by_test_id("stException")).to_have_count(0)
            expect(main.locator(".js-plotly-plot").first).to_be_visible()
            bad = cut_off(page) + page.evaluate(LABELS_OVERLAP) + text_overlaps(page)
            assert bad == [], (lesson.slug, lang, bad)
            full_shot(page, shots / f"w1280_lesson{n:02d}_{lang}.png")


def test_a_refusal_on_a_chinese_page_is_in_chinese(page, app_url):
    """The refusal is written in a callback, before the page sets its language: in the browser too
    it must come out in Chinese."""
    open_app(page, f"{app_url}/?lang=zh")
    page.get_by_test_id("stSidebar").get_by_test_id("stExpander").filter(has_text="P1").locator("summary").click()
    wait_idle(page)
    rate = page.locator(".st-key-p1_rate input")
    rate.fill("9000")
    rate.press("Enter")
    wait_idle(page)
    error = page.get_by_test_id("stAlertContentError")
    expect(error.first).to_contain_text("无法运行")
    assert "cannot run" not in " ".join(error.all_inner_texts())
