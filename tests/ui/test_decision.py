"""The decision's choice (`ui.teach.decision`) on hand-made judgements, its judging on real runs, and its
figure (`ui.charts.fig_decision`)."""

import pytest

from engine import load
from engine.sweeps.diagnosis import diagnose
from engine.sweeps.evidence import Estimate, Holds, over_seeds
from engine.sweeps.remedy_rule import Remedy, suggest
from ui.charts.fig_decision import benefit_cost
from ui.teach.decision import AS_IS, Judged, Option, choose, judge, options

SC = load("classic-inversion")


def judged(key, k, n=3, cap=None, p99=2.0, parts=None, settled=True):
    remedy = None if key == AS_IS else Remedy(parts or tuple(key.split("+")), {})
    e = Estimate(p99, p99 * 0.8, p99 * 1.1, (p99,) * n, 90, 30)
    capacity = None if cap is None else {"capacity": cap, "capacity_per_gpu": cap, "settled": settled,
                                         "below_min": cap == 0}
    return Judged(Option(key, remedy, SC), {"P0": e, "P1": e}, Holds(k, n), None, 0, capacity)


def test_keep_as_it_is_when_p0_already_meets_its_slo_on_every_seed():
    ch = choose([judged(AS_IS, 3), judged("priority", 3, cap=2.0)])
    assert ch.kind == "keep" and ch.pick.option.key == AS_IS and (ch.k, ch.n) == (3, 3)


def test_the_cheapest_of_those_meeting_the_slo_on_every_seed_wins():
    rows = [judged(AS_IS, 0, cap=0.1), judged("priority", 2, cap=3.0),  # most capacity, but on 2 of 3 only
            judged("priority+kv_reserve", 3, cap=0.9), judged("priority+holder_split", 3, cap=1.4),
            judged("priority+token_reserve+kv_reserve+holder_split", 3, cap=1.4)]
    ch = choose(rows)
    assert ch.kind == "remedy" and ch.pick.option.key == "priority+holder_split"  # tie: fewer parts
    assert (ch.k, ch.n) == (3, 3) and ch.final


def test_a_candidate_whose_capacity_is_still_searched_makes_the_choice_provisional():
    rows = [judged(AS_IS, 0), judged("kv_reserve", 3, cap=0.5), judged("holder_cap", 3, cap=None)]
    ch = choose(rows)
    assert ch.pick.option.key == "kv_reserve" and not ch.final
    assert choose([judged(AS_IS, 0), judged("kv_reserve", 3, cap=0.5, settled=False)]).final is False


def test_no_decision_when_no_candidate_meets_the_slo_on_most_seeds():
    rows = [judged(AS_IS, 0), judged("priority", 1, n=3, p99=3.0), judged("kv_reserve", 1, p99=1.5),
            judged("holder_cap", 0, p99=1.1)]
    ch = choose(rows)
    assert ch.kind == "none" and ch.pick.option.key == "kv_reserve" and ch.k == 1  # most seeds, then lowest P99
    assert choose([judged("priority", 3)]) is None  # nothing decided before the configuration as is


def test_judge_pairs_seeds_and_counts_the_slo_per_seed_on_real_runs():
    base = load("classic-inversion", {"duration_s": 60.0})
    runs = {AS_IS: over_seeds(base, [7, 8])}
    remedies = suggest(diagnose([r.waits for r in runs[AS_IS]]),
                       diagnose([r.waits for r in over_seeds(load("classic-inversion", {
                           "duration_s": 60.0, "scheduler.policy": "priority"}), [7, 8])]))
    opts, refused = options(base, remedies)
    assert not refused and opts[0].key == AS_IS and [o.key for o in opts[1:]] == [r.key for r in remedies]
    for o in opts[1:]:
        runs[o.key] = over_seeds(o.scenario, [7, 8])
    rows = judge(opts, runs)
    assert rows[0].better is None and all(r.better.n == 2 for r in rows[1:])
    for r in rows:
        slo = r.option.scenario.request_class("P0").slo.ttft_s
        per = r.p99["P0"].per_seed
        # P0 met its SLO on a seed iff that seed's P99 is within it (nothing of P0 is rejected here)
        assert r.meets.k == sum(v <= slo for v in per), r.option.key
    split = next(r for r in rows if r.option.key == "priority+holder_split")
    assert split.option.scenario.classes["P2"].caps.over_cap == "split"
    assert split.p99["P0"].value < rows[0].p99["P0"].value


