"""Speed benchmark: wall time, steps/s, requests/s and peak memory per scenario.

Each scenario runs in a fresh process (so peak RSS is that run's alone), three times for the
small default scenario (best of three is reported) and once for the 100k-request one.
"""

from __future__ import annotations

import json
import subprocess
import sys

CASES = [("default", 3), ("stress-100k", 1)]

_CHILD = """
import json, resource, sys, time
from engine import load, simulate
sc = load(sys.argv[1])
t0 = time.perf_counter()
res = simulate(sc)
wall = time.perf_counter() - t0
print(json.dumps({"wall_s": wall, "steps": res.summary["steps"], "requests": len(res.requests),
                  "sim_s": res.summary["sim_time_s"],
                  "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def measure(name: str) -> dict:
    out = subprocess.run([sys.executable, "-c", _CHILD, name], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_bench(quick: bool = False) -> None:
    print(f"{'scenario':<14}{'requests':>10}{'steps':>10}{'sim s':>9}{'wall s':>9}{'steps/s':>10}"
          f"{'req/s':>10}{'peak MiB':>10}")
    for name, repeats in CASES:
        if quick and name == "stress-100k":
            continue
        best = min((measure(name) for _ in range(repeats)), key=lambda r: r["wall_s"])
        print(f"{name:<14}{best['requests']:>10}{best['steps']:>10}{best['sim_s']:>9.0f}{best['wall_s']:>9.2f}"
              f"{best['steps'] / best['wall_s']:>10.0f}{best['requests'] / best['wall_s']:>10.0f}"
              f"{best['peak_mib']:>10.0f}")
