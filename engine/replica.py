"""One engine instance: its scheduler, its KV pool, and its step loop as a SimPy process.

The loop is nano-vLLM's `step()`: schedule → run for the step time → apply results. When nothing
is queued or running, the replica sleeps until its feed hands it the next arrival.

Multi-step skipping: after a pure decode step (everyone decoded one token; nobody was admitted,
preempted or finished) the next steps are the same step again until something happens — an
arrival is due, a request finishes, a KV block the pool cannot give is needed, a waiting
request's reason would change, an alert is due, or the run's time limit comes. The replica works
out how many steps that is (`_quiet_steps`), computes their step times exactly as stepping would
(the roofline time grows with the context every step), logs them as one run, and advances time
in one SimPy timeout. Every decision, count and time equals stepping one at a time.

The replica keeps its own clock (`now`): the same float additions stepping makes, so a run's end
is exactly where stepping would have arrived; SimPy's clock only orders the replicas.
"""

from __future__ import annotations

import math

import numpy as np
import simpy

from .cost import StepCost
from .kv import KVPool
from .observe import WaitLog
from .reasons import Reason
from .requests import Requests
from .scheduler import Scheduler
from .step import Step
from .steplog import StepLog

MAX_RUN = 4096  # steps considered for one run (a longer quiet stretch becomes several runs)
_KV_SHORT, _RESERVE = int(Reason.KV_SHORT), int(Reason.RESERVE)


