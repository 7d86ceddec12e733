"""The inversion timeline: who got in ahead (with both needs), whom a request waited on, the lanes,
the per-class inversion strip, and the figure — on hand-built frames and on real runs."""

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import load, simulate
from engine.core.reasons import Reason
from ui.charts.fig_timeline import lane_positions, timeline
from ui.panels import inversions, text, vocab


class Run:
    """A hand-built run: #0 (lo, priority 2) holds KV; #1 (hi) waits 1–3 s short of KV and is
    inverted 2–3 s, when #2 (lo) is admitted needing 10 blocks while #1 needed 40."""

    def __init__(self):
        self.requests = pd.DataFrame({
            "id": [0, 1, 2], "class": pd.Categorical(["lo", "hi", "lo"], categories=["hi", "lo"]),
            "priority": [2, 0, 2], "arrival_s": [0.0, 1.0, 1.5], "first_scheduled_s": [0.0, 3.0, 2.5],
            "finish_s": [5.0, 4.0, 6.0], "ttft_s": [0.1, 2.1, 1.1], "measured": [True] * 3})
        self.waits = pd.DataFrame({
            "id": [0, 1], "class": ["hi", "lo"], "priority": [0, 2], "request": [1, 2], "start_s": [1.0, 1.5],
            "end_s": [3.0, 2.5], "need_blocks": [40, -1], "free_blocks": [12, -1], "blocker": [-1, -1],
            "eta_s": [1.5, np.nan], "replica": [0, 0], "duration_s": [2.0, 1.0], "reason": ["kv_short", "token_budget"],
            "short_by": [28, -1]})
        self.holders = pd.DataFrame({"wait": [0], "alert": [False], "rank": [0], "request": [0], "class": ["lo"],
                                     "priority": [2], "blocks": [50], "eta_s": [1.0]})
        self.episodes = pd.DataFrame({"request": [1], "class": pd.Categorical(["hi"], categories=["hi", "lo"]),
                                      "priority": [0], "start_s": [2.0], "end_s": [3.0], "steps": [5],
                                      "overtakers": [1], "replica": [0], "duration_s": [1.0]})
        self.admissions = pd.DataFrame({"request": [0, 2, 1], "class": ["lo", "lo", "hi"], "priority": [2, 2, 0],
                                        "t_s": [0.0, 2.5, 3.0], "step": [0, 25, 30], "replica": [0, 0, 0],
                                        "need_blocks": [50, 10, 40], "readmission": [False] * 3})
        self.steps = pd.DataFrame({"replica": [0, 0], "t_s": [0.0, 6.0], "kv_hi": [0, 40], "kv_lo": [50, 60],
                                   "waiting_hi": [0, 0], "waiting_lo": [0, 0]})
        self.alerts = pd.DataFrame()
        self.summary = {"sim_time_s": 6.0}


def test_ahead_names_the_overtaker_and_both_needs():
    got = inversions.ahead(Run(), [1])
    assert got[["request", "overtaker", "overtaker_class", "t_s", "overtaker_need_blocks", "need_blocks"]] \
        .values.tolist() == [[1, 2, "lo", 2.5, 10, 40]]
    assert len(inversions.ahead(Run(), [0])) == 0


def test_waited_on_lists_the_holders_of_each_wait():
    on = inversions.waited_on(Run(), [1])
    got = on[["request", "wait", "holder", "holder_class", "blocks", "rank"]].values.tolist()
    assert got == [[1, 0, 0, "lo", 50, 0]]


def test_story_lanes_put_the_top_class_first_then_holders_then_one_lane_per_class_ahead():
    lanes, got, held, note = inversions.story_lanes(Run(), ["hi", "lo"], (0.0, 6.0))
    assert [(ln.key, ln.kind) for ln in lanes] == [(1, "top"), (0, "holder"), ("ahead:lo", "ahead")]
    assert lanes[1].label == "#0 lo · held up to 50 blocks" and lanes[2].label == "lo admitted ahead (1)"
    assert note is None and len(got) == 1 and len(held) == 1
    lanes, *_ = inversions.story_lanes(Run(), ["hi", "lo"], (3.5, 6.0))
    assert [ln.key for ln in lanes][:1] == [1]  # #1 still runs in this window
    lanes, *_ = inversions.story_lanes(Run(), ["hi", "lo"], (4.5, 6.0))
    assert lanes == []  # #1 finished at 4 s: nothing to tell in this window


def test_lane_limit_says_what_it_hides():
    res = simulate(load("classic-inversion"))
    lanes, _, _, note = inversions.story_lanes(res, res.class_names, (0.0, 200.0), limit=5)
    assert sum(ln.kind == "top" for ln in lanes) == 5 and "first 5 of" in note
    everyone, _, _, note = inversions.all_lanes(res, res.class_names, (0.0, 200.0), limit=40)
    assert len(everyone) == 40 and "Showing 40 of" in note
    assert [ln.kind for ln in everyone[:3]] == ["top"] * 3