def test_a_remedy_the_schema_refuses_is_left_out_with_why():
    bad = Remedy(("kv_reserve",), {"mitigations.p0_kv_reserve": -5})
    opts, refused = options(SC, [bad])
    assert [o.key for o in opts] == [AS_IS] and "p0_kv_reserve" in refused["kv_reserve"]


def test_the_figure_draws_each_settled_option_with_its_band_the_slo_and_the_choice():
    rows = [judged(AS_IS, 0, cap=0, p99=10.0), judged("priority", 1, cap=0.5, p99=3.0),
            judged("priority+holder_split", 3, cap=1.5, p99=0.7), judged("kv_reserve", 3, cap=None)]
    names = {AS_IS: "as is", "priority": "priority policy", "priority+holder_split": "split",
             "kv_reserve": "reserve"}
    fig = benefit_cost(rows, names, 1.0, "priority+holder_split")
    assert [t.name for t in fig.data] == ["as is", "priority policy", "split"]  # the unsettled one is left out
    as_is, _prio, split = fig.data
    assert as_is.x == (0.0,) and as_is.marker.symbol == "square"  # fails at the smallest load: at 0
    assert split.marker.symbol == "star" and split.marker.size > as_is.marker.size
    assert split.y == (0.7,) and split.error_y.array == (pytest.approx(0.07),)  # up to the seeds' max
    assert split.error_y.arrayminus == (pytest.approx(0.14),)  # down to their min
    assert "on 3 of 3 seeds" in split.hovertext[0] and "90 requests" in split.hovertext[0]
    assert [s.y0 for s in fig.layout.shapes] == [1.0]  # the SLO
    assert fig.layout.xaxis.range[1] == pytest.approx(1.65) and fig.layout.yaxis.type == "log"


def test_the_figure_stays_readable_at_1280_px():
    """Several configurations that fail at the smallest load share x = 0: they are set side by side
    (not on top of each other, the hover keeps the true value), the axis starts left of 0 so they clear
    the tick labels, the log axis is labelled at 1-2-5 only, and the SLO's label sits on its line
    (plotly put a line's annotation at 10^y on a log axis: at 10 s for a 1 s SLO)."""
    rows = [judged(AS_IS, 0, cap=0, p99=17.0), judged("priority", 0, cap=0, p99=6.6),
            judged("priority+token_reserve", 0, cap=0, p99=6.6), judged("priority+kv_reserve", 0, cap=0, p99=6.2),
            judged("priority+holder_split", 2, cap=1.76, p99=0.71)]
    fig = benefit_cost(rows, {}, 1.0, "priority+holder_split")
    at_zero = [t.x[0] for t in fig.data[:4]]
    assert len(set(at_zero)) == 4 and sum(at_zero) == pytest.approx(0.0)  # apart, centred on 0
    assert all("capacity < 0.125×" in t.hovertext[0] for t in fig.data[:4])
    assert fig.layout.xaxis.range[0] < min(at_zero) - 0.01  # clear of the y axis's labels
    assert fig.data[4].x == (pytest.approx(1.76),)  # alone: exactly where it is
    ticks = list(fig.layout.yaxis.tickvals)
    assert set(ticks) <= {m * 10.0 ** d for d in range(-2, 4) for m in (1, 2, 5)} and {1.0, 10.0} <= set(ticks)
    assert list(fig.layout.yaxis.ticktext) == [f"{t:g}" for t in ticks]
    (label,) = fig.layout.annotations
    assert label.text == "P0 SLO 1 s" and label.yref == "y" and label.y == pytest.approx(0.0)  # log10(1 s)
