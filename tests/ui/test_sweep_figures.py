"""The Sweeps page's pure parts: figure builders on hand-built tables, and reading outputs
(uploads, paths under the working directory only)."""

from __future__ import annotations

import io
import json
import os

import numpy as np
import pandas as pd
import pytest

from engine.sweeps.plan import pareto, points
from ui.charts import sweep_data as sd
from ui.charts import sweep_figures as sf


def table() -> pd.DataFrame:
    """2 policies × 2 reserves × 2 seeds × 2 classes, numbers chosen by hand."""
    rows = []
    for pol in ("fcfs", "priority"):
        for res in (0, 512):
            for seed in (1, 2):
                run = f"{pol[0]}{res}{seed}"
                p0 = {"fcfs": 2.0, "priority": 0.5}[pol] + (0.1 if seed == 2 else 0.0) - res / 10_000
                for cls, prio, ttft, slo in (("P0", 0, p0, 1.0), ("P1", 1, 3 * p0, None)):
                    rows.append({"run": run, "seed": seed, "scheduler.policy": pol, "mitigations.p0_token_reserve": res,
                                 "class": cls, "priority": prio, "n": 10, "ttft_p99": ttft, "tpot_p99": 0.05,
                                 "rejected": 0, "unfinished": 0, "slo_attainment": 1.0, "slo_ttft_s": slo,
                                 "slo_tpot_s": None, "gpus": 1, "served_tok_s": 1000.0 - res / 10 + seed})
    return pd.DataFrame(rows)


KNOBS = ["scheduler.policy", "mitigations.p0_token_reserve"]


def test_explore_one_panel_per_class_and_one_point_per_run():
    fig = sf.explore(table(), "mitigations.p0_token_reserve", "ttft_p99", "scheduler.policy", knobs=KNOBS)
    assert sorted({t.name for t in fig.data}) == ["fcfs", "priority"]
    assert sum(len(t.x) for t in fig.data) == 16  # 8 runs × 2 classes
    titles = [a.text for a in fig.layout.annotations]
    assert titles == ["P0", "P1"]
    # P1 panel holds three times P0's values
    p0 = np.concatenate([t.y for t in fig.data if t.xaxis == "x"])
    p1 = np.concatenate([t.y for t in fig.data if t.xaxis == "x2"])
    assert np.allclose(sorted(p1), sorted(3 * p0))


def test_explore_folded_is_the_mean_over_seeds_with_min_max_bars():
    fig = sf.explore(table(), "mitigations.p0_token_reserve", "ttft_p99", "scheduler.policy", knobs=KNOBS,
                     classes=["P0"], folded=True)
    fcfs = [t for t in fig.data if t.name == "fcfs"][0]
    assert list(fcfs.x) == [0, 512]
    assert np.allclose(fcfs.y, [2.05, 2.05 - 0.0512])  # seeds 2.0 and 2.1 (minus res/10k)
    assert np.allclose(fcfs.error_y.array, [0.05, 0.05]) and np.allclose(fcfs.error_y.arrayminus, [0.05, 0.05])
    assert fcfs.mode == "lines+markers"


def test_explore_few_numeric_values_become_colour_categories_and_text_x_keeps_spec_order():
    t = table()
    fig = sf.explore(t, "scheduler.policy", "ttft_p99", "mitigations.p0_token_reserve", knobs=KNOBS, folded=True,
                     classes=["P0"])
    assert [tr.name for tr in fig.data] == ["0", "512"]
    assert list(fig.data[0].x) == ["fcfs", "priority"]
    flipped = t.iloc[::-1]  # priority first in the file → first on the axis
    fig = sf.explore(flipped, "scheduler.policy", "ttft_p99", None, knobs=KNOBS, folded=True, classes=["P0"])
    assert list(fig.data[0].x) == ["priority", "priority", "fcfs", "fcfs"]  # two reserves per policy
    assert fig.data[0].mode == "markers"  # no line zigzagging between settings at one x


def test_explore_on_one_panel_tells_classes_apart():
    fig = sf.explore(table(), "seed", "ttft_p99", None, facet=False, knobs=KNOBS)
    assert {t.marker.symbol for t in fig.data} >= {"circle", "diamond"} and not fig.layout.annotations


