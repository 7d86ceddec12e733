"""The engine's shortcuts must not change anything.

- The O(1) decode step (`scheduler.DECODE_STEP`) and the vectorised general step
  (`scheduler.VECTOR_STEP`) against vLLM's plain sequential loop over the running requests:
  same workloads, identical frames.
- `RunningSet`'s bookkeeping (the pending decode shift, the per-residue block counts, the finish
  heap) against a plain model of the rows, over random sequences of operations.
"""

from __future__ import annotations

import pandas.testing as pdt
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import engine.scheduler as scheduler
from engine import from_dict, load, simulate
from engine.running import COMP, END, SEQ, RunningSet
from engine.scenario import apply_overrides, load_raw

from test_properties import scenarios

FRAMES = ("requests", "steps", "waits", "episodes", "alerts")


def three_ways(sc, monkeypatch) -> list:
    """The run with every shortcut, without the decode step, and with the sequential loop only."""
    out = []
    for decode, vector in ((True, True), (False, True), (False, False)):
        monkeypatch.setattr(scheduler, "DECODE_STEP", decode)
        monkeypatch.setattr(scheduler, "VECTOR_STEP", vector)
        out.append(simulate(sc))
    return out


def assert_same(runs) -> None:
    for other in runs[1:]:
        for name in FRAMES:
            pdt.assert_frame_equal(getattr(runs[0], name), getattr(other, name), check_exact=True)


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=scenarios())
def test_shortcuts_change_nothing_on_random_workloads(monkeypatch, data):
    assert_same(three_ways(from_dict(data), monkeypatch))


@pytest.mark.parametrize("overrides", [
    {},
    {"scheduler.policy": "fcfs", "classes.P1.arrival.rate": 40},
    {"scheduler.policy": "backfill", "mitigations.p0_token_reserve": 512, "mitigations.p0_kv_reserve": 200},
    {"scheduler.policy": "preempt", "mitigations.preempt_mode": "swap", "mitigations.alert_after_s": 0.5},
    {"mitigations.inheritance": True, "mitigations.aging_s": 2.0, "scheduler.long_prefill_token_threshold": 64},
])
def test_shortcuts_change_nothing_on_the_default_scenario(monkeypatch, overrides):
    sc = from_dict(apply_overrides(load_raw("default"), overrides))
    assert_same(three_ways(sc, monkeypatch))


def test_the_shortcuts_are_really_taken(monkeypatch):
    """Guard against a vacuous comparison: with small prefill chunks (threshold 64) the default
    scenario has many decode steps and many general steps, and few need the sequential loop."""
    decode, loop = [], []
    real_decode, real_loop = RunningSet.decode, scheduler.Scheduler._schedule_running_exact
    monkeypatch.setattr(RunningSet, "decode", lambda self: (decode.append(1), real_decode(self))[1])
    monkeypatch.setattr(scheduler.Scheduler, "_schedule_running_exact",
                        lambda self, now: (loop.append(1), real_loop(self, now))[1])
    steps = len(simulate(load("default", {"scheduler.long_prefill_token_threshold": 64})).steps)
    general = steps - len(decode)
    assert len(decode) > 0.3 * steps and general > 0.3 * steps
    assert len(loop) < 0.1 * general


# ---------------------------------------------------------------------------------------------
# RunningSet against a model

BS = 4
ops = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.integers(0, 30), st.integers(1, 20), st.integers(1, 12), st.integers(0, 2)),
        st.tuples(st.just("decode")),
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
    run = RunningSet(n_classes=3, block_size=BS, capacity=2)  # small: growth is exercised too
    model: list[dict] = []  # true values, running order
    next_id = 0

    def finish_due():
        """What the scheduler does after a step: take out whoever has nothing left to sample."""
        expect = [p for p, r in enumerate(model) if r["end"] - r["seq"] <= 0]
        assert run.finished() == expect
        for p in reversed(expect):
            run.remove_at(p)
            model.pop(p)

    for op in ops:
        kind = op[0]
        if kind == "add":
            _, comp, extra, out, c = op
            seq = comp + extra
            run.add(next_id, c, comp, seq, prompt=seq, end=seq + out, top=c == 0)
            model.append({"id": next_id, "c": c, "comp": comp, "seq": seq, "end": seq + out})
            next_id += 1
        elif kind == "decode" and model:
            run.decode()
            for r in model:
                r["comp"] += 1
                r["seq"] += 1
            finish_due()
        elif kind == "put" and model:
            _, p, dcomp, dseq = op
            p %= len(model)
            r = model[p]
            r["comp"] = min(r["comp"] + dcomp, r["seq"])
            r["seq"] = min(r["seq"] + dseq, r["end"])
            run.put(p, r["comp"], r["seq"])
            finish_due()
        elif kind == "remove" and model:
            p = op[1] % len(model)
            run.remove_at(p)
            model.pop(p)
        elif kind == "reindex":
            run.reindex()
        elif kind == "settle":
            run.settled()
        # the invariants, after every operation
        assert run.ids == [r["id"] for r in model]
        assert [run.comp_seq(p) for p in range(len(model))] == [(r["comp"], r["seq"]) for r in model]
        cross = [0, 0, 0]
        for r in model:
            cross[r["c"]] += r["comp"] % BS == 0
        assert run.crossings() == cross
    F = run.settled()
    n = len(model)
    assert F[COMP, :n].tolist() == [r["comp"] for r in model]
    assert F[SEQ, :n].tolist() == [r["seq"] for r in model]
    assert F[END, :n].tolist() == [r["end"] for r in model]
    assert run.shift == 0
