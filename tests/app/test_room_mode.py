"""AppTest: room mode on the Workshop page. A presenter opens a room, participants join by link or
by code and predict (an answer and a number); their predictions are stored and the presenter's
reveal shows them beside the seed band; a bad room code is a note, never a traceback."""

from __future__ import annotations

import json

import pytest
from streamlit.testing.v1 import AppTest

from tests.support.apptest import open_page
from ui.teach import room_store

WS = "pages/workshop.py"


@pytest.fixture(autouse=True)
def room_db(tmp_path, monkeypatch):
    path = tmp_path / "rooms.sqlite"
    monkeypatch.setenv(room_store.ENV_DB, str(path))
    return path


def on_page(**query) -> AppTest:
    return open_page(WS, timeout=90, **query)


def notes(at: AppTest) -> str:
    return " ".join(w.value for w in at.warning)


def figures(at: AppTest) -> list[dict]:
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def titled(at: AppTest, start: str) -> list[dict]:
    return [f for f in figures(at) if f["layout"].get("title", {}).get("text", "").startswith(start)]


def open_room(lesson: str) -> tuple[AppTest, str]:
    at = on_page(lesson=lesson, present="true")
    at.button(key="room_open").click().run()
    code = at.query_params["room"][-1] if isinstance(at.query_params["room"], list) else at.query_params["room"]
    assert not at.exception and room_store.CODE.match(code)
    assert any(f"room={code}" in c.value for c in at.code)  # the join link
    return at, code


def predict(at: AppTest, slug: str, choice: int, number: float | None) -> AppTest:
    at.radio(key=f"ws_q_{slug}").set_value(choice)
    if number is not None:
        at.number_input(key=f"ws_est_{slug}").set_value(number)
    at.run()  # Run waits for an answer
    return at.button(key=f"ws_run_{slug}").click().run()


def test_participants_predictions_reach_the_presenters_reveal(room_db):
    presenter, code = open_room("no-alarm")
    assert titled(presenter, "Answers: 0")  # live before the reveal: nobody yet
    guesses = [(3, 2.0), (3, 1.5), (0, 40.0)]
    for choice, number in guesses:
        p = on_page(room=code, lesson="no-alarm")
        assert not p.exception and any(f"Room {code}" in m.value for m in p.markdown)
        p = predict(p, "no-alarm", choice, number)
        assert not p.exception and any(f"in room {code}" in c.value for c in p.caption)
        assert any(("band" in s.value) for s in [*p.success, *p.info])  # scored against the seeds
    preds = room_store.RoomStore(room_db).predictions(code, "no-alarm")
    assert sorted((x.choice, x.estimate) for x in preds) == sorted(guesses)
    presenter.button(key="ws_run_no-alarm").click().run()
    assert not presenter.exception
    answers = titled(presenter, "Answers: 3")[0]
    assert answers["data"][0]["x"] == [1, 0, 0, 2]
    hist = titled(presenter, "Estimates: 3")[0]
    assert sum(hist["data"][0]["y"]) == 3
    assert any(s["type"] == "rect" for s in hist["layout"]["shapes"])  # the seed band


def test_a_participant_keeps_their_id_and_replaces_their_prediction(room_db):
    _p, code = open_room("primer")
    at = on_page(room=code, lesson="primer")
    you = at.query_params["you"]
    you = you[-1] if isinstance(you, list) else you
    assert room_store.valid_participant(you)
    predict(at, "primer", 0, 5.0)
    again = on_page(room=code, lesson="primer", you=you)  # the same link reopened (a reload, a restart)
    predict(again, "primer", 1, 9.0)
    preds = room_store.RoomStore(room_db).predictions(code, "primer")
    assert [(x.participant, x.choice, x.estimate) for x in preds] == [(you, 1, 9.0)]


def test_joining_by_typing_the_code(room_db):
    _p, code = open_room("primer")
    at = on_page()
    at.text_input(key="room_code").set_value(f" {code.lower()[:2]}-{code.lower()[2:]} ")
    at.button(key="room_join").click().run()
    assert not at.exception and any(f"Room {code}" in m.value for m in at.markdown)
    at.button(key="room_leave").click().run()
    assert "room" not in at.query_params
    at.text_input(key="room_code").set_value("<b>nope</b>")
    at.button(key="room_join").click().run()
    said = notes(at)
    assert not at.exception and "is not an open room" in said
    assert "\\<b\\>nope" in said and "\\\\" not in said  # escaped once: shown as typed, never as HTML