def test_frontier_marks_feasible_points_the_frontier_and_the_cheapest():
    pts = pd.DataFrame({"replicas.count": [1, 2, 3, 4], "gpus": [1, 2, 3, 4], "top_ttft_p99": [5.0, 0.9, 0.95, 0.3],
                        "served_tok_s": [100.0, 200.0, 190.0, 210.0], "feasible": [False, True, True, True],
                        "seeds": [2] * 4, "runs": [["a"], ["b", "c"], ["d"], ["e"]]})
    pts["frontier"] = pareto(pts).to_numpy()
    assert pts["frontier"].tolist() == [True, True, False, True]
    fig = sf.frontier(pts, ["replicas.count"], top="P0", cheapest_runs=["c"], slo_s=1.0)
    by = {t.name: t for t in fig.data}
    assert list(by["meets every SLO"].x) == [2, 3, 4] and list(by["misses an SLO"].x) == [1]
    assert by["misses an SLO"].marker.symbol == "circle-open"
    assert list(by["frontier"].x) == [1, 2, 4] and list(by["frontier"].y) == [5.0, 0.9, 0.3]
    steps = by["lowest P99 up to these GPUs"]
    assert list(steps.x) == [1, 2, 3, 4] and list(steps.y) == [5.0, 0.9, 0.9, 0.3]
    assert list(by["cheapest plan"].x) == [2] and list(by["cheapest plan"].y) == [0.9]
    assert any("cheapest: 2 GPUs" in a.text for a in fig.layout.annotations)
    assert fig.layout.yaxis.type == "linear"
    assert fig.layout.shapes[0].y0 == 1.0  # the SLO line
    wide = sf.frontier(pts.assign(top_ttft_p99=[300.0, 0.9, 0.95, 0.3]), ["replicas.count"])
    assert wide.layout.yaxis.type == "log" and "cheapest plan" not in {t.name for t in wide.data}
    wide = sf.frontier(pts.assign(top_ttft_p99=[300.0, 0.9, 0.95, 0.3]), ["replicas.count"], cheapest_runs=["b"],
                       slo_s=1.0)
    notes = {a.text.split(":")[0].split(" TTFT")[0]: a.y for a in wide.layout.annotations}
    assert notes["cheapest"] == pytest.approx(np.log10(0.9)) and notes["top class"] == 0.0  # log axes: log10


def test_frontier_from_a_sweep_table():
    pts = points(table(), KNOBS)
    pts["frontier"] = pareto(pts).to_numpy()
    fig = sf.frontier(pts, KNOBS, top="P0", slo_s=1.0)
    assert sum(len(t.x) for t in fig.data if t.name in ("meets every SLO", "misses an SLO")) == 4
    assert sf.settings_label(pts.iloc[0], KNOBS) == "scheduler.policy=fcfs · mitigations.p0_token_reserve=0"


# ---------------------------------------------------------------------------------------------
# Reading outputs


def test_uploads_parquet_csv_and_plan_json():
    t = table()
    buf = io.BytesIO()
    t.to_parquet(buf, index=False)
    got = sd.from_uploads([("runs.parquet", buf.getvalue()), ("plan.json", json.dumps({"cheapest": None}).encode())])
    pd.testing.assert_frame_equal(got.table, t)
    assert got.plan == {"cheapest": None} and got.knobs == KNOBS
    csv = sd.from_uploads([("runs.csv", t.to_csv(index=False).encode())])
    assert csv.table.shape == t.shape and csv.plan is None


@pytest.mark.parametrize("files, needle", [
    ([], "upload one table"),
    ([("a.csv", b"x,y\n1,2\n"), ("b.csv", b"x,y\n1,2\n")], "upload one table"),
    ([("runs.csv", b"x,y\n1,2\n")], "not a sweep table (no column run, class"),
    ([("runs.parquet", b"PAR1 not really")], "runs.parquet: not a readable parquet table"),
    ([("runs.csv", b"\xff\xfe\x00garbage")], "runs.csv: not"),
    ([("runs.csv", table().head(0).to_csv(index=False).encode())], "no runs yet"),
    ([("runs.csv", table().drop(columns="slo_ttft_s").to_csv(index=False).encode())], "no column slo_ttft_s"),
    ([("runs.csv", table().to_csv(index=False).encode()), ("x.json", b"{oops")], "x.json: not a JSON file"),
    ([("runs.csv", table().to_csv(index=False).encode()), ("x.json", b"[1]")], "neither a plan.json"),
])
def test_bad_uploads_say_why(files, needle):
    with pytest.raises(sd.SweepFileError) as err:
        sd.from_uploads(files)
    assert needle in str(err.value)


def test_text_from_a_file_is_inert_and_links_nowhere():
    """Markdown escaped, and no web address, link or e-mail GFM would turn into a live link."""
    for text in ("www.evil.example/a", "https://evil.example", "ceo@evil.example", "[x](http://e)"):
        shown = sd.inert(text)
        assert "www." not in shown and "://" not in shown and "@evil" not in shown and "](" not in shown, shown


