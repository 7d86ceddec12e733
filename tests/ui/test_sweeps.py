"""Sweep plans (run order, refused points), the long table, the knee, and the P99 figure."""

import numpy as np
import pytest

from engine import load
from ui.charts.fig_sweep import p99_panels
from ui.frame.limits import why_not
from ui.runtime import sweeps
from ui.runtime.sweeps import KNOBS, coarse_indices, knee, values_for


def test_values_are_evenly_spaced_whole_numbers_for_integer_knobs():
    assert values_for(KNOBS["reserve"], 0, 4096, 9) == [0, 512, 1024, 1536, 2048, 2560, 3072, 3584, 4096]
    assert values_for(KNOBS["reserve"], 0, 3, 9) == [0, 1, 2, 3]  # no repeats
    assert values_for(KNOBS["rate"], 0.5, 1.0, 3) == [0.5, 0.75, 1.0]


@pytest.mark.parametrize("n, want", [(9, [0, 2, 4, 6, 8]), (3, [0, 1, 2]), (6, [0, 1, 2, 4, 5]),
                                     (16, [0, 4, 8, 11, 15])])
def test_coarse_points_spread_over_the_range_and_keep_both_ends(n, want):
    assert coarse_indices(n) == want


def test_plan_runs_a_coarse_curve_first_then_every_value_then_more_seeds():
    sc = load("default")
    values = values_for(KNOBS["reserve"], 0, 4096, 9)
    p = sweeps.plan(sc, "reserve", values, [1, 2, 3])
    assert len(p.points) == 27 == len(set(p.order)) and set(p.order) == set(p.keys)
    key = {(v, s): k for v, s, k in p.points}
    assert p.coarse == 5
    assert p.order[:5] == [key[(v, 1)] for v in (0, 1024, 2048, 3072, 4096)]
    assert p.order[5:9] == [key[(v, 1)] for v in (512, 1536, 2560, 3584)]
    assert p.order[9:18] == [key[(v, 2)] for v in values] and p.order[18:] == [key[(v, 3)] for v in values]


def test_points_that_cannot_run_are_left_out_with_the_reason():
    sc = load("default", {"scheduler.max_num_batched_tokens": 2048})
    p = sweeps.plan(sc, "reserve", [0, 1024, 2048, 4096], [1], why_not=why_not)
    assert [v for v, _, _ in p.points] == [0, 1024]
    assert set(p.refused) == {2048, 4096} and "must be below" in p.refused[4096]
    big = sweeps.plan(sc, "load", [1.0, 500.0], [1], why_not=why_not)
    assert list(big.refused) == [500.0] and "50,000 allowed" in big.refused[500.0]


def test_each_knob_writes_its_scenario_key():
    sc = load("default")
    for name, knob in KNOBS.items():
        lo, hi = knob.default_range(sc, "P2", 2074)
        assert lo < hi, name
        p = sweeps.plan(sc, name, [lo, hi], [1], "P2", why_not=why_not)
        assert len(p.points) == 2, (name, p.refused)
    assert KNOBS["kvres"].overrides(sc, 300, None) == {"mitigations.p0_kv_reserve": 300}
    assert KNOBS["running"].overrides(sc, 4, "P2") == {"classes.P2.caps.max_running": 4}
    assert KNOBS["blocks"].overrides(sc, 999.6, None) == {"kv.num_blocks": 1000}
    assert KNOBS["load"].overrides(sc, 2.0, None)["classes.P1.arrival.rate"] == 6.0


def test_total_load_packs_a_traces_arrivals_closer_over_the_same_stretch_of_it():
    from engine.config.scenario import apply_overrides, from_dict, to_dict
    from engine.config.traces import read_trace
    from engine.config.workload import build

    sc = load("real-traffic")
    twice = from_dict(apply_overrides(to_dict(sc), KNOBS["load"].overrides(sc, 2.0, None)))
    assert (twice.trace.time_scale, twice.trace.start_s, twice.trace.path) == (0.5, 420.0, "azure-code")
    assert twice.trace.assign == sc.trace.assign
    t = read_trace("azure-code")["arrival_s"]
    within = int(((t >= 840) & (t < 840 + 2 * sc.duration_s)).sum())  # the same start, twice the stretch
    assert len(build(twice)) == within > len(build(sc))
    none = from_dict(apply_overrides(to_dict(sc), KNOBS["load"].overrides(sc, 0.0, None)))
    assert none.trace is None


def summary(p0, p2, rejected=0, tp=100.0, idle=0.0):
    return {"served_tok_s": tp, "batch_fill": 0.5, "reserve_idle_token_frac": idle, "classes": {
        "P0": {"priority": 0, "n": 10, "rejected": 0, "unfinished": 0, "ttft_p99": p0, "slo_attainment": 1.0},
        "P2": {"priority": 2, "n": 3, "rejected": rejected, "unfinished": 0, "ttft_p99": p2, "slo_attainment": 0.5},
    }}


def hand_plan():
    p = sweeps.Plan(KNOBS["reserve"], None, [0.0, 512.0, 1024.0], [1, 2])
    p.points = [(v, s, f"{v}-{s}") for v in p.values for s in p.seeds]
    return p


