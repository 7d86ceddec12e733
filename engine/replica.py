"""One engine instance: its rulebook over its state (queue, running set, KV pool), and its step loop
as a SimPy process.

The loop is nano-vLLM's `step()`: schedule → run for the step time → apply results. When nothing
is queued or running, the replica sleeps until its feed hands it the next arrival and starts a step
at that instant (vLLM's engine core blocks on its input queue). A schedule()
call that schedules nothing yet changes something (it preempted every running request; under
async scheduling, it took in the last step's outputs) runs no forward pass and takes no time, as
in vLLM: the next call, at the same instant, builds the step. A call that schedules nothing and
changes nothing is an idle step of the usual length, so the loop always moves on.

Multi-step skipping: after a pure decode step (everyone decoded one token; nobody was admitted,
preempted or finished) the next steps are the same step again until something happens — an
arrival is due, a request finishes, a KV block the pool cannot give is needed, a waiting
request's reason would change, an alert is due, or the run's time limit comes. The replica works
out how many steps that is (`_quiet_steps`), computes their step times exactly as stepping would
(the roofline time grows with the context every step), logs them as one run, and advances time
in one SimPy timeout. Every decision, count and time equals stepping one at a time.

The replica keeps its own clock (`now`, `engine.clock`): on a fixed step the exact boundaries
origin + k·dt of the busy period, otherwise the same float additions stepping makes, so a run's
end is exactly where stepping would have arrived; SimPy's clock only orders the replicas.
"""

from __future__ import annotations

import math

import numpy as np
import simpy

from .clock import Clock
from .cost import StepCost
from .kv import KVPool
from .observe import WaitLog
from .reasons import IN_ENGINE, VLLM_REASON, Reason
from .requests import Requests
from .step import Step
from .steplog import StepLog

MAX_RUN = 4096  # steps considered for one run (a longer quiet stretch becomes several runs)
WATCH_EVERY = 64  # loop turns between two looks at the run's limits (`engine.limits.Stop`)
WAKE = object()  # a wait until the router hands over an arrival
_KV_SHORT, _RESERVE, _HOL = int(Reason.KV_SHORT), int(Reason.RESERVE), int(Reason.HEAD_OF_LINE)
_TOKEN_BUDGET, _PREEMPTED = int(Reason.TOKEN_BUDGET), int(Reason.PREEMPTED)
_DEFERRED = [int(r) - 1 for r, word in VLLM_REASON.items() if word == "deferred"]  # vLLM's two words
_NO_REASONS = [0] * len(IN_ENGINE)
_CODES = len(IN_ENGINE) + 1  # the engine's codes are 1 … len(IN_ENGINE)


