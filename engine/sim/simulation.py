"""Run a scenario: build the workload, the replicas and their feeds, let SimPy drive time.

One replica runs its step loop directly (nothing shares its clock, so SimPy would only add its
bookkeeping) and reads its arrivals straight from the sorted arrays (no per-arrival events). Several
replicas get a router process that hands each arrival, at its arrival time, to the least-loaded
replica allowed for its class (`routing: shared` — all replicas; `pinned` — the class's list).
Arrivals stop at `duration_s`; the run then drains until everything ends or `drain_limit_s`
passes, and whatever is left is reported as `unfinished`.
"""

from __future__ import annotations

import math
import time
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from ..config.cost import make_step_cost
from ..config.scenario import Scenario
from ..config.workload import build
from ..core.kv import UNLIMITED, KVPool
from ..core.policies import make_policy
from ..core.requests import Requests, Status
from ..core.sglang_rules import Settings, SGLangRules, default_class_priority, sglang_state
from ..core.state import EngineState
from ..core.step import Limits
from ..core.vllm_rules import VLLMRules
from ..core.walk import PREFILTER_MIN_QUEUE
from .feeds import WINDOW, GatewayFeed, RouterFeed, StaticFeed
from .gateway import Gateway
from .limits import Stop
from .observe import WaitLog
from .preflight import validate
from .replica import Replica
from .result import Result, build_result
from .steplog import StepLog

if TYPE_CHECKING:
    import simpy


def _scheduler(sc: Scenario, mem, wl, rs: Requests, shortcuts: bool,
               prefilter_min_queue: int = PREFILTER_MIN_QUEUE) -> VLLMRules | SGLangRules:
    """One engine's rulebook for `scheduler.engine` (vLLM's rules or SGLang's) over its own state."""
    if sc.scheduler.engine != "sglang":
        policy, limits = make_policy(sc.scheduler.policy), _limits(sc, mem, wl)
        return VLLMRules(EngineState(rs, _pool(sc, mem, wl), policy, limits), policy, limits, shortcuts=shortcuts,
                         prefilter_min_queue=prefilter_min_queue)
    limits = replace(_limits(sc, mem, wl), async_scheduling=False, prefix_caching=False)
    settings = sglang_settings(sc, wl.class_names, wl.class_priority.tolist())
    return SGLangRules(sglang_state(rs, _pool(sc, mem, wl), limits, settings), settings)


def sglang_settings(sc: Scenario, names: list[str], lab_priority: list[int]) -> Settings:
    """`scheduler.sglang.*` (and the shared keys it reads) as the SGLang scheduler's settings."""
    s, g = sc.scheduler, sc.scheduler.sglang
    prio = default_class_priority(lab_priority, g.schedule_low_priority_values_first)
    given = g.class_priority or {}
    prio = [given.get(n, p) for n, p in zip(names, prio)]
    chunk = (g.chunked_prefill_size or s.max_num_batched_tokens) if s.chunked_prefill else None
    return Settings(
        chunked_prefill_size=chunk,
        max_prefill_tokens=g.max_prefill_tokens,
        enable_mixed_chunk=g.enable_mixed_chunk,
        priority_scheduling=s.policy == "priority",
        low_values_first=g.schedule_low_priority_values_first,
        preemption_threshold=g.priority_scheduling_preemption_threshold,
        priority_preemption=not g.disable_priority_preemption,
        retraction_policy=g.retraction_policy,
        ignore_eos=g.ignore_eos,
        schedule_conservativeness=g.schedule_conservativeness,
        init_new_token_ratio=g.init_new_token_ratio,
        min_new_token_ratio_factor=g.min_new_token_ratio_factor,
        new_token_ratio_decay_steps=g.new_token_ratio_decay_steps,
        class_priority=tuple(prio),
    )


