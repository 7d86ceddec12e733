"""Speed benchmark: wall time, steps/s, requests/s and peak memory per scenario.

Each case runs in a fresh process (`python -m engine run NAME --json`), so its peak RSS is its
own (read with `os.wait4`); the small cases run three times and the best is reported. The Vidur
case is also run through `naive_loop`: the plain per-step Python loop a simulator would write
first (one object per request, every running request touched every step), with the same vLLM
FCFS rules, timed in the same process environment — the yardstick for "faster than stepping".
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import deque

CASES = [("default", 3), ("vidur-2k", 3), ("stress-100k", 1), ("stress-1m", 1)]
QUICK = {"default", "vidur-2k"}


def measure(name: str) -> dict:
    """Run one scenario in a child process: its summary, wall times (the simulation's, the whole
    process's with its imports) and peak RSS."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "engine", "run", name, "--json", "--no-work-limit"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.stdout.read(), proc.stderr.read()  # then reap it ourselves: wait4 gives its own peak RSS
    _, status, usage = os.wait4(proc.pid, 0)
    process_s = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise RuntimeError(f"{name}: {err.strip()}")
    s = json.loads(out)
    peak = usage.ru_maxrss / 1024
    return {"wall_s": s["wall_time_s"], "steps": s["steps"], "turns": s["loop_turns"], "process_s": process_s,
            "requests": sum(c["n"] for c in s["classes"].values()), "sim_s": s["sim_time_s"], "peak_mib": peak}


class _Req:
    __slots__ = ("arrival", "prompt", "end", "computed", "seq", "finish")

    def __init__(self, arrival: float, prompt: int, output: int):
        self.arrival, self.prompt, self.end = arrival, prompt, prompt + output
        self.computed, self.seq, self.finish = 0, prompt, -1.0


def naive_loop(arrival, prompt, output, blocks: int, block_size: int, budget: int, max_seqs: int,
               step_s: float, asyn: bool = True) -> tuple[int, list[float]]:
    """vLLM v1 FCFS stepped one iteration at a time over per-request objects: (steps, finish times).
    `blocks` usable KV blocks; an idle engine starts at an arrival, a busy one steps at
    origin + k·step_s; `asyn`: a finished request leaves after the next schedule() call (which
    takes no time if it schedules nothing). No prefix cache: the engine agrees with it when
    nothing shares a prefix and nothing is preempted (vidur-2k)."""
    reqs = [_Req(a, p, o) for a, p, o in zip(arrival, prompt, output)]
    pending, waiting, running, in_flight = deque(reqs), deque(), [], []
    free, origin, tick, steps, eps = blocks, 0.0, 0, 0, step_s * 1e-9

    def need(tokens: int) -> int:
        return -(-tokens // block_size)

    while pending or waiting or running:
        while pending and pending[0].arrival <= origin + tick * step_s + eps:
            waiting.append(pending.popleft())
        if not waiting and not running:
            origin, tick = pending[0].arrival, 0  # idle: the next arrival starts a step at once
            continue
        left, chunk, preempted, free = _naive_running(running, waiting, free, budget, need)
        if not preempted:
            left, free = _naive_waiting(running, waiting, free, left, chunk, max_seqs, need)
        if in_flight:  # async: the last step's outputs, taken in after this call
            for r in in_flight:
                if r in running:
                    running.remove(r)
                    free += need(r.computed)
                else:  # preempted by this call
                    waiting.remove(r)
            in_flight = []
            if not chunk:
                continue  # an empty call: no forward pass, no time
        tick += 1
        steps += 1
        done = []
        for r in running:  # apply the step
            r.computed += chunk.get(id(r), 0)
            if r.computed == r.seq:
                r.seq += 1
                if r.seq == r.end:
                    done.append(r)
                    r.finish = origin + tick * step_s
        if asyn:
            in_flight = done
            continue
        for r in done:
            running.remove(r)
            free += need(r.computed)
    return steps, [r.finish for r in reqs]


def _naive_running(running, waiting, free, budget, need):
    """The running pass in admission order; no blocks: preempt the most recently admitted."""
    left, chunk, preempted = budget, {}, False
    k = 0
    while k < len(running) and left > 0:
        r = running[k]
        if r.seq == r.end:  # its last token is in flight (async)
            k += 1
            continue
        n = min(r.seq - r.computed, left)
        grow = need(r.computed + n) - need(r.computed)
        while grow > free:
            v = running.pop()
            given = chunk.pop(id(v), 0)
            free += need(v.computed + given)
            left += given
            v.computed = 0
            waiting.appendleft(v)
            preempted = True
            if v is r:
                break
        if preempted and r not in running:
            break
        free -= grow
        chunk[id(r)] = n
        left -= n
        k += 1
    return left, chunk, preempted, free


def _naive_waiting(running, waiting, free, left, chunk, max_seqs, need):
    """The waiting pass, FCFS: the whole sequence must fit; only the first chunk is allocated."""
    while waiting and left > 0 and len(running) < max_seqs:
        r = waiting[0]
        if need(r.seq) > free:
            break
        n = min(r.seq - r.computed, left)
        running.append(waiting.popleft())
        free -= need(r.computed + n)
        chunk[id(r)] = n
        left -= n
    return left, free


def naive_vidur() -> dict:
    """The naive loop on the Vidur workload, timed in this process."""
    from .config.scenario import load
    from .config.workload import build

    sc = load("vidur-2k")
    wl = build(sc)
    t0 = time.perf_counter()
    steps, _ = naive_loop(wl.arrival_s.tolist(), wl.prompt.tolist(), wl.output.tolist(), sc.kv.num_blocks - 1,
                          sc.kv.block_size, sc.scheduler.max_num_batched_tokens, sc.scheduler.max_num_seqs,
                          sc.cost.step_time_s, sc.scheduler.async_scheduling)
    return {"wall_s": time.perf_counter() - t0, "steps": steps}


def run_bench(quick: bool = False) -> None:
    """One line per scenario: `wall s` is the simulation (loop and result frames), `µs/turn` that
    time per turn of the replica's loop (an event: a step, a run of quiet steps, an arrival or a
    wake), `process s` the whole `python -m engine run NAME --json` with its imports."""
    from .native import ENGINE

    print(f"engine: {ENGINE}")
    print(f"{'scenario':<14}{'requests':>10}{'steps':>11}{'turns':>10}{'sim s':>9}{'wall s':>9}{'µs/turn':>9}"
          f"{'steps/s':>11}{'req/s':>10}{'process s':>11}{'peak MiB':>10}")
    for name, repeats in CASES:
        if quick and name not in QUICK:
            continue
        best = min((measure(name) for _ in range(repeats)), key=lambda r: r["wall_s"])
        print(f"{name:<14}{best['requests']:>10}{best['steps']:>11}{best['turns']:>10}{best['sim_s']:>9.0f}"
              f"{best['wall_s']:>9.3f}{best['wall_s'] / best['turns'] * 1e6:>9.1f}"
              f"{best['steps'] / best['wall_s']:>11.0f}{best['requests'] / best['wall_s']:>10.0f}"
              f"{best['process_s']:>11.2f}{best['peak_mib']:>10.0f}")
        if name == "vidur-2k":
            naive = min((naive_vidur() for _ in range(repeats)), key=lambda r: r["wall_s"])
            print(f"{'  naive loop':<14}{'':>10}{naive['steps']:>11}{'':>10}{'':>9}{naive['wall_s']:>9.3f}{'':>9}"
                  f"{naive['steps'] / naive['wall_s']:>11.0f}{'':>10}{'':>11}{'':>10}"
                  f"   engine/naive = {best['wall_s'] / naive['wall_s']:.2f}")