def test_strip_counts_inverted_requests_at_once():
    ep = pd.DataFrame({"class": ["hi", "hi", "lo"], "start_s": [0.0, 0.5, 2.0], "end_s": [1.0, 1.0, 3.0]})
    s = inversions.strip(ep, ["hi", "lo"], 4.0, bins=4)
    assert s[s["class"] == "hi"]["value"].tolist() == [1.5, 0, 0, 0]  # 1 s + 0.5 s in the first second
    assert s[s["class"] == "lo"]["value"].tolist() == [0, 0, 1.0, 0]


def by_name(fig, name):
    return [t for t in fig.data if t.name == name]


def test_timeline_figure_draws_inversion_on_top_and_connects_overtakers_and_holders():
    run = Run()
    lanes, got, held, _ = inversions.story_lanes(run, ["hi", "lo"], (0.0, 6.0))
    strip = inversions.strip(run.episodes, ["hi", "lo"], 6.0)
    fig = timeline(run, lanes, got, held, strip, ["hi", "lo"], capacity=64, kv_reserve=8, window=(0.0, 6.0), pick=1)
    names = [t.name for t in fig.data]
    wait = by_name(fig, "waiting: kv_short")[0]
    assert list(wait.x[:2]) == [1.0, 3.0] and list(wait.y[:2]) == [0.0, 0.0]  # lane 0 = the top request
    assert names.index("inversion stripe") > names.index("waiting: kv_short")  # drawn on top of the wait
    marks = by_name(fig, "inversion: a lower-priority request admitted")[0]
    assert list(marks.x) == [2.0] and list(marks.y) == [0.0]
    y = lane_positions(lanes)
    conn = by_name(fig, "admitted ahead (connector)")[0]
    assert list(conn.x[:2]) == [2.5, 2.5] and list(conn.y[:2]) == [y[1], y["ahead:lo"]]
    tick = by_name(fig, "admitted ahead")[0]
    assert "<b>#2 lo</b> admitted at 2.50 s needing 10 blocks" in tick.text[0] and "ahead of #1" in tick.text[0]
    hold = by_name(fig, "waited on (KV holder)")[0]
    assert list(hold.x[:2]) == [1.0, 1.0] and list(hold.y[:2]) == [y[1], y[0]]
    hover = by_name(fig, "hover")[0]
    assert "waited on: #0 lo (50 blocks)" in hover.text[0] and "short by 28" in hover.text[0]
    assert "1 lower-priority admitted ahead meanwhile:<br>#2 lo at 2.50 s (10 blocks)" in hover.text[0]
    run_hi = by_name(fig, "hi running")[0]
    assert list(run_hi.x[:2]) == [3.0, 4.0] and run_hi.line.color == "#cf222e"  # coloured by class
    assert "#1 hi" in fig.layout.yaxis.ticktext[0] and "#cf222e" in fig.layout.yaxis.ticktext[0]
    assert by_name(fig, "hi inverted")[0].yaxis == "y2" and by_name(fig, "hi KV")[0].yaxis == "y3"
    assert fig.layout.xaxis3.matches == "x" and any(s.type == "rect" for s in fig.layout.shapes)


def test_timeline_on_a_real_run_draws_every_wait_of_its_lanes():
    res = simulate(load("classic-inversion"))
    w = (0.0, float(res.summary["sim_time_s"]))
    lanes, got, held, _ = inversions.story_lanes(res, res.class_names, w)
    fig = timeline(res, lanes, got, held, inversions.strip(res.episodes, res.class_names, w[1]), res.class_names,
                   capacity=res.memory.blocks, kv_reserve=0, window=w)
    ids = [ln.key for ln in lanes if ln.kind != "ahead"]
    drawn = sum(np.isfinite(np.asarray(t.x, dtype=float)).sum() // 2 for t in fig.data
                if t.name and t.name.startswith("waiting: "))
    assert drawn == len(res.waits[res.waits["request"].isin(ids)])
    ahead_lane = [ln for ln in lanes if ln.kind == "ahead"]
    assert ahead_lane and ahead_lane[0].cls == "P1"


def test_behind_a_gateway_the_timeline_and_the_story_show_the_wait_there():
    res = simulate(load("gateway-priority", {"duration_s": 120}))
    req = res.requests
    worst = req[req["class"] == "P0"].sort_values("gateway_queue_s").iloc[-1]
    assert worst["gateway_queue_s"] > 5 and worst["blocked_s"] >= worst["gateway_queue_s"]
    w = (0.0, float(res.summary["sim_time_s"]))
    lanes, got, held, _ = inversions.story_lanes(res, res.class_names, w)
    lanes = [inversions.Lane(int(worst["id"]), "worst P0", "P0", "top")]  # the P0 held longest at the gateway
    fig = timeline(res, lanes, got.iloc[:0], held.iloc[:0], inversions.strip(res.episodes, res.class_names, w[1]),
                   res.class_names, capacity=res.memory.blocks, kv_reserve=0, window=w)
    bar = [t for t in fig.data if t.name == "waiting: gateway"]
    assert bar and bar[0].line.color == vocab.REASONS[Reason.GATEWAY].color
    xs = np.asarray(bar[0].x, dtype=float)
    assert worst["arrival_s"] in xs and worst["dispatched_s"] in xs  # from its arrival to its dispatch
    story = text.request_story(worst, res.waits, res.holders)
    assert any(f"({worst['gateway_queue_s']:.2f} s): waits — held at the gateway, not yet sent" in s for s in story)


