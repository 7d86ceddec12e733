"""AppTest: every page renders, controls drive the numbers, links seed the controls."""

import pytest
from streamlit.testing.v1 import AppTest

APP = "../../app.py"  # relative to this test file (AppTest resolves it so)
PAGES = ["pages/playground.py", "pages/timeline.py", "pages/p99_curves.py", "pages/compare.py",
         "pages/workshop.py", "pages/memory.py"]


def fresh(**query) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    for k, v in query.items():
        at.query_params[k] = v
    return at.run()


def metric(at: AppTest, label: str) -> str:
    found = [m.value for m in at.metric if m.label == label]
    assert found, f"no metric {label!r}: {[m.label for m in at.metric]}"
    return found[0]


@pytest.fixture(scope="module")
def at():
    return fresh()


def test_default_page_renders_kpis(at):
    assert not at.exception
    assert metric(at, "P0 · P99 TTFT").endswith(" s")
    assert at.get("plotly_chart")
    assert any("P0" in m.value and "priority 0" in m.value for m in at.markdown)


@pytest.mark.parametrize("page", PAGES)
def test_every_page_renders_without_exception(at, page):
    at.switch_page(page).run()
    assert not at.exception, page
    assert at.selectbox(key="preset").value == "default"  # the sidebar is there on every page


def test_moving_the_reserve_changes_p0_p99():
    at = fresh()
    at.selectbox(key="policy").set_value("priority").run()
    before = metric(at, "P0 · P99 TTFT")
    at.slider(key="reserve").set_value(2048).run()
    assert not at.exception
    after = metric(at, "P0 · P99 TTFT")
    assert after != before
    delta = [m for m in at.metric if m.label == "P0 · P99 TTFT"][0]
    assert delta.delta  # compared with the same scenario without the reserve


def test_url_parameters_seed_the_controls():
    at = fresh(reserve="512", policy="priority", p2_cap="4096", p2_over="split", inherit="true")
    assert not at.exception and not at.warning
    assert at.slider(key="reserve").value == 512
    assert at.selectbox(key="policy").value == "priority"
    assert at.number_input(key="p2_cap").value == 4096
    assert at.radio(key="p2_over").value == "split"
    assert at.toggle(key="inherit").value is True


def test_preset_from_the_url():
    at = fresh(preset="classic-inversion", reserve="256")
    assert not at.exception
    assert at.selectbox(key="preset").value == "classic-inversion"
    assert at.slider(key="reserve").value == 256


@pytest.mark.parametrize("query, needle, key, fallback", [
    ({"reserve": "lots"}, "`reserve=lots`", "reserve", 0),
    ({"reserve": "999999"}, "`reserve=999999`", "reserve", 0),
    ({"p2_rate": "-3"}, "`p2_rate=-3`", "p2_rate", 0.05),
    ({"colour": "blue"}, "`colour`", "reserve", 0),
])
def test_malformed_parameter_warns_once_and_falls_back(query, needle, key, fallback):
    at = fresh(**query)
    assert not at.exception
    assert len(at.warning) == 1 and needle in at.warning[0].value
    widget = at.slider(key=key) if key == "reserve" else at.number_input(key=key)
    assert widget.value == pytest.approx(fallback)


def test_invalid_combination_falls_back_to_the_preset():
    at = fresh(budget="1024", reserve="2048")  # a reserve >= the budget cannot run
    assert not at.exception
    assert any("cannot run" in w.value for w in at.warning)
    assert metric(at, "P0 · P99 TTFT")


def test_reset_returns_to_the_preset():
    at = fresh()
    at.slider(key="reserve").set_value(512).run()
    at.selectbox(key="policy").set_value("backfill").run()
    reset = [b for b in at.button if b.label == "Reset"][0]
    reset.click().run()
    assert at.slider(key="reserve").value == 0
    assert at.selectbox(key="policy").value == "fcfs"


def test_workshop_load_scenario_sets_the_sidebar():
    at = fresh()
    at.switch_page("pages/workshop.py").run()
    at.button(key="ws_load_04-kv-caps").click().run()
    assert not at.exception
    assert at.selectbox(key="preset").value == "classic-inversion"
    assert at.number_input(key="p2_cap").value == 8192
    assert at.radio(key="p2_over").value == "split"
    at.button(key="ws_load_06-separate-replicas").click().run()
    assert at.number_input(key="reps").value == 2
    assert at.text_input(key="p2_pin").value == "1"


def test_workshop_reveal_after_run():
    at = fresh()
    at.switch_page("pages/workshop.py").run()
    q = at.radio(key="ws_q_01-inversion-appears")
    q.set_value(q.options[0]).run()
    at.button(key="ws_run_01-inversion-appears").click().run()
    assert not at.exception
    assert any("The simulation says" in i.value for i in at.info)
    assert at.dataframe


def test_timeline_story_of_a_picked_request():
    at = fresh()
    at.switch_page("pages/timeline.py").run()
    at.selectbox(key="tl_pick").select_index(0).run()
    assert not at.exception
    assert any("arrives with" in m.value for m in at.markdown)


def test_sweep_runs_and_marks_the_result():
    at = fresh()
    at.switch_page("pages/p99_curves.py").run()
    at.selectbox(key="sw_knob").set_value("cap")
    at.number_input(key="sw_n").set_value(3)
    at.slider(key="sw_seeds").set_value(1)
    [b for b in at.button if b.label == "Run sweep"][0].click().run(timeout=120)
    assert not at.exception
    assert at.success or at.warning
    assert at.get("plotly_chart")


def test_a_run_too_big_for_the_app_falls_back_with_a_warning():
    """A share link asking for ~1.8M requests must not hang the page: warning + preset values."""
    at = AppTest.from_file(str(APP), default_timeout=60)
    at.query_params["p1_rate"] = "10000"
    at.run()
    assert not at.exception
    warned = " ".join(w.value for w in at.warning)
    assert "at most 50,000" in warned and "requests" in warned