@pytest.mark.parametrize("bad", ["ZZZZZ", "nope!", "<script>", "A" * 200])
def test_a_bad_room_link_says_so_and_runs_without_a_room(bad):
    at = on_page(room=bad, lesson="kv-caps")
    assert not at.exception
    assert "is not an open room" in notes(at)
    assert "room" not in at.query_params and at.selectbox(key="lesson").value == "kv-caps"
    assert at.text_input(key="room_code")  # the page goes on, offering to join


def test_the_numeric_estimate_is_scored_without_a_room():
    at = on_page(lesson="primer")
    at = predict(at, "primer", 0, 1000.0)
    assert not at.exception
    assert any("too high" in i.value for i in at.info)
    assert at.number_input(key="ws_est_primer").disabled  # fixed once revealed


def test_a_room_database_it_cannot_use_is_a_warning_not_a_traceback(tmp_path, monkeypatch):
    (tmp_path / "file").write_text("x")
    monkeypatch.setenv(room_store.ENV_DB, str(tmp_path / "file" / "rooms.sqlite"))
    at = on_page(present="true", lesson="primer")
    at.button(key="room_open").click().run()
    assert not at.exception and "Rooms are not available" in notes(at)
    assert "room" not in at.query_params
    p = on_page(room="ABCDE")
    assert not p.exception and "Rooms are not available" in notes(p)


def test_draw_your_curve_on_the_sweep_lesson():
    """The sweep lesson asks for P0's P99 at a few reserves before the reveal and scores each point."""
    slug = "reserve-when-budget-binds"
    at = on_page(lesson=slug)
    at.radio(key=f"ws_q_{slug}").set_value(0)
    for i, v in enumerate([1.0, 0.7, 50.0, 0.35]):
        at.number_input(key=f"ws_curve_{slug}_{i}").set_value(v)
    at.run()
    at.button(key=f"ws_run_{slug}").click().run()
    assert not at.exception
    words = [m.value for m in at.markdown if m.value.startswith("Your curve:")]
    assert words and "of 4 points inside the band of 20 seeds" in words[0] and not words[0].startswith(
        "Your curve: 4 of")  # 50 s at a 2048-token reserve is far outside it
    assert at.number_input(key=f"ws_curve_{slug}_0").disabled
    assert len(at.get("plotly_chart")) == 2  # the sweep, and the drawn curve over the bands


def test_the_participants_curves_reach_the_presenter(room_db):
    """On the lesson that asks for a curve, each participant's drawn points are stored with their
    prediction; the presenter sees every curve, faint, and after the reveal the seed band under them."""
    slug = "reserve-when-budget-binds"
    presenter, code = open_room(slug)
    assert titled(presenter, "Curves: 0")
    drawn = [[1.0, 0.7, 0.5, 0.4], [3.0, None, 1.0, 0.8]]
    for points in drawn:
        p = on_page(room=code, lesson=slug)
        p.radio(key=f"ws_q_{slug}").set_value(0)
        for i, v in enumerate(points):
            if v is not None:
                p.number_input(key=f"ws_curve_{slug}_{i}").set_value(v)
        p.run()
        p.button(key=f"ws_run_{slug}").click().run()
        assert not p.exception and any(f"in room {code}" in c.value for c in p.caption)
    stored = sorted(x.curve for x in room_store.RoomStore(room_db).predictions(code, slug))
    assert stored == sorted(tuple(c) for c in drawn)
    presenter.run()
    before = titled(presenter, "Curves: 2")[0]
    assert not [t for t in before["data"] if t.get("fill") == "tonexty"]  # no band before the reveal
    presenter.button(key=f"ws_run_{slug}").click().run()
    assert not presenter.exception
    after = titled(presenter, "Curves: 2")[0]
    faint = [t for t in after["data"] if t.get("legendgroup") == "drawn"]
    assert [t["y"] for t in faint] == drawn
    assert [t for t in after["data"] if t.get("fill") == "tonexty"]  # the seed band, once revealed
