"""Capacity (`engine.sweeps.capacity`): worked out on paper on a one-seat engine, the bisection's
bracketing, the replica check, reuse of an output directory, and the command line."""

from __future__ import annotations

import copy
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import from_dict
from engine.sweeps import capacity as cap
from tests.sweep_fixtures import ONE_SEAT, InlineBackend

REPO = Path(__file__).resolve().parents[2]


def one_seat(rate: float = 10) -> dict:
    """The one-seat scenario (tests/sweep_fixtures.ONE_SEAT, worked out there) at `rate` requests/s."""
    data = copy.deepcopy(ONE_SEAT)
    data["classes"]["A"]["arrival"]["rate"] = rate
    return data


def find(data: dict, seeds=(0, 1), **kw) -> dict:
    o = cap.search([cap.config("a", from_dict(data))], seeds, InlineBackend(), **kw)
    return cap.report(o)["configurations"][0]


def test_one_seat_capacity_is_where_the_seat_fills():
    f = find(one_seat())
    lo, hi = f["bracket"]
    assert lo <= 2.0 < hi <= 2.0 * (1 + cap.TOLERANCE) + 1e-9  # the paper's 2, bracketed within 2 %
    assert f["capacity"] == lo and f["tested"]["1"] and f["tested"]["2"]  # s = 2 exactly still passes
    assert f["fails_at_bracket_top"].startswith("A: P99 TTFT")
    assert f["gpus_for_offered_load"] == 1 and f["replicas_tested"] == {}  # capacity ≥ 1: one engine
    # flat out, the seat turns out one token a step, prefill or decode: 100 output tok/s and
    # 100 processed (1 prompt token + 4 decode tokens per 5 steps), exactly, in every seed
    s = f["saturated"]
    assert s["saturated"] and s["scale"] == 4.0  # at 2× (ρ = 1) the queue still empties at times
    assert s["output_tok_s"]["per_seed"] == [100.0, 100.0] and s["processed_tok_s"]["value"] == 100.0
    assert all(399 <= n <= 400 for n in f["top_class_requests_per_seed"])  # 20 s × 20/s at s = 2


def test_gpus_for_the_offered_load_start_from_the_capacity():
    """Three times the traffic (30/s, ρ = 1.5): capacity 1/1.5 = 0.667 (bracketed within 2 %), so
    ceil(1 / 0.667) = 2 replicas are tried first; the least-loaded router alternates the periodic
    arrivals, each seat sees 15/s (ρ = 0.75): two pass, one did not (the capacity's s = 1)."""
    f = find(one_seat(30))
    lo, hi = f["bracket"]
    assert lo <= 2 / 3 < hi and hi / lo <= 1 + cap.TOLERANCE + 1e-9
    assert f["replicas_tested"] == {"2": True} and f["gpus_for_offered_load"] == 2


def test_a_rerun_reuses_every_run(tmp_path):
    first = cap.search([cap.config("a", from_dict(one_seat()))], [0, 1], InlineBackend(), out=tmp_path / "o")
    again_backend = InlineBackend()
    again = cap.search([cap.config("a", from_dict(one_seat()))], [0, 1], again_backend, out=tmp_path / "o")
    assert again_backend.keys == [] and again.reused == again.runs == first.runs
    assert cap.report(again)["configurations"][0]["tested"] == cap.report(first)["configurations"][0]["tested"]


@settings(max_examples=300, deadline=None)
@given(t=st.floats(0.01, 200.0))
def test_bisection_brackets_a_monotone_threshold(t):
    s = cap.ScaleSearch()
    while todo := s.next():
        for x in todo:
            s.record(x, x <= t)
    if t < cap.S_MIN:
        assert s.capacity is None and min(s.tested) >= cap.S_MIN and len(s.tested) == 4  # 1, ½, ¼, ⅛
    elif t >= cap.S_MAX:
        assert s.capacity == cap.S_MAX and s.hi is None and len(s.tested) == 7  # 1, 2, … 64
    else:
        assert s.lo <= t < s.hi and s.hi / s.lo <= 1 + cap.TOLERANCE + 1e-3  # (loads have 4 digits)
        assert len(s.tested) <= 1 + 6 + math.ceil(math.log2(math.log(2) / math.log(1 + cap.TOLERANCE))) + 1


