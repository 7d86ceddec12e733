"""Figure builders on a tiny fixed-step run and on hand-built frames."""

import numpy as np
import pandas as pd
import pytest

from engine import from_dict, simulate
from ui import figures

TINY = {
    "name": "tiny", "seed": 3, "duration_s": 4, "cost": {"model": "fixed", "step_time_s": 0.01},
    "kv": {"num_blocks": 64, "block_size": 16},
    "scheduler": {"policy": "fcfs", "max_num_batched_tokens": 512},
    "classes": {
        "hi": {"priority": 0, "arrival": {"rate": 3}, "prompt": {"value": 200}, "output": {"value": 20}},
        "lo": {"priority": 2, "arrival": {"rate": 1}, "prompt": {"value": 700}, "output": {"value": 60}},
    },
}


@pytest.fixture(scope="module")
def res():
    return simulate(from_dict(TINY))


def by_name(fig, name):
    return [t for t in fig.data if t.name == name]


def test_kv_usage_stacks_classes_with_capacity_and_reserve(res):
    fig = figures.kv_usage(res.steps, res.class_names, 64, kv_reserve=8)
    kv = [t for t in fig.data if t.stackgroup == "kv"]
    assert [t.name for t in kv] == ["hi KV", "lo KV"]
    assert np.array_equal(np.asarray(kv[1].y), res.steps["kv_lo"].to_numpy())
    assert list(by_name(fig, "KV capacity")[0].y) == [64, 64]
    assert list(by_name(fig, "hi KV reserve")[0].y) == [56, 56]
    assert not by_name(figures.kv_usage(res.steps, res.class_names, 64), "hi KV reserve")


def test_waiting_queue_has_one_line_per_class(res):
    fig = figures.waiting_queue(res.steps, res.class_names)
    assert [t.name for t in fig.data] == ["hi", "lo"]
    assert np.asarray(fig.data[0].y).sum() == res.steps["waiting_hi"].sum()


def hand_frames():
    """Two requests: #0 (lo) holds KV; #1 (hi) waits 1–3 s short of KV, inverted 2–3 s."""
    req = pd.DataFrame({
        "id": [0, 1], "class": pd.Categorical(["lo", "hi"]), "priority": [2, 0], "arrival_s": [0.0, 1.0],
        "first_scheduled_s": [0.0, 3.0], "finish_s": [5.0, 4.0], "measured": [True, True], "ttft_s": [0.1, 2.1],
    })
    waits = pd.DataFrame({
        "id": [0], "request": [1], "class": ["hi"], "priority": [0], "start_s": [1.0], "end_s": [3.0],
        "need_blocks": [10], "free_blocks": [4], "blocker": [-1], "eta_s": [1.5], "replica": [0],
        "duration_s": [2.0], "reason": ["kv_short"], "short_by": [6],
    })
    holders = pd.DataFrame({"wait": [0], "alert": [False], "rank": [0], "request": [0], "class": ["lo"],
                            "priority": [2], "blocks": [50], "eta_s": [1.0]})
    episodes = pd.DataFrame({"request": [1], "class": ["hi"], "priority": [0], "start_s": [2.0], "end_s": [3.0],
                             "steps": [5], "overtakers": [1], "replica": [0], "duration_s": [1.0]})
    steps = pd.DataFrame({"replica": [0, 0], "t_s": [0.0, 4.0], "kv_hi": [0, 4], "kv_lo": [50, 50],
                          "waiting_hi": [0, 0], "waiting_lo": [0, 0]})
    return req, waits, holders, episodes, steps


def test_timeline_segments_episodes_and_hover():
    req, waits, holders, episodes, steps = hand_frames()
    fig = figures.timeline(req, waits, holders, episodes, steps, [0, 1], ["hi", "lo"], 64)
    wait = by_name(fig, "waiting: kv_short")[0]
    assert list(wait.x[:2]) == [1.0, 3.0] and np.isnan(wait.x[2])
    assert list(wait.y[:2]) == [-1.0, -1.0]  # lane 1 (second by arrival) is drawn at y = -1
    run = by_name(fig, "running")[0]
    assert list(run.x[:2]) == [0.0, 5.0] and list(run.x[3:5]) == [3.0, 4.0]
    rect = by_name(fig, "inversion (lower priority admitted)")[0]
    assert rect.fill == "toself" and list(rect.x[:5]) == [2.0, 3.0, 3.0, 2.0, 2.0]
    hover = by_name(fig, "hover")[0]
    assert list(hover.x) == [2.0]
    text = hover.hovertext[0]
    assert "kv_short" in text and "short by 6" in text and "#0 lo (50 blocks)" in text and "1.5 s" in text
    assert any(t.name == "hi KV" and t.yaxis == "y2" for t in fig.data)  # KV chart below, same x axis


def test_default_lanes_are_top_requests_their_holders_and_overtakers():
    req, waits, holders, _, _ = hand_frames()
    extra = pd.DataFrame({"id": [2, 3], "class": pd.Categorical(["lo", "lo"]), "priority": [2, 2],
                          "arrival_s": [1.5, 10.0], "first_scheduled_s": [2.0, 10.0], "finish_s": [6.0, 11.0],
                          "measured": [True, True], "ttft_s": [0.5, 0.1]})
    allreq = pd.concat([req, extra], ignore_index=True)
    assert figures.default_lanes(allreq, waits, holders, 0) == [0, 1, 2]  # #3 neither holds nor overtakes


def test_timeline_on_a_real_run(res):
    lanes = figures.default_lanes(res.requests, res.waits, res.holders, 0)
    fig = figures.timeline(res.requests, res.waits, res.holders, res.episodes, res.steps, lanes, res.class_names,
                           res.memory.blocks)
    drawn = sum(np.isfinite(np.asarray(t.x, dtype=float)).sum() // 2 for t in fig.data
                if t.name and t.name.startswith("waiting: "))
    assert drawn == len(res.waits[res.waits["request"].isin(lanes)])


def test_ttft_cdf_reaches_one(res):
    fig = figures.ttft_cdf({"a": res.requests, "b": res.requests}, res.class_names)
    assert len(fig.data) == 4
    assert fig.data[0].y[-1] == pytest.approx(1.0)


def test_memory_bar_parts_sum_to_total():
    gib = figures.GIB
    fig = figures.memory_bar(80 * gib, 40 * gib, 3 * gib, 29 * gib, "x")
    assert [t.name for t in fig.data][:3] == ["weights", "activations", "KV cache"]
    assert sum(t.x[0] for t in fig.data) == pytest.approx(80)
