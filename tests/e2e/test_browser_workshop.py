"""The workshop and the Chinese UI in a real browser: a lesson link opens that lesson beside the
sidebar's scenario, which it can lend the lesson's own and take back; presenter mode runs it with its chart; the
language switch is bound to the URL (`lang=zh`) and the pages render in Chinese with a CJK font.
Screenshots (1280 px) go to artifacts/screenshots/."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest
from playwright.sync_api import expect

from tests.support.browser import full_shot, open_app, text_overlaps, wait_idle

pytestmark = pytest.mark.browser


def sidebar_scenario(page) -> str:
    return page.get_by_test_id("stSidebar").get_by_role("combobox", name="Scenario").input_value()


def test_a_lesson_opens_beside_the_users_scenario_and_can_lend_it_its_own(page, app_url, shots):
    """A lesson link opens the lesson without touching the sidebar; "Load this lesson's scenario"
    puts the lesson's run there (and it stays across pages); "Back to your scenario" undoes it."""
    open_app(page, f"{app_url}/workshop?lesson=reserve-when-budget-binds&present=true&reserve=512")
    main = page.get_by_test_id("stMain")
    title = "7. What does a token reserve buy, and what does it cost?"
    expect(main.get_by_role("heading", name=title)).to_be_visible()
    assert sidebar_scenario(page) == "default"
    main.get_by_text("Link to this lesson").click()
    wait_idle(page)
    link = main.get_by_test_id("stCode").inner_text()
    assert "/workshop?" in link and "reserve=512" in link and "lesson=reserve-when-budget-binds" in link
    main.get_by_role("button", name="Run", exact=True).click()  # presenter mode: no prediction needed
    wait_idle(page, 180_000)
    expect(main.locator(".js-plotly-plot")).to_have_count(1)
    expect(main.get_by_text("The article's example, next to the simulation.")).to_be_visible()
    full_shot(page, shots / "workshop_lesson_link.png")
    main.get_by_role("button", name="Load this lesson's scenario").first.click()
    wait_idle(page)
    assert sidebar_scenario(page) == "budget-bound"
    page.get_by_role("link", name="Timeline").click()
    wait_idle(page)
    assert sidebar_scenario(page) == "budget-bound"
    page.get_by_role("link", name="Workshop").click()
    wait_idle(page)
    expect(main.get_by_role("heading", name=title)).to_be_visible()
    expect(page).to_have_url(re.compile(r"[?&]lesson=reserve-when-budget-binds"))
    main.get_by_role("button", name="Back to your scenario").click()
    wait_idle(page)
    assert sidebar_scenario(page) == "default"


def has_cjk_font() -> bool:
    if not shutil.which("fc-list"):
        return False
    out = subprocess.run(["fc-list", ":lang=zh", "family"], capture_output=True, text=True).stdout
    return bool(out.strip())


def test_the_chinese_ui_renders_and_the_switch_is_in_the_url(page, app_url, shots):
    if not has_cjk_font():
        if os.environ.get("CI") == "true":
            pytest.fail("no CJK font on CI (apt-get install -y fonts-noto-cjk)")
        pytest.skip("no CJK font installed (fonts-noto-cjk)")
    open_app(page, f"{app_url}/?preset=classic-inversion")
    page.get_by_test_id("stSidebar").get_by_text("中文", exact=True).click()
    wait_idle(page)
    expect(page).to_have_url(re.compile(r"[?&]lang=zh"))
    main = page.get_by_test_id("stMain")
    expect(main.get_by_role("heading", name="实验台")).to_be_visible()
    expect(main.get_by_role("heading", name="发生了什么")).to_be_visible()
    expect(main.get_by_text(re.compile("最重要的类"))).to_be_visible()
    expect(page.get_by_test_id("stException")).to_have_count(0)
    full_shot(page, shots / "zh_playground.png")
    page.get_by_role("link", name="工作坊").click()
    wait_idle(page)
    expect(page).to_have_url(re.compile(r"/workshop\?.*lang=zh"))
    expect(main.get_by_role("heading", name="1. 引擎的一步里发生了什么？")).to_be_visible()
    main.get_by_test_id("stRadio").filter(has_text="先预测").get_by_role("radio").nth(1).click(force=True)
    wait_idle(page)
    main.get_by_role("button", name="运行", exact=True).click()
    wait_idle(page, 180_000)
    expect(main.get_by_text(re.compile("你的预测与模拟结果一致"))).to_be_visible()
    expect(main.locator(".js-plotly-plot")).to_have_count(1)
    full_shot(page, shots / "zh_workshop.png")
    page.goto(f"{app_url}/timeline?lang=zh&preset=classic-inversion")  # a Chinese link, opened fresh
    wait_idle(page)
    expect(main.get_by_role("heading", name="反转时间线")).to_be_visible()
    full_shot(page, shots / "zh_timeline.png")


def test_the_recap_ends_with_a_decision_that_the_page_polls_in(page, app_url, shots):
    """The decision's stages come in by the fragment's own polling (no click, no reload): the
    diagnosis, the candidates and, once their capacities are searched, the decision and its figure."""
    open_app(page, f"{app_url}/workshop?lesson=recap&seeds=2")
    main = page.get_by_test_id("stMain")
    expect(main.get_by_role("heading", name="Decide: from P0's waits to a remedy, its benefit and its cost")) \
        .to_be_visible()
    done = main.locator(".st-key-ws_decision_done")  # settled: every capacity in, the fragment stopped polling
    expect(done).to_be_visible(timeout=300_000)
    wait_idle(page)  # the fragment's last poll reruns the page once, to stop its timer
    expect(done.get_by_text("Decision: priority policy + P2 prompts split at 4,096 tokens.")).to_have_count(1)
    expect(done.get_by_text("Provisional", exact=False)).to_have_count(0)
    expect(done.locator(".js-plotly-plot")).to_have_count(1)  # benefit against capacity
    page.set_viewport_size({"width": 1280, "height": 800})  # a projector's
    wait_idle(page)
    assert text_overlaps(page) == []  # the recap's and the decision's labels, and their tables, at 1280 px
    full_shot(page, shots / "workshop_decision.png")