def test_the_story_names_who_got_in_ahead_and_the_holders():
    run = Run()
    row = pd.Series({**run.requests.loc[1].to_dict(), "status": "finished", "reason": "", "prompt_tokens": 600,
                     "output_tokens": 20, "first_token_s": 3.1, "preemptions": 0, "e2e_s": 3.0, "inversion_s": 1.0,
                     "inversion_episodes": 1})
    story = text.request_story(row, run.waits, run.holders, inversions.ahead(run, [1]))
    wait_line = [s for s in story if "waits" in s][0]
    assert "#0 lo (50 blocks)" in wait_line
    assert "Meanwhile 1 lower-priority request was admitted ahead of it" in wait_line
    assert "#2 lo at 2.50 s (needed 10 blocks; this one needed 40)" in wait_line


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 10), st.floats(0, 3)), max_size=30), st.integers(1, 12))
def test_the_strip_adds_up_every_episode_overlap(spans, bins):
    ep = pd.DataFrame({"class": ["a"] * len(spans), "start_s": [s for s, _ in spans],
                       "end_s": [s + d for s, d in spans]})
    got = inversions.strip(ep, ["a"], 10.0, bins=bins)["value"].to_numpy() * (10.0 / bins)
    edges = np.linspace(0, 10, bins + 1)
    want = [sum(max(0.0, min(b, s + d) - max(a, s)) for s, d in spans) for a, b in zip(edges[:-1], edges[1:])]
    assert np.allclose(got, want, atol=1e-9)


def test_close_episodes_merge_into_one_stripe_per_lane():
    from ui.charts.fig_timeline import merge_close

    ep = pd.DataFrame({"request": [1, 1, 1, 2], "start_s": [0.0, 1.05, 3.0, 1.0], "end_s": [1.0, 2.0, 4.0, 1.5]})
    got = merge_close(ep, 0.1)
    assert got[["request", "start_s", "end_s"]].values.tolist() == [[1, 0.0, 2.0], [1, 3.0, 4.0], [2, 1.0, 1.5]]


def test_the_story_span_frames_the_top_class_waits():
    assert inversions.story_span(Run()) == (0.82, 4.18)  # #1 arrives at 1 s and finishes at 4 s; 3 % of 6 s
    res = simulate(load("default"))
    lo, hi = inversions.story_span(res)
    waited = res.requests[res.requests["id"].isin(res.waits.loc[res.waits["priority"] == 0, "request"])]
    assert lo <= waited["arrival_s"].min() and hi >= waited["finish_s"].max() and hi - lo < 0.6 * 117


def test_the_timeline_options_draw_what_they_name():
    """The KV reserve line, the picked lane's tint and the replica whose KV is drawn."""
    run = Run()
    run.steps = pd.concat([run.steps, run.steps.assign(replica=1, kv_hi=[7, 7], kv_lo=[9, 9])], ignore_index=True)
    lanes, got, held, _ = inversions.story_lanes(run, ["hi", "lo"], (0.0, 6.0))
    strip = inversions.strip(run.episodes, ["hi", "lo"], 6.0)

    def fig(**kw):
        return timeline(run, lanes, got, held, strip, ["hi", "lo"], **{"capacity": 64, "kv_reserve": 0,
                                                                        "window": (0.0, 6.0), **kw})

    plain = fig()
    assert not by_name(plain, "hi KV reserve") and not [s for s in plain.layout.shapes if s.type == "rect"]
    assert list(by_name(plain, "KV capacity")[0].y) == [64, 64]
    assert list(by_name(plain, "hi KV")[0].y) == [0, 40] and list(by_name(plain, "lo KV")[0].y) == [50, 60]
    assert list(by_name(fig(kv_reserve=8), "hi KV reserve")[0].y) == [56, 56]
    rect = [s for s in fig(pick=0).layout.shapes if s.type == "rect"]
    assert [(r.y0, r.y1) for r in rect] == [(-1.5, -0.5)]  # #0 is the second lane (the holder)
    assert not [s for s in fig(pick=99).layout.shapes if s.type == "rect"]  # not a lane: nothing tinted
    other = fig(replica=1)
    assert list(by_name(other, "hi KV")[0].y) == [7, 7] and list(by_name(other, "lo KV")[0].y) == [9, 9]