def simulate(sc: Scenario, *, shortcuts: bool = True, skip_steps: bool = True, stop: Stop | None = None,
             prefilter_min_queue: int = PREFILTER_MIN_QUEUE, window: int = WINDOW, around=None) -> Result:
    """Simulate the scenario; the same scenario (incl. seed) always gives identical results.

    `shortcuts` (the running set's plans) and `skip_steps` (runs of pure decode steps in one go)
    change how fast, never what: with both off the engine steps through vLLM's plain loop.
    `stop`: limits past which the run gives up with a WorkLimitError (none by default).
    `prefilter_min_queue`: a skipping policy's queue longer than this is pre-filtered on KV;
    `window`: arrivals turned into Python numbers at a time (tests make it small);
    `around(rules)`: what each replica uses as its rulebook instead (tests: a spy on the rules, a
    fault injected into `schedule`) — the rules' interface is what `Replica` calls."""
    wall0 = time.perf_counter()
    mem = validate(sc)
    wl = build(sc)
    names = wl.class_names
    top = int(wl.class_priority.min())
    rs = Requests(wl, top)
    for i, why in wl.rejected.items():
        rs.reject(i, why)
    cost = make_step_cost(sc.cost, mem)
    gw_spec = sc.gateway if sc.gateway is not None and sc.gateway.enabled else None
    env = _environment() if gw_spec is not None or sc.replicas.count > 1 else None  # one replica: no SimPy
    log = WaitLog(rs, sc.mitigations.alert_after_s, sc.kv.block_size)
    steps = StepLog(names, mem.usable_blocks)
    until = sc.duration_s + sc.drain_limit_s
    replicas: list[Replica] = []
    by_class_replicas = _allowed_replicas(sc, names)

    def on_finish(i: int, t: float, after_the_call: bool = False) -> None:
        """A split request's next piece is sent when the previous one finishes. Under async
        scheduling the finish is known once a call takes in the outputs; if that call built the
        step at t, the piece arrives just after it (the next float): the step at t never saw it
        wait (an empty call is followed at once by another, which does see it)."""
        j = int(rs.next_piece[i])
        if j >= 0:
            rs.arrival[j] = math.nextafter(t, math.inf) if after_the_call else t
            route(j, float(rs.arrival[j]))

    # Split pieces arrive when an earlier piece finishes on any replica: not known in advance, so
    # several replicas step one at a time when there may be pieces. Behind a gateway, requests
    # arrive whenever it dispatches: every replica steps one at a time.
    skip = skip_steps and gw_spec is None and (sc.replicas.count == 1 or not (rs.next_piece >= 0).any())
    watch = stop.watch(lambda: sum(rep.k for rep in replicas)) if stop is not None else None
    for k in range(sc.replicas.count):
        rules = _scheduler(sc, mem, wl, rs, shortcuts, prefilter_min_queue)
        if around is not None:
            rules = around(rules)
        replicas.append(Replica(k, env, rs, rules, cost, log, steps, on_finish, until=until, skip=skip, watch=watch))

    first = np.flatnonzero(np.isfinite(rs.arrival) & (rs.status != Status.REJECTED))
    due = rs.arrival[first]  # an idle engine starts at the arrival, a busy one takes it at its next step
    gateway = None
    if gw_spec is not None:  # arrivals reach the gateway; it dispatches at arrivals and step boundaries
        gateway = Gateway(gw_spec, rs, replicas, names, wl.class_priority, log)
        feed = GatewayFeed(gateway, steps.compact)
        if gw_spec.scrape_interval_s > 0:
            env.process(_scraper(env, gateway, gw_spec.scrape_interval_s))
        for rep in replicas:
            env.process(rep.process(feed))

        def route(j: int, t: float) -> None:
            gateway.arrive(j, t)

        env.process(_router(env, first, due, route, RouterFeed(due), steps.compact, window))
        env.run(until=until)
        gateway.finish()
    elif len(replicas) == 1:  # no router: the replica's loop runs without SimPy
        feed = StaticFeed(first, due, steps.compact, window)

        def route(j: int, t: float) -> None:
            feed.add(j, t)

        replicas[0].drive(feed, until)
    else:
        shared = RouterFeed(due)
        for rep in replicas:
            env.process(rep.process(shared))

        def route(j: int, t: float) -> None:
            allowed = by_class_replicas[int(rs.cls[j])]
            best = min(allowed, key=lambda k: (replicas[k].load, k))
            replicas[best].submit(j)

        env.process(_router(env, first, due, route, shared, steps.compact, window))
        env.run(until=until)
    steps.seal()  # the log is complete: compact it before the frames are built
    t_end = steps.end() or 0.0
    for rep in replicas:
        rep.state.write_back()
    left = rs.in_flight()
    rs.unfinish(left.tolist(), f"still in the system after the {sc.drain_limit_s:g} s drain limit")
    log.finish(max(t_end, until) if len(left) else t_end)
    return build_result(sc, mem, rs, log, steps, t_end, time.perf_counter() - wall0, gateway,
                        sum(rep.turns for rep in replicas))


def _environment() -> simpy.Environment:
    """SimPy's clock, for several replicas or a gateway: loaded only then (one replica runs without it)."""
    import simpy

    return simpy.Environment()


def _router(env: simpy.Environment, ids: np.ndarray, times: np.ndarray, route, feed: RouterFeed, tidy,
            window: int = WINDOW):
    """Hands each arrival over at its time (and, between steps, lets the step log compact itself)."""
    for i, t in _pairs(ids, times, window):
        if t > env.now:
            yield env.timeout(t - env.now)
        feed.routed()
        route(i, t)
        tidy()


def _pairs(ids: np.ndarray, times: np.ndarray, window: int = WINDOW):
    """(id, time) as Python numbers, converted a window at a time (not a million at once)."""
    for k in range(0, len(ids), window):
        yield from zip(ids[k:k + window].tolist(), times[k:k + window].tolist())


def _scraper(env: simpy.Environment, gateway: Gateway, every: float):
    """The gateway's metric scrapes, at multiples of the interval, each followed by a look at
    what may go; asleep while nothing is anywhere."""
    while True:
        gateway.scrape()
        gateway.pump(env.now)
        if gateway.idle:
            gateway.kick = env.event()
            yield gateway.kick
            gateway.kick = None
            nxt = math.ceil(env.now / every) * every  # the next scrape time (the last one saw nothing)
            if nxt > env.now:
                yield env.timeout(nxt - env.now)
        else:
            yield env.timeout(every)


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
        capacity=mem.usable_blocks,  # vLLM's null block is never handed out
        block_size=sc.kv.block_size,
        class_is_top=is_top,
        class_caps=caps,
        top_reserve=sc.mitigations.p0_kv_reserve if not is_top.all() else 0,
        watermark_blocks=int(sc.scheduler.watermark * mem.blocks),  # vLLM: on num_gpu_blocks, null block included
    )


def _limits(sc: Scenario, mem, wl) -> Limits:
    s, m = sc.scheduler, sc.mitigations
    several = len(set(wl.class_priority.tolist())) > 1
    swap = m.preempt_mode == "swap"
    return Limits(
        budget=s.max_num_batched_tokens,
        max_seqs=s.max_num_seqs,
        threshold=s.long_prefill_token_threshold,
        threshold_adaptive=s.long_prefill_token_threshold_adaptive,
        async_scheduling=s.async_scheduling,
        prefix_caching=sc.kv.prefix_caching,
        max_queued_reqs=s.max_num_queued_reqs,
        max_queued_tokens=s.max_num_queued_tokens,
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
