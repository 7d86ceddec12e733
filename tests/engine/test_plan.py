"""Capacity plans: the bisection, the SLO check, frontier and cheapest point, and a whole search
checked against direct simulation."""

from __future__ import annotations

import copy
import json
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine import from_dict, simulate
from engine.sweeps.plan import Search, cheapest, pareto, parse_plan, points, read_plan, rows_ok, run_plan
from engine.sweeps.sweep import SweepError, parse_spec
from engine.sweeps.sweep_store import read_table
from tests.sweep_fixtures import TINY_PLAN_BASE, InlineBackend

# One class with a 1 s TTFT SLO beside a heavier one, on a fixed 20 ms step: one replica is far
# too few (P99 TTFT ~50 s); how many are enough is measured below by direct simulation.
TINY = TINY_PLAN_BASE


@given(low=st.integers(1, 10), width=st.integers(0, 40), need=st.integers(0, 60))
def test_bisection_finds_the_smallest_passing_count_in_few_tests(low, width, need):
    high = low + width
    s = Search(1, {}, low - 1, high + 1, high)
    while todo := s.next():
        for r in todo:
            s.record(r, r >= need)
    want = max(low, need) if need <= high else None
    assert s.answer == want
    assert len(s.tested) <= (1 if width == 0 else 2 + math.ceil(math.log2(width)))  # what max_runs promises


def _rows(**over):
    base = {"run": "r1", "seed": 0, "class": "P0", "priority": 0, "ttft_p99": 0.5, "tpot_p99": 0.05,
            "rejected": 0, "unfinished": 0, "slo_attainment": 1.0, "slo_ttft_s": 1.0, "slo_tpot_s": 0.1,
            "gpus": 1, "served_tok_s": 100.0}
    return {**base, **over}


@pytest.mark.parametrize("row, ok", [
    (_rows(), True),
    (_rows(ttft_p99=1.0), True),  # at the SLO meets it
    (_rows(ttft_p99=1.01), False),
    (_rows(tpot_p99=0.2), False),
    (_rows(tpot_p99=None), True),  # no TPOT (one-token outputs): nothing to miss
    (_rows(unfinished=1), False),  # a request that never finished has no TTFT but misses
    (_rows(rejected=2), False),
    (_rows(ttft_p99=50.0, slo_ttft_s=None, slo_tpot_s=None), True),  # no SLO, not checked
    (_rows(ttft_p99=None, n=0), True),
])
def test_rows_ok_p99(row, ok):
    assert rows_ok(pd.DataFrame([row])).tolist() == [ok]


def test_rows_ok_attainment():
    t = pd.DataFrame([_rows(slo_attainment=0.995, ttft_p99=3.0), _rows(slo_attainment=0.9)])
    assert rows_ok(t, "attainment", 0.99).tolist() == [True, False]


def test_points_fold_seeds_worst_p99_mean_throughput_and_all_seeds_must_pass():
    t = pd.DataFrame([
        _rows(run="a", seed=0, **{"replicas.count": 1}, ttft_p99=0.5, served_tok_s=100, gpus=1),
        _rows(run="a", seed=0, **{"replicas.count": 1}, **{"class": "P1"}, priority=1, ttft_p99=9.0, slo_ttft_s=None,
              served_tok_s=100, gpus=1),
        _rows(run="b", seed=1, **{"replicas.count": 1}, ttft_p99=1.5, served_tok_s=120, gpus=1),
        _rows(run="c", seed=0, **{"replicas.count": 2}, ttft_p99=0.2, served_tok_s=150, gpus=2),
        _rows(run="d", seed=1, **{"replicas.count": 2}, ttft_p99=0.3, served_tok_s=170, gpus=2),
    ])
    p = points(t)
    assert p["replicas.count"].tolist() == [1, 2]
    assert p["top_ttft_p99"].tolist() == [1.5, 0.3]  # P0's worst seed; P1's 9 s is not the top class
    assert p["served_tok_s"].tolist() == [110.0, 160.0]  # one value per run, not per class row
    assert p["feasible"].tolist() == [False, True]
    assert p["runs"].tolist() == [["a", "b"], ["c", "d"]] and p["seeds"].tolist() == [2, 2]
    assert cheapest(p)["replicas.count"] == 2


def test_pareto_and_cheapest_by_hand():
    p = pd.DataFrame({"gpus": [1, 2, 2, 4, 4], "top_ttft_p99": [5.0, 1.0, 2.0, 0.5, 0.5],
                      "served_tok_s": [100, 200, 150, 200, 190], "feasible": [False, True, True, True, True]})
    # (2, 2.0 s, 150) is beaten by (2, 1.0 s, 200); (4, 0.5, 190) by (4, 0.5, 200)
    assert pareto(p).tolist() == [True, True, False, True, False]
    assert cheapest(p).name == 1
    assert cheapest(p.assign(feasible=False)) is None
    tie = pd.DataFrame({"gpus": [2, 2], "top_ttft_p99": [0.4, 0.3], "served_tok_s": [1, 1],
                        "feasible": [True, True]})
    assert cheapest(tie).name == 1  # same GPUs: the lower P99 wins


def _tiny_spec(plan, grid=None, tmp=None):
    import yaml

    from engine.sweeps.sweep import load_spec

    path = tmp / "tiny.yaml"
    path.write_text(yaml.safe_dump(TINY))
    spec = tmp / "plan.yaml"
    spec.write_text(yaml.safe_dump({"base": "tiny.yaml", "seeds": [0, 1],
                                    "grid": grid or {"scheduler.policy": ["fcfs", "priority"]}, "plan": plan}))
    return load_spec(spec)


