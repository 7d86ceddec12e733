"""The primer's picture of one step: each bar is its own whole, the step is the first P0 KV wait."""

import pandas as pd
import pytest

from engine import load, simulate
from ui.charts.fig_primer import step_picture, teaching_step


def step(**kw) -> pd.Series:
    row = {"t_s": 12.5, "prefill_tokens": 300.0, "decode_tokens": 12.0, "kv_P0": 0.0, "kv_P1": 300.0,
           "kv_P2": 1600.0, "running_P0": 0.0, "running_P1": 12.0, "running_P2": 1.0, "waiting_P0": 3.0,
           "waiting_P1": 30.0, "waiting_P2": 0.0}
    return pd.Series({**row, **kw})


def bars(fig, row_prefix: str) -> dict[str, float]:
    return {t.name: t.x[0] for t in fig.data if t.y[0].startswith(row_prefix)}


def test_each_bar_is_the_share_of_its_whole_with_counts_on_hover():
    fig = step_picture(step(), budget=8192, usable_blocks=2073, classes=["P0", "P1", "P2"])
    budget, kv, people = bars(fig, "Token budget"), bars(fig, "KV cache"), bars(fig, "Requests")
    assert sum(budget.values()) == pytest.approx(1.0) and budget["unused"] == pytest.approx((8192 - 312) / 8192)
    assert sum(kv.values()) == pytest.approx(1.0) and kv["P2 holds"] == pytest.approx(1600 / 2073)
    assert kv["free"] == pytest.approx(173 / 2073)
    assert sum(people.values()) == pytest.approx(1.0) and people["P1 waiting"] == pytest.approx(30 / 46)
    p2 = next(t for t in fig.data if t.name == "P2 holds")
    assert p2.customdata[0] == 1600  # the count, shown on hover
    assert "12.5 s" in fig.layout.title.text


def test_the_pictured_step_is_inside_the_first_p0_wait_for_kv():
    res = simulate(load("classic-inversion"))
    s = teaching_step(res.steps, res.waits, "P0")
    kv = res.waits[(res.waits["class"] == "P0") & (res.waits["reason"] == "kv_short")].sort_values("start_s").iloc[0]
    assert kv["start_s"] <= s["t_s"] < kv["end_s"] and s["waiting_P0"] >= 1 and s["waiting_for_kv_short"] >= 1
