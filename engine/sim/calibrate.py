"""Measure what the work estimate (`engine.sim.limits`) should predict: `python -m engine.sim.calibrate`.

Runs a grid of scenarios (light, saturated, overloaded under each policy, many classes, tiny
fixed steps, split prompts, replicas, a trace), each in a fresh process, and prints per scenario
the estimate next to the measurement (steps, mean waiting requests, seconds, peak MiB), then the
least-squares constants for the time and memory formulas. Time is the child's CPU time (on a
shared machine other processes inflate wall time; a run is single-threaded, so on an idle
machine the two agree). Re-run it after changing
the engine and copy the constants into `engine/sim/limits.py` if they moved.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

_CHILD = """
import json, resource, sys, time
from engine import from_dict, simulate
sc = from_dict(json.loads(sys.argv[1]))
t0, c0 = time.perf_counter(), time.process_time()
res = simulate(sc)
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
st = res.steps
waiting = st[[c for c in st.columns if c.startswith("waiting_")]].to_numpy().sum()
print(json.dumps({"wall_s": wall, "cpu_s": cpu, "steps": len(st), "requests": len(res.requests),
                  "queue_steps": float(waiting),
                  "prefill_steps": int((st["prefill_tokens"] > 0).sum()),
                  "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def _classes(n: int, total_rate: float) -> dict:
    return {f"C{i:03d}": {"priority": i % 4, "arrival": {"rate": total_rate / n},
                          "prompt": {"dist": "lognormal", "median": 400, "p90": 1200, "max": 8000},
                          "output": {"dist": "lognormal", "median": 120, "p90": 350, "max": 1000}}
            for i in range(n)}


# Cases measured but left out of the fit: the engine's inversion-episode records grow with
# blocked × admitted requests (issue 15.2, being rewritten), which no work formula should bake in.
NOT_FITTED = {"trace 8k rows"}


def grid(tmp: Path) -> list[tuple[str, str, dict]]:
    """(label, base scenario, overrides) for each measured case."""
    trace = tmp / "trace.csv"
    rng = np.random.default_rng(0)
    t = np.sort(rng.uniform(0, 300, 8000))
    rows = [f"{a:.4f},{int(p)},{int(o)},{k}" for a, p, o, k in
            zip(t, rng.lognormal(6, 0.8, 8000) + 1, rng.lognormal(4.5, 0.7, 8000) + 1, rng.integers(0, 3, 8000))]
    trace.write_text("arrived_at,num_prefill_tokens,num_decode_tokens,priority\n" + "\n".join(rows) + "\n")
    cases = [
        ("default", "default", {}),
        ("classic-inversion", "classic-inversion", {}),
        ("stress-100k", "stress-100k", {}),
        ("default P1×10", "default", {"classes.P1.arrival.rate": 30}),
        ("stress dur 600, P1 40/s", "stress-100k", {"duration_s": 600, "classes.P1.arrival.rate": 40}),
        ("120 classes", "default", {"classes": _classes(120, 3.5)}),
        ("200 classes, 600 s", "default", {"classes": _classes(200, 3.5), "duration_s": 600}),
        ("fixed 1 ms steps", "default", {"cost.model": "fixed", "cost.step_time_s": 0.001}),
        ("chunk threshold 1", "default", {"scheduler.long_prefill_token_threshold": 1}),
        ("chunk threshold 64", "classic-inversion", {"scheduler.long_prefill_token_threshold": 64}),
        ("budget 16, priority", "classic-inversion", {"scheduler.max_num_batched_tokens": 16, "drain_limit_s": 100,
                                                      "scheduler.policy": "priority"}),
        ("budget 16, priority+aging", "classic-inversion", {
            "scheduler.max_num_batched_tokens": 16, "drain_limit_s": 100, "scheduler.policy": "priority",
            "mitigations.aging_s": 10}),
        ("light, long outputs", "default", {
            "duration_s": 1800, "classes": {"A": {"arrival": {"rate": 0.02}, "output": {"value": 3000}}}}),
        ("split caps", "default", {"classes.P2.caps.max_prompt_tokens": 256, "classes.P2.caps.over_cap": "split",
                                   "classes.P1.caps.max_prompt_tokens": 128, "classes.P1.caps.over_cap": "split"}),
        ("4 replicas, P1 20/s", "default", {"replicas.count": 4, "classes.P1.arrival.rate": 20}),
        ("trace 8k rows", "default", {"duration_s": 300, "trace": {"path": str(trace), "assign": {"by": "column"}},
                                      "classes.P0.arrival.rate": 0, "classes.P1.arrival.rate": 0,
                                      "classes.P2.arrival.rate": 0}),
    ]
    for policy in ("fcfs", "priority", "backfill", "preempt"):
        cases.append((f"default P1×33 {policy}", "default",
                      {"classes.P1.arrival.rate": 100, "scheduler.policy": policy}))
    return cases


def _scenario(base: str, over: dict):
    from ..config.scenario import apply_overrides, from_dict, load_raw

    raw = load_raw(base)
    if "classes" in over:
        raw = {**raw, "classes": over["classes"]}
        over = {k: v for k, v in over.items() if k != "classes"}
    return from_dict(apply_overrides(raw, over))


def measure(sc) -> dict:
    out = subprocess.run([sys.executable, "-c", _CHILD, sc.key()], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[2])  # the repository (this file: engine/sim/)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    from . import limits

    ap = argparse.ArgumentParser(prog="python -m engine.sim.calibrate", description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="run only cases whose label contains this text")
    args = ap.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for label, base, over in grid(Path(tmp)):
            if args.only and args.only not in label:
                continue
            sc = _scenario(base, over)
            w = limits.estimate_work(sc)
            m = measure(sc)
            rows.append((label, sc, w, m))
            print(f"{label:<26} req {w.requests:>8,.0f}/{m['requests']:<8,} steps {w.steps:>9,.0f}/{m['steps']:<9,} "
                  f"prefill {w.parts['prefill_steps']:>8,.0f}/{m['prefill_steps']:<8,} "
                  f"queue {w.queue:>7,.0f}/{m['queue_steps'] / max(m['steps'], 1):<7,.0f} "
                  f"cpu s {w.seconds:>6.2f}/{m['cpu_s']:<6.2f} (wall {m['wall_s']:.2f}) "
                  f"MiB {w.memory_mib:>6.0f}/{m['peak_mib']:<6.0f}",
                  flush=True)
    _fit(rows)
    return 0


def _fit(rows) -> None:
    """Least-squares constants (negative ones dropped and refitted) for seconds and MiB, on the
    relative error (a 0.1 s run counts as much as a 10 s one)."""
    from .limits import values_per_step

    def nnls(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        keep = np.ones(a.shape[1], dtype=bool)
        x = np.zeros(a.shape[1])
        for _ in range(a.shape[1]):
            x[:] = 0
            x[keep] = np.linalg.lstsq(a[:, keep], b, rcond=None)[0]
            if (x >= 0).all():
                break
            keep &= x > 0
        return np.maximum(x, 0)

    rows = [r for r in rows if r[0] not in NOT_FITTED]
    if len(rows) < 5:
        return
    a, b, am, bm = [], [], [], []
    for _, sc, w, m in rows:
        qs = w.parts["queue_steps"]
        skip = sc.scheduler.policy == "backfill"
        aging = sc.mitigations.aging_s > 0 and sc.scheduler.policy != "fcfs"
        ps = w.parts["prefill_steps"]
        a.append([1.0, w.requests, w.steps - ps, ps, w.steps * w.classes, 0 if skip else qs, qs if skip else 0,
                  qs if aging else 0])
        b.append(m["cpu_s"])
        am.append([1.0, w.requests, w.steps * values_per_step(w.classes), qs])
        bm.append(m["peak_mib"])
    a, b, am, bm = map(np.array, (a, b, am, bm))
    x = nnls(a / b[:, None], np.ones(len(b)))
    print("fit, seconds: base %.3g, per request %.3g, per decode step %.3g, per prefill step %.3g, "
          "per step×class %.3g, per queue-step %.3g (backfill %.3g, + aging %.3g)" % tuple(x))
    y = nnls(am / bm[:, None], np.ones(len(bm)))
    print("fit, MiB: base %.3g, per request %.3g, per step-log value %.3g, per queue-step %.3g" % tuple(y))


if __name__ == "__main__":
    raise SystemExit(main())
