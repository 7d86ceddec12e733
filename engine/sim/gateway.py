"""A gateway in front of the replicas: priority bands and flow control, as llm-d-router does it.

Many deployments put priority at the gateway, not in the engine. This models the flow control of
llm-d-router (`pkg/epp/flowcontrol`, llm-d/llm-d-router @ ebab6879, 2026-08-21; the code moved
there from the Gateway API Inference Extension in 2026):

- Each class is a flow with an integer priority (`InferenceObjective.spec.priority`): higher is
  dispatched first, negative is sheddable. Default: the class order, top class highest (N−1 …
  0 over the distinct lab priorities), so nothing is sheddable unless configured.
- One queue per priority band. Within a band: `global-strict` (llm-d's default: one FCFS order
  over the band) or `round-robin` over the band's flows (the fairness id is the class); FCFS
  within a flow (by arrival at the gateway).
- Saturation (llm-d's `utilization` detector): the mean over endpoints of max(queue / 5,
  KV / 0.8), queue = requests waiting at the engine (including those handed over and not yet
  taken in), KV = used blocks / usable blocks. With `scrape_interval_s` = 0 the metrics are read
  live at every dispatch decision, so a dispatch counts at once in its endpoint's queue. With an
  interval (llm-d scrapes every 50 ms) they are the last scrape's, taken at multiples of the
  interval: a dispatch does not count until the next scrape, so a burst passes a gate that
  looked open (the lagged signal of llm-d; metrics are never older than the interval here).
- Dispatch: the highest non-empty band whose ceiling is above the saturation sends its oldest
  request (by the fairness rule) to the least-loaded replica — the lab's router rule — and the
  gateway looks again, until no band may send. A band's ceiling (holdback, llm-d's
  `priority-holdback-policy`) defaults to 1.0, the saturation threshold; a band held by its
  ceiling does not stop a lower band whose ceiling is higher.
- Shedding: a sheddable arrival is dropped with HTTP 429 while the pool is saturated
  (`shed_when_saturated`); any request queued longer than `request_ttl_s` is dropped with HTTP
  429 at the next dispatch decision. Both end `rejected` with a reason starting "HTTP 429".

The gateway looks when a request arrives and at every step boundary of every replica (the only
times engine metrics change). It never writes a priority into the engine's request: the
engine's policy is its own (`scheduler.policy`, `fcfs` as deployed). An engine sees a request
arrive when it is dispatched (its FCFS order and engine wait segments start there; ties in
dispatch order); TTFT, end-to-end latency and alerts count from the arrival at the gateway. The
time a request is held here is a wait segment of its own (reason `gateway`, in the run's wait log),
and a top-priority request held past the alert threshold raises its alert here.

A gateway inversion: a request dispatched while a more important one (lower lab priority) waits
at the gateway; `overtaken[i]` counts them for the waiting request i.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from ..core.reasons import SHED_GATEWAY as HTTP_429  # the reason of a request the gateway drops starts so
from ..core.reasons import Reason
from ..core.requests import Status


def saturation(queues, kv_fractions, queue_threshold: float = 5.0, kv_threshold: float = 0.8) -> float:
    """llm-d's utilization detector: the mean over endpoints of max(queue/qt, kv/kt) (0: none)."""
    scores = [max(q / queue_threshold, k / kv_threshold) for q, k in zip(queues, kv_fractions)]
    return sum(scores) / len(scores) if scores else 0.0


def default_priorities(lab_priorities) -> dict[int, int]:
    """Gateway priority per lab priority: the class order, top (lowest number) highest, bottom 0."""
    distinct = sorted(set(int(p) for p in lab_priorities))
    return {p: len(distinct) - 1 - k for k, p in enumerate(distinct)}


