"""The engine's shortcuts must not change anything.

- The running set's plans (O(1) decode steps, vectorised prefill chunks), the long-queue
  pre-filter and multi-step skipping against vLLM's plain loops one step at a time: same
  workloads, identical frames (`simulate(..., shortcuts=False, skip_steps=False)`).
- `RunningSet`'s bookkeeping (the pending decode shift, the per-residue block counts, the finish
  heap, the running totals) against a plain model of the rows, over random sequences of operations.
"""

from __future__ import annotations

import pandas.testing as pdt
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_properties import scenarios

from engine import from_dict, load, simulate
from engine.config.scenario import apply_overrides, load_raw
from engine.core.running import RunningSet
from tests.support.rules import keeping

FRAMES = ("requests", "steps", "waits", "holders", "admissions", "episodes", "alerts")
MODES = ({}, {"skip_steps": False}, {"skip_steps": False, "shortcuts": False})


def three_ways(sc) -> list:
    """The run as shipped, without multi-step skipping, and with the plain loops only."""
    return [simulate(sc, **mode) for mode in MODES]


def assert_same(runs) -> None:
    for other in runs[1:]:
        for name in FRAMES:
            pdt.assert_frame_equal(getattr(runs[0], name), getattr(other, name), check_exact=True)
        a, b = dict(runs[0].summary), dict(other.summary)
        a.pop("wall_time_s"), b.pop("wall_time_s")
        assert a == b


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(data=scenarios())
def test_shortcuts_change_nothing_on_random_workloads(data):
    assert_same(three_ways(from_dict(data)))


@pytest.mark.parametrize("overrides", [
    {},
    {"scheduler.policy": "fcfs", "classes.P1.arrival.rate": 40},
    {"scheduler.policy": "backfill", "mitigations.p0_token_reserve": 512, "mitigations.p0_kv_reserve": 200},
    {"scheduler.policy": "preempt", "mitigations.preempt_mode": "swap", "mitigations.alert_after_s": 0.5},
    {"mitigations.inheritance": True, "mitigations.aging_s": 2.0, "scheduler.long_prefill_token_threshold": 64},
    {"replicas.count": 2, "mitigations.alert_after_s": 0.2, "kv.num_blocks": 900},
])
def test_shortcuts_change_nothing_on_the_default_scenario(overrides):
    sc = from_dict(apply_overrides(load_raw("default"), overrides))
    assert_same(three_ways(sc))


def test_the_shortcuts_are_really_taken():
    """Guard against a vacuous comparison: with small prefill chunks (threshold 64) the default
    scenario has many uniform decode plans, many per-request plans and few steps that need the
    sequential loop; without it, most steps are skipped over in runs."""
    seen = []
    res = simulate(load("default", {"scheduler.long_prefill_token_threshold": 64}), around=keeping(seen))
    paths = seen[0].paths
    uniform, general, loop = paths.uniform_plans, paths.other_plans, paths.running_loops
    steps, rows = len(res.steps), len(res.step_runs)
    assert uniform > 50 and general > 0.5 * rows
    assert loop < 0.1 * general
    assert steps > rows
    plain = simulate(load("default"))
    assert len(plain.steps) > 2.5 * len(plain.step_runs)  # most decode steps are skipped over in runs


# ---------------------------------------------------------------------------------------------
# RunningSet against a model

