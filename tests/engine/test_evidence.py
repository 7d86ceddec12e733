"""Figures over seeds (`engine.sweeps.evidence`): hand-worked estimates on tiny arrays, the property that
bounds a pooled percentile, comparisons seed by seed, and the record a worker sends back."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import load, simulate
from engine.sweeps import evidence as ev

REPO = Path(__file__).resolve().parents[2]
SMALL = {"duration_s": 30}  # default traffic, a third as long: ~100 requests a run


def fake(seed: int, ttft, within: int | None = None, n: int | None = None) -> ev.RunSamples:
    """A run whose class A has these TTFTs (and `within` of `n` requests within its SLO)."""
    ttft = np.asarray(ttft, dtype=float)
    n = len(ttft) if n is None else n
    counts = {"n": n, "completed": n, "rejected": 0, "shed": 0, "unfinished": 0,
              "within_slo": n if within is None else within}
    values = {"ttft_s": ttft, "tpot_s": np.empty(0), "e2e_s": ttft, "queue_wait_s": ttft, "blocked_s": ttft}
    return ev.RunSamples("fake", seed, {"classes": {"A": {}}}, {"A": ev.ClassSamples(0, values, counts, True)})


def test_pooled_percentile_and_the_seeds_range_by_hand():
    """Seed 1: 1, 2, 3, 4 (P50 = 2.5); seed 2: 10, 20 (P50 = 15). Pooled 1, 2, 3, 4, 10, 20: the
    P50 sits at rank (6 − 1) × 0.5 = 2.5, between 3 and 4: 3.5 — not the mean of the seeds' P50s
    (8.75) nor their median."""
    e = ev.percentile([fake(1, [4, 2, 3, 1]), fake(2, [20, 10])], "A", "ttft_s", 50)
    assert e.value == pytest.approx(3.5)
    assert (e.lo, e.hi) == (2.5, 15.0) and e.per_seed == (2.5, 15.0)
    assert (e.n, e.n_min) == (6, 2) and e.few


def test_a_pooled_percentile_can_leave_the_seeds_range():
    """Two seeds of [0, 100]: each seed's P99 is at rank 0.99 → 99; pooled [0, 0, 100, 100] puts it
    at rank 2.97, between the two 100s → 100. Both are right; the docstring says so."""
    e = ev.percentile([fake(1, [0, 100]), fake(2, [0, 100])], "A", "ttft_s", 99)
    assert e.per_seed == (99.0, 99.0) and e.value == 100.0


def test_fewer_than_100_requests_in_a_seed_is_flagged():
    many, few = np.arange(ev.FEW, dtype=float), np.arange(ev.FEW - 1, dtype=float)
    assert not ev.percentile([fake(1, many), fake(2, many)], "A", "ttft_s", 99).few
    e = ev.percentile([fake(1, many), fake(2, few)], "A", "ttft_s", 99)
    assert e.few and (e.n, e.n_min) == (2 * ev.FEW - 1, ev.FEW - 1)  # 199 pooled, yet one seed's P99 rests on 99
    assert e.to_dict()["few"] is True and e.to_dict()["n_min"] == ev.FEW - 1
    # a P99 of 40 requests is their maximum, to within 0.4 of the gap to the second largest
    forty = ev.percentile([fake(1, np.arange(40.0))], "A", "ttft_s", 99)
    assert forty.few and forty.value == pytest.approx(39 - 0.39)


def test_attainment_is_pooled_over_requests_not_averaged_over_seeds():
    """3 of 4 within SLO, then 1 of 2: pooled 4/6 = 0.667, the seeds' mean would say 0.625."""
    e = ev.attainment([fake(1, [1, 1, 1, 1], within=3), fake(2, [1, 1], within=1)], "A")
    assert e.value == pytest.approx(4 / 6) and e.per_seed == (0.75, 0.5) and (e.lo, e.hi) == (0.5, 0.75)
    assert e.method == "ratio" and not e.few and "n" not in e.to_dict()


def test_run_level_figures_are_the_mean_with_the_range():
    e = ev.mean_of([0.9, None, 0.6])
    assert e.value == pytest.approx(0.75) and (e.lo, e.hi) == (0.6, 0.9) and e.per_seed == (0.9, None, 0.6)
    assert not e.few


def test_holds_on_counts_seed_against_seed():
    a, b = [1.0, 2.0, 3.0, None, 5.0], [2.0, 2.0, 1.0, 1.0, 9.0]
    h = ev.holds_on(a, b, "lower")
    assert (h.k, h.n) == (2, 5) and str(h) == "holds on 2 of 5 seeds"  # seeds 1 and 5; a tie and a gap do not hold
    assert ev.holds_on(a, b, "higher").k == 1
    assert ev.holds_on(a, b, lambda x, y: x <= 0.5 * y).k == 1  # seed 1 only (1 ≤ 1; 5 > 4.5)
    with pytest.raises(ValueError):
        ev.holds_on([1.0], [1.0, 2.0])
    with pytest.raises(ValueError):
        ev.holds_on([1.0], [2.0], "smaller")