class Replica:
    def __init__(self, index: int, env: simpy.Environment, rs: Requests, sched: Scheduler,
                 cost: StepCost, log: WaitLog, steps: StepLog, on_finish, *, until: float, skip: bool = True):
        self.index, self.env, self.rs, self.sched = index, env, rs, sched
        self.pool: KVPool = sched.pool
        self.cost, self.log, self.steps = cost, log, steps
        self.on_finish = on_finish
        self.until, self.skip = until, skip
        self.k = 0
        self.now = 0.0
        self._last_row: list[int] = []
        self._wake: simpy.Event | None = None
        self.pending: list[int] = []  # arrivals handed over, entered at the next step boundary
        self._no_waiting = [0] * len(self.pool.used_cls)

    @property
    def load(self) -> int:
        """Outstanding requests (queued + running): what the least-loaded router compares."""
        return len(self.sched.queue) + len(self.sched.running) + len(self.pending)

    def submit(self, i: int) -> None:
        self.rs.replica[i] = self.index
        self.pending.append(i)
        if self._wake is not None and not self._wake.triggered:
            self._wake.succeed()

    def _enter_pending(self) -> None:
        for i in self.pending:
            if self.sched.enqueue(i):
                self.log.enter(i, float(self.rs.arrival[i]))
        self.pending.clear()

    def run(self, feed):
        """SimPy process: `feed(now)` hands over the arrivals due by now; `feed.next_t` is when
        the next one is due."""
        env, sched, log = self.env, self.sched, self.log
        self.now = env.now
        last: Step | None = None  # the last step, while nothing has changed since (for a run)
        while True:
            if feed.next_t <= self.now:
                for i in feed(self.now):
                    self.submit(i)
            if self.pending:
                self._enter_pending()
                last = None
            if not sched.running and not sched.queue:
                yield from self._sleep(feed)
                continue
            if self.skip and (quiet := self._quiet_steps(last, feed)) is not None:
                yield from self._run_quiet(*quiet)
                last = None
                continue
            now = self.now
            step = sched.schedule(now)
            for v in step.preempted:
                log.enter(v, now)
            dt = self.cost(step.tokens, step.attn, step.context) + step.swap_s
            log.observe(self.index, self.k, now, dt, step, sched.running, sched.lim.budget)
            row = self._row(step)  # KV and running counts during the step
            yield env.timeout(dt)
            self.now = now + dt
            finished = sched.complete(step, self.now)
            self.steps.add(now, dt, row)
            self.k += 1
            for i in finished:
                self.on_finish(i, self.now)
            last = step if step.uniform and not finished else None
            self._last_row = row

    def _sleep(self, feed):
        """Nothing to do: sleep until the feed's next arrival, or until the router wakes us."""
        env = self.env
        if not feed.strict and feed.next_t < math.inf:
            delay = max(feed.next_t - self.now, 0.0)
            yield env.timeout(delay)
            self.now = self.now + delay
        else:
            self._wake = env.event()
            yield self._wake
            self._wake = None
            self.now = env.now

    def _row(self, step: Step) -> list[int]:
        """The step's integer columns of the step log (see `StepLog`)."""
        used = self.pool.used
        waiting = np.bincount(self.rs.cls[step.waiting], minlength=len(self._no_waiting)).tolist() \
            if len(step.waiting) else self._no_waiting
        return [self.index, step.tokens - step.decode, step.decode, step.batch, len(step.admitted),
                len(step.preempted), used, self.pool.capacity - used, step.reserve_idle,
                *self.sched.n_running_cls, *waiting, *self.pool.used_cls]

    # -- multi-step skipping --------------------------------------------------------------------
    def _run_quiet(self, starts: list[float], dts: list[float], kv: list[list[int]], row: list[int]):
        """Run these pure decode steps as one run: one row in the log, one SimPy timeout."""
        m = len(starts)
        self.steps.add_run(starts, dts, row, kv)
        t_end = starts[-1] + dts[-1]
        yield self.env.timeout(max(t_end - self.env.now, 0.0))
        self.now = t_end
        self.k += m
        growth = [b - a for a, b in zip(self.pool.used_cls, kv[-1])]
        for i in self.sched.repeat(m, growth, t_end):
            self.on_finish(i, t_end)

    def _quiet_steps(self, last: Step | None, feed):
        """The pure decode steps that come next, until something could happen: (start times, step
        times, KV blocks per class during each, the log row's constant columns), or None.

        The next step is surely a pure decode step when every running request decodes and nobody
        waits (the running pass hands out one token each, the waiting pass has nobody), or when the
        last step was one and nothing changed since (its waiting requests still cannot get in:
        KV room only shrinks while everyone decodes, seats and budget stay as they were). The run
        ends before an arrival, an alert or the time limit, with the first finish, and before KV
        would run out or a waiting request's reason would change."""
        sched, run, lim = self.sched, self.sched.running, self.sched.lim
        n = len(run)
        if sched.queue:
            if last is None or lim.aging_s > 0 and sched.policy.by_priority or lim.inheritance:
                return None  # unknown outcome / keys that drift with waiting time / holders reordered
            row = self._last_row
        else:
            if run.n_dec != n:
                return None
            reserve = lim.token_reserve if not lim.reserve_lendable else 0  # nobody waits or prefills
            r = min(reserve, run.n_top)
            if n - r > lim.budget - reserve:
                return None  # the budget cuts some decodes short: not a uniform step
            shared_left, reserve_left = lim.budget - reserve - (n - r), reserve - r
            idle = reserve_left if reserve_left and shared_left == 0 else 0
            row = [self.index, 0, n, n, 0, 0, 0, 0, idle, *sched.n_running_cls, *self._no_waiting,
                   *self.pool.used_cls]
        m = min(run.steps_to_finish(), MAX_RUN)
        start_by = min(feed.next_t, self._alert_time(last))  # steps must start before this
        end_by = min(self.until, feed.next_t) if feed.strict else self.until  # and end before this
        if min(start_by, end_by) < math.inf:  # steps only get longer as the context grows
            m = min(m, int((min(start_by, end_by) - self.now) / self.cost(n, run.ctx + 0.5 * n, run.ctx)) + 2)
        if m < 1:
            return None
        kv = self._kv_steps(m, last)
        starts, dts = self._times(len(kv), n, run.ctx, start_by, end_by)
        if not starts:
            return None
        return starts, dts, kv[:len(starts)], row

    def _times(self, m: int, n: int, ctx: int, start_by: float, end_by: float) -> tuple[list[float], list[float]]:
        """Start and step times of up to m decode steps of n requests on a context growing by n
        each step — the float additions stepping makes — keeping those that start before
        `start_by` and end before `end_by`."""
        cost, t = self.cost, self.now
        starts, dts = [], []
        for j in range(m):
            c = ctx + j * n
            dt = cost(n, float(c) + 0.5 * float(n), c)
            if t >= start_by or t + dt >= end_by:
                break
            starts.append(t)
            dts.append(dt)
            t = t + dt
        return starts, dts

    def _kv_steps(self, m: int, last: Step | None) -> list[list[int]]:
        """KV blocks per class during each of up to m decode steps, as long as they fit and leave
        every waiting request's reason as it is."""
        pool, run = self.pool, self.sched.running
        kv = list(pool.used_cls)
        cap, used = pool.capacity, pool.used
        other_cap = pool.capacity - pool.reserve if pool.reserve else None
        other = pool.used_other
        top = pool._top
        caps = pool._caps if pool.capped else None
        cap_total, cls_room = self._reason_limits(last)
        out = []
        for grow in run.growth_steps(m):
            if any(grow):
                kv = [a + g for a, g in zip(kv, grow)]
                used += sum(grow)
                if other_cap is not None:
                    other += sum(g for g, t in zip(grow, top) if not t)
                    if other > other_cap:
                        break
                if used > min(cap, cap_total):
                    break
                if caps is not None and any(a > c for a, c in zip(kv, caps)):
                    break
                if cls_room is not None and any(kv[c] > r for c, r in cls_room.items()):
                    break
            out.append(kv)
        return out

    def _reason_limits(self, last: Step | None) -> tuple[float, dict[int, int] | None]:
        """How full the pool (and each capped class) may get before a waiting request's KV reason
        would change: `reserve` turns `kv_short` once the whole pool is that short; with class
        caps, `kv_short`/`reserve` turn `class_cap` once the class holds that much."""
        if last is None or not len(last.waiting):
            return math.inf, None
        pool = self.pool
        checked = (last.need >= 0) & ((last.reasons == _KV_SHORT) | (last.reasons == _RESERVE))
        if not checked.any():
            return math.inf, None
        need, why = last.need[checked], last.reasons[checked]
        res = why == _RESERVE
        total = math.inf
        if res.any():
            total = pool.capacity - (pool.watermark if self.sched.running else 0) - int(need[res].max())
        rooms = None
        if pool.capped:
            rooms = {}
            for c, k in zip(self.rs.cls[last.waiting[checked]].tolist(), need.tolist()):
                rooms[c] = min(rooms.get(c, math.inf), pool._caps[c] - k)
        return total, rooms

    def _alert_time(self, step: Step | None) -> float:
        """When a waiting top-priority request could first raise its alert (inf: none can)."""
        after = self.log.alert_after_s
        if after is None or step is None or not len(step.waiting):
            return math.inf
        w = step.waiting[self.rs.is_top[step.waiting] & ~self.log.alerted[step.waiting]]
        if not len(w):
            return math.inf
        # the least float t with t − a ≥ after, so that "start < t" is exactly "no alert yet"
        a = float(self.rs.arrival[w].min())
        t = a + after
        while t - a >= after:
            t = math.nextafter(t, -math.inf)
        while t - a < after:
            t = math.nextafter(t, math.inf)
        return t
