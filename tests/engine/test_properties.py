"""Property tests: invariants of the scheduler simulation over random small workloads.

Hypothesis draws small scenarios (1-3 classes, explicit arrival times, a fixed step time, class
system prompts the prefix cache can share, async or sync scheduling) over every policy and
mitigation knob, and every run must keep the hard limits of the engine (KV
capacity, token budget, max_num_seqs, class caps, the top-priority KV reserve), end every request
cleanly, keep its timestamps ordered, account for every computed token, and be deterministic —
in-process and across processes. `PROPERTY_EXAMPLES=2000` runs that many workloads per property
(the suite: 60, and 150 for "every request ends somewhere").
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import from_dict, simulate
from engine.sim.metrics import clean

REPO = Path(__file__).resolve().parents[2]
EPS = 1e-9

EXAMPLES = int(os.environ.get("PROPERTY_EXAMPLES", 0))  # 0: the suite's own numbers
PROPS = settings(
    max_examples=EXAMPLES or 60,
    deadline=None,
    derandomize=True,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


# ---------------------------------------------------------------------------------------------
# Scenario generator


@st.composite
def scenarios(draw) -> dict:
    n_classes = draw(st.integers(1, 3))
    per_class = max(1, 25 // n_classes)
    num_blocks = draw(st.integers(8, 200))
    budget = draw(st.integers(8, 256))
    classes = {}
    for k in range(n_classes):
        times = draw(st.lists(st.floats(0.0, 1.0, allow_nan=False).map(lambda x: round(x, 3)),
                              min_size=1, max_size=per_class))
        caps: dict = {}
        if draw(st.booleans()):
            caps["max_running"] = draw(st.integers(1, 4))
        if draw(st.booleans()):
            caps["max_kv_blocks"] = draw(st.integers(1, num_blocks))
        if draw(st.booleans()):
            caps["max_prompt_tokens"] = draw(st.integers(1, 300))
            caps["over_cap"] = draw(st.sampled_from(["reject", "split"]))
        prefix = draw(st.sampled_from([0, 0, 0, 3, 23, 40, 200, 653]))  # a class system prompt (prefix cache)
        prompt = ({"dist": "constant", "value": draw(st.integers(1, 300))} if not prefix else
                  {"dist": "uniform", "low": prefix + 1, "high": prefix + draw(st.integers(1, 300))})
        classes[f"C{k}"] = {
            "priority": draw(st.integers(0, 2)),
            "arrival": {"process": "times", "times": times},
            "prompt": prompt,
            "output": {"dist": "constant", "value": draw(st.integers(1, 40))},
            "caps": caps,
            "prefix_tokens": prefix,
        }
    scheduler = {
        "policy": draw(st.sampled_from(["fcfs", "priority", "backfill", "preempt"])),
        "max_num_batched_tokens": budget,
        "max_num_seqs": draw(st.integers(1, 8)),
        "async_scheduling": draw(st.booleans()),
    }
    if draw(st.booleans()):
        scheduler["long_prefill_token_threshold"] = draw(st.integers(1, 300))
        scheduler["long_prefill_token_threshold_adaptive"] = draw(st.booleans())
    if draw(st.booleans()):
        scheduler["watermark"] = draw(st.sampled_from([0.01, 0.05, 0.1, 0.2]))
    mitigations: dict = {}
    if draw(st.booleans()):
        mitigations["p0_token_reserve"] = draw(st.integers(0, budget - 1))
        mitigations["reserve_mode"] = draw(st.sampled_from(["strict", "lendable"]))
    if draw(st.booleans()):
        mitigations["p0_kv_reserve"] = draw(st.integers(0, num_blocks - 2))  # N - 1 usable (null block)
    if draw(st.booleans()):
        mitigations["inheritance"] = True
    if draw(st.booleans()):
        mitigations["aging_s"] = draw(st.sampled_from([0.05, 0.5, 2.0]))
    return {
        "name": "prop",
        "seed": draw(st.integers(0, 5)),
        "duration_s": 10.0,
        "drain_limit_s": 100_000.0,
        "kv": {"num_blocks": num_blocks, "block_size": draw(st.sampled_from([1, 4, 16]))},
        "cost": {"model": "fixed", "step_time_s": 0.01},
        "scheduler": scheduler,
        "classes": classes,
        "mitigations": mitigations,
    }


def _run(data: dict):
    return simulate(from_dict(data))


# ---------------------------------------------------------------------------------------------
# Invariants


def check_invariants(data: dict, res) -> None:
    sc = res.scenario
    steps, req, waits = res.steps, res.requests, res.waits
    names = sc.class_names
    nb = data["kv"]["num_blocks"]
    budget = sc.scheduler.max_num_batched_tokens
    seqs = sc.scheduler.max_num_seqs

    # KV capacity at every step
    assert (steps["kv_used"] <= nb - 1).all()  # one of num_gpu_blocks is vLLM's null block
    assert (steps["kv_used"] >= 0).all()
    for c in names:  # each class's running requests hold at least a block each (the class's own column)
        assert (steps[f"kv_{c}"] >= steps[f"running_{c}"]).all()
    # every running request holds at least one block, and nothing is held when nothing runs
    running = steps[[f"running_{c}" for c in names]].sum(axis=1)
    assert (steps["kv_used"] >= running).all()
    assert ((steps["kv_used"] == 0) == (running == 0)).all()

    # token budget and max_num_seqs
    assert (steps["prefill_tokens"] + steps["decode_tokens"] <= budget).all()
    assert (steps["prefill_tokens"] >= 0).all() and (steps["decode_tokens"] >= 0).all()
    assert (steps["batch_size"] <= seqs).all()
    run_cols = [f"running_{c}" for c in names]
    assert (steps[run_cols].sum(axis=1) <= seqs).all()
    assert (steps[run_cols] >= 0).all().all()

    # time moves forward, steps do not overlap within the (single) replica
    t, dt = steps["t_s"].to_numpy(), steps["dt_s"].to_numpy()
    assert np.all(dt > 0)
    assert np.all(t[1:] >= t[:-1] + dt[:-1] - EPS)

    # class caps
    for c in names:
        caps = sc.request_class(c).caps
        if caps.max_kv_blocks is not None:
            assert (steps[f"kv_{c}"] <= caps.max_kv_blocks).all(), c
        if caps.max_running is not None:
            assert (steps[f"running_{c}"] <= caps.max_running).all(), c

    # top-priority KV reserve: the other classes share num_blocks - reserve
    prios = {c: sc.request_class(c).priority for c in names}
    top = min(prios.values())
    others = [f"kv_{c}" for c in names if prios[c] != top]
    if others and sc.mitigations.p0_kv_reserve:
        assert (steps[others].sum(axis=1) <= nb - 1 - sc.mitigations.p0_kv_reserve).all()

    # every request ends finished or rejected (the drain limit is huge)
    status = req["status"].astype(str)
    assert set(status) <= {"finished", "rejected"}, status.value_counts().to_dict()
    rej = req[status == "rejected"]
    assert (rej["reason"].str.len() > 0).all()
    assert rej["first_scheduled_s"].isna().all()
    fin = req[status == "finished"]
    assert (fin["reason"] == "").all()
    assert (fin["first_scheduled_s"] >= fin["arrival_s"] - EPS).all()
    assert (fin["first_token_s"] >= fin["first_scheduled_s"] - EPS).all()
    assert (fin["first_token_s"] >= fin["arrival_s"]).all()
    assert (fin["finish_s"] >= fin["first_token_s"]).all()
    assert (fin["ttft_s"] >= 0).all()
    assert (fin["queue_wait_s"] >= -EPS).all()
    # a request needs at least one step per output token after being scheduled
    step_s = sc.cost.step_time_s
    assert (fin["finish_s"] - fin["first_scheduled_s"] >= fin["output_tokens"] * step_s - 1e-6).all()

    # a finished request has computed its whole sequence but the last sampled token (cache hits
    # count as computed) — also one preempted while its last token was in flight (async), which
    # finishes from the queue having lost nothing
    assert (fin["computed_tokens"] == fin["prompt_tokens"] + fin["output_tokens"] - 1).all()

    # token conservation: every computed token appears in exactly one step (prompt, every output
    # token but the last, and the progress preemption lost — less what admissions found cached)
    expected = int((fin["prompt_tokens"] + fin["output_tokens"] - 1 + fin["recomputed_tokens"]
                    - fin["cached_tokens_all"]).sum())
    assert int((steps["prefill_tokens"] + steps["decode_tokens"]).sum()) == expected

    # admissions: every finished request was admitted once, plus once more per preemption — but
    # under async scheduling a request preempted while its last token is in flight finishes from
    # the queue without a re-admission; a preemption by a call that scheduled nothing is logged
    # with the next step (none follows if the engine then goes idle)
    adm = res.admissions
    assert int(steps["admitted"].sum()) == len(adm)
    assert int((~adm["readmission"]).sum()) == len(fin)
    again, pre = int(adm["readmission"].sum()), int(req["preemptions"].sum())
    assert again <= pre and int(steps["preempted"].sum()) <= pre
    if not sc.scheduler.async_scheduling:
        assert again == pre == int(steps["preempted"].sum())

    # FCFS within a class: with one prompt length per class (no split pieces), no policy lets a
    # later request of a class be admitted for the first time before an earlier one (a KV cap skips
    # a request too big for what its class has left, so a smaller one behind it may go first)
    for c in names:
        spec = sc.request_class(c)
        if spec.caps.max_prompt_tokens is None and spec.prompt.dist == "constant":
            g = fin[fin["class"] == c].sort_values(["arrival_s", "id"])
            assert np.all(np.diff(g["first_scheduled_s"].to_numpy()) >= -EPS), c

    # a never-preempted request's blocked time is its queue wait (it was seen waiting), or 0 when
    # it was admitted at the first step boundary after its arrival
    once = fin[fin["preemptions"] == 0]
    b, q = once["blocked_s"].to_numpy(), once["queue_wait_s"].to_numpy()
    assert np.all((np.abs(b - q) < EPS) | ((b == 0) & (q <= step_s + EPS)))

    # prefill takes at least ceil((prompt − cache hit) / budget) steps before the first token (the
    # chunk cap is lifted while a request runs alone, so only the budget bounds a chunk)
    chunk = budget
    lower = np.ceil((once["prompt_tokens"] - once["cached_tokens"]).to_numpy() / chunk) * step_s
    assert np.all(once["first_token_s"].to_numpy() - once["first_scheduled_s"].to_numpy() >= lower - 1e-6)

    # prompt caps: no admitted piece exceeds its class's max_prompt_tokens
    for c in names:
        cap = sc.request_class(c).caps.max_prompt_tokens
        if cap is not None:
            mine = req[(req["class"] == c) & (status == "finished")]
            assert (mine["prompt_tokens"] <= cap).all()

    # inversion is a part of blocked time
    assert (req["inversion_s"] <= req["blocked_s"] + EPS).all()
    assert (req["inversion_s"] >= 0).all()

    # wait segments: well-formed, and those of one request do not overlap
    if len(waits):
        assert (waits["end_s"] >= waits["start_s"] - EPS).all()
        for _, g in waits.groupby("request"):
            s = g.sort_values(["start_s", "end_s"])
            assert np.all(s["start_s"].to_numpy()[1:] >= s["end_s"].to_numpy()[:-1] - EPS), g
        w = waits.merge(req[["id", "arrival_s"]], left_on="request", right_on="id")
        assert (w["start_s"] >= w["arrival_s"] - EPS).all()

    # episodes lie within their request's blocked time
    if len(res.episodes):
        per = res.episodes.groupby("request")["duration_s"].sum()
        assert np.all(per.to_numpy() <= req.set_index("id").loc[per.index, "inversion_s"].to_numpy() + 1e-6)


@PROPS
@given(scenarios())
def test_invariants_hold_for_random_workloads(data):
    check_invariants(data, _run(data))


@settings(max_examples=25, deadline=None, derandomize=True)
@given(scenarios())
def test_same_scenario_gives_identical_frames(data):
    a, b = _run(data), _run(data)
    for name in ("requests", "steps", "waits", "episodes", "alerts"):
        pd.testing.assert_frame_equal(getattr(a, name), getattr(b, name), check_exact=True)
    sa, sb = dict(a.summary), dict(b.summary)
    sa.pop("wall_time_s"), sb.pop("wall_time_s")
    assert json.dumps(clean(sa)) == json.dumps(clean(sb))


# ---------------------------------------------------------------------------------------------
# Hand-made scenarios that pin the invariants to specific situations (so they cannot pass vacuously)


def _two_class(policy: str, **mit) -> dict:
    return {
        "name": "two",
        "duration_s": 10.0,
        "kv": {"num_blocks": 20, "block_size": 4},
        "cost": {"model": "fixed", "step_time_s": 0.01},
        "scheduler": {"policy": policy, "max_num_batched_tokens": 32, "max_num_seqs": 4},
        "classes": {
            "P0": {"priority": 0, "arrival": {"process": "times", "times": [0.05, 0.06, 0.3]},
                   "prompt": {"dist": "constant", "value": 30}, "output": {"dist": "constant", "value": 10}},
            "P2": {"priority": 2, "arrival": {"process": "times", "times": [0.0, 0.01, 0.02, 0.03]},
                   "prompt": {"dist": "constant", "value": 40}, "output": {"dist": "constant", "value": 30}},
        },
        "mitigations": mit,
    }


@pytest.mark.parametrize("policy", ["fcfs", "priority", "backfill", "preempt"])
def test_invariants_on_a_contended_two_class_run(policy):
    data = _two_class(policy)
    res = _run(data)
    check_invariants(data, res)
    # the run really is contended: KV fills up and P0 waits (or, with `preempt`, evicts P2)
    assert res.steps["kv_used"].max() >= 15
    if policy == "preempt":
        assert res.summary["preemptions"] > 0
    else:
        assert res.requests.loc[res.requests["class"] == "P0", "blocked_s"].sum() > 0


def test_kv_reserve_is_respected_under_pressure():
    data = _two_class("fcfs", p0_kv_reserve=8)
    data["classes"]["P2"]["prompt"]["value"] = 20  # 29 tokens: 8 of the 11 blocks P2 may use
    data["classes"]["P2"]["output"]["value"] = 10
    res = _run(data)
    check_invariants(data, res)
    # the non-top class is pushed right up to its share (20 - 1 null block - 8 reserved), and P0
    # uses the reserve
    assert res.steps["kv_P2"].max() == 11
    assert res.steps["kv_used"].max() > 11
    assert (res.requests["status"] == "finished").all()


def test_preempt_policy_preempts_and_accounts_recomputed_tokens():
    data = _two_class("preempt")
    res = _run(data)
    check_invariants(data, res)
    assert res.summary["preemptions"] > 0
    assert res.requests["recomputed_tokens"].sum() > 0


# ---------------------------------------------------------------------------------------------
# Determinism across processes


@pytest.mark.parametrize("policy", ["fcfs", "preempt"])
def test_subprocess_run_matches_in_process_summary(tmp_path, policy):
    data = _two_class(policy, p0_token_reserve=8, inheritance=True)
    data["classes"]["P1"] = {
        "priority": 1,
        "arrival": {"process": "poisson", "rate": 20.0},
        "prompt": {"dist": "lognormal", "median": 20, "p90": 60, "max": 70},
        "output": {"dist": "uniform", "low": 1, "high": 20},
    }
    data["duration_s"] = 3.0
    data["seed"] = 11
    path = tmp_path / "sc.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "engine", "run", str(path), "--json"], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    theirs = json.loads(proc.stdout)
    ours = json.loads(json.dumps(clean(_run(data).summary)))
    theirs.pop("wall_time_s"), ours.pop("wall_time_s"), theirs.pop("loop_turns")
    assert ours["classes"]["P1"]["n"] > 20  # the random class really drew a workload
    assert theirs == ours


def test_request_evicted_for_a_waiting_one_is_blocked_during_that_step():
    data = {
        "duration_s": 10.0,
        "kv": {"num_blocks": 100, "block_size": 16},
        "cost": {"model": "fixed", "step_time_s": 0.01},
        "scheduler": {"policy": "preempt", "max_num_seqs": 1},
        "classes": {
            "P0": {"priority": 0, "arrival": {"process": "times", "times": [0.005]},
                   "prompt": {"dist": "constant", "value": 1}, "output": {"dist": "constant", "value": 1}},
            "P1": {"priority": 1, "arrival": {"process": "times", "times": [0.0]},
                   "prompt": {"dist": "constant", "value": 1}, "output": {"dist": "constant", "value": 5}},
        },
    }
    res = _run(data)
    p1 = res.requests.set_index("class").loc["P1"]
    # P1 runs at 0.00, is evicted for P0's seat at 0.01, and is re-admitted at 0.02 after P0 finishes
    assert p1["preemptions"] == 1
    assert res.steps["preempted"].tolist()[:2] == [0, 1]
    # so during the step [0.01, 0.02) P1 waits (reason: preempted)
    assert res.steps.loc[np.isclose(res.steps["t_s"], 0.01), "waiting_P1"].item() == 1
    assert p1["blocked_s"] == pytest.approx(0.01)
    w = res.waits[res.waits["request"] == p1["id"]]
    assert w["reason"].astype(str).tolist() == ["preempted"]
    assert w[["start_s", "end_s"]].to_numpy().ravel().tolist() == pytest.approx([0.01, 0.02])


# ---------------------------------------------------------------------------------------------
# Every request ends somewhere (the drain limit cuts runs short, split pieces are still queued)


@settings(max_examples=EXAMPLES or 150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(data=scenarios(), drain=st.sampled_from([0.05, 0.2, 1.0, 5.0]), split=st.booleans(),
       cap=st.integers(5, 100))
def test_every_request_ends_finished_rejected_or_unfinished(data, drain, split, cap):
    data = dict(data, drain_limit_s=drain)
    if split:
        for c in data["classes"].values():
            c["caps"] = {**c["caps"], "max_prompt_tokens": cap, "over_cap": "split"}
    res = _run(data)
    req = res.requests
    status = req["status"].astype(str)
    assert set(status) <= {"finished", "rejected", "unfinished"}, status.value_counts().to_dict()
    assert (req.loc[status != "finished", "reason"].str.len() > 0).all()
    # the client's request (pieces folded) is complete only when every piece finished
    key = np.where(req["parent"] >= 0, req["parent"], req["id"])
    all_done = (status == "finished").groupby(key).all()
    from engine.sim.metrics import logical_requests
    logical = logical_requests(req).set_index("id")
    assert ((logical["status"].astype(str) == "finished") == all_done.loc[logical.index]).all()
    done = {name: c["completed"] for name, c in res.summary["classes"].items()}
    assert sum(done.values()) <= int(all_done[logical["measured"].to_numpy()].sum())


def test_a_split_request_cut_by_the_drain_limit_is_unfinished():
    """One 40-token prompt (4 output tokens) split into 4 pieces of 10 prompt tokens and 1 output
    token: each piece is one 1 s step, released when the one before finishes (t = 1, 2, 3). The run
    ends at duration 1 s + drain 2.5 s = 3.5 s, before the last piece's step would end (4 s): that
    piece is unfinished, and so is the client's request — not a completed one."""
    data = {"duration_s": 1.0, "drain_limit_s": 2.5, "kv": {"num_blocks": 100, "block_size": 4},
            "cost": {"model": "fixed", "step_time_s": 1.0},
            "scheduler": {"max_num_batched_tokens": 10},
            "classes": {"P0": {"arrival": {"process": "times", "times": [0.0]},
                               "prompt": {"dist": "constant", "value": 40}, "output": {"dist": "constant", "value": 4},
                               "caps": {"max_prompt_tokens": 10, "over_cap": "split"}}}}
    res = _run(data)
    assert res.requests["status"].astype(str).tolist() == ["finished", "finished", "finished", "unfinished"]
    assert res.requests["finish_s"].tolist()[:3] == [1.0, 2.0, 3.0]
    assert res.summary["classes"]["P0"]["completed"] == 0 and res.summary["classes"]["P0"]["unfinished"] == 1