arrays = st.lists(st.lists(st.floats(0, 1e3, allow_nan=False), min_size=1, max_size=30), min_size=1, max_size=6)


@settings(max_examples=300, deadline=None)
@given(xs=arrays, q=st.floats(0, 100))
def test_pooled_percentile_is_bracketed_by_neighbouring_order_statistics(xs, q):
    """What holds for a pooled linear percentile (numpy's default): every seed's value lies in
    [lo, hi] by definition, and the pooled one lies between the smallest seed's *lower* order
    statistic at q and the largest seed's *higher* one. Proof: with U the largest seed's higher
    order statistic, seed i has at least ⌈(nᵢ−1)q⌉ + 1 ≥ (nᵢ−1)q + 1 values ≤ U, so the pool has at
    least (N−m)q + m ≥ (N−1)q + 1 of them (q ≤ 1), i.e. ⌈(N−1)q⌉ + 1: the pooled higher order
    statistic, and so the interpolated value, is ≤ U. The lower side is the mirror image. (The
    pooled value can leave [lo, hi] itself: test_a_pooled_percentile_can_leave_the_seeds_range.)"""
    runs = [fake(i, x) for i, x in enumerate(xs)]
    e = ev.percentile(runs, "A", "ttft_s", q)
    assert all(e.lo <= v <= e.hi for v in e.per_seed)
    lower = min(np.percentile(x, q, method="lower") for x in xs)
    higher = max(np.percentile(x, q, method="higher") for x in xs)
    assert lower - 1e-9 <= e.value <= higher + 1e-9
    assert e.n == sum(map(len, xs)) and e.n_min == min(map(len, xs))
    if len(xs) == 1:
        assert e.value == e.lo == e.hi == np.percentile(xs[0], q)


def test_one_seed_reproduces_the_runs_summary_exactly():
    """Same measured requests, split pieces folded, same percentiles and attainment as the summary;
    a P2 prompt cap that splits documents must not count their pieces as requests."""
    sc = load("classic-inversion", {"classes.P2.caps.max_prompt_tokens": 8192, "classes.P2.caps.over_cap": "split",
                                    "duration_s": 60})
    res = simulate(sc)
    assert (res.requests["parent"] >= 0).any()  # the split happened
    rep = ev.report([ev.RunSamples.of(res)])
    for name, c in res.summary["classes"].items():
        got = rep["classes"][name]
        for k in ("ttft_p50", "ttft_p90", "ttft_p99", "tpot_p99", "e2e_p99", "queue_wait_p99", "blocked_p99"):
            assert got[k]["value"] == c[k] == got[k]["lo"] == got[k]["hi"], (name, k)
        for k in ("n", "completed", "rejected", "shed", "unfinished"):
            assert got[k]["total"] == c[k], (name, k)
        assert (got["slo_attainment"] or {}).get("value") == c["slo_attainment"]
        assert got["inversion_s"]["value"] == c["inversion_s"]


def test_the_record_is_small_and_travels_by_pickle():
    res = simulate(load("default"))
    blob = pickle.dumps(ev.RunSamples.of(res))
    assert len(blob) < 60_000  # 311 requests: ~14 kB of values and a 4 kB summary; the Result is MBs
    back = pickle.loads(blob)
    assert back.summary == res.summary
    again = ev.RunSamples.of(res).classes["P0"].values["ttft_s"]
    np.testing.assert_array_equal(back.classes["P0"].values["ttft_s"], again)


def test_default_seeds_are_the_scenarios_and_the_next_ones():
    assert ev.default_seeds(7, 5) == [7, 8, 9, 10, 11]
    assert ev.default_seeds(3, 1) == [3]


_CHILD = """
import json, sys
from engine import load
from engine.sweeps.evidence import over_seeds, report
runs = over_seeds(load("default", {"duration_s": 30}), [4, 5])
print(json.dumps(report(runs)))
"""


def test_same_seeds_same_figures_in_another_process():
    here = ev.report(ev.over_seeds(load("default", SMALL), [4, 5]))
    proc = subprocess.run([sys.executable, "-c", _CHILD], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    there = json.loads(proc.stdout)
    assert there == json.loads(json.dumps(here))
    assert there["seeds"] == [4, 5] and there["classes"]["P0"]["ttft_p99"]["per_seed"][0] is not None


def test_estimate_of_nothing_is_none():
    e = ev.percentile([fake(1, []), fake(2, [])], "A", "ttft_s", 99)
    assert e == ev.Estimate(None, None, None, (None, None), 0, 0, "pooled") and e.few