@settings(max_examples=200, deadline=None)
@given(answers=st.lists(st.booleans(), min_size=20, max_size=20))
def test_bisection_ends_with_a_pass_below_a_fail_whatever_the_noise(answers):
    """A predicate that is not monotone (seed noise) still ends: the capacity passed, the bracket's
    top failed, and nothing outside the range was tried."""
    s, k = cap.ScaleSearch(), 0
    while todo := s.next():
        for x in todo:
            s.record(x, answers[k % len(answers)])
            k += 1
        assert k < 60
    assert all(cap.S_MIN <= x <= cap.S_MAX for x in s.tested)
    if s.capacity is not None:
        assert s.tested[s.capacity] and (s.hi is None or (not s.tested[s.hi] and s.capacity < s.hi))


@given(need=st.integers(2, 80), start=st.integers(2, 80))
def test_replica_search_walks_to_the_boundary(need, start):
    r = cap.ReplicaSearch(1, start)
    while todo := r.next():
        for x in todo:
            r.tested[x] = x >= need
    assert r.answer == (need if need <= cap.MAX_REPLICAS else None)
    assert len(r.tested) <= 2 * math.ceil(math.log2(cap.MAX_REPLICAS)) + 1  # a guess, doubling, bisection


def test_judge_names_what_failed():
    row = {"class": "P1", "seed": 3, "n": 10, "rejected": 0, "unfinished": 0, "ttft_p99": 2.5, "tpot_p99": None,
           "slo_ttft_s": 2.0, "slo_tpot_s": None, "slo_attainment": 0.9}
    assert cap.judge([row]) == (False, "P1: P99 TTFT 2.5 s > 2 s (seed 3)")
    assert cap.judge([{**row, "ttft_p99": 1.0, "rejected": 2}]) == (False, "P1: 2 rejected (seed 3)")
    assert cap.judge([{**row, "ttft_p99": 1.0}]) == (True, "")
    assert cap.judge([{"class": "", "seed": 4, "run_error": "over the limit"}]) == (False, "seed 4: over the limit")


def test_remedies_follow_the_stated_rule():
    from engine import load

    rows = {label: (over, against) for label, over, against in cap.remedies(load("classic-inversion"))}
    assert rows["priority + token reserve 2048 strict"] == ({"scheduler.policy": "priority",
                                                             "mitigations.p0_token_reserve": 2048,
                                                             "mitigations.reserve_mode": "strict"}, "priority")
    assert rows["priority + KV reserve 414 blocks"][0]["mitigations.p0_kv_reserve"] == 2073 // 5
    assert rows["P2 at most 1 running"] == ({"classes.P2.caps.max_running": 1}, "as shipped (fcfs)")
    bb = {label: against for label, _o, against in cap.remedies(load("budget-bound"))}
    assert bb["fcfs (vLLM's default)"] == "as shipped (priority)"
    assert bb["priority + aging 10 s"] == "as shipped (priority)"  # already priority: compared with itself


# ---------------------------------------------------------------------------------------------
# The command line


def cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "engine", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout)


