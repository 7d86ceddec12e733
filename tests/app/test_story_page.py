"""AppTest of *Does this hold?* (`ui.panels.story_view`): the sidebar preset's story judged over seeds and
load ×0.9/×1/×1.1 in the sweeps' pool, an uploaded scenario told it has none, and an edge claim's
band. Few seeds keep it quick (the runs are the engine's own: `tests/engine/test_story.py`)."""

from __future__ import annotations

import json
import time

from streamlit.testing.v1 import AppTest

from engine.config.scenario import load_raw
from engine.sweeps.story import of_scenario, seeds_of
from tests.support.apptest import open_page

APP = "../../app.py"  # relative to this file (AppTest resolves it so)
PAGE = "pages/story.py"


def on_page(**query) -> AppTest:
    return open_page(PAGE, **query)


def table(at: AppTest) -> list[dict]:
    """The claims table's rows, its cells as shown (inert text: Markdown escapes dropped)."""
    return at.table[0].value.map(lambda v: str(v).replace("\\", "")).to_dict("records")


def run_until_judged(at: AppTest, timeout_s: float = 240.0) -> AppTest:
    """Rerun (as the polling fragment would) until every run is in: the progress bar is gone."""
    deadline = time.monotonic() + timeout_s
    while at.get("progress"):
        assert time.monotonic() < deadline, "the story's runs did not finish"
        time.sleep(0.3)
        at.run()
        assert not at.exception
    return at


def test_the_preset_s_claims_are_listed_with_k_of_n_per_load():
    at = on_page(preset="classic-inversion", st_seeds="2")
    assert not at.exception
    assert at.number_input(key="st_seeds").value == 2
    run_until_judged(at)
    story = of_scenario("classic-inversion")
    rows = table(at)
    assert len(rows) == len(story.claims)
    first = seeds_of(story, 1)[0]  # the scenario's own seed and the next: never picked
    assert [c for c in at.caption if "runs:" in c.value and f"2 seeds ({first}–{first + 1})" in c.value]
    for row in rows:
        assert row[""] in ("✓", "✗", "~")
        for scale in ("×0.9", "×1", "×1.1"):
            k, n = row[scale].split(" · ")[0].split("/")
            assert n == "2" and 0 <= int(k) <= 2, row
    # the claims in words, with the story's run labels; P0's P99 rests on fewer than 100 requests
    p99 = [r for r in rows if r["Claim"] == "P0 P99 TTFT [vLLM FCFS] > 5.00 s"]
    assert p99 and p99[0]["Requests behind"].endswith("n < 100")
    holder = [r for r in rows if r["Claim"] == "Main KV holder when it waits [vLLM priority] = P2"]
    assert holder and holder[0]["×1"] == "2/2 · P2 ×2"
    assert not at.get("plotly_chart") and not at.subheader  # no claim of this story is on an edge
    # the runs stay in the pool: a second session gets the judged table at once
    again = on_page(preset="classic-inversion", st_seeds="2")
    assert not again.get("progress") and table(again) == rows


def test_an_uploaded_scenario_has_no_story_and_says_so():
    at = AppTest.from_file(APP, default_timeout=60)
    at.switch_page(PAGE)
    at.session_state["_upload_raw"] = load_raw("classic-inversion")
    at.run()
    assert not at.exception
    assert [i for i in at.info if "has no story to check" in i.value]
    assert not at.table and not at.get("progress")


def test_an_edge_claim_shows_the_story_s_words_and_its_band():
    at = run_until_judged(on_page(preset="two-gpus", st_seeds="1"))
    story = of_scenario("two-gpus")
    assert [m for m in at.markdown if "only while that GPU has room" in m.value]
    rows = table(at)
    assert len(rows) == len(story.claims)
    edge = [r for r in rows if r["Claim"] == "P0 P99 TTFT [P0 + P1 on GPU 0, documents on GPU 1] ≤ 1.00 s"]
    assert edge and edge[0][""] in ("✓", "~")
    (chart,) = at.get("plotly_chart")
    fig = json.loads(chart.proto.spec)
    xs = sorted({x for t in fig["data"] for x in t["x"]})
    assert xs == [0.8, 0.9, 1.0, 1.1, 1.2]  # the band reaches past ±10 %
    threshold = [t for t in fig["data"] if t["name"].startswith("threshold")]
    assert threshold and threshold[0]["y"] == [1.0, 1.0]
    assert [c for c in at.caption if c.value.startswith("Holds on: ×0.8 ")]
    assert [c for c in at.caption if "runs:" in c.value and "on an edge the story names" in c.value]


def test_the_page_renders_in_chinese():
    at = on_page(preset="two-gpus", st_seeds="1", lang="zh")
    assert not at.exception
    assert at.title[0].value == "站得住吗？"
