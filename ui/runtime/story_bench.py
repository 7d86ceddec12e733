"""How long *Does this hold?* takes to judge a story: `python -m ui.runtime.story_bench [PRESET ...] [--seeds 5]`.

The page's path minus Streamlit: a `RunPool` over two `python -m ui.runtime.worker` processes (what
`ui.runtime.runs.run_pool` builds on a 2-core machine), warmed by one run, then the page's wish list
(`ui.runtime.story_plan.plan`) polled every 0.1 s as its fragment does (every 0.5 s). A fresh pool per
preset, so nothing comes from the pool's memory. Prints the runs, the seconds until the shipped
load's column (×1) is judged on every seed, and until every run is in.
"""

from __future__ import annotations

import argparse
import time

from engine import load
from engine.sweeps.story import job, of_scenario

from . import story_plan
from .pool import RunPool
from .worker import MEASURE, WorkerExecutor

PRESETS = ("classic-inversion", "two-gpus", "sglang-engine")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("presets", nargs="*", default=list(PRESETS))
    ap.add_argument("--seeds", type=int, default=story_plan.DEFAULT_SEEDS)
    args = ap.parse_args()
    for name in args.presets:
        p = story_plan.plan(of_scenario(name), args.seeds)
        pool = RunPool(lambda: WorkerExecutor(2), workers=2)
        try:
            warm = [MEASURE + job(load(name, {"seed": 10**6}).key(), [])]  # a run the page never asks for
            pool.want("warm", warm)
            pool.wait(warm, 120)
            pool.want("warm", [])
            t0 = time.perf_counter()
            first = None
            while True:
                pool.want("bench", p.order)
                done, failed = pool.results("bench", p.order)
                if first is None and all(t.n == len(p.seeds) for t in story_plan.judge(p, done).tallies[1.0]):
                    first = time.perf_counter() - t0
                if len(done) + len(failed) == len(p.order):
                    break
                time.sleep(0.1)
            total = time.perf_counter() - t0
            print(f"{name}: {len(p.order)} runs ({args.seeds} seeds); ×1 judged in {first:.1f} s, all in {total:.1f} s"
                  + (f"; {len(failed)} failed" if failed else ""), flush=True)
        finally:
            pool.close()


if __name__ == "__main__":
    main()
