"""The first lesson's picture: one P0 request's wait under FCFS, fill what fits and priority, on the
same arrivals — who was admitted meanwhile, and whether they arrived after it."""

from __future__ import annotations

import pytest

from engine import load, simulate
from ui.charts import fig_wait

LABELS = ["FCFS", "fill what fits", "priority"]


@pytest.fixture(scope="module")
def runs():
    return [simulate(load("classic-inversion", o)) for o in
            ({}, {"scheduler.policy": "backfill"}, {"scheduler.policy": "priority"})]


def overtakers_by_hand(res, request: int) -> tuple[int, int]:
    """(lower-priority admissions during the wait, of them arrived after the request), one by one."""
    req = res.requests.set_index("id")
    me = req.loc[request]
    start = me["first_scheduled_s"]
    during = after = 0
    for a in res.admissions.itertuples(index=False):
        if me["arrival_s"] <= a.t_s < start and a.priority > me["priority"]:
            during += 1
            after += bool(req.loc[a.request, "arrival_s"] > me["arrival_s"])
    return during, after


def test_the_request_shown_is_the_one_overtaken_most_under_fill_what_fits(runs):
    backfill = runs[1]
    pick = fig_wait.most_overtaken(backfill)
    p0 = backfill.requests[backfill.requests["class"] == "P0"]["id"]
    counts = {int(i): overtakers_by_hand(backfill, int(i))[1] for i in p0}
    assert counts[pick] == max(counts.values()) > 0
    assert pick == min(i for i, k in counts.items() if k == counts[pick])  # the earliest on a tie
    w = fig_wait.one_wait(backfill, pick, "fill what fits")
    assert (len(w.ahead), w.overtook) == overtakers_by_hand(backfill, pick)
    assert w.waited == pytest.approx(backfill.requests.set_index("id").loc[pick, "first_scheduled_s"] - w.arrival)


def test_fcfs_lets_earlier_arrivals_in_and_priority_lets_nobody_in(runs):
    pick = fig_wait.most_overtaken(runs[1])
    window = fig_wait.window_of(runs, pick)
    fcfs, _bf, prio = (fig_wait.one_wait(r, pick, label, window) for r, label in zip(runs, LABELS))
    assert len(fcfs.ahead) > 0 and fcfs.overtook == 0  # hollow marks only: they were there first
    assert len(prio.ahead) == 0 and prio.waited > 0  # nobody ahead, and it still waited
    for w in (fcfs, prio):
        assert window[0] <= w.steps["t_s"].min() and w.steps["t_s"].max() <= window[1]
    steps = prio.steps[(prio.steps["t_s"] >= prio.arrival) & (prio.steps["t_s"] < prio.arrival + prio.waited)]
    assert steps["prefill_tokens"].max() > 0  # what ran ahead took the budget meanwhile


def test_nobody_overtook_means_the_longest_wait(runs):
    prio = runs[2]
    req = prio.requests[prio.requests["class"] == "P0"]
    waits = req["first_scheduled_s"] - req["arrival_s"]
    assert fig_wait.most_overtaken(prio) == int(req.loc[waits.idxmax(), "id"])


def test_the_figure_has_two_rows_per_run_a_band_per_row_and_a_mark_per_admission(runs):
    pick = fig_wait.most_overtaken(runs[1])
    window = fig_wait.window_of(runs, pick)
    waits = [fig_wait.one_wait(r, pick, label, window) for r, label in zip(runs, LABELS)]
    fig = fig_wait.wait_figure(waits, ["P0", "P1", "P2"], runs[0].memory.usable_blocks, 8192)
    titles = [a.text for a in fig.layout.annotations]
    assert [t.split(":")[0] for t in titles] == LABELS
    assert f"#{pick} waited" in titles[1] and f"{waits[1].overtook} of them arrived after it" in titles[1]
    assert len([s for s in fig.layout.shapes if s.type == "rect"]) == 2 * len(runs)
    marks = [t for t in fig.data if t.legendgroup and t.legendgroup.startswith("ahead_")]
    assert sum(len(t.x) for t in marks) == sum(len(w.ahead) for w in waits)
    filled = [t for t in marks if t.legendgroup == "ahead_True"]
    assert sum(len(t.x) for t in filled) == waits[1].overtook
    shown = [t.name for t in fig.data if t.showlegend]
    assert len(shown) == len(set(shown))  # each legend entry once
    assert {"admitted while it waits, arrived after it (overtook)", "admitted while it waits, arrived before it",
            "P2 KV", "prefill tokens"} <= set(shown)