class Replica:
    def __init__(self, index: int, env: simpy.Environment | None, rs: Requests, rules, cost: StepCost,
                 log: WaitLog, steps: StepLog, on_finish, *, until: float, skip: bool = True, watch=None):
        self.index, self.env, self.rs, self.rules = index, env, rs, rules
        self.state = rules.state
        self.pool: KVPool = self.state.pool
        self.cost, self.log, self.steps = cost, log, steps
        self.on_finish = on_finish
        self.until, self.skip = until, skip and rules.multi_step  # (SGLang's loop: every step decided)
        self.watch = watch  # called every WATCH_EVERY turns of the loop with `now` (may stop the run)
        self.k = 0
        self.clock = Clock(cost.fixed_s)  # the engine's own time (`now`): exact boundaries
        self.grid = cost.fixed_s  # a fixed step: boundaries are origin + tick × grid
        self.sim = 0.0  # SimPy's clock as it would read: the sum of the waits yielded
        self._last_row: list[int] = []
        self._wake: simpy.Event | None = None
        self.pending: list[int] = []  # arrivals handed over, entered at the next step boundary
        self._no_waiting = [0] * len(self.pool.used_cls)
        self._carried: list[int] = []  # requests preempted by empty schedule() calls since the last step

    @property
    def now(self) -> float:
        return self.clock.now

    @property
    def load(self) -> int:
        """Outstanding requests (queued + running): what the least-loaded router compares."""
        return len(self.state.queue) + len(self.state.running) + len(self.pending)

    @property
    def waiting(self) -> int:
        """Requests waiting in this engine (queued + handed over): what a gateway scrapes."""
        return len(self.state.queue) + len(self.pending)

    def submit(self, i: int) -> None:
        self.rs.replica[i] = self.index
        self.pending.append(i)
        if self._wake is not None and not self._wake.triggered:
            self._wake.succeed()

    def _enter_pending(self) -> None:
        for i in self.pending:
            if self.rules.enqueue(i):
                self.log.enter(i, float(self.rs.arrival[i]))
        self.pending.clear()

    def process(self, feed):
        """The replica as a SimPy process (several replicas share SimPy's clock with the router)."""
        env = self.env
        for wait in self.run(feed):
            if wait is WAKE:
                self._wake = env.event()
                yield self._wake
                self._wake = None
                self.sim = env.now
                # an idle engine starts at once; the first request's own time where SimPy's
                # float sums put the wake an ulp before it
                self.clock.start(max([self.sim, *(float(self.rs.arrival[i]) for i in self.pending)]))
            else:
                yield env.timeout(wait)

    def drive(self, feed, until: float) -> None:
        """The replica alone: no other process shares its clock, so SimPy would only add its own
        bookkeeping; run it directly, stopping before a wait that reaches `until` (SimPy's rule)."""
        for wait in self.run(feed):
            if wait is WAKE or self.sim >= until:
                return

    def run(self, feed):
        """The step loop, a generator of waits (seconds, or ticks on a grid; WAKE: until the router
        hands over an arrival): `feed(now)` hands over the arrivals due by now; `feed.next_t` is
        when the next one is due."""
        st, skip = self.state, self.skip
        running, queued = st.running, st.queue.order
        strict, clock, eps = feed.strict and self.grid is not None, self.clock, self.clock.eps
        clock.start(0.0)
        self.sim = 0.0
        last: Step | None = None  # the last step, while nothing has changed since (for a run)
        watch, turns = self.watch, 0
        while True:
            if watch is not None:
                turns += 1
                if turns % WATCH_EVERY == 0:
                    watch(clock.now)
            if strict:  # let arrivals routed at this boundary (within eps) reach us first
                wait = feed.next_t - self.sim if self.sim < feed.next_t <= clock.now + eps else 0.0
                self.sim += wait
                yield wait
            if feed.next_t <= clock.now + eps:
                for i in feed(clock.now + eps):
                    self.submit(i)
            if self.pending:
                self._enter_pending()
                last = None
            if not running.ids and not queued:
                yield from self._sleep(feed)
                continue
            if skip and running.done and (done := st.take_early()):
                for i in done:  # async: the last step's outputs, when taking them in first changes nothing
                    self.on_finish(i, self.now, bool(running.ids))  # (nobody left: that call is empty)
                if not running.ids:
                    continue  # as after the empty call it saves: what arrived meanwhile enters now
            if skip and (quiet := self._quiet_steps(last, feed)) is not None:
                finished = yield from self._run_quiet(*quiet)
                if finished or not st.queue.order:
                    last = None  # (else the waiting requests stand as in `last`: see `_quiet_steps`)
                continue
            if (begun := self._begin(last)) is None:
                last = None  # an empty schedule() call: no forward pass, no time
                continue
            step, row, dt, ticks = begun
            now = clock.now
            wait = (clock.at(ticks) if ticks else now + dt) - self.sim
            self.sim += wait
            yield wait
            clock.advance(ticks, dt)
            last = self._end(step, row, now, dt)

    def _begin(self, last: Step | None):
        """One schedule() call: (its step, the step's log row, time, grid ticks), or None if it
        scheduled nothing."""
        st, log, now = self.state, self.log, self.now
        step = self.rules.schedule(now, last if self.skip and st.running.done and self._waits_stand(last) else None)
        for v in step.preempted:
            log.enter(v, now)
        empty = not step.tokens and step.changed  # an empty schedule() call: no forward pass, no time
        for i in step.finished:  # async: the last step's finishes, taken in by this call (after
            self.on_finish(i, now, not empty)  # it decided, unless another call follows at once)
        if empty:
            self._carried += step.preempted  # (its preemptions are logged with the next step)
            return None
        if self._carried:
            step.preempted[:0], self._carried = self._carried, []
        dt = self.cost(step.tokens, step.attn, step.context) + step.swap_s
        ticks = 0 if self.grid is None else (1 if dt == self.grid else self.clock.ticks(dt))
        if ticks:
            dt = ticks * self.grid
        log.observe(self.index, self.k, now, dt, step, st.running, st.lim.budget)
        return step, self._row(step), dt, ticks  # (the row: KV and running counts during the step)

    def _end(self, step: Step, row: list[int], now: float, dt: float) -> Step | None:
        """The step's time has passed: apply it. Returns the step if it was a pure decode step
        after which nothing changed (else None)."""
        st = self.state
        finished = st.complete(step, self.now)
        self.steps.add_row(now, dt, row)
        self.k += 1
        for i in finished:
            self.on_finish(i, self.now)
        self._last_row = row
        if not step.uniform or finished or step.finished and not self._still_short(step):
            return None
        return step

    def _still_short(self, step: Step) -> bool:
        """Async: the step's call took in finished requests' outputs, freeing their blocks and
        seats. Its waiting requests still stand as the call left them if each waits for KV that
        is still short even so (or behind one that does): then the step can start a run."""
        pool, cache = self.pool, self.state.cache
        if pool.capped or pool.reserve or cache is not None and cache.any_prefix:
            return False  # (hits on the freed blocks, caps, the reserve: not worth proving)
        codes = step.reasons
        if not ((codes == _KV_SHORT) | (codes == _HOL)).all():
            return False
        short = codes == _KV_SHORT
        free = pool.capacity - pool.used - (pool.watermark if self.state.running.ids else 0)
        return bool(short.any() and (step.need[short] > free).all())

    def _sleep(self, feed):
        """Nothing to do: sleep until the feed's next arrival, or until the router wakes us; the
        engine starts at that instant (a new busy period)."""
        if not feed.strict and feed.next_t < math.inf:
            delay = max(feed.next_t - self.sim, 0.0)
            self.sim += delay
            yield delay
            self.clock.start(max(feed.next_t, self.clock.now))
        else:
            yield WAKE  # (`process` starts the clock when the router hands over an arrival)

    def _row(self, step: Step) -> list[int]:
        """The step's integer columns of the step log (see `StepLog`)."""
        used = self.pool.used
        if len(step.waiting):
            waiting = np.bincount(self.rs.cls[step.waiting], minlength=len(self._no_waiting)).tolist()
            why = np.bincount(step.reasons, minlength=_CODES).tolist()[1:]
            deferred = sum(why[k] for k in _DEFERRED)
        else:
            waiting, why, deferred = self._no_waiting, _NO_REASONS, 0
        return [self.index, step.tokens - step.decode, step.decode, step.batch, len(step.admitted),
                len(step.preempted), used, self.pool.capacity - used, step.reserve_idle,
                len(step.waiting) - deferred, deferred, *why, 1,
                *self.state.n_running_cls, *waiting, *self.pool.used_cls]

    # -- multi-step skipping --------------------------------------------------------------------
    def _run_quiet(self, starts: list[float], dts: list[float], kv: list[int], row: list[int]):
        """Run these pure decode steps as one run: one row in the log, one SimPy timeout."""
        m = len(starts)
        self.steps.add_run(starts, dts, row, kv)
        clock = self.clock
        t_end = clock.at(m) if self.grid is not None else starts[-1] + dts[-1]
        wait = max(t_end - self.sim, 0.0)
        self.sim += wait
        yield wait
        if self.grid is not None:
            clock.advance(m, 0.0)
        else:
            clock.now = t_end
        t_end = clock.now
        self.k += m
        used = self.pool.used_cls
        growth = [b - a for a, b in zip(used, kv[-len(used):])]
        finished = self.state.repeat(m, growth, t_end)
        for i in finished:
            self.on_finish(i, t_end)
        return finished

    def _quiet_steps(self, last: Step | None, feed):
        """The pure decode steps that come next, until something could happen: (start times, step
        times, KV blocks per class during each, the log row's constant columns), or None.

        The next step is surely a pure decode step when every running request decodes and nobody
        waits (the running pass hands out one token each, the waiting pass has nobody), or when the
        last step was one and nothing changed since (its waiting requests still cannot get in:
        KV room only shrinks while everyone decodes, seats and budget stay as they were). The run
        ends before an arrival, an alert or the time limit, with the first finish, and before KV
        would run out or a waiting request's reason would change."""
        st, run, lim = self.state, self.state.running, self.state.lim
        n = len(run.ids)
        if run.done:
            return None  # async: a finished request leaves at the end of the next call
        if st.queue.order:
            if last is None or lim.aging_s > 0 and st.policy.by_priority or lim.inheritance:
                return None  # unknown outcome / keys that drift with waiting time / holders reordered
            if st.cache is not None and (st.cache.any_prefix or st.cache.segs) and (
                    self.pool.capped or self.pool.reserve):
                return None  # evicted hits grow a waiting request's need: a cap or reserve reason could change
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
            row = [self.index, 0, n, n, 0, 0, 0, 0, idle, 0, 0, *_NO_REASONS, 1, *st.n_running_cls,
                   *self._no_waiting, *self.pool.used_cls]
        m = min(run.steps_to_finish(), MAX_RUN)
        cache = st.cache
        if cache is not None and cache.hashing:  # stop before a shareable block would be hashed
            m = min([m] + [cache.pending(i) - run.comp_seq(run.ids.index(i))[0] - 1 for i in cache.hashing])
        start_by = feed.next_t - self.clock.eps  # steps must start before this (an arrival within eps is due)
        if last is not None and self.log.alert_after_s is not None:
            start_by = min(start_by, self._alert_time(last))
        end_by = min(self.until, feed.next_t) if feed.strict else self.until  # and end before this
        if self.grid is not None:  # one tick each: how many fit is arithmetic
            if min(start_by, end_by) < self.clock.at(m + 2):
                m = min(m, self._grid_steps(start_by, end_by))
        elif min(start_by, end_by) < math.inf:  # steps only get longer as the context grows
            m = min(m, int((min(start_by, end_by) - self.now) / self.cost(n, run.ctx + 0.5 * n, run.ctx)) + 2)
        if m < 1:
            return None
        kv = self._kv_steps(m, last)
        if not kv:
            return None
        c = len(self._no_waiting)
        m = len(kv) // c
        if self.grid is not None:
            at = self.clock.at
            return [at(j) for j in range(m)], [self.grid] * m, kv, row
        starts, dts = self._times(m, n, run.ctx, start_by, end_by)
        if not starts:
            return None
        return starts, dts, kv[:len(starts) * c], row

    def _waits_stand(self, last: Step | None) -> bool:
        """Async, the call after a finish, with requests waiting: in that call the finished
        requests still hold their blocks and seats, the others decode (KV room only shrinks),
        only the budget grows. If the last step was a pure decode step whose waiting requests
        waited for KV or seats only (not the budget, nor a reserve, nor a KV cap their class's
        growth could reach) and no alert is due, they stand exactly as then (nobody is admitted):
        the call can skip their walk."""
        lim = self.state.lim
        if last is None or self.pool.capped or lim.inheritance or lim.aging_s > 0 and self.state.policy.by_priority:
            return False
        if self._alert_time(last) <= self.now:
            return False
        codes = last.reasons
        return not ((codes == _TOKEN_BUDGET) | (codes == _RESERVE) | (codes == _PREEMPTED)).any()

    def _grid_steps(self, start_by: float, end_by: float) -> int:
        """On a fixed step: how many steps from this tick start before `start_by` and end before
        `end_by` (the same float comparisons stepping makes, at the boundary)."""
        g, o, k = self.grid, self.clock.origin, self.clock.tick
        j = k + MAX_RUN  # the last step j that may run: o + j·g < start_by and o + (j + 1)·g < end_by
        if start_by < math.inf:
            j = min(j, math.floor((start_by - o) / g) + 1)
            while o + j * g >= start_by:
                j -= 1
        if end_by < math.inf:
            j = min(j, math.floor((end_by - o) / g))
            while o + (j + 1) * g >= end_by:
                j -= 1
        return max(0, j - k + 1)

    def _times(self, m: int, n: int, ctx: int, start_by: float, end_by: float) -> tuple[list[float], list[float]]:
        """Start and step times of up to m decode steps of n requests on a context growing by n
        each step — the float additions stepping makes — keeping those that start before
        `start_by` and end before `end_by` (roofline cost; a fixed step is `_grid_steps`)."""
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

    def _kv_steps(self, m: int, last: Step | None) -> list[int]:
        """KV blocks per class during each of up to m decode steps (one step's per-class counts
        after another's), as long as they fit and leave every waiting request's reason as it is."""
        pool = self.pool
        table, at, bs = self.state.running.growth_table()  # step j adds table[(at - j) % bs]
        used, kv = pool.used, pool.used_cls
        cap_total, cls_room = (math.inf, None) if last is None or not len(last.waiting) else self._reason_limits(last)
        out: list[int] = []
        if not pool.reserve and not pool.capped and cls_room is None:  # only the pool's limit
            limit = min(pool.capacity, cap_total)
            if len(kv) == 1:  # one class: plain ints
                col = [g for g, in table]
                k0 = kv[0]
                for j in range(at, at - m, -1):
                    if g := col[j % bs]:
                        used += g
                        if used > limit:
                            break
                        k0 += g
                    out.append(k0)
                return out
            for j in range(at, at - m, -1):
                grow = table[j % bs]
                if g := sum(grow):
                    used += g
                    if used > limit:
                        break
                    kv = [a + b for a, b in zip(kv, grow)]
                out += kv
            return out
        cap = pool.capacity
        other_cap = pool.capacity - pool.reserve if pool.reserve else None
        other = pool.used_other
        top = pool._top
        caps = pool._caps if pool.capped else None
        for j in range(at, at - m, -1):
            grow = table[j % bs]
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
            out += kv
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
            total = pool.capacity - (pool.watermark if self.state.running else 0) - int(need[res].max())
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
        a = float(self.log.since[w].min())
        t = a + after
        while t - a >= after:
            t = math.nextafter(t, -math.inf)
        while t - a < after:
            t = math.nextafter(t, math.inf)
        return t
