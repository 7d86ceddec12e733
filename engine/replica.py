"""One engine instance: its scheduler, its KV pool, and its step loop as a SimPy process.

The loop is nano-vLLM's `step()`: schedule → run for the step time → apply results. When nothing
is queued or running, the replica sleeps until its feed hands it the next arrival.
"""

from __future__ import annotations

import math
from array import array

import numpy as np
import simpy

from .cost import StepCost
from .kv import KVPool
from .observe import TOP_HOLDERS, WaitLog
from .running import COMP, END, SEQ
from .scheduler import Scheduler, Step
from .state import Requests


class StepLog:
    """Per-step time series: one flat float64 buffer that replicas extend by a row per step
    (COLUMNS, then running, waiting and KV blocks per class); the `steps` frame is built from it
    at the end. Counts are exact in float64 far beyond any simulation's size."""

    COLUMNS = ("replica", "t_s", "dt_s", "prefill_tokens", "decode_tokens", "batch_size", "admitted",
               "preempted", "kv_used", "kv_free", "reserve_idle")

    def __init__(self, n_classes: int):
        self.n_classes = n_classes
        self.buf = array("d")

    def table(self) -> np.ndarray:
        """All steps as a (steps × columns) array: COLUMNS, then running, waiting, KV per class
        (a copy: a view would pin the buffer, which must stay free to grow)."""
        return np.frombuffer(self.buf, dtype=np.float64).reshape(-1, len(self.COLUMNS) + 3 * self.n_classes).copy()


class Replica:
    def __init__(self, index: int, env: simpy.Environment, rs: Requests, sched: Scheduler,
                 cost: StepCost, log: WaitLog, steps: StepLog, on_finish):
        self.index, self.env, self.rs, self.sched = index, env, rs, sched
        self.pool: KVPool = sched.pool
        self.cost, self.log, self.steps = cost, log, steps
        self.on_finish = on_finish
        self.k = 0
        self.dt = 0.0
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
        env, sched, cost, log, buf = self.env, self.sched, self.cost, self.log, self.steps.buf
        while True:
            if feed.next_t <= env.now:
                for i in feed(env.now):
                    self.submit(i)
            if self.pending:
                self._enter_pending()
            if not sched.running and not sched.queue:
                if feed.next_t < math.inf:
                    yield env.timeout(max(feed.next_t - env.now, 0.0))
                else:
                    self._wake = env.event()
                    yield self._wake
                    self._wake = None
                continue
            now = env.now
            step = sched.schedule(now)
            for v in step.preempted:
                log.enter(v, now)
            self.dt = dt = cost(step.tokens, step.attn, step.context) + step.swap_s
            log.observe(self, self.k, now, dt, step)
            row = self._row(now, step)  # KV and running counts during the step
            yield env.timeout(dt)
            finished = sched.complete(step, env.now)
            buf.extend(row)
            self.k += 1
            for i in finished:
                self.on_finish(i, env.now)

    def _row(self, now: float, step: Step) -> list:
        """The step's row of the step log (see `StepLog`)."""
        used = self.pool.used
        waiting = np.bincount(self.rs.cls[step.waiting], minlength=len(self._no_waiting)).tolist() \
            if len(step.waiting) else self._no_waiting
        return [self.index, now, self.dt, step.tokens - step.decode, step.decode, step.batch, len(step.admitted),
                len(step.preempted), used, self.pool.capacity - used, step.reserve_idle,
                *self.sched.n_running_cls, *waiting, *self.pool.used_cls]

    # -- observability --------------------------------------------------------------------
    def holders_and_eta(self, short_by):
        """A snapshot of the top KV holders — (ids, classes, blocks, each one's ETA in s) — and the
        estimated seconds until `short_by` blocks free (a number or an array of them; inf if the
        running requests cannot free that many)."""
        run = self.sched.run
        short = np.asarray(short_by)
        if not run:
            empty = np.empty(0, np.int64)
            return (empty, empty, empty, np.empty(0)), (np.zeros(short.shape) if short.ndim else 0.0)
        blocks = run.held()
        top = np.argsort(-blocks, kind="stable")[:TOP_HOLDERS]
        top = top[blocks[top] > 0]
        seq = run.row(SEQ)
        prefill_left = np.maximum(seq - run.row(COMP) - 1, 0)
        steps_left = -(-prefill_left // self.sched.lim.budget) + (run.row(END) - seq)
        step_s = max(self.dt, 1e-9)
        ids = np.array(run.ids, dtype=np.int64)[top]
        cls = np.array(run.cls, dtype=np.int64)[top]
        snap = (ids, cls, blocks[top].astype(np.int64), steps_left[top] * step_s)
        order = np.argsort(steps_left, kind="stable")
        freed = np.cumsum(blocks[order])
        j = np.searchsorted(freed, short)
        when = np.append(steps_left[order], np.inf)[np.minimum(j, len(order))] * step_s
        eta = np.where(short <= 0, 0.0, when)
        return snap, (eta if short.ndim else float(eta))
