"""The *Does this hold?* page's pure parts: its runs and their order (`ui.runtime.story_plan`), judging while
runs come in, the claims in words, and the edge band (`ui.charts.fig_story`): band = the seeds' min–max,
line = their median, the claim's threshold as a line."""

from __future__ import annotations

import pandas as pd
import pytest

from engine.sweeps.story import of_scenario, parse
from ui.charts.fig_story import edge_band
from ui.runtime import story_plan
from ui.runtime.worker import MEASURE


def frame(rows):
    return pd.DataFrame(rows, columns=["scale", "seed", "value", "ref", "ok", "n"])


def test_the_band_is_the_seeds_min_max_the_line_their_median_and_the_threshold_a_line():
    f = frame([(0.9, 1, 0.5, 1.0, True, 60), (0.9, 2, 0.7, 1.0, True, 70), (0.9, 3, 0.6, 1.0, True, 65),
               (1.1, 1, 0.9, 1.0, True, 60), (1.1, 2, 1.4, 1.0, False, 80), (1.1, 3, 1.2, 1.0, False, 90)])
    fig = edge_band(f, y_title="P0 P99 TTFT", x_title="load", value_name="P0", band_name="band",
                    threshold_name="threshold: ≤ 1 s", threshold=1.0)
    band, line, thr = fig.data
    assert list(band.x) == [0.9, 1.1, 1.1, 0.9] and list(band.y) == [0.7, 1.4, 0.9, 0.5]  # max along, min back
    assert band.fill == "toself" and band.name == "band"
    assert list(line.x) == [0.9, 1.1] and list(line.y) == [0.6, 1.2]
    assert [list(c) for c in line.customdata] == [[0.5, 0.7, 3], [0.9, 1.4, 3]]
    assert list(thr.x) == [0.9, 1.1] and list(thr.y) == [1.0, 1.0] and thr.line.dash == "dash"
    assert list(fig.layout.xaxis.ticktext) == ["×0.9", "×1.1"]


def test_against_another_run_the_line_is_the_median_reference_and_missing_values_are_left_out():
    f = frame([(1.0, 1, 0.0, 0.2, True, None), (1.0, 2, None, 0.4, False, None), (1.0, 3, 0.3, 0.9, True, None),
               (1.2, 1, 0.5, 0.1, False, None)])
    fig = edge_band(f, y_title="y", x_title="x", value_name="v", band_name="b",
                    threshold_name="1 × [other] (median)")
    band, line, ref = fig.data
    assert list(line.y) == [0.15, 0.5]  # the seed with no value does not count
    assert list(band.y) == [0.3, 0.5, 0.5, 0.0]
    assert list(ref.y) == [0.4, 0.1] and ref.name == "1 × [other] (median)"


def test_an_empty_frame_draws_an_empty_figure():
    fig = edge_band(frame([]), y_title="y", x_title="x", value_name="v", band_name="b", threshold_name="t",
                    threshold=1.0)
    assert not fig.data


TOY = parse({"runs": [{"label": "fcfs", "set": {}}, {"label": "priority", "set": {"scheduler.policy": "priority"}}],
             "claims": [{"run": 0, "metric": "P0.ttft_p99", "op": ">", "value": 1.0},
                        {"run": 1, "metric": "P0.ttft_p99", "op": "<", "other": 0, "factor": 0.5, "edge": True}],
             "edge": "why"}, "classic-inversion", "toy", "toy.yaml")


def measured(p, values: dict[tuple[int, int, float], float]) -> dict[str, dict]:
    return {p.keys[k]: {"values": {"P0.ttft_p99": v}, "support": {"P0.ttft_p99": 40}} for k, v in values.items()}


def test_the_runs_go_to_the_pool_shipped_load_first_and_only_edge_runs_reach_further():
    p = story_plan.plan(TOY, 2)
    seeds = p.seeds
    assert len(seeds) == 2 and seeds[1] == seeds[0] + 1
    # both runs feed the edge claim (run and other): 2 runs × 2 seeds × 5 scales
    assert len(p.keys) == len(p.order) == 2 * 2 * 5
    assert all(key.startswith(MEASURE) for key in p.order)
    scale_of = {v: k[2] for k, v in p.keys.items()}
    assert [scale_of[k] for k in p.order[:4]] == [1.0] * 4
    assert [scale_of[k] for k in p.order[-8:]] == [0.8] * 4 + [1.2] * 4
    two = story_plan.plan(of_scenario("two-gpus"), 1)  # its edge claim reads one run (P0 + P1 on GPU 0)
    assert {k[0] for k in two.keys if k[2] in (0.8, 1.2)} == {2}
    assert len(two.keys) == 3 * 3 + 2


def test_claims_are_judged_on_the_seeds_whose_runs_are_in():
    p = story_plan.plan(TOY, 2)
    s0, s1 = p.seeds
    done = measured(p, {(0, s0, 1.0): 3.0, (1, s0, 1.0): 1.0, (0, s1, 1.0): 2.0})  # seed s1 lacks its run 1
    a = story_plan.judge(p, done)
    fcfs, edge = a.tallies[1.0]
    assert (fcfs.k, fcfs.n) == (1, 1) and (edge.k, edge.n) == (1, 1)  # 1.0 < 0.5 × 3.0
    assert a.tallies[0.9][0].n == 0
    done |= measured(p, {(1, s1, 1.0): 1.5, (0, s0, 0.8): 1.0, (1, s0, 0.8): 0.2})
    f = story_plan.edge_frame(p, done, 1)
    assert f[["scale", "seed", "value", "ref", "ok"]].values.tolist() == [
        [0.8, s0, 0.2, 0.5, True], [1.0, s0, 1.0, 1.5, True], [1.0, s1, 1.5, 1.0, False]]
    assert story_plan.support_range(a.tallies[1.0][1].support) == (40, 40)


@pytest.mark.parametrize("claim, text", [
    ({"run": 0, "metric": "P0.ttft_p99", "op": "<=", "value": 1.0}, "P0 P99 TTFT [a] ≤ 1.00 s"),
    ({"run": 1, "metric": "P1.ttft_p99", "op": ">=", "other": 0, "factor": 2.0}, "P1 P99 TTFT [b] ≥ 2 × [a]"),
    ({"run": 0, "metric": "P0.slo_attainment", "op": "<", "value": 0.9}, "P0 SLO met [a] < 90%"),
    ({"run": 1, "metric": "top_holder", "op": "==", "value": "P2"}, "Main KV holder when it waits [b] = P2"),
    ({"run": 0, "metric": "wait_s.kv_short", "op": ">", "value": 0},
     "Top class's time waiting (not enough free KV blocks) [a] > 0 s"),
    ({"run": 0, "metric": "top_reason", "op": "==", "value": "token_budget"},
     "Main reason the top class waits [a] = the step's token budget was used up"),
    ({"run": 0, "metric": "replica0.kv_use", "op": "<", "value": 0.25}, "Replica 0: KV use (mean) [a] < 25%"),
])
def test_claims_in_words(claim, text):
    from ui.panels.story_view import claim_text

    assert claim_text(claim, ["a", "b"]) == text
