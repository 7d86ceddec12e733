"""Queueing theory: a one-seat engine is a single-server queue in continuous time.

Set-up: `max_num_seqs: 1`, `cost: fixed` with step time s, prompt = 1 token, output = K tokens.

Service time. A request admitted at t0 is prefilled in one step (its 1-token prompt fits any
budget), which samples its first token at t0 + s; the remaining K − 1 tokens take one decode step
each, so it finishes at t0 + K·s exactly: S = K·s (deterministic for a constant K).

When it starts. vLLM's engine core blocks on its input queue while idle and starts a step the
moment a request arrives, so a request that finds the engine idle starts at its arrival. A
request that finds the seat taken cannot start before the holder finishes; the holder finishes
exactly on a step boundary, after which the very next step (same instant) admits the head of the
queue (under async scheduling the finished request still holds its seat in that schedule() call,
which therefore schedules nothing and takes no time). So FCFS starts obey Lindley's recursion
start_n = max(a_n, finish_{n−1}) exactly, and the long-run means are those of M/D/1 and, with
two priorities and random K, of the non-preemptive priority M/G/1 queue.
"""

from __future__ import annotations

import numpy as np
import pytest

from engine import from_dict, simulate

STEP_S = 0.01
K = 3  # output tokens: D = 3 steps
D = K * STEP_S


def _one_seat(classes: dict, duration_s: float, seed: int, policy: str = "fcfs", warmup_s: float = 0.0):
    return simulate(from_dict({
        "name": "one-seat",
        "seed": seed,
        "duration_s": duration_s,
        "warmup_s": warmup_s,
        "kv": {"num_blocks": 1000, "block_size": 16},
        "cost": {"model": "fixed", "step_time_s": STEP_S},
        "scheduler": {"policy": policy, "max_num_seqs": 1, "max_num_batched_tokens": 64},
        "classes": classes,
    }))


def _md1(rho: float, duration_s: float, seed: int, warmup_s: float = 0.0):
    lam = rho / D
    cls = {"A": {"priority": 0, "arrival": {"process": "poisson", "rate": lam},
                 "prompt": {"dist": "constant", "value": 1}, "output": {"dist": "constant", "value": K}}}
    return _one_seat(cls, duration_s, seed, warmup_s=warmup_s), lam


def test_single_seat_engine_follows_the_fcfs_lindley_recursion():
    res, _ = _md1(rho=0.7, duration_s=60.0, seed=3)
    r = res.requests.sort_values("arrival_s")
    assert (r["status"] == "finished").all()
    assert len(r) > 1000
    arr = r["arrival_s"].to_numpy()
    start = r["first_scheduled_s"].to_numpy()
    fin = r["finish_s"].to_numpy()
    # exact deterministic service D = K·s, first token after exactly one step
    np.testing.assert_allclose(fin - start, D, atol=1e-9)
    np.testing.assert_allclose(r["first_token_s"].to_numpy() - start, STEP_S, atol=1e-9)
    # FCFS single server in continuous time: start_n = max(a_n, finish_{n-1})
    expected = np.maximum(arr, np.concatenate([[arr[0]], fin[:-1]]))
    np.testing.assert_allclose(start, expected, atol=1e-9)
    idle_start = start - arr < 1e-12
    assert 0.2 < idle_start.mean() < 0.4  # P(the server is idle) = 1 − ρ = 0.3: those start at once
    assert (start - arr > 1e-6).mean() > 0.5  # and the queue really formed
    assert res.steps["batch_size"].max() == 1


@pytest.mark.slow
def test_mean_queue_wait_matches_pollaczek_khinchine():
    """M/D/1 at ρ = 0.5: Wq = ρ·D / (2(1 − ρ)) (Pollaczek–Khinchine). Four runs of 900 s each
    (~57k requests after warm-up) pooled: the mean is within 3 % (one run's mean moves about 1 %
    with the seed, the pooled one about 0.6 %: waits are autocorrelated over busy periods). The
    grid that made an idle engine wait for the next step put the mean half a step (+33 %) above."""
    rho = 0.5
    wq = rho * D / (2 * (1 - rho))
    waits, busy = [], []
    for seed in range(4):
        res, _ = _md1(rho=rho, duration_s=900.0, seed=seed, warmup_s=50.0)
        m = res.requests[res.requests["measured"]]
        assert (m["status"] == "finished").all()
        waits.append(m["queue_wait_s"].to_numpy())
        busy.append(res.steps["dt_s"].sum() / res.summary["sim_time_s"])
    wait = np.concatenate(waits)
    assert len(wait) > 55_000
    assert wait.mean() == pytest.approx(wq, rel=0.03)
    assert np.mean(busy) == pytest.approx(rho, abs=0.01)  # the engine steps a fraction ρ of the time


@pytest.mark.slow
def test_two_priorities_match_cobhams_formula():
    """Two classes on one seat, priority policy: the non-preemptive priority M/G/1 queue.
    P0: K = 2 tokens (S = 2s), ρ0 = 0.15; P1: K uniform on 1..8 (E[K] = 4.5, E[K²] = 25.5),
    ρ1 = 0.3. Cobham (1954): with W0 = Σ λᵢ·E[Sᵢ²] / 2 the residual work an arrival finds in
    service, Wq₀ = W0 / (1 − ρ0) and Wq₁ = W0 / ((1 − ρ0)(1 − ρ0 − ρ1)). Eight runs of 900 s
    pooled (~48k requests of each class after warm-up; one run's class mean moves 2–3 % with the
    seed, the pooled one about 1 %): each class's mean within 3 %. FCFS would give both classes
    W0 / (1 − ρ) (P0 about 1.5× its value here), and a grid start about half a step (+40 % for P0)."""
    s, k0, ek1, ek1_sq = STEP_S, 2, 4.5, 25.5
    rho0, rho1 = 0.15, 0.3
    lam0, lam1 = rho0 / (k0 * s), rho1 / (ek1 * s)
    w0 = (lam0 * (k0 * s) ** 2 + lam1 * ek1_sq * s * s) / 2
    theory = {"P0": w0 / (1 - rho0), "P1": w0 / ((1 - rho0) * (1 - rho0 - rho1))}
    classes = {
        "P0": {"priority": 0, "arrival": {"process": "poisson", "rate": lam0},
               "prompt": {"dist": "constant", "value": 1}, "output": {"dist": "constant", "value": k0}},
        "P1": {"priority": 1, "arrival": {"process": "poisson", "rate": lam1},
               "prompt": {"dist": "constant", "value": 1}, "output": {"dist": "uniform", "low": 1, "high": 8}},
    }
    waits: dict[str, list[np.ndarray]] = {"P0": [], "P1": []}
    for seed in range(8):
        res = _one_seat(classes, 900.0, seed, policy="priority", warmup_s=50.0)
        m = res.requests[res.requests["measured"]]
        assert (m["status"] == "finished").all()
        for name in waits:
            waits[name].append(m.loc[m["class"] == name, "queue_wait_s"].to_numpy())
    for name, parts in waits.items():
        w = np.concatenate(parts)
        assert len(w) > 40_000
        assert w.mean() == pytest.approx(theory[name], rel=0.03), name