def test_paths_outside_the_working_directory_are_refused(tmp_path):
    root = tmp_path / "work"
    (root / "runs").mkdir(parents=True)
    (tmp_path / "secret.csv").write_text(table().to_csv(index=False))
    os.symlink(tmp_path / "secret.csv", root / "runs" / "link.csv")
    outside = ("../secret.csv", str(tmp_path / "secret.csv"), "runs/link.csv", "/etc/passwd", "runs/../../secret.csv")
    for text in outside:
        with pytest.raises(sd.SweepFileError, match="only paths under the working directory"):
            sd.from_path(text, root)
    for text, needle in (("", "enter a path"), ("runs/none", "no such file"), ("runs", "no manifest.json")):
        with pytest.raises(sd.SweepFileError, match=needle):
            sd.from_path(text, root)
    (root / "runs" / "t.csv").write_text(table().to_csv(index=False))
    assert sd.from_path("runs/t.csv", root).table.shape == table().shape
    assert sd.from_path(str(root / "runs" / "t.csv"), root).origin == "runs/t.csv"  # absolute inside is fine


def test_a_sweep_directory_reads_table_manifest_and_plan(tmp_path):
    from tests.sweep_fixtures import tiny_plan_output

    out = tiny_plan_output(tmp_path / "runs" / "p")
    got = sd.from_path("runs/p", tmp_path)
    assert got.plan["cheapest"] and got.manifest["kind"] == "plan"
    assert got.knobs[:2] == ["hardware.num_gpus", "replicas.count"]
    assert got.table["run"].nunique() == got.manifest["done"]
    assert out.exists()


def test_inert_escapes_markdown():
    assert sd.inert("[x](http://e) **b** <i>") == "\\[x\\]\\(http\\:\u2060//e\\) \\*\\*b\\*\\* \\<i\\>"


def test_picker_columns():
    t = table()
    assert sd.numeric_columns(t)[0] == "mitigations.p0_token_reserve" and "ttft_p99" in sd.numeric_columns(t)
    assert "scheduler.policy" not in sd.numeric_columns(t)
    assert sd.axis_columns(t)[:3] == ["scheduler.policy", "mitigations.p0_token_reserve", "seed"]
    assert sd.class_order(t.iloc[::-1]) == ["P0", "P1"]


def test_the_frontier_names_the_plans_cheapest_else_the_best_point_that_meets_the_slos():
    f = sd.frontier(sd.SweepData(table(), None, None, "t"), "P0")
    assert f.points["feasible"].tolist() == [False, False, True, True] and f.slo_s == 1.0
    assert f.cheapest_runs == ["p5121", "p5122"]  # one GPU each: the lower worst-seed P99 of the two within it
    assert sd.cheapest_setting(f)["mitigations.p0_token_reserve"] == 512
    planned = sd.frontier(sd.SweepData(table(), {"cheapest": {"runs": ["f5122"]}}, None, "t"), "P0")
    assert planned.cheapest_runs == ["f5122"]  # plan.json's word, as written
    assert sd.cheapest_setting(planned)[["scheduler.policy", "mitigations.p0_token_reserve"]].tolist() == ["fcfs", 512]
    assert sd.cheapest_setting(sd.Frontier(f.points, ["gone"], None)) is None  # no point holds those runs
    missed = sd.frontier(sd.SweepData(table().assign(ttft_p99=9.0), None, None, "t"), "P0")
    assert missed.cheapest_runs is None and sd.cheapest_setting(missed) is None


def test_the_explorer_opens_on_what_varies():
    t = table()
    xs, ys, varied = sd.axis_columns(t), sd.numeric_columns(t), sd.varied_columns(t, KNOBS)
    assert varied == KNOBS  # one GPU everywhere: not a choice
    assert xs[sd.default_x(xs, varied)] == "scheduler.policy" and ys[sd.default_y(ys)] == "ttft_p99"
    colours, k = sd.colour_columns(xs, "scheduler.policy", varied)
    assert colours[:3] == ["(none)", "class", "mitigations.p0_token_reserve"] and "scheduler.policy" not in colours
    assert colours[k] == "mitigations.p0_token_reserve"  # the other knob that varies
    assert sd.colour_columns(xs, "mitigations.p0_token_reserve", ["gpus", "mitigations.p0_token_reserve"])[1] == 0
    assert sd.default_x(xs, []) == 0 and sd.default_y(["a"]) == 0
