"""Room mode in a real browser: a presenter opens a room, ten participants' pages (one browser,
one context) join by its link and predict at once, and the presenter's live panel counts all of
them; the Streamlit server is then stopped and started again on the same room database, and the
room's link still opens the room with every prediction in it."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.support.browser import full_shot, open_app, streamlit_server, wait_idle

pytestmark = pytest.mark.browser
LESSON = "no-alarm"
PARTICIPANTS = 10


def room_code(page) -> str:
    m = re.search(r"[?&]room=([A-Z0-9]+)", page.url)
    assert m, page.url
    return m.group(1)


def predictions_seen(page, n: int, timeout_ms: int = 60_000) -> None:
    """The presenter's live panel (it polls the store every two seconds) shows n predictions."""
    main = page.get_by_test_id("stMain")
    expect(main.get_by_text(f"The room's predictions ({n} so far)")).to_be_visible(timeout=timeout_ms)


def test_ten_participants_predict_at_once_and_the_room_survives_a_restart(browser, chromium_path, tmp_path, shots):
    env = {"INVERSION_LAB_ROOM_DB": str(tmp_path / "rooms.sqlite")}
    context = browser.new_context(viewport={"width": 1280, "height": 1000})
    try:
        with streamlit_server(env) as url:
            presenter = context.new_page()
            open_app(presenter, f"{url}/workshop?lesson={LESSON}&present=true")
            presenter.locator(".st-key-room_open button").click()
            wait_idle(presenter)
            code = room_code(presenter)
            main = presenter.get_by_test_id("stMain")
            expect(main.get_by_text(f"{url}/workshop?room={code}")).to_be_visible()
            predictions_seen(presenter, 0)

            pages = [context.new_page() for _ in range(PARTICIPANTS)]
            for p in pages:  # all ten load at once
                p.goto(f"{url}/workshop?room={code}&lesson={LESSON}", wait_until="commit")
            for k, p in enumerate(pages):
                wait_idle(p, 120_000)
                expect(p.get_by_text(f"Room {code}")).to_be_visible()
                p.locator(f".st-key-ws_q_{LESSON}").get_by_role("radio").nth(k % 4).click(force=True)
                wait_idle(p)
                box = p.locator(f".st-key-ws_est_{LESSON} input")
                box.fill(str(1 + k))
                box.press("Enter")
                wait_idle(p)
            for p in pages:  # ten submissions at once: each Run stores its page's prediction
                p.locator(f".st-key-ws_run_{LESSON} button").click()
            for p in pages:
                wait_idle(p, 180_000)
                expect(p.get_by_text(f"Your prediction is in room {code}.")).to_be_visible()
            ids = {re.search(r"[?&]you=([0-9a-f]+)", p.url).group(1) for p in pages}
            assert len(ids) == PARTICIPANTS  # ten anonymous participants, ten ids

            predictions_seen(presenter, PARTICIPANTS)
            presenter.locator(f".st-key-ws_run_{LESSON} button").click()  # the reveal, with the room beside it
            wait_idle(presenter, 180_000)
            predictions_seen(presenter, PARTICIPANTS)
            expect(main.locator(".gtitle").filter(has_text=f"Estimates: {PARTICIPANTS}")).to_have_count(1)
            expect(main.locator(".gtitle").filter(has_text=f"Answers: {PARTICIPANTS}")).to_have_count(1)
            expect(presenter.get_by_test_id("stException")).to_have_count(0)
            full_shot(presenter, shots / "room_presenter.png")
            for p in pages:
                p.close()

        with streamlit_server(env) as url:  # the server stopped and started again: the same file
            open_app(presenter, f"{url}/workshop?lesson={LESSON}&present=true&room={code}")
            expect(presenter.get_by_test_id("stMain").get_by_text(f"Room {code}")).to_be_visible()
            predictions_seen(presenter, PARTICIPANTS)
            expect(presenter.get_by_text("is not an open room")).to_have_count(0)
    finally:
        context.close()
