"""Sweep benchmark: the runner's overhead per run, and the wall time of many runs per backend.

    python -m engine.sweeps.sweep_bench                       # overhead (300 runs) + 10,000 runs, local
    python -m engine.sweeps.sweep_bench --runs 2000 --backend ray
    python -m engine.sweeps.sweep_bench --overhead-only

Every run is the default scenario with its own seed (the spec `base: default, seeds: N`).
*Overhead*: the same K runs (1) called one after another in a fresh worker process —
`simulate(from_dict(json))` plus turning the summary into rows, i.e. the run itself — and (2)
through `run_sweep` with one local worker, which adds expansion (validation, hashing), the pool,
batching, pickling, parts, the consolidated Parquet + CSV and the manifest; overhead per run =
(2 − 1) / K, in wall time and in CPU time of all processes (the latter is robust to other load).
*Throughput*: N runs through `run_sweep` on all cores (or the Ray instance), wall time from the
first expansion to the last file written. Runs go to a temporary directory, removed after.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import tempfile
import time
from pathlib import Path

from ..config.scenario import from_dict
from ..sim.simulation import simulate
from .sweep import expand, parse_spec, run_sweep
from .sweep_exec import cpu_count, make_backend, summary_rows


def spec_of(n: int, start: int = 1):
    return parse_spec({"name": f"bench-{n}", "base": "default", "seeds": list(range(start, start + n))})


def cpu() -> float:
    """CPU seconds of this process and its waited-for children (the pool's workers, once closed)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def direct(keys: list[str]) -> tuple[float, float]:
    """Wall and CPU time of the runs themselves, one after another in one process (no pool, no
    batches, no output): `simulate(from_dict(json))` and the summary's rows."""
    t0, c0 = time.perf_counter(), time.process_time()
    for key in keys:
        sc = from_dict(json.loads(key))
        summary_rows(simulate(sc).summary, sc)
    return time.perf_counter() - t0, time.process_time() - c0


def direct_in_a_worker(keys: list[str]) -> tuple[float, float]:
    """`direct` in a fresh worker process, as the sweep's runs execute (same start method)."""
    from concurrent.futures import ProcessPoolExecutor

    backend = make_backend("local", workers=1)
    with ProcessPoolExecutor(1, mp_context=backend._ctx) as pool:
        pool.submit(direct, keys[:3]).result()  # imports and caches warm, as after a worker's first task
        return pool.submit(direct, keys).result()


def overhead(k: int, tmp: Path) -> dict:
    spec = spec_of(k, start=100_000)
    keys = [r.key for r in expand(spec)]
    t_direct, c_direct = direct_in_a_worker(keys)
    backend = make_backend("local", workers=1)
    t0, c0 = time.perf_counter(), cpu()
    run_sweep(spec, tmp / "overhead", backend, progress=False)
    t_sweep = time.perf_counter() - t0
    backend.close()
    c_sweep = cpu() - c0
    per_run, extra = t_direct / k, (t_sweep - t_direct) / k
    return {"runs": k, "direct_s": t_direct, "sweep_s": t_sweep, "run_ms": per_run * 1e3,
            "overhead_ms": extra * 1e3, "overhead_pct": 100 * extra / per_run,
            "direct_cpu_s": c_direct, "sweep_cpu_s": c_sweep,
            "overhead_cpu_pct": 100 * (c_sweep - c_direct) / c_direct}


def throughput(n: int, backend_name: str, workers: int | None, address: str | None, tmp: Path) -> dict:
    spec = spec_of(n)
    t0, c0 = time.perf_counter(), cpu()
    backend = make_backend(backend_name, address, workers)
    t_start = time.perf_counter() - t0
    o = run_sweep(spec, tmp / f"throughput-{backend_name}", backend, progress=True)
    wall = time.perf_counter() - t0
    backend.close()
    used = cpu() - c0  # this process + the pool's workers (Ray's workers are not our children)
    return {"runs": n, "backend": backend_name, "workers": backend.workers, "wall_s": wall,
            "backend_start_s": t_start, "runs_per_s": n / wall, "status": o.status,
            "for_10k_min": wall / n * 10_000 / 60, "cpu_s": used if backend_name == "local" else None}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m engine.sweeps.sweep_bench", description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=10_000, help="runs for the throughput case (default 10,000)")
    p.add_argument("--overhead-runs", type=int, default=300)
    p.add_argument("--backend", choices=("local", "ray"), default="local")
    p.add_argument("--address")
    p.add_argument("--workers", type=int)
    p.add_argument("--overhead-only", action="store_true")
    p.add_argument("--no-overhead", action="store_true")
    args = p.parse_args(argv)
    load = os.getloadavg()
    print(f"{cpu_count()} cores; load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}", flush=True)
    with tempfile.TemporaryDirectory(prefix="sweep-bench-") as tmp:
        tmp = Path(tmp)
        if not args.no_overhead:
            o = overhead(args.overhead_runs, tmp)
            print(f"overhead: {o['runs']} runs: direct {o['direct_s']:.2f} s ({o['run_ms']:.1f} ms/run), "
                  f"through run_sweep with 1 local worker {o['sweep_s']:.2f} s → overhead "
                  f"{o['overhead_ms']:.2f} ms/run = {o['overhead_pct']:.1f} % of a run; CPU: direct "
                  f"{o['direct_cpu_s']:.2f} s, sweep {o['sweep_cpu_s']:.2f} s (all processes) → "
                  f"{o['overhead_cpu_pct']:.1f} %", flush=True)
        if not args.overhead_only:
            t = throughput(args.runs, args.backend, args.workers, args.address, tmp)
            print(f"throughput: {t['runs']:,} runs on {t['backend']} × {t['workers']}: {t['wall_s']:.1f} s wall "
                  f"(backend start {t['backend_start_s']:.1f} s), {t['runs_per_s']:.1f} runs/s → "
                  f"{t['for_10k_min']:.2f} min per 10,000 runs", flush=True)
            if t["cpu_s"]:
                idle_min = t["cpu_s"] / t["workers"] / 60 * 10_000 / t["runs"]
                print(f"  CPU of all processes {t['cpu_s']:.0f} s = {t['cpu_s'] / t['runs'] * 1e3:.1f} ms/run; on "
                      f"{t['workers']} otherwise idle cores that is {idle_min:.2f} min per 10,000 runs", flush=True)
    load = os.getloadavg()
    print(f"load average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
