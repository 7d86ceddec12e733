"""How long the reserve-sizing aid takes: `python -m ui.runtime.sizing_bench [PRESET ...] [--reps N]`.

The aid's own path minus Streamlit: a `RunPool` over two `python -m ui.runtime.worker` processes (what
`ui.runtime.runs.run_pool` builds on a 2-core machine), warmed by one run, then `sizing.size` for the
token and the KV reserve with the wait loop of `ui.runtime.runs.summaries` (polls every 0.1 s). Each
repetition uses a fresh pool, so nothing comes from the pool's memory of earlier runs. Prints
seconds and runs per knob.
"""

from __future__ import annotations

import argparse
import time

from engine import load
from engine.config.memory import breakdown

from . import sizing
from .pool import RunPool
from .worker import WorkerExecutor

PRESETS = {"budget-bound": {}, "classic-inversion+priority": {"scheduler.policy": "priority"}}


def summarizer(pool: RunPool, counter: list[int]):
    def summarize(keys: list[str]) -> list[dict]:
        keys = list(keys)
        counter[0] += len(set(keys))
        while True:
            pool.want("bench", keys)
            done, failed = pool.results("bench", keys)
            if len(done) + len(failed) >= len(set(keys)):
                if failed:
                    raise RuntimeError(next(iter(failed.values())))
                return [done[k] for k in keys]
            time.sleep(0.1)

    return summarize


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("presets", nargs="*", default=list(PRESETS))
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    for name in args.presets:
        sc = load(name.split("+")[0], PRESETS.get(name, {}))
        blocks = breakdown(sc).blocks
        for rep in range(args.reps):
            pool = RunPool(lambda: WorkerExecutor(2), workers=2)
            try:
                summarizer(pool, [0])([sc.key()])  # start the workers
                line = []
                for knob in ("reserve", "kvres"):
                    runs = [0]
                    t0 = time.perf_counter()
                    r = sizing.size(sc, knob, blocks, summarizer(pool, runs))
                    line.append(f"{knob} {time.perf_counter() - t0:.2f} s / {runs[0]} runs → {r.value}")
                print(f"{name} #{rep + 1}: " + "; ".join(line), flush=True)
            finally:
                pool.close()


if __name__ == "__main__":
    main()
