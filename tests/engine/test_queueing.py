"""Queueing-theory check: one class on a one-seat engine is an M/D/1 queue on a time grid.

Set-up: `max_num_seqs: 1`, `cost: fixed` with step time s, prompt = 1 token, output = k tokens.

Service time. A request admitted at a step boundary t0 is prefilled in one step (its 1-token prompt
fits any budget), which samples its first token at t0 + s; the remaining k − 1 tokens take one
decode step each, so it finishes at t0 + k·s exactly: D = k·s, deterministic.

What `queue_wait_s` (= first_scheduled_s − arrival_s) measures. On a fixed step the engine's
steps lie on the grid k·s (`engine.clock`):
- a request arriving at a is taken at the first grid point g(a) ≥ a — an idle engine wakes there;
- when the seat is taken, a newcomer cannot start before the holder finishes, and the holder
  finishes exactly on a grid point, after which the very next step (same instant) admits the
  head of the queue (under async scheduling the finished request still holds its seat in that
  schedule() call, which therefore schedules nothing and takes no time).
So the simulated start obeys the FCFS recursion start_n = max(g(a_n), finish_{n−1}) *exactly*.
The first test checks it request by request (it pins FCFS order, the grid and the exact service
time). The second compares the long-run mean with M/D/1 theory: snapping arrivals forward by at
most s can only delay each start by less than s, so the mean wait lies between the
Pollaczek–Khinchine value Wq = ρ·D / (2(1 − ρ)) and Wq + s; a service of (k+1)·s, or LIFO
service, would leave that band.
"""

from __future__ import annotations

import numpy as np
import pytest

from engine import from_dict, simulate

STEP_S = 0.01
K = 3  # output tokens: D = 3 steps
D = K * STEP_S


def _md1(rho: float, duration_s: float, seed: int, warmup_s: float = 0.0):
    lam = rho / D
    sc = from_dict({
        "name": "md1",
        "seed": seed,
        "duration_s": duration_s,
        "warmup_s": warmup_s,
        "kv": {"num_blocks": 1000, "block_size": 16},
        "cost": {"model": "fixed", "step_time_s": STEP_S},
        "scheduler": {"policy": "fcfs", "max_num_seqs": 1, "max_num_batched_tokens": 64},
        "classes": {
            "A": {
                "priority": 0,
                "arrival": {"process": "poisson", "rate": lam},
                "prompt": {"dist": "constant", "value": 1},
                "output": {"dist": "constant", "value": K},
            }
        },
    })
    return simulate(sc), lam


def test_single_seat_engine_follows_the_fcfs_lindley_recursion():
    res, _ = _md1(rho=0.7, duration_s=60.0, seed=3)
    r = res.requests.sort_values("arrival_s")
    assert (r["status"] == "finished").all()
    assert len(r) > 1000
    arr = r["arrival_s"].to_numpy()
    start = r["first_scheduled_s"].to_numpy()
    fin = r["finish_s"].to_numpy()
    # exact deterministic service D = k·s, first token after exactly one step
    np.testing.assert_allclose(fin - start, D, atol=1e-9)
    np.testing.assert_allclose(r["first_token_s"].to_numpy() - start, STEP_S, atol=1e-9)
    # FCFS single server on the grid: start_n = max(g(a_n), finish_{n-1})
    grid = np.ceil(np.round(arr / STEP_S, 9)) * STEP_S
    expected = np.maximum(grid, np.concatenate([[grid[0]], fin[:-1]]))
    np.testing.assert_allclose(start, expected, atol=1e-9)
    assert np.all(np.abs(start / STEP_S - np.round(start / STEP_S)) < 1e-6)  # every start on the grid
    # and the queue really formed (the recursion is not trivially start == g(arrival))
    assert (start - grid > 1e-6).mean() > 0.5
    # one request at a time, every step busy while something waits
    assert res.steps["batch_size"].max() == 1


@pytest.mark.slow
def test_mean_queue_wait_matches_pollaczek_khinchine():
    """ρ = 0.5, ~40k requests (~6 s). The standard error of the mean wait at this length is about
    1.5 % (autocorrelated waits), so 3 % is ~2σ; the seed is fixed so the run is reproducible."""
    rho = 0.5
    res, lam = _md1(rho=rho, duration_s=2400.0, seed=0, warmup_s=100.0)
    r = res.requests
    m = r[r["measured"]]
    assert len(m) > 35_000
    assert (m["status"] == "finished").all()
    wait = m["queue_wait_s"].to_numpy()
    np.testing.assert_allclose(wait, (m["first_scheduled_s"] - m["arrival_s"]).to_numpy())

    wq = rho * D / (2 * (1 - rho))
    assert wq < wait.mean() < wq + STEP_S
    assert wait.mean() == pytest.approx(wq + STEP_S / 2, rel=0.1)  # ≈ half a step for the grid
    # the FCFS recursion on the grid, computed here over every request (warm-up included)
    r = r.sort_values("arrival_s")
    grid = np.ceil(np.round(r["arrival_s"].to_numpy() / STEP_S, 9)) * STEP_S
    fin = np.empty(len(grid))
    prev = -np.inf
    for n, g in enumerate(grid):
        prev = fin[n] = max(g, prev) + D
    np.testing.assert_allclose(r["finish_s"].to_numpy(), fin, atol=1e-6)
    # utilisation: the fraction of time the engine steps is ρ
    busy = res.steps["dt_s"].sum() / res.summary["sim_time_s"]
    assert busy == pytest.approx(rho, abs=0.02)