def test_capacity_command_matches_the_search_in_process(tmp_path):
    """Another process, a real process pool, the same answer (determinism across processes); the
    baseline row is there because the scenario has a remedy (priority)."""
    data = one_seat()
    data["scheduler"]["policy"] = "priority"
    data["duration_s"] = 10
    path = tmp_path / "seat.yaml"
    path.write_text(yaml.safe_dump(data))
    proc = cli("capacity", str(path), "--seeds", "2", "--json", "--out", str(tmp_path / "o"), "--workers", "2")
    assert proc.returncode == 0, proc.stderr
    rep = json.loads(proc.stdout)
    assert rep["seeds"] == [0, 1] and [c["label"] for c in rep["configurations"]] == [
        "as given", "without remedies (vLLM defaults)"]
    here = find(data)
    got = rep["configurations"][0]
    assert got["tested"] == here["tested"] and got["capacity"] == here["capacity"]
    assert got["against"] == "without remedies (vLLM defaults)" and got["change_pct"] == pytest.approx(0.0)
    table = cli("capacity", str(path), "--seeds", "2", "--out", str(tmp_path / "o"))
    assert table.returncode == 0, table.stderr
    assert f"{rep['runs']} runs ({rep['runs']} reused)" in table.stdout  # all from the output directory
    assert "as given: capacity 2× of the offered load on 1 GPU(s)" in table.stdout


def test_capacity_table_in_process(tmp_path, capsys):
    from engine.cli import main

    path = tmp_path / "seat.yaml"
    path.write_text(yaml.safe_dump(one_seat()))
    table = (cap.Group("seat", str(path), {}, "reserve"),)
    assert main(["capacity", "--table", "--seeds", "1", "--out", str(tmp_path / "t"), "--quiet"], table=table) == 0
    out = capsys.readouterr().out
    assert "seat (seeds 0–0, 1 per tested load)" in out
    rows = {ln.split("  ")[0]: ln for ln in out.splitlines()}
    assert "as shipped (fcfs)" in rows and "token reserve 16 strict" in rows
    assert (tmp_path / "t" / "seat" / "manifest.json").is_file()


@pytest.mark.parametrize("args, must", [
    ((), "name a scenario, or --table"),
    (("default", "--table"), "name a scenario, or --table"),
    (("--table", "--set", "seed=1"), "--set and --seed"),
    (("default", "--seeds", "0"), "--seeds 0"),
    (("default", "--set", "scheduler.polcy=x"), "scheduler.polcy"),
])
def test_bad_capacity_arguments_are_one_error_line(args, must, tmp_path):
    proc = cli("capacity", *args, "--out", str(tmp_path / "o"))
    assert proc.returncode == 2, proc.stdout
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("error:") and must in proc.stderr


# ---------------------------------------------------------------------------------------------
# The README's claim: a strict token reserve costs capacity only where a step with fewer tokens
# is not shorter. CAPACITY_SEEDS=5 runs the README's five seeds (the suite: two).


@pytest.mark.slow
def test_the_token_reserve_is_free_on_compute_bound_steps_and_costs_on_fixed_ones():
    import os

    seeds = int(os.environ.get("CAPACITY_SEEDS", "2"))
    found = {}
    for g in cap.TABLE[3:]:
        configs = cap.group_configs(g)
        o = cap.search(configs, [3 + k for k in range(seeds)])
        found[g.title] = {f["label"].split(": ", 1)[1]: f for f in cap.report(o)["configurations"]}
    roofline, fixed = found["budget-bound, P0 SLO 2 s"], found["budget-bound, P0 SLO 2 s, fixed 0.25 s steps"]
    for block in (roofline, fixed):  # P1's 20 s SLO sets the capacity in every row (P0's 2 s is met)
        assert all(f["fails_at_bracket_top"].startswith("P1:") for f in block.values())
    assert abs(roofline["token reserve 2048 strict"]["change_pct"]) <= 3  # a 25 % shorter step: nothing lost
    assert fixed["token reserve 2048 strict"]["change_pct"] <= -15  # the step costs the same: ~ the 25 % idled
    assert abs(fixed["token reserve 2048 lendable"]["change_pct"]) <= 3  # lent out when P0 does not need it
    sat = {k: f["saturated"]["processed_tok_s"]["value"] for k, f in fixed.items()}
    assert sat["token reserve 2048 strict"] < 0.95 * sat["as shipped (priority)"]