def _meets(replicas: int, policy: str) -> bool:
    """Direct simulation, independent of the planner: does `hi` meet its SLO in both seeds?"""
    for seed in (0, 1):
        data = copy.deepcopy(TINY)
        data.update(seed=seed, replicas={"count": replicas})
        data["scheduler"]["policy"] = policy
        c = simulate(from_dict(data)).summary["classes"]["hi"]
        if c["ttft_p99"] > 1.0 or c["unfinished"] or c["rejected"]:
            return False
    return True


def test_plan_finds_the_fewest_replicas_that_meet_the_slo(tmp_path):
    spec = _tiny_spec({"replicas": [1, 8]}, tmp=tmp_path)
    o = run_plan(spec, tmp_path / "out", InlineBackend(), progress=False)
    assert o.status == "complete"
    answers = {s.knobs["scheduler.policy"]: s.answer for s in o.searches}
    assert answers["fcfs"] is not None and answers["fcfs"] > 1
    for policy, r in answers.items():
        assert _meets(r, policy), (policy, r)
        assert r == 1 or not _meets(r - 1, policy), (policy, r - 1)
    best = min(answers.values())
    assert o.cheapest["gpus"] == best and o.cheapest["replicas.count"] == best
    assert o.cheapest["scheduler.policy"] in [p for p, r in answers.items() if r == best]
    # the runs behind it are in the table, with the plan's knobs as columns
    table = read_table(tmp_path / "out")
    assert set(o.cheapest["runs"]) <= set(table["run"])
    assert {"hardware.num_gpus", "replicas.count", "scheduler.policy"} <= set(table.columns)
    plan = read_plan(tmp_path / "out")
    assert plan["cheapest"]["runs"] == o.cheapest["runs"] and plan["top_class"] == "hi"
    assert plan["frontier"] and all(p["frontier"] for p in plan["frontier"])
    # a rerun replays the search from the stored runs: nothing runs again
    again = InlineBackend()
    o2 = run_plan(spec, tmp_path / "out", again, progress=False)
    assert again.keys == [] and o2.reused == o2.runs and o2.cheapest == o.cheapest


def test_tensor_parallel_sizes_multiply_gpus(tmp_path):
    spec = _tiny_spec({"replicas": [1, 8], "tensor_parallel": [1, 2]}, grid={"scheduler.policy": ["priority"]},
                      tmp=tmp_path)
    o = run_plan(spec, tmp_path / "out", InlineBackend(), progress=False)
    for s in o.searches:
        row = o.points[(o.points["hardware.num_gpus"] == s.tp) & (o.points["replicas.count"] == s.answer)]
        assert row["gpus"].tolist() == [s.tp * s.answer]


@pytest.mark.parametrize("plan, grid, needle", [
    ({"replicas": [0, 4]}, None, "plan.replicas = [0, 4]"),
    ({"replicas": [4, 2]}, None, "plan.replicas"),
    ({"tensor_parallel": ["two"]}, None, "plan.tensor_parallel"),
    ({"tensor_parallel": [16]}, None, "hardware.num_gpus"),
    ({"criterion": "p50"}, None, "plan.criterion = 'p50'"),
    ({"targets": 0.9}, None, "plan.targets: unknown key"),
    ({}, {"replicas.count": [1, 2]}, "replicas.count: the plan searches it"),
])
def test_bad_plan_spec_names_the_key(tmp_path, plan, grid, needle):
    with pytest.raises(SweepError) as err:
        parse_plan(_tiny_spec(plan, grid=grid, tmp=tmp_path))
    assert needle in str(err.value)


def test_plan_needs_an_slo_and_shared_routing(tmp_path):
    no_slo = json.loads(json.dumps(TINY))
    del no_slo["classes"]["hi"]["slo"]
    spec = parse_spec({"base": "default", "plan": {}})
    parse_plan(spec)  # the default scenario has SLOs
    import yaml

    (tmp_path / "noslo.yaml").write_text(yaml.safe_dump(no_slo))
    with pytest.raises(SweepError, match="no class of the base scenario has an SLO"):
        parse_plan(parse_spec({"base": str(tmp_path / "noslo.yaml"), "plan": {}}))
    with pytest.raises(SweepError, match="replicas.routing = 'pinned'"):
        parse_plan(parse_spec({"base": "separate-replicas", "plan": {}}))


def _pareto_by_definition(p: pd.DataFrame) -> list[bool]:
    g, lat = p["gpus"].to_numpy(float), np.nan_to_num(p["top_ttft_p99"].to_numpy(float), nan=np.inf)
    thr = np.nan_to_num(p["served_tok_s"].to_numpy(float), nan=-np.inf)
    out = []
    for j in range(len(p)):
        ge = (g <= g[j]) & (lat <= lat[j]) & (thr >= thr[j])
        gt = (g < g[j]) | (lat < lat[j]) | (thr > thr[j])
        out.append(not (ge & gt).any())
    return out


@given(st.lists(st.tuples(st.integers(1, 4), st.one_of(st.none(), st.sampled_from([0.1, 0.5, 1.0, 2.0])),
                          st.sampled_from([100.0, 150.0, 200.0])), max_size=30))
def test_pareto_equals_its_definition(items):
    p = pd.DataFrame(items, columns=["gpus", "top_ttft_p99", "served_tok_s"], dtype=float)
    assert pareto(p).tolist() == _pareto_by_definition(p)
