"""One engine's iteration-level scheduler: vLLM v1's rules (README "Semantics", DESIGN §2).

Each call to `schedule()` decides one step, as vLLM's `Scheduler.schedule()` does:
1. the running pass: running requests in running (admission) order, each getting
   min(remaining, chunk cap, budget left) tokens; a request whose KV growth does not fit preempts
   the policy's victim (possibly itself: then fcfs stops the pass, priority goes on);
2. the waiting pass, only if nothing was preempted: waiting requests in queue order, each
   admitted if blocks for its whole sequence (+ watermark) are free, with only its first chunk
   allocated; the first misfit stops admission (fcfs, priority) or is skipped (backfill).
`complete()` applies the step once its time has passed. Under async scheduling (vLLM's
`AsyncScheduler`, on by default) the next call is built before that step's outputs are taken in:
the step's computed tokens and sampled tokens count at once (vLLM's output placeholders), but a
request whose last token was sampled stays in the running list — skipped, holding its blocks and
seat, counted as running, a possible victim — until the end of the next call. Taking in the
outputs decides nothing, so it lives apart, in `engine.outputs` (vLLM's `update_from_output`).

The rules are written once, here. Speed lives below them: the running set proposes the running
pass's outcome as a `Plan` (O(1) when every running request decodes) and the scheduler accepts it
when the pool proves no growth fails — then the loop would have preempted nobody and handed out
exactly the plan. A skipping policy's long queue is pre-filtered on KV in one vectorised check.
`shortcuts=False` runs the plain loops every step (tests compare the two).
Mitigations (token/KV reserves, class caps, inheritance, aging, preemption for waiting requests,
swap) are parameters of the same two passes, not separate code paths.
"""

from __future__ import annotations

import numpy as np

from . import mitigations, outputs
from . import walk as walks
from .arrival import ArrivalGate
from .kv import KVPool
from .policies import Policy
from .prefix import PrefixCache
from .queue import WaitingQueue
from .reasons import Reason
from .requests import Requests
from .running import COMP, RunningSet
from .step import Budget, Limits, Step
from .walk import Walk

_NO_HIT = ((), (), 0, 0)