BS = 4
ops = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.integers(0, 30), st.sampled_from([1, 1, 1, 1, 1, 2, 5, 20]), st.integers(1, 12),
                  st.integers(0, 2)),
        st.tuples(st.just("decode"), st.integers(1, 3)),
        st.tuples(st.just("decode"), st.integers(1, 3)),
        st.tuples(st.just("decode"), st.integers(1, 3)),
        st.tuples(st.just("put"), st.integers(0, 50), st.integers(0, 3), st.integers(1, 3)),
        st.tuples(st.just("remove"), st.integers(0, 50)),
        st.tuples(st.just("reindex")),
        st.tuples(st.just("settle")),
    ),
    max_size=60,
)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(ops=ops)
def test_running_set_bookkeeping_matches_the_rows(ops):
    run = RunningSet(n_classes=3, block_size=BS)
    model: list[dict] = []  # true values, running order
    next_id = 0

    def finish_due():
        """What the scheduler does after a step: take out whoever has nothing left to sample."""
        expect = [p for p, r in enumerate(model) if r["end"] - r["seq"] <= 0]
        assert run.finished() == expect
        for p in reversed(expect):
            assert run.remove_at(p)[:1] == (model[p]["id"],)
            model.pop(p)

    for op in ops:
        kind = op[0]
        if kind == "add":
            _, comp, extra, out, c = op
            seq = comp + extra
            prompt = seq - 1 if extra == 1 and seq > 1 else seq  # one token to compute: decoding
            run.add(next_id, c, comp, seq, prompt=prompt, end=seq + out, top=c == 0)
            model.append({"id": next_id, "c": c, "comp": comp, "seq": seq, "end": seq + out, "prompt": prompt})
            next_id += 1
        elif kind == "decode" and model:
            if run.n_dec != len(model):  # decode steps happen when every running request decodes
                continue
            k = min(op[1], min(r["end"] - r["seq"] for r in model))  # never past someone's finish
            if k < 1:
                continue
            table, at, bs = run.growth_table()
            grow = [table[(at - j) % bs] for j in range(k)]
            expect = [[sum((r["comp"] + j) % BS == 0 for r in model if r["c"] == c) for c in range(3)]
                      for j in range(k)]
            assert grow == expect
            assert run.steps_to_finish() == min(r["end"] - r["seq"] for r in model)
            run.skip(k)
            for r in model:
                r["comp"] += k
                r["seq"] += k
            finish_due()
        elif kind == "put" and model:
            _, p, dcomp, dseq = op
            p %= len(model)
            r = model[p]
            r["comp"] = min(r["comp"] + dcomp, r["seq"] - 1)
            r["seq"] = min(r["seq"] + dseq, r["end"])
            run._put(p, r["comp"], r["seq"])
            finish_due()
        elif kind == "remove" and model:
            p = op[1] % len(model)
            i, c, comp, seq = run.remove_at(p)
            r = model.pop(p)
            assert (i, c, comp, seq) == (r["id"], r["c"], r["comp"], r["seq"])
        elif kind == "reindex":
            run._reindex()
        elif kind == "settle":
            run.settle()
        # the invariants, after every operation
        assert run.ids == [r["id"] for r in model]
        assert [run.comp_seq(p) for p in range(len(model))] == [(r["comp"], r["seq"]) for r in model]
        cross = [0, 0, 0]
        for r in model:
            cross[r["c"]] += r["comp"] % BS == 0
        assert run.crossings() == cross
        assert run.ctx == sum(r["comp"] for r in model)
        assert run.n_top == sum(r["c"] == 0 for r in model)
        assert run.n_dec == sum(r["seq"] - r["comp"] == 1 and r["seq"] > r["prompt"] for r in model)
    run.settle()
    assert run.comp == [r["comp"] for r in model]
    assert run.seq == [r["seq"] for r in model]
    assert run.end == [r["end"] for r in model]
    assert run.shift == 0


@pytest.mark.parametrize("asyn", [True, False])
def test_the_benchmarks_naive_loop_reproduces_the_engine(asyn):
    """`engine.bench.naive_loop` (the yardstick the benchmark times) steps through the same fcfs
    rules one object at a time: same finish times on a tight-KV workload with preemptions (with
    no prefix cache: the naive loop recomputes a preempted request in full)."""
    import numpy as np

    from engine.bench import naive_loop
    from engine.config.workload import build

    sc = from_dict({"seed": 3, "duration_s": 20.0, "kv": {"num_blocks": 41, "block_size": 4, "prefix_caching": False},
                    "cost": {"model": "fixed", "step_time_s": 0.1},
                    "scheduler": {"max_num_batched_tokens": 64, "max_num_seqs": 6, "async_scheduling": asyn},
                    "classes": {"A": {"arrival": {"rate": 3}, "prompt": {"dist": "uniform", "low": 1, "high": 60},
                                      "output": {"dist": "uniform", "low": 1, "high": 40}}}})
    wl, res = build(sc), simulate(sc)
    steps, fin = naive_loop(wl.arrival_s.tolist(), wl.prompt.tolist(), wl.output.tolist(), 40, 4, 64, 6, 0.1, asyn)
    assert res.summary["preemptions"] > 0
    assert steps == res.summary["steps"]
    np.testing.assert_array_equal(np.array(fin), res.requests["finish_s"].to_numpy())
