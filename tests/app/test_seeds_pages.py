"""AppTest: the pages' figures over N seeds — the sidebar's seeds control and its link value, the
"better on k of N seeds" of a comparison, the "n < 100 requests" beside a thin percentile, and the
capacity table of the P99 page and Compare."""

import time

import pytest
from streamlit.testing.v1 import AppTest

from tests.app.seeded import captions, run_until_seeded
from tests.support.apptest import open_page


def on_page(page: str | None = None, **query) -> AppTest:
    return open_page(page, **query)


def card(at: AppTest, label: str):
    found = [m for m in at.metric if m.label == label]
    assert found, [m.label for m in at.metric]
    return found[0]


def test_the_first_card_is_the_shown_seed_then_every_figure_is_over_five_seeds():
    at = on_page()
    assert not at.exception
    assert at.number_input(key="seeds").value == 5
    # the first full run draws the shown seed at once and says the others are running
    first = captions(at)
    assert any("Seed 1 shown" in c or "over 5 seeds (1–5)" in c for c in first), first
    run_until_seeded(at)
    assert any("Every figure is over 5 seeds (1–5)" in c for c in captions(at))
    assert any(c.startswith("5 seeds: ") and "requests" in c for c in captions(at))  # under each card
    assert any("Over 5 seeds (1–5)" in m.value for m in at.markdown)


def test_the_seeds_control_is_in_the_share_link_and_sets_n():
    at = run_until_seeded(on_page(seeds="3"))
    assert not at.exception and not at.warning
    assert at.number_input(key="seeds").value == 3
    assert any("Every figure is over 3 seeds (1–3)" in c for c in captions(at))
    assert any("seeds=3" in c.value for c in at.code)  # the share link keeps it
    at.number_input(key="seeds").set_value(1).run()
    assert any(c.startswith("Every figure is from seed 1.") for c in captions(at))


@pytest.mark.parametrize("value", ["abc", "10000", "0", "-2", "3.5", "<b>7</b>"])
def test_a_bad_seeds_value_in_the_link_is_named_and_falls_back_to_five(value):
    at = on_page(seeds=value)
    assert not at.exception
    warned = " ".join(w.value for w in at.warning)
    assert "“seeds”" in warned and "not a number of seeds" in warned and "using 5" in warned
    assert at.number_input(key="seeds").value == 5
    assert "<b>" not in " ".join(m.value for m in at.markdown)  # the value is never HTML
    assert "seeds" not in at.query_params


def test_a_remedy_s_deltas_say_on_how_many_seeds_they_hold():
    at = run_until_seeded(on_page(preset="classic-inversion", policy="priority"))
    m = card(at, "P0 · P99 TTFT")
    assert m.delta
    under = [c for c in captions(at) if c.startswith("better on ") and " of 5 seeds · 5 seeds: " in c]
    assert under, captions(at)  # under the card: on how many seeds it holds, then the seeds' range
    assert any("Without the remedies it was" in x.value and " of 5 seeds" in x.value for x in at.markdown)


def test_a_percentile_from_fewer_than_100_requests_says_so():
    # classic-inversion: P0 sends 28–45 requests a run
    at = run_until_seeded(on_page(preset="classic-inversion"))
    notes = [c for c in captions(at) if c.startswith("5 seeds: ")]
    assert any("n < 100 requests (" in c and "fewest in a seed: " in c for c in notes), notes
    assert any("n < 100" in c for c in captions(at) if "“n < 100”" in c)  # the legend says what it means


def test_the_timeline_strip_is_over_the_seeds():
    at = run_until_seeded(on_page("pages/timeline.py", preset="classic-inversion", seeds="2"))
    assert not at.exception
    strip = next(c for c in captions(at) if c.startswith("The timeline draws seed"))
    assert "the first of 2. Over the 2 seeds:" in strip and "P0: P99 TTFT" in strip and "n < 100" in strip


def test_compare_says_on_how_many_seeds_a_configuration_is_better():
    at = run_until_seeded(on_page("pages/compare.py", preset="classic-inversion", seeds="3", c2_pol="priority"))
    assert not at.exception
    table = at.table[0].value
    cells = " ".join(str(v) for v in table.to_numpy().ravel())
    assert "of 3 seeds" in cells and "better on" in cells


def capacity_table(at: AppTest, timeout_s: float = 240.0):
    deadline = time.monotonic() + timeout_s
    while True:
        tables = [d.value for d in at.dataframe if "capacity (× the offered load)" in d.value.columns]
        if tables and not any("…" in str(v) for v in tables[0].to_numpy().ravel()):
            return tables[0]
        assert time.monotonic() < deadline, "the capacity search did not settle"
        time.sleep(0.5)
        at.run()
        assert not at.exception


def test_the_p99_page_shows_a_remedy_s_cost_as_capacity():
    # budget-bound (priority) with a 2,048-token reserve, against vLLM's FCFS without it: FCFS
    # misses P0's 0.6 s at every load down to 1/8, the reserve carries about the offered load
    at = on_page("pages/p99.py", preset="budget-bound", reserve="2048", seeds="2", sw_pts="3")
    assert not at.exception
    table = capacity_table(at).set_index("configuration")
    assert list(table.index) == ["without remedies", "this scenario"]
    assert table.at["without remedies", "capacity (× the offered load)"] == "< 0.125×"
    assert float(table.at["this scenario", "capacity (× the offered load)"].rstrip("×")) > 0.5
    assert table.at["this scenario", "capacity change per GPU"] == "more (without: < 0.125×)"
    assert table.at["this scenario", "GPUs for this traffic"] == "1"
    for col in ("batch fill at 1×", "KV use at 1×"):
        assert table[col].str.endswith("%)").all()  # the mean with the seeds' min–max
    assert any(c.startswith("without remedies fails at 0.125×: P0: P99 TTFT") for c in captions(at))


def test_compare_shows_each_configuration_s_capacity_against_the_sidebar_s():
    at = on_page("pages/compare.py", preset="budget-bound", seeds="1", cmp_n="2", c2_name="Reserve",
                 c2_pol="priority", c2_res="2048")
    assert not at.exception
    table = capacity_table(at).set_index("configuration")
    assert list(table.index) == ["Sidebar", "Reserve"]
    assert table.at["Sidebar", "capacity change per GPU"] == "–"
    change = table.at["Reserve", "capacity change per GPU"]
    assert change == "no change" or change.endswith(" %") or change.startswith(("more", "less")), change
