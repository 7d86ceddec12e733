"""Figure builders on a tiny fixed-step run and on hand-built frames."""

import numpy as np
import pytest

from engine import from_dict, simulate
from ui.charts import figures

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


def test_ttft_cdf_reaches_one(res):
    fig = figures.ttft_cdf({"a": res.requests, "b": res.requests}, res.class_names)
    assert len(fig.data) == 4
    assert fig.data[0].y[-1] == pytest.approx(1.0)


def test_memory_bar_parts_sum_to_total():
    gib = figures.GIB
    fig = figures.memory_bar(80 * gib, 40 * gib, 3 * gib, 29 * gib, "x")
    assert [t.name for t in fig.data][:3] == ["weights", "activations", "KV cache"]
    assert sum(t.x[0] for t in fig.data) == pytest.approx(80)


def test_step_time_table_is_memory_bound_for_decode_and_compute_bound_for_prefill():
    from engine import load
    from engine.config.memory import breakdown
    from ui.panels.costs import step_table

    sc = load("default")
    t = step_table(sc, breakdown(sc)).set_index("case")
    assert list(t.columns) == ["compute_ms", "memory_ms", "overhead_ms", "step_ms"]
    assert t.loc["decode ×1", "memory_ms"] > t.loc["decode ×1", "compute_ms"]
    assert t.loc["prefill 8,192 tok", "compute_ms"] > t.loc["prefill 8,192 tok", "memory_ms"]
    for _, r in t.iterrows():
        assert r["step_ms"] == pytest.approx(max(r["compute_ms"], r["memory_ms"]) + r["overhead_ms"], abs=0.02)


def test_every_chart_module_draws_on_the_white_template(res):
    """The template is plotly's default, set once by ui.charts.figures (not named per figure): charts
    still carry it, in the app's import order (streamlit first: it sets a default of its own)."""
    import importlib

    import plotly.io as pio
    import streamlit  # noqa: F401

    importlib.reload(figures)

    white = pio.templates["plotly_white"].layout.plot_bgcolor
    charts = [figures.kv_usage(res.steps, res.class_names, 64), figures.waiting_queue(res.steps, res.class_names),
              figures.ttft_cdf({"run": res.requests}, res.class_names)]
    for fig in charts:
        assert fig.layout.template.layout.plot_bgcolor == white == "white"


def test_thin_keeps_every_peak_and_at_most_max_points():
    import pandas as pd

    n = 3003
    t = np.arange(n) * 0.01
    kv = np.zeros(n, dtype=int)
    kv[1234] = 99  # a one-step spike
    frame = pd.DataFrame({"t_s": t, "kv_a": kv, "waiting_a": np.arange(n) % 7})
    out = figures.thin(frame, ["kv_a", "waiting_a"], max_points=600)
    assert len(out) <= 600 and out["t_s"].iloc[0] == 0.0
    assert out["kv_a"].max() == 99 and out["waiting_a"].max() == 6  # no peak lost
    assert out["t_s"].is_monotonic_increasing
    short = frame.head(100)
    assert figures.thin(short, ["kv_a"]) is short  # short frames are drawn as they are


def test_over_time_is_one_figure_with_kv_above_the_queue(res):
    fig = figures.over_time(res.steps, res.class_names, 64, kv_reserve=8)
    kv = [t for t in fig.data if t.stackgroup == "kv"]
    assert [t.name for t in kv] == ["hi KV", "lo KV"] and {t.yaxis for t in kv} == {"y"}
    queue = [t for t in fig.data if t.name in ("hi waiting", "lo waiting")]
    assert len(queue) == 2 and {t.yaxis for t in queue} == {"y2"}
    assert np.array_equal(np.asarray(queue[1].y), res.steps["waiting_lo"].to_numpy())  # short run: every step
    assert list(by_name(fig, "hi KV reserve")[0].y) == [56, 56]


def test_thin_whole_rows_never_stacks_above_any_real_step():
    import pandas as pd

    rng = np.random.default_rng(0)
    n = 5000
    a = rng.integers(0, 100, n)
    frame = pd.DataFrame({"t_s": np.arange(n) * 0.1, "kv_a": a, "kv_b": 100 - a})  # every step holds 100
    out = figures.thin(frame, ["kv_a", "kv_b"], max_points=500, whole_rows=True)
    assert len(out) <= 500 and ((out["kv_a"] + out["kv_b"]) == 100).all()  # each point is one real step
    per_column = figures.thin(frame, ["kv_a", "kv_b"], max_points=500)
    assert ((per_column["kv_a"] + per_column["kv_b"]) > 100).any()  # the per-column maximum: not so