class Band:
    """One priority band's queue: flows (by class, or one flow for `global-strict`), FCFS each."""

    def __init__(self, priority: int, ceiling: float, round_robin: bool):
        self.priority, self.ceiling, self.round_robin = priority, ceiling, round_robin
        self.flows: dict[int, deque[int]] = {}
        self.turn: deque[int] = deque()  # round-robin: the flows in the order they get their turn
        self.size = 0

    def push(self, flow: int, i: int) -> None:
        key = flow if self.round_robin else -1
        q = self.flows.get(key)
        if q is None:
            q = self.flows[key] = deque()
            self.turn.append(key)
        q.append(i)
        self.size += 1

    def pop(self) -> int:
        key = self.turn[0]
        q = self.flows[key]
        i = q.popleft()
        self.size -= 1
        self.turn.rotate(-1)  # the next flow's turn (a single flow stays first)
        if not q:
            del self.flows[key]
            self.turn.remove(key)
        return i

    def drop(self, i: int, flow: int) -> None:
        """Take request i (the head of its flow, or anywhere in it) out of the band."""
        key = flow if self.round_robin else -1
        q = self.flows[key]
        q.remove(i)
        self.size -= 1
        if not q:
            del self.flows[key]
            self.turn.remove(key)

    def ids(self) -> list[int]:
        return [i for q in self.flows.values() for i in q]


