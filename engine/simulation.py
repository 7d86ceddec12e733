"""Run a scenario: build the workload, the replicas and their feeds, let SimPy drive time.

One replica reads its arrivals straight from the sorted arrays (no per-arrival events). Several
replicas get a router process that hands each arrival, at its arrival time, to the least-loaded
replica allowed for its class (`routing: shared` — all replicas; `pinned` — the class's list).
Arrivals stop at `duration_s`; the run then drains until everything ends or `drain_limit_s`
passes, and whatever is left is reported as `unfinished`.
"""

from __future__ import annotations

import bisect
import heapq
import math
import time

import numpy as np
import simpy

from .cost import make_step_cost
from .kv import UNLIMITED, KVPool
from .memory import breakdown
from .observe import WaitLog
from .policies import make_policy
from .replica import Replica, StepLog
from .result import Result, build_result
from .scenario import Scenario, ScenarioError
from .scheduler import Limits, Scheduler
from .state import REJECTED, RUNNING, UNFINISHED, WAITING, Requests
from .workload import build


class StaticFeed:
    """Arrivals known in advance (sorted), plus follow-up pieces released while running.
    `next_t` is the time of the next arrival (inf: none known)."""

    def __init__(self, ids: np.ndarray, times: np.ndarray):
        self.ids, self.times, self.pos = ids.tolist(), times.tolist(), 0
        self.later: list[tuple[float, int]] = []
        self.next_t = self.times[0] if self.times else math.inf

    def add(self, i: int, t: float) -> None:
        heapq.heappush(self.later, (t, i))
        self.next_t = min(self.next_t, t)

    def __call__(self, now: float) -> list[int]:
        """The ids due by `now` (and `next_t` moves on)."""
        j = bisect.bisect_right(self.times, now, self.pos)
        due = self.ids[self.pos:j]
        self.pos = j
        while self.later and self.later[0][0] <= now:
            due.append(heapq.heappop(self.later)[1])
        nxt = self.times[j] if j < len(self.times) else math.inf
        self.next_t = min(nxt, self.later[0][0]) if self.later else nxt
        return due


class NoFeed:
    """A replica fed by the router only."""

    next_t = math.inf

    def __call__(self, now: float) -> list[int]:
        return []


def check(sc: Scenario) -> None:
    """Combinations that validate key by key but cannot run together."""
    if sc.mitigations.p0_token_reserve >= sc.scheduler.max_num_batched_tokens:
        raise ScenarioError(
            f"mitigations.p0_token_reserve = {sc.mitigations.p0_token_reserve}: must be below "
            f"scheduler.max_num_batched_tokens ({sc.scheduler.max_num_batched_tokens}), or no other class could ever run"
        )


def simulate(sc: Scenario) -> Result:
    """Simulate the scenario; the same scenario (incl. seed) always gives identical results."""
    wall0 = time.perf_counter()
    check(sc)
    mem = breakdown(sc)
    wl = build(sc)
    names = wl.class_names
    top = int(wl.class_priority.min())
    if sc.mitigations.p0_kv_reserve >= mem.blocks and len(set(wl.class_priority)) > 1:
        raise ScenarioError(
            f"mitigations.p0_kv_reserve = {sc.mitigations.p0_kv_reserve} blocks leaves nothing of the "
            f"{mem.blocks}-block KV cache for the other classes"
        )
    rs = Requests(wl, top)
    for i, why in wl.rejected.items():
        rs.reject(i, why)
    cost = make_step_cost(sc.cost, mem)
    env = simpy.Environment()
    log = WaitLog(rs, sc.mitigations.alert_after_s)
    steps = StepLog(len(names))
    replicas: list[Replica] = []
    by_class_replicas = _allowed_replicas(sc, names)

    def on_finish(i: int, t: float) -> None:
        j = int(rs.next_piece[i])
        if j >= 0:
            rs.arrival[j] = t
            route(j, t)

    for k in range(sc.replicas.count):
        sched = Scheduler(rs, _pool(sc, mem, wl), make_policy(sc.scheduler.policy), _limits(sc, mem, wl))
        replicas.append(Replica(k, env, rs, sched, cost, log, steps, on_finish))

    first = np.flatnonzero(np.isfinite(rs.arrival) & (rs.status != REJECTED))
    if len(replicas) == 1:
        feed = StaticFeed(first, rs.arrival[first])
        env.process(replicas[0].run(feed))

        def route(j: int, t: float) -> None:
            feed.add(j, t)
    else:
        for rep in replicas:
            env.process(rep.run(NoFeed()))

        def route(j: int, t: float) -> None:
            allowed = by_class_replicas[int(rs.cls[j])]
            best = min(allowed, key=lambda k: (replicas[k].load, k))
            replicas[best].submit(j)

        env.process(_router(env, first, rs.arrival[first], route))

    env.run(until=sc.duration_s + sc.drain_limit_s)
    table = steps.table()
    t_end = float((table[:, 1] + table[:, 2]).max()) if len(table) else 0.0
    left = np.flatnonzero(np.isin(rs.status, (WAITING, RUNNING)) | ((rs.status == 0) & np.isfinite(rs.arrival)))
    for i in left.tolist():
        rs.status[i] = UNFINISHED
        rs.reason[i] = f"still in the system after the {sc.drain_limit_s:g} s drain limit"
    log.finish(max(t_end, sc.duration_s + sc.drain_limit_s) if len(left) else t_end)
    return build_result(sc, mem, rs, log, steps, t_end, time.perf_counter() - wall0)


def _router(env: simpy.Environment, ids: np.ndarray, times: np.ndarray, route):
    for i, t in zip(ids.tolist(), times.tolist()):
        if t > env.now:
            yield env.timeout(t - env.now)
        route(i, t)


def _allowed_replicas(sc: Scenario, names: list[str]) -> list[list[int]]:
    everyone = list(range(sc.replicas.count))
    if sc.replicas.routing == "shared":
        return [everyone for _ in names]
    pin = sc.replicas.pin or {}
    return [sorted(set(pin.get(n, everyone))) for n in names]


def _pool(sc: Scenario, mem, wl) -> KVPool:
    names = wl.class_names
    caps = np.array([sc.request_class(c).caps.max_kv_blocks or UNLIMITED for c in names], dtype=np.int64)
    is_top = wl.class_priority == wl.class_priority.min()
    return KVPool(
        capacity=mem.blocks,
        block_size=sc.kv.block_size,
        class_is_top=is_top,
        class_caps=caps,
        top_reserve=sc.mitigations.p0_kv_reserve if not is_top.all() else 0,
        watermark_blocks=int(sc.scheduler.watermark * mem.blocks),
    )


def _limits(sc: Scenario, mem, wl) -> Limits:
    s, m = sc.scheduler, sc.mitigations
    several = len(set(wl.class_priority.tolist())) > 1
    swap = m.preempt_mode == "swap"
    return Limits(
        budget=s.max_num_batched_tokens,
        max_seqs=s.max_num_seqs,
        threshold=s.long_prefill_token_threshold,
        chunked=s.chunked_prefill,
        token_reserve=m.p0_token_reserve if several else 0,
        reserve_lendable=m.reserve_mode == "lendable",
        class_max_running=tuple(sc.request_class(c).caps.max_running for c in wl.class_names),
        inheritance=m.inheritance,
        aging_s=m.aging_s,
        top_priority=int(wl.class_priority.min()),
        swap_bytes_per_s=m.host_bandwidth_gbs * 1e9 if swap else 0.0,
        block_bytes=mem.kv_bytes_per_token * sc.kv.block_size,  # per GPU; each GPU has its own link
    )
