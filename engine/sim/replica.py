"""One engine instance: its rulebook over its state, and its step loop as a SimPy process.

The loop is nano-vLLM's `step()`: schedule → run for the step time → apply results. An engine with
nothing queued or running sleeps until its feed hands it the next arrival and starts a step at that
instant (vLLM's engine core blocks on its input queue). A schedule() call that schedules nothing yet
changes something (it preempted every running request; async, it took in the last step's outputs)
takes no time, as in vLLM: the next call, at the same instant, builds the step. A call that changes
nothing is an idle step of the usual length, so the loop always moves on.

Multi-step runs: after a pure decode step (everyone decoded one token; nobody was admitted,
preempted or finished) the next steps are the same step again until something happens. Each
owner says how many it can promise — the rules (`horizon`), the KV pool (`steps_within`), the
wait log (`next_alert`), the feed (the next arrival), the time limit — and the replica runs the
fewest as one: step times exactly as stepping (`StepCost.decode_times`, `Clock.steps_before`), one
log row, one SimPy timeout. Every decision, count and time equals stepping one at a time.

Its own clock (`now`, `engine.sim.clock`) keeps the exact boundaries stepping would reach; SimPy's
clock only orders the replicas. What it is plugged into (rules, feed, callbacks): `engine.sim.ports`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING

from ..config.cost import StepCost
from ..core.kv import KVPool
from ..core.requests import Requests
from ..core.step import Step
from .clock import Clock
from .observe import WaitLog
from .ports import WAKE, Feed, OnFinish, Quiet, Rules, Wake
from .steplog import StepLog

if TYPE_CHECKING:  # SimPy only times several replicas (or a gateway): one replica's run never loads it
    import simpy

MAX_RUN = 4096  # steps considered for one run (a longer quiet stretch becomes several runs)
WATCH_EVERY = 64  # loop turns between two looks at the run's limits (`engine.sim.limits.Stop`)


class Replica:
    def __init__(self, index: int, env: simpy.Environment | None, rs: Requests, rules: Rules, cost: StepCost,
                 log: WaitLog, steps: StepLog, on_finish: OnFinish, *, until: float, skip: bool = True,
                 watch: Callable[[float], None] | None = None):
        self.index, self.env, self.rs, self.rules = index, env, rs, rules
        self.state = rules.state
        self.pool: KVPool = self.state.pool
        self.cost, self.log, self.steps, self.on_finish = cost, log, steps, on_finish
        self.until, self.skip = until, skip and rules.multi_step  # (SGLang's loop: every step decided)
        self.watch = watch  # called every WATCH_EVERY turns of the loop with `now` (may stop the run)
        self.clock = Clock(cost.fixed_s)  # the engine's own time (`now`): on a fixed step, origin + tick × dt
        self.k, self.sim = 0, 0.0  # steps run; SimPy's clock as it would read (the sum of the waits yielded)
        self.turns = 0  # turns of the loop (events: what the benchmark divides its time by)
        self._last_row: list[int] = []
        self._wake: simpy.Event | None = None
        self.pending: list[int] = []  # arrivals handed over, entered at the next step boundary
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

    def process(self, feed: Feed) -> Generator[simpy.Event, None, None]:
        """The replica as a SimPy process (several replicas share SimPy's clock with the router)."""
        env = self.env
        assert env is not None  # (a replica alone is driven without SimPy: `drive`)
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

    def drive(self, feed: Feed, until: float) -> None:
        """The replica alone: no other process shares its clock, so SimPy would only add its own
        bookkeeping; run it directly, stopping before a wait that reaches `until` (SimPy's rule)."""
        for wait in self.run(feed):
            if wait is WAKE or self.sim >= until:
                return

    def run(self, feed: Feed) -> Generator[float | Wake, None, None]:
        """The step loop, a generator of waits (seconds, or ticks on a grid; WAKE: until the router
        hands over an arrival): `feed(now)` hands over the arrivals due by now; `feed.next_t` is
        when the next one is due."""
        st, skip = self.state, self.skip
        running, queued = st.running, st.queue.order
        strict, clock, eps = feed.strict and self.clock.grid is not None, self.clock, self.clock.eps
        clock.start(0.0)
        self.sim = 0.0
        last: Step | None = None  # the last step, while nothing has changed since (for a run)
        watch = self.watch
        while True:
            self.turns += 1
            if watch is not None and self.turns % WATCH_EVERY == 0:
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

    def _begin(self, last: Step | None) -> tuple[Step, list[int], float, int] | None:
        """One schedule() call: (its step, the step's log row, time, grid ticks), or None if it
        scheduled nothing."""
        st, log, now = self.state, self.log, self.now
        stand = self.skip and st.running.done and self.rules.waits_stand(last) and self.log.next_alert(last) > now
        step = self.rules.schedule(now, last if stand else None)
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
        ticks, dt = self.clock.on_grid(self.cost(step.tokens, step.attn, step.context) + step.swap_s)
        log.observe(self.index, self.k, now, dt, step, st.running, st.lim.budget)
        return step, self._row(step), dt, ticks  # (the row: KV and running counts during the step)

    def _end(self, step: Step, row: list[int], now: float, dt: float) -> Step | None:
        """The step's time has passed: apply it. Returns the step if it was a pure decode step
        after which nothing changed (else None)."""
        finished = self.state.complete(step, self.now)
        self.steps.add_row(now, dt, row)
        self.k += 1
        for i in finished:
            self.on_finish(i, self.now)
        self._last_row = row
        quiet = step.uniform and not finished and not (step.finished and not self.rules.still_waiting(step))
        return step if quiet else None

    def _sleep(self, feed: Feed) -> Generator[float | Wake, None, None]:
        """Nothing to do: sleep until the feed's next arrival, or until the router wakes us; the
        engine starts at that instant (a new busy period)."""
        if not feed.strict and feed.next_t < math.inf:
            delay = max(feed.next_t - self.sim, 0.0)
            self.sim += delay
            yield delay
            self.clock.start(max(feed.next_t, self.clock.now))
        else:
            yield WAKE  # (`process` starts the clock when the router hands over an arrival)

    # -- multi-step skipping --------------------------------------------------------------------
    def _run_quiet(self, starts: list[float], dts: list[float], kv: list[int],
                   row: list[int]) -> Generator[float, None, list[int]]:
        """Run these pure decode steps as one run: one row in the log, one SimPy timeout."""
        m = len(starts)
        self.steps.add_run(starts, dts, row, kv)
        t_end = self.clock.run_end(m, starts[-1] + dts[-1])
        wait = max(t_end - self.sim, 0.0)
        self.sim += wait
        yield wait
        t_end = self.clock.pass_run(m, t_end)
        self.k += m
        used = self.pool.used_cls
        growth = [b - a for a, b in zip(used, kv[-len(used):])]
        finished = self.state.repeat(m, growth, t_end)
        for i in finished:
            self.on_finish(i, t_end)
        return finished

    def _quiet_steps(self, last: Step | None, feed: Feed) -> Quiet | None:
        """The pure decode steps that come next, until something could happen: (start times, step
        times, KV blocks per class during each, the log row's constant columns), or None. Each
        owner says how far it can promise the same step again — the rules (`horizon`: up to the
        first finish), the feed (the next arrival), the wait log (the next alert), the run's time
        limit, the KV pool (growth that fits and leaves every waiting request's reason as it is)
        — and the run is the shortest of them."""
        st, clock, run = self.state, self.clock, self.state.running
        if (m := self.rules.horizon(last)) is None:
            return None
        n = len(run.ids)
        row = self._last_row if st.queue.order else self._row(self.rules.decode_step())
        m = min(m, MAX_RUN)
        start_by = min(feed.next_t - clock.eps, self.log.next_alert(last))  # steps must start before this
        end_by = min(self.until, feed.next_t) if feed.strict else self.until  # and end before this
        m = clock.fit(m, start_by, end_by, self.cost(n, run.ctx + 0.5 * n, run.ctx))
        if m < 1:
            return None
        total, rooms = (math.inf, None) if last is None or not len(last.waiting) else \
            self.pool.waiting_limits(last.need, last.reasons, self.rs.cls[last.waiting], bool(run))
        table, at, _ = run.growth_table()
        kv = self.pool.steps_within(table, at, m, total, rooms)
        if not (m := len(kv) // (c := len(self.pool.used_cls))):
            return None
        starts, dts = clock.decode_times(m, self.cost, n, run.ctx, start_by, end_by)
        if not starts:
            return None
        return starts, dts, kv[:len(starts) * c], row

    def _row(self, step: Step) -> list[int]:
        return self.steps.row_of(self.index, step, self.rs.cls, self.state.n_running_cls, self.pool)
