"""AppTest of the Sweeps page, in the app's frame: a plan output under the
working directory shows the frontier and the cheapest plan; pickers drive the explorer; paths
outside the working directory are refused with a message, never a traceback."""

from __future__ import annotations

import json

import pytest
from streamlit.testing.v1 import AppTest

from tests.sweep_fixtures import tiny_plan_output

APP = "../../app.py"  # relative to this file (AppTest resolves it so)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    root = tmp_path_factory.mktemp("work")
    tiny_plan_output(root / "runs" / "tiny")
    return root


@pytest.fixture
def at(workdir, monkeypatch):
    monkeypatch.chdir(workdir)  # the page opens paths under the working directory only
    at = AppTest.from_file(APP, default_timeout=60).run()
    return at.switch_page("pages/sweeps.py").run()


def charts(at: AppTest) -> list[dict]:
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def test_without_input_the_page_says_what_to_do(at):
    assert not at.exception
    assert not at.get("plotly_chart")
    assert "python -m engine sweep" in at.info[0].value


def test_a_plan_output_shows_the_frontier_and_the_cheapest_plan(at, workdir):
    at.text_input(key="swp_path").set_value("runs/tiny").run()
    assert not at.exception and not at.error
    frontier, explore = charts(at)
    names = {t.get("name") for t in frontier["data"]}
    assert {"meets every SLO", "misses an SLO", "frontier", "cheapest plan"} <= names
    plan = json.loads((workdir / "runs" / "tiny" / "plan.json").read_text())
    star = [t for t in frontier["data"] if t.get("name") == "cheapest plan"][0]
    assert star["x"] == [plan["cheapest"]["gpus"]]
    gpus = plan["cheapest"]["gpus"]
    assert f"Cheapest plan: **{gpus} GPU{'s' if gpus > 1 else ''}**" in at.success[0].value
    assert r"scheduler\.policy\=" in at.success[0].value  # knob names go through inert()
    # the explorer: one panel per class, y = P99 TTFT by default, x = GPUs (it varies in a plan)
    assert [a["text"] for a in explore["layout"]["annotations"]] == ["hi", "lo"]
    assert explore["layout"]["xaxis"]["title"]["text"] == "gpus"
    assert explore["layout"]["yaxis"]["title"]["text"] == "ttft_p99"


def test_pickers_drive_the_explorer(at):
    at.text_input(key="swp_path").set_value("runs/tiny").run()
    y = [s for s in at.selectbox if s.label == "y"][0]
    y.set_value("served_tok_s").run()
    assert not at.exception
    assert charts(at)[1]["layout"]["yaxis"]["title"]["text"] == "served_tok_s"
    [t for t in at.toggle if t.label == "panel per class"][0].set_value(False).run()
    assert not charts(at)[1]["layout"].get("annotations")
    [m for m in at.multiselect if m.label == "classes"][0].set_value([]).run()
    assert not at.exception and len(charts(at)) == 1


@pytest.mark.parametrize("text", ["../outside", "/etc", "runs/../../x"])
def test_paths_outside_the_working_directory_are_refused(at, text):
    at.text_input(key="swp_path").set_value(text).run()
    assert not at.exception
    assert "only paths under the working directory" in at.error[0].value
    assert not at.get("plotly_chart")


def test_markdown_in_a_bad_path_stays_inert(at):
    at.text_input(key="swp_path").set_value("runs/[click](http://evil)").run()
    assert not at.exception
    shown = at.error[0].value  # path normalised, markdown escaped, the address broken (no autolink)
    assert r"\[click\]\(http\:" in shown and "/evil\\)" in shown and "http://" not in shown