class Scheduler:
    """vLLM v1's `Scheduler` for one engine: `enqueue` arrivals, `schedule` a step, `complete` it."""

    multi_step = True  # the replica may run pure decode steps as one (`Replica._quiet_steps`)

    def __init__(self, requests: Requests, pool: KVPool, policy: Policy, limits: Limits, *, shortcuts: bool = True):
        self.rs, self.pool, self.policy, self.lim = requests, pool, policy, limits
        self.shortcuts = shortcuts
        n_cls = len(pool.used_cls)
        self.queue = WaitingQueue()
        self.running = RunningSet(n_cls, pool.block_size, min(limits.max_seqs, 1024))
        self.evicted = np.zeros(requests.n, bool)  # waiting again after a preemption
        self.n_evicted = 0
        self.n_running_cls = [0] * n_cls
        self._requeued = 0
        self._running_caps = any(cap is not None for cap in limits.class_max_running)
        self._step = Step(None)
        self._cap = 0  # this call's chunk cap (`Limits.chunk_cap`)
        self._hit: tuple = _NO_HIT  # the last admission check's prefix-cache hit (`_why_not`)
        self._outputs: tuple[float, list[int]] | None = None  # async: the last step's end and who finished in it
        self.cache = pool.cache = PrefixCache(pool, requests) if limits.prefix_caching else None
        self._lag = limits.async_scheduling and self.cache is not None  # async: hashing lags (`RunningSet.hashed`)
        self.running.track = self._lag
        self.gate = ArrivalGate(requests, pool, limits)

    # -- arrivals ---------------------------------------------------------------------------
    def enqueue(self, i: int) -> bool:
        """Accept an arrival into the waiting queue, or reject one that can never run or that
        vLLM's API server would shed."""
        rs = self.rs
        if (why := self.gate.refuse(i, self.queue)) is not None:
            rs.reject(i, why)
            return False
        rs.wait(i)
        self.queue.push(i, self.policy.order_key(int(rs.prio[i]), float(rs.arrival[i]), rs.tie[i]))
        return True

    # -- one step ---------------------------------------------------------------------------
    def schedule(self, now: float, unchanged: Step | None = None) -> Step:
        """One step. `unchanged`: a step whose waiting requests, the caller has proved, stand
        exactly as they would in this call if it preempts nobody (their walk is skipped)."""
        lim = self.lim
        queued = self.queue.order
        if lim.aging_s > 0 and self.policy.by_priority and queued:
            self.queue.rekey(lambda i: mitigations.aged_key(self, i, now))
        if mitigations.boosting(self):
            mitigations.boost_holders(self)
        reserve = mitigations.reserve_now(self)
        budget = Budget(reserve, lim.budget - reserve)
        step = self._step = Step(None)
        self._cap = lim.chunk_cap(len(self.running.ids) + len(self.queue.order)) if lim.threshold else 0
        cause = self._schedule_running(budget, now)
        if self.cache is not None and self.cache.hashing:
            outputs.hash_running(self, granted=True)
        if step.preempted and queued:  # vLLM: no admission in a step that preempted
            self._all_wait(cause)
        elif queued and unchanged is not None:
            step.wait_as(unchanged)
        elif queued:
            self._schedule_waiting(budget, now)
        if self._outputs is not None:  # async: the last step's outputs arrive now
            outputs.take(self, step)
        if self.n_evicted and len(step.waiting):
            step.reasons[self.evicted[step.waiting]] = Reason.PREEMPTED
        step.tokens, step.decode, step.batch, step.context, step.attn = self.running.totals(step.plan)
        if budget.reserve and budget.shared == 0 and not lim.reserve_lendable:
            step.reserve_idle = budget.reserve
        return step

    # -- the running pass ---------------------------------------------------------------------
    def _schedule_running(self, budget: Budget, now: float) -> Reason:
        run, pool = self.running, self.pool
        if not run.ids:
            self._step.plan = run.propose(budget, self._cap)  # empty: admissions ride on it
            return Reason.NONE
        if self.shortcuts:
            plan = run.propose(budget, self._cap)
            if pool.fits(plan.growth):  # no growth fails, so the loop below would preempt nobody
                pool.add(plan.growth)
                run.accept(plan)
                budget.reserve -= plan.reserve_used
                budget.shared -= plan.shared_used
                self._step.plan = plan
                return Reason.NONE
        return self._running_loop(budget, now)

    def _running_loop(self, budget: Budget, now: float) -> Reason:
        """vLLM's running loop: allocate each request's chunk, else evict the policy's victim."""
        run, pool, step = self.running, self.pool, self._step
        cause = Reason.NONE
        p = 0
        while p < len(run) and budget.left() > 0:
            r, c, top = run.ids[p], run.cls[p], self.rs.top_l[run.ids[p]]
            comp, want = run.todo(p)  # want 0: its last token is in flight (async)
            n = min(want, self._cap) if self._cap else want
            n = min(n, budget.available(top))
            if n <= 0:
                p += 1
                continue
            grow = pool.blocks(comp + n) - pool.blocks(comp)
            while (why := pool.shortfall(c, grow)) != Reason.NONE:
                cause = why
                victim = self._victim(c, why)
                if run.ids.index(victim) < p:
                    p -= 1
                self._evict(victim, now, budget)
                if victim == r:
                    break
            if step.preempted and step.preempted[-1] == r:  # preempted itself
                if self.policy.by_priority:
                    continue  # vLLM 0.33: priority goes on with the requests after it (now at p)
                break  # fcfs stops (its victim is the last running request: nothing follows)
            pool.grow(c, grow)
            run.set_tokens(p, n, budget.take(n, top))
            p += 1
        return cause

    def _victim(self, c: int, why: Reason) -> int:
        """The policy's victim among the running requests whose eviction relieves `why`."""
        rs = self.rs
        if why == Reason.CLASS_CAP:
            cands = [i for i in self.running.ids if rs.cls_l[i] == c]
        elif why == Reason.RESERVE:
            cands = [i for i in self.running.ids if not rs.top_l[i]]
        else:
            cands = self.running.ids
        return self.policy.victim(cands, rs.prio, rs.arrival)

    def _evict(self, v: int, now: float, budget: Budget) -> None:
        """Preempt a running request: its tokens go back to the budget, its blocks are freed;
        recompute (progress lost) or swap. The step's plan no longer describes the rows."""
        rs, run, step = self.rs, self.running, self._step
        p = run.ids.index(v)
        tok, from_r = run.tokens_of(p)
        budget.reserve += from_r
        budget.shared += tok - from_r
        hashed = run.hashed(p, self._lag)
        _, c, comp, seq = run.remove_at(p)
        freed = outputs.free(self, v, c, comp + tok, hashed, keep=self.lim.swap_bytes_per_s == 0)
        self.n_running_cls[c] -= 1
        rs.generated[v] = seq - int(rs.prompt[v])
        rs.preemptions[v] += 1
        if self.lim.swap_bytes_per_s > 0:
            rs.swapped[v] = True
            step.swap_s += freed * self.lim.block_bytes / self.lim.swap_bytes_per_s
            rs.computed[v] = comp
        elif seq < rs.prompt_l[v] + rs.output_l[v]:  # recompute: progress lost
            rs.recomputed[v] += comp
            rs.computed[v] = 0
        else:  # its last token is in flight: it finishes from the queue, nothing is lost
            rs.computed[v] = comp
        rs.wait(v)
        self._requeued += 1
        self.queue.push(v, self.policy.requeue_key(int(rs.prio[v]), float(rs.arrival[v]), rs.tie[v], self._requeued))
        if not self.evicted[v]:
            self.evicted[v] = True
            self.n_evicted += 1
        step.preempted.append(v)
        step.plan = None

    def _all_wait(self, cause: Reason) -> None:
        """A step that preempted admits nobody: the head waits for KV, the rest behind it."""
        step = self._step
        order = np.array(self.queue.ids(), dtype=np.int64)
        behind = Reason.HEAD_OF_LINE if self.policy.stops_at_misfit else cause
        step.reasons = np.full(len(order), behind, np.int8)
        step.reasons[0] = cause
        step.waiting, step.blocker = order, int(order[0])
        step.need = step.room = np.full(len(order), -1, np.int64)

    # -- the waiting pass -----------------------------------------------------------------------
    def _schedule_waiting(self, budget: Budget, now: float) -> None:
        """Walk the queue in order, admitting what fits; every request left waiting gets one
        reason (and, where KV was checked, the blocks it needs and could take)."""
        rs, step = self.rs, self._step
        order = self.queue.ids()
        walk = Walk(order, sum(rs.top_l[w] for w in order))
        if self._running_caps:  # classes already at their running cap wait from the start
            walk.closed_at = {c: -1 for c in range(len(self.n_running_cls)) if self._at_running_cap(c)}
        long = not self.policy.stops_at_misfit and len(order) > walks.PREFILTER_MIN_QUEUE
        pre = walks.prefilter(self, walk, budget) if long else None
        evicted_before = len(step.preempted)
        self._walk(walk, order, budget, now, pre)
        if pre is not None:
            walk.as_arrays()
            walks.label_skipped(self, walk, pre)
        step.waiting, step.reasons, step.need, step.room = walk.left_waiting()
        step.blocker = walk.blocker
        late = step.preempted[evicted_before:]  # evicted by the walk (preempt policy): waiting now
        if late:
            step.also_waiting(late, Reason.PREEMPTED)

    def _walk(self, walk: Walk, order: list[int], budget: Budget, now: float, pre) -> None:
        rs, lim, run, stops = self.rs, self.lim, self.running, self.policy.stops_at_misfit
        todo = walk.todo if pre is not None else range(len(order))
        k = 0
        while k < len(todo):
            p, k = todo[k], k + 1
            w, top = order[p], rs.top_l[order[p]]
            walk.top_left -= top
            if pre is not None:
                walk.walked[p] = True
            if len(run) >= lim.max_seqs and not mitigations.evict_for_seat(self, w, now, budget):
                walk.stop(p, Reason.MAX_SEQS)
                return
            if not top and walk.block_other:
                walk.codes[p] = walk.block_other
                if walk.top_left == 0:
                    walk.stop(p + 1, walk.block_other)
                    return
                continue
            c = rs.cls_l[w]
            if c in walk.closed_at or self._at_running_cap(c):
                walk.closed_at.setdefault(c, p)
                walk.codes[p] = Reason.CLASS_CAP
                continue
            if budget.available(top) <= 0:
                if top or budget.reserve == 0:
                    walk.stop(p, Reason.TOKEN_BUDGET)
                    return
                walk.codes[p] = Reason.RESERVE
                walk.block(p, Reason.RESERVE)
                continue
            why, n, need, done, seq = self._why_not(w, c, top, budget, now)
            if why:
                walk.codes[p], walk.need[p] = why, need
                walk.room[p] = self.pool.room(c, watermark=bool(run))
                if pre is not None and walk.dense_from > p and k < len(todo):  # room shrank: re-filter the rest
                    rest = np.array(todo[k:], dtype=np.int64)
                    codes, _ = self.pool.shortfall_many(rs.cls[walk.ids[rest]], pre[1][rest], watermark=bool(run))
                    todo = todo[:k] + walk.to_walk(codes, rest).tolist()
                if why != Reason.CLASS_CAP and stops:  # over its class's KV cap: skipped, not a stop
                    walk.blocker = w
                    if top or why != Reason.RESERVE:
                        walk.stop(p + 1, Reason.HEAD_OF_LINE)
                        return
                    walk.block(p, Reason.HEAD_OF_LINE)
                continue
            walk.admitted(p, self._admit(w, c, n, now, done, seq, budget), c)
            if self._at_running_cap(c):
                walk.closed_at.setdefault(c, p)
            if pre is not None and walk.dense_from > p and (len(run) >= lim.max_seqs or budget.shared <= 0):
                walk.dense_from = p + 1  # a global limit now binds: walk every later position
                todo = todo[:k] + list(range(p + 1, len(order)))

    def _why_not(self, w: int, c: int, top: bool, budget: Budget, now: float):
        """Whether w fits now: (reason, first chunk, blocks for its whole sequence, computed, sequence)."""
        rs, pool, lim, cache = self.rs, self.pool, self.lim, self.cache
        seq, done = rs.prompt_l[w] + int(rs.generated[w]), int(rs.computed[w])
        hit = self._hit = cache.lookup(w, seq) if cache is not None and not done and cache.findable(w) else _NO_HIT
        _, _, hits, fresh = hit
        done += hits * pool.block_size  # a prefix-cache hit counts as computed
        n = seq - done if not self._cap else min(seq - done, self._cap)
        avail = budget.available(top)
        why = Reason.TOKEN_BUDGET if (not lim.chunked and n > avail) else Reason.NONE
        need = pool.blocks(seq) - hits + fresh  # hit blocks that sit free in the cache count
        if not why:
            why = pool.shortfall(c, need, watermark=bool(self.running))
            if why in (Reason.KV_SHORT, Reason.RESERVE) and self.policy.preempts_for_waiting:
                why = mitigations.evict_for_blocks(self, w, c, need, now, budget)
        return why, min(n, avail), need, done, seq

    def _at_running_cap(self, c: int) -> bool:
        if not self._running_caps:
            return False
        cap = self.lim.class_max_running[c]
        return cap is not None and self.n_running_cls[c] >= cap

    def _admit(self, w: int, c: int, n: int, now: float, computed: int, seq: int, budget: Budget) -> int:
        """Move w from the queue to the running set; allocate blocks for its first chunk only
        (returns how many)."""
        rs, pool = self.rs, self.pool
        self.queue.remove(w)
        prompt, top = rs.prompt_l[w], rs.top_l[w]
        p = self.running.add(w, c, computed, seq, prompt, prompt + rs.output_l[w], top)
        self.n_running_cls[c] += 1
        first = rs.first_sched[w] != rs.first_sched[w]  # NaN: never admitted before
        rs.run(w, now)
        if rs.swapped[w]:
            rs.swapped[w] = False
            self._step.swap_s += pool.blocks(computed) * self.lim.block_bytes / self.lim.swap_bytes_per_s
        hit, cache = self._hit, self.cache
        _, _, hits, fresh = hit
        if hits:
            rs.hit(w, computed, first)
        if hits or cache is not None and cache.any_prefix and cache.prefix_l[w]:
            cache.admit(w, c, hit)  # hits on free cached blocks take them out of the free queue
        blocks = pool.blocks(computed + n) - hits
        pool.grow(c, blocks)
        if cache is not None and w in cache.held:
            cache.register(w, c, computed + n)
        self.running.set_tokens(p, n, budget.take(n, top))
        self._step.admitted.append(w)
        if self.evicted[w]:
            self.evicted[w] = False
            self.n_evicted -= 1
        return blocks + fresh

    def write_back(self) -> None:
        """The run is over: the running requests' progress back into `Requests` (how far an
        unfinished request got)."""
        run = self.running
        if run.ids:
            self.rs.computed[run.ids] = run.row(COMP)

    # -- after the step: vLLM's update_from_output side, in `engine.outputs` -------------------
    complete = outputs.complete  # apply a finished step: progress, first tokens, who finished
    repeat = outputs.repeat  # k more pure decode steps like the last (the replica's multi-step run)
    outputs_first = outputs.take_early  # async: take in the last step's outputs before the next call
    _retire = outputs.retire  # finished requests leave the running set (SGLangScheduler extends it)