class Gateway:
    """The flow controller. `replicas` are engine.sim.replica.Replica objects (their scheduler's queue
    and KV pool are the metrics; `submit` hands a request over)."""

    def __init__(self, spec, rs, replicas, class_names: list[str], class_priority, log=None):
        self.spec, self.rs, self.replicas = spec, rs, replicas
        lab = [int(p) for p in class_priority]
        defaults = default_priorities(lab)
        prio, ceil = [], []
        for c, name in enumerate(class_names):
            own = spec.classes.get(name)
            prio.append(own.priority if own is not None and own.priority is not None else defaults[lab[c]])
            ceil.append(own.ceiling if own is not None and own.ceiling is not None else 1.0)
        self.class_gw_priority = prio
        rr = spec.fairness == "round-robin"
        bands: dict[int, Band] = {}
        for c, p in enumerate(prio):  # a band's ceiling: the lowest of its classes'
            b = bands.get(p)
            bands[p] = Band(p, ceil[c], rr) if b is None else b
            bands[p].ceiling = min(bands[p].ceiling, ceil[c])
        self.bands = [bands[p] for p in sorted(bands, reverse=True)]
        self.band_of = [bands[p] for p in prio]
        n = rs.n
        self.arrived = np.full(n, np.nan)
        self.seen = np.full(n, np.nan)  # when the gateway first looked at it
        self.dispatched = np.full(n, np.nan)
        self.overtaken = np.zeros(n, np.int64)
        self.inversions = 0  # dispatches that overtook at least one more important waiting request
        self.waiting_lab = {p: 0 for p in set(lab)}  # requests waiting at the gateway per lab priority
        # dispatches of requests less important than each lab priority so far: a waiting request's
        # `overtaken` is the growth of its priority's count while it waits (no walk of the queue)
        self.passed = {p: 0 for p in set(lab)}
        self._since = np.zeros(n, np.int64)
        self.seq = 0
        self.scraped: tuple[list[int], list[float]] | None = None  # None: live metrics
        self.kick = None  # set by the scraper while it sleeps (engine.sim.simulation)
        # the wait log (engine.sim.observe.WaitLog), if the waits here are observed: a request held
        # here has a `gateway` wait segment, and a top-priority one raises its alert here
        self.log = log
        top = [self.band_of[c] for c, p in enumerate(lab) if p == min(lab)]
        self.top_bands = [b for b in self.bands if any(b is t for t in top)]  # where top requests wait
        if log is not None:
            log.since = self.arrived  # alerts count from the arrival here, as TTFT does

    # -- metrics ---------------------------------------------------------------------------------
    def metrics(self) -> tuple[list[int], list[float]]:
        """Each endpoint's waiting requests and KV usage, as they are now."""
        qs, kvs = [], []
        for rep in self.replicas:
            qs.append(rep.waiting)
            pool = rep.pool
            kvs.append(pool.used / pool.capacity)
        return qs, kvs

    def scrape(self) -> None:
        """Take the metrics the gateway will see until the next scrape."""
        self.scraped = self.metrics()

    def saturation(self) -> float:
        qs, kvs = self.scraped if self.scraped is not None else self.metrics()
        return saturation(qs, kvs, self.spec.queue_depth_threshold, self.spec.kv_cache_threshold)

    @property
    def idle(self) -> bool:
        """Nothing queued here and nothing at any engine (a scrape would see the same)."""
        return not self.waiting and not any(rep.load for rep in self.replicas)

    @property
    def waiting(self) -> int:
        return sum(b.size for b in self.bands)

    # -- arrivals and dispatch -------------------------------------------------------------------
    def arrive(self, i: int, t: float) -> None:
        """Request i reaches the gateway: queued (or shed), then the gateway looks at t."""
        rs = self.rs
        self.arrived[i] = rs.arrival[i] if np.isfinite(rs.arrival[i]) else t
        self.seen[i] = t
        c = int(rs.cls[i])
        if self.class_gw_priority[c] < 0 and self.spec.shed_when_saturated and (s := self.saturation()) >= 1.0:
            rs.reject(i, f"{HTTP_429} (gateway): sheddable (gateway priority {self.class_gw_priority[c]}) "
                         f"and the pool is saturated ({s:.2f} >= 1)")
            return
        self.band_of[c].push(c, i)
        p = int(rs.prio[i])
        self.waiting_lab[p] += 1
        self._since[i] = self.passed[p]
        if self.log is not None:
            self.log.hold(i, self.arrived[i], Reason.GATEWAY)
        self.pump(t)
        if self.kick is not None and not self.kick.triggered:
            self.kick.succeed()

    def pump(self, now: float) -> None:
        """Dispatch what may go now: the highest band whose ceiling is above the saturation, again
        and again, until none may."""
        if not self.waiting:
            return
        ttl = self.spec.request_ttl_s
        if ttl is not None:
            self._expire(now, ttl)
        while True:
            sat = self.saturation()
            for band in self.bands:
                if band.size and sat < band.ceiling:
                    self._dispatch(band.pop(), now)
                    break
            else:
                break
        if self.log is not None and self.log.alert_after_s is not None:
            self._alerts(now)

    def _alerts(self, now: float) -> None:
        """Top-priority requests still held here that have now waited long enough alert (at an
        arrival or a step boundary: when an engine would have looked too)."""
        log, after, top = self.log, self.log.alert_after_s, self.rs.is_top
        for band in self.top_bands:
            for q in band.flows.values():
                for i in q:
                    if now - float(self.arrived[i]) < after:
                        break  # (a flow is in arrival order)
                    if top[i] and not log.alerted[i]:
                        log.alert_held(i, now)

    def _dispatch(self, i: int, now: float) -> None:
        rs = self.rs
        p = int(rs.prio[i])
        self._leave(i, p, now)
        if any(n for q, n in self.waiting_lab.items() if q < p):  # a more important one waits
            self.inversions += 1
        for q in self.passed:
            if q < p:
                self.passed[q] += 1
        self.dispatched[i] = now
        rs.arrival[i] = now  # the engine's arrival (FCFS order, wait segments); restored by `finish`
        rs.tie[i] = self.seq  # same instant: the engine keeps the dispatch order
        self.seq += 1
        best = min(self.replicas, key=lambda r: (r.load, r.index))
        best.submit(i)

    def _expire(self, now: float, ttl: float) -> None:
        """Drop every queued request older than the TTL (each flow is FCFS: look at its head)."""
        rs = self.rs
        for band in self.bands:
            for q in list(band.flows.values()):
                while q and now - float(self.arrived[q[0]]) > ttl:
                    i = q[0]
                    waited = now - float(self.arrived[i])
                    band.drop(i, int(rs.cls[i]))
                    self._leave(i, int(rs.prio[i]), now)
                    rs.reject(i, f"{HTTP_429} (gateway): waited {waited:.3f} s in the gateway queue "
                                 f"(gateway.request_ttl_s = {ttl:g})")

    def _leave(self, i: int, p: int, now: float) -> None:
        """Request i (lab priority p) leaves the gateway queue at `now`: dispatched or dropped (its
        wait here is a segment if it outlasted the gateway's first look at it)."""
        if self.log is not None:
            self.log.release(i, now, keep=bool(now > self.seen[i]))  # (a numpy bool: the compiled log takes a bool)
        self.waiting_lab[p] -= 1
        self.overtaken[i] = self.passed[p] - self._since[i]

    def finish(self) -> None:
        """After the run: every request's arrival is its arrival at the gateway again (TTFT, e2e);
        a request still queued counts what passed it until the end."""
        rs = self.rs
        for i in self.still_queued():
            self.overtaken[i] = self.passed[int(rs.prio[i])] - self._since[i]
        seen = np.isfinite(self.arrived)
        self.rs.arrival[seen] = self.arrived[seen]

    def still_queued(self) -> list[int]:
        return [i for b in self.bands for i in b.ids() if self.rs.status[i] == Status.PENDING]