def test_table_and_knee_use_the_worst_seed_and_skip_rejections():
    p = hand_plan()
    done = {"0.0-1": summary(3.0, 40), "0.0-2": summary(2.0, 50), "512.0-1": summary(0.9, 60),
            "512.0-2": summary(1.2, 70), "1024.0-1": summary(0.5, 80), "1024.0-2": summary(0.8, 90)}
    t = sweeps.frame(p, done)
    assert len(t) == 12 and set(t.columns) >= {"value", "seed", "class", "ttft_p99", "rejected", "batch_fill"}
    assert knee(t, "P0", 1.0, "low") == 1024  # 512 fails for seed 2
    assert knee(t, "P0", 1.2, "low") == 512
    assert knee(t, "P0", 1.2, "high") == 1024
    assert knee(t, "P0", 0.1, "low") is None
    done["512.0-1"] = summary(0.9, 60, rejected=3)  # rejected requests never make a knee
    assert knee(sweeps.frame(p, done), "P0", 1.2, "low") == 1024
    assert len(sweeps.frame(p, {"0.0-1": done["0.0-1"]})) == 2  # only finished points


def test_p99_figure_panels_bands_slo_knee_and_rejections():
    p = hand_plan()
    done = {"0.0-1": summary(3.0, 40), "0.0-2": summary(2.0, 50, idle=0.0), "512.0-1": summary(0.9, None, rejected=3),
            "512.0-2": summary(1.2, None, rejected=3, idle=0.1), "1024.0-1": summary(0.5, 80, idle=0.2),
            "1024.0-2": summary(0.8, 90, idle=0.2)}
    fig = p99_panels(sweeps.frame(p, done), ["P0", "P2"], "reserve (tokens)", {"P0": 1.0, "P2": None}, (0, 1024),
                     knee=1024, knee_text="1,024 tokens")
    bands = [t for t in fig.data if t.fill == "toself"]
    assert [t.yaxis for t in bands] == ["y", "y2"] and all(t.mode == "lines" for t in bands)  # no stray markers
    assert list(bands[0].y) == [3.0, 1.2, 0.8, 0.5, 0.9, 2.0]  # max forward, min backward
    p0 = [t for t in fig.data if t.name == "P0 P99 TTFT"][0]
    assert list(p0.y) == pytest.approx([2.5, 1.05, 0.65])
    p2 = [t for t in fig.data if t.name == "P2 P99 TTFT"][0]
    assert list(p2.x) == [0.0, 1024.0]  # all rejected at 512: no P99 to draw
    rej = [t for t in fig.data if t.name == "some requests rejected"]
    assert len(rej) == 1 and rej[0].yaxis == "y2" and "6 of 6 rejected" in rej[0].text[0]
    assert fig.layout.yaxis.domain[0] > fig.layout.yaxis2.domain[1]  # P0's panel above P2's, own y scale
    slo = [s for s in fig.layout.shapes if s.yref == "y"]
    assert len(slo) == 1 and slo[0].y0 == 1.0
    label = [a for a in fig.layout.annotations if a.text == "SLO 1 s"][0]
    assert label.xref == "paper" and label.x >= 1.0  # in the right margin, clear of the curves
    assert any(s.x0 == 1024 and s.yref == "paper" for s in fig.layout.shapes)
    assert any("knee" in (a.text or "") for a in fig.layout.annotations)
    cost = {t.name: t.yaxis for t in fig.data if t.name in ("served rate (tok/s)", "batch fill",
                                                            "idle reserve (share of budget)")}
    assert cost == {"served rate (tok/s)": "y3", "batch fill": "y4", "idle reserve (share of budget)": "y4"}
    assert fig.layout.xaxis3.title.text == "reserve (tokens)" and fig.layout.xaxis2.matches == "x"


def test_an_empty_table_still_draws_the_panels():
    fig = p99_panels(sweeps.frame(hand_plan(), {}), ["P0", "P2"], "x", {"P0": 1.0}, (0, 10))
    assert fig.layout.yaxis.domain and fig.layout.yaxis3.domain and len(fig.layout.annotations) >= 3
    assert np.isfinite(fig.layout.xaxis.range).all()


def test_the_curve_is_redrawn_only_at_milestones():
    from ui.runtime.live import milestone

    sc = load("default")
    p = sweeps.plan(sc, "reserve", values_for(KNOBS["reserve"], 0, 4096, 9), [1, 2, 3])
    order = p.order
    assert milestone(p, set()) == 0
    assert milestone(p, set(order[:4])) == 0  # the coarse curve is not complete yet
    assert milestone(p, set(order[:5])) == 5
    assert milestone(p, set(order[:8])) == 5
    assert milestone(p, set(order[:9])) == 9  # every setting, first seed
    assert milestone(p, set(order[:17])) == 9 and milestone(p, set(order[:18])) == 18
    assert milestone(p, set(order)) == 27
    assert milestone(p, set(order[1:])) == 0  # a prefix, not just a count


def test_a_full_run_waits_for_the_whole_sweep_only_when_the_pace_so_far_says_it_is_near():
    from ui.runtime.live import rest_within

    assert rest_within(left=22, made=5, elapsed_s=0.2, within_s=1.5)  # 22 × 40 ms: drawn once, complete
    assert not rest_within(left=75, made=5, elapsed_s=0.3, within_s=1.5)  # 4.5 s: coarse first, then polls
    assert not rest_within(left=22, made=0, elapsed_s=0.3, within_s=1.5)  # nothing came back yet: no pace
