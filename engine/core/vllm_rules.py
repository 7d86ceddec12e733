"""One engine's iteration-level scheduler: vLLM v1's rules (README "Semantics", DESIGN §2).

Each call to `schedule()` decides one step, as vLLM's `Scheduler.schedule()` does:
1. the running pass: running requests in running (admission) order, each getting
   min(remaining, chunk cap, budget left) tokens; a request whose KV growth does not fit preempts
   the policy's victim (possibly itself: then fcfs stops the pass, priority goes on);
2. the waiting pass, only if nothing was preempted: waiting requests in queue order, each
   admitted if blocks for its whole sequence (+ watermark) are free, with only its first chunk
   allocated; the first misfit stops admission (fcfs, priority) or is skipped (backfill).
The rules decide over the engine's state (`engine.core.state.EngineState`), which carries their
decisions out (admit, evict) and applies the step once its time has passed (`complete`). Under
async scheduling (vLLM's `AsyncScheduler`, on by default) the next call is built before that
step's outputs are taken in: the step's computed tokens and sampled tokens count at once (vLLM's
output placeholders), but a request whose last token was sampled stays in the running list —
skipped, holding its blocks and seat, counted as running, a possible victim — until the end of
the next call.

The rules are written once, here. Speed lives below them: the running set proposes the running
pass's outcome as a `Plan` (O(1) when every running request decodes) and the scheduler accepts it
when the pool proves no growth fails — then the loop would have preempted nobody and handed out
exactly the plan. A skipping policy's long queue is pre-filtered on KV in one vectorised check.
`shortcuts=False` runs the plain loops every step (tests compare the two).
Mitigations (token/KV reserves, class caps, inheritance, aging, preemption for waiting requests,
swap) are parameters of the same two passes, not separate code paths (the project's own ones are
methods from `engine.core.mitigations`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .mitigations import Mitigations
from .policies import Policy
from .prefix import Hit
from .reasons import Reason
from .state import NO_HIT, EngineState
from .step import Budget, Limits, Step
from .walk import PREFILTER_MIN_QUEUE, Walk

_TOKEN_BUDGET, _RESERVE, _PREEMPTED = int(Reason.TOKEN_BUDGET), int(Reason.RESERVE), int(Reason.PREEMPTED)


@dataclass
class Paths:
    """How the rules reached their decisions, counted per call: which fast path the running pass
    took and how often the waiting pass was pre-filtered. The evidence that a comparison of the
    fast paths with the plain loops (tests) is not vacuous, and where a profile's time goes."""

    uniform_plans: int = 0  # running pass: a plan where every running request decodes, accepted
    other_plans: int = 0  # running pass: a per-request plan, accepted
    running_loops: int = 0  # running pass: vLLM's plain loop
    prefilters: int = 0  # waiting pass: a long queue pre-filtered on KV
    prefilters_leaving_out: int = 0  # … that left someone out of the walk
    prefilters_with_hits: int = 0  # … where a prefix-cache hit might help someone (walked anyway)


class VLLMRules(Mitigations):
    """vLLM v1's `Scheduler` for one engine: `schedule` a step over the engine's state.

    `shortcuts=False` runs the plain loops every step; `prefilter_min_queue`: a skipping
    policy's queue longer than this is pre-filtered on KV (tests set it low)."""

    multi_step = True  # the replica may run pure decode steps as one (`Replica._quiet_steps`)

    def __init__(self, state: EngineState, policy: Policy, limits: Limits, *, shortcuts: bool = True,
                 prefilter_min_queue: int = PREFILTER_MIN_QUEUE):
        self.state, self.policy, self.lim = state, policy, limits
        self.shortcuts = shortcuts
        self.prefilter_min_queue = prefilter_min_queue
        self._running_caps = any(cap is not None for cap in limits.class_max_running)
        self._cap = 0  # this call's chunk cap (`Limits.chunk_cap`)
        self._hit: Hit = NO_HIT  # the last admission check's prefix-cache hit (`_why_not`)
        self.paths = Paths()

    def enqueue(self, i: int) -> bool:
        """An arrival enters the waiting queue (or is rejected: `EngineState.enqueue`)."""
        return self.state.enqueue(i)

    # -- one step ---------------------------------------------------------------------------
    def schedule(self, now: float, unchanged: Step | None = None) -> Step:
        """One step. `unchanged`: a step whose waiting requests, the caller has proved, stand
        exactly as they would in this call if it preempts nobody (their walk is skipped)."""
        lim, st = self.lim, self.state
        queued = st.queue.order
        if lim.aging_s > 0 and self.policy.by_priority and queued:
            st.queue.rekey(lambda i: self.aged_key(i, now))
        if self.boosting():
            self.boost_holders()
        reserve = self.reserve_now()
        budget = Budget(reserve, lim.budget - reserve)
        step = st.begin()
        self._cap = lim.chunk_cap(len(st.running.ids) + len(st.queue.order)) if lim.threshold else 0
        cause = self._schedule_running(budget, now)
        if st.cache is not None and st.cache.hashing:
            st.hash_running(granted=True)
        if step.preempted and queued:  # vLLM: no admission in a step that preempted
            self._all_wait(cause)
        elif queued and unchanged is not None:
            step.wait_as(unchanged)
        elif queued:
            self._schedule_waiting(budget, now)
        if st.outputs is not None:  # async: the last step's outputs arrive now
            st.take(step)
        if st.n_evicted and len(step.waiting):
            step.reasons[st.evicted[step.waiting]] = Reason.PREEMPTED
        step.tokens, step.decode, step.batch, step.context, step.attn = st.running.totals(step.plan)
        if budget.reserve and budget.shared == 0 and not lim.reserve_lendable:
            step.reserve_idle = budget.reserve
        return step

    # -- the running pass ---------------------------------------------------------------------
    def _schedule_running(self, budget: Budget, now: float) -> Reason:
        run, pool, step = self.state.running, self.state.pool, self.state.step
        if not run.ids:
            step.plan = run.propose(budget, self._cap)  # empty: admissions ride on it
            return Reason.NONE
        if self.shortcuts:
            plan = run.propose(budget, self._cap)
            if pool.fits(plan.growth):  # no growth fails, so the loop below would preempt nobody
                pool.add(plan.growth)
                run.accept(plan)
                if plan.uniform:
                    self.paths.uniform_plans += 1
                else:
                    self.paths.other_plans += 1
                budget.reserve -= plan.reserve_used
                budget.shared -= plan.shared_used
                step.plan = plan
                return Reason.NONE
        self.paths.running_loops += 1
        return self._running_loop(budget, now)

    def _running_loop(self, budget: Budget, now: float) -> Reason:
        """vLLM's running loop: allocate each request's chunk, else evict the policy's victim."""
        st = self.state
        run, pool, step = st.running, st.pool, st.step
        cause = Reason.NONE
        p = 0
        while p < len(run) and budget.left() > 0:
            r, c, top = run.ids[p], run.cls[p], st.rs.top_l[run.ids[p]]
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
                st.evict(victim, now, budget)
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
        rs, ids = self.state.rs, self.state.running.ids
        if why == Reason.CLASS_CAP:
            cands = [i for i in ids if rs.cls_l[i] == c]
        elif why == Reason.RESERVE:
            cands = [i for i in ids if not rs.top_l[i]]
        else:
            cands = ids
        return self.policy.victim(cands, rs.prio, rs.arrival)

    def _all_wait(self, cause: Reason) -> None:
        """A step that preempted admits nobody: the head waits for KV, the rest behind it."""
        step = self.state.step
        order = np.array(self.state.queue.ids(), dtype=np.int64)
        behind = Reason.HEAD_OF_LINE if self.policy.stops_at_misfit else cause
        step.reasons = np.full(len(order), behind, np.int8)
        step.reasons[0] = cause
        step.waiting, step.blocker = order, int(order[0])
        step.need = step.room = np.full(len(order), -1, np.int64)

    # -- the waiting pass -----------------------------------------------------------------------
    def _schedule_waiting(self, budget: Budget, now: float) -> None:
        """Walk the queue in order, admitting what fits; every request left waiting gets one
        reason (and, where KV was checked, the blocks it needs and could take)."""
        st = self.state
        rs, step = st.rs, st.step
        order = st.queue.ids()
        walk = Walk(order, sum(rs.top_l[w] for w in order))
        if self._running_caps:  # classes already at their running cap wait from the start
            walk.closed_at = {c: -1 for c in range(len(st.n_running_cls)) if self._at_running_cap(c)}
        long = self.shortcuts and not self.policy.stops_at_misfit and len(order) > self.prefilter_min_queue
        pre = walk.prefilter(st, budget) if long else None
        if pre is not None:
            self._count_prefilter(walk, pre[0])
        evicted_before = len(step.preempted)
        self._walk(walk, order, budget, now, pre)
        if pre is not None:
            walk.as_arrays()
            walk.label_skipped(st, pre)
        step.waiting, step.reasons, step.need, step.room = walk.left_waiting()
        step.blocker = walk.blocker
        late = step.preempted[evicted_before:]  # evicted by the walk (preempt policy): waiting now
        if late:
            step.also_waiting(late, Reason.PREEMPTED)

    def _count_prefilter(self, walk: Walk, codes: np.ndarray) -> None:
        paths = self.paths
        paths.prefilters += 1
        paths.prefilters_leaving_out += bool(codes.any())
        paths.prefilters_with_hits += walk.findable is not None and bool(walk.findable.any())

    def _walk(self, walk: Walk, order: list[int], budget: Budget, now: float,
              pre: tuple[np.ndarray, np.ndarray] | None) -> None:
        st, lim, stops = self.state, self.lim, self.policy.stops_at_misfit
        rs, run = st.rs, st.running
        todo: Sequence[int] = walk.todo if pre is not None else range(len(order))
        k = 0
        while k < len(todo):
            p, k = todo[k], k + 1
            w, top = order[p], rs.top_l[order[p]]
            walk.top_left -= top
            if pre is not None:
                walk.walked[p] = True
            if len(run) >= lim.max_seqs and not self.evict_for_seat(w, now, budget):
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
                walk.room[p] = st.pool.room(c, watermark=bool(run))
                if pre is not None and walk.dense_from > p and k < len(todo):  # room shrank: re-filter the rest
                    rest = np.array(todo[k:], dtype=np.int64)
                    codes, _ = st.pool.shortfall_many(rs.cls[walk.ids[rest]], pre[1][rest], watermark=bool(run))
                    todo = walk.todo = walk.todo[:k] + walk.to_walk(codes, rest).tolist()
                if why != Reason.CLASS_CAP and stops:  # over its class's KV cap: skipped, not a stop
                    walk.blocker = w
                    if top or why != Reason.RESERVE:
                        walk.stop(p + 1, Reason.HEAD_OF_LINE)
                        return
                    walk.block(p, Reason.HEAD_OF_LINE)
                continue
            walk.admitted(p, st.admit(w, c, n, now, done, seq, budget, self._hit), c)
            if self._at_running_cap(c):
                walk.closed_at.setdefault(c, p)
            if pre is not None and walk.dense_from > p and (len(run) >= lim.max_seqs or budget.shared <= 0):
                walk.dense_from = p + 1  # a global limit now binds: walk every later position
                todo = walk.todo = walk.todo[:k] + list(range(p + 1, len(order)))

    def _why_not(self, w: int, c: int, top: bool, budget: Budget, now: float) -> tuple[Reason, int, int, int, int]:
        """Whether w fits now: (reason, first chunk, blocks for its whole sequence, computed, sequence)."""
        st, lim = self.state, self.lim
        rs, pool, cache = st.rs, st.pool, st.cache
        seq, done = rs.prompt_l[w] + int(rs.generated[w]), int(rs.computed[w])
        hit = self._hit = cache.lookup(w, seq) if cache is not None and not done and cache.findable(w) else NO_HIT
        _, _, hits, fresh = hit
        done += hits * pool.block_size  # a prefix-cache hit counts as computed
        n = seq - done if not self._cap else min(seq - done, self._cap)
        avail = budget.available(top)
        why = Reason.TOKEN_BUDGET if (not lim.chunked and n > avail) else Reason.NONE
        need = pool.blocks(seq) - hits + fresh  # hit blocks that sit free in the cache count
        if not why:
            why = pool.shortfall(c, need, watermark=bool(st.running))
            if why in (Reason.KV_SHORT, Reason.RESERVE) and self.policy.preempts_for_waiting:
                why = self.evict_for_blocks(w, c, need, now, budget)
        return why, min(n, avail), need, done, seq

    def _at_running_cap(self, c: int) -> bool:
        if not self._running_caps:
            return False
        cap = self.lim.class_max_running[c]
        return cap is not None and self.state.n_running_cls[c] >= cap

    # -- what the replica may run as one step (multi-step runs) --------------------------------
    def horizon(self, last: Step | None) -> int | None:
        """How many pure decode steps, the same step again, these rules promise next (None: not
        even one). Sure when every running request decodes and nobody waits (the running pass
        hands out one token each, the waiting pass has nobody), or when the last step was one and
        nothing changed since (its waiting requests still cannot get in: KV room only shrinks while
        everyone decodes, seats and budget stay as they were) — unless keys drift with waiting time
        (aging), holders are reordered (inheritance), or an evicted prefix hit could grow a waiting
        request's need past a cap or reserve. The promise ends with the first finish and before a
        shareable block is hashed; the KV pool, the wait log and time bound the run further."""
        st, lim = self.state, self.lim
        run, cache = st.running, st.cache
        if run.done:
            return None  # async: a finished request leaves at the end of the next call
        if st.queue.order:
            if last is None or lim.aging_s > 0 and self.policy.by_priority or lim.inheritance:
                return None
            if cache is not None and (cache.any_prefix or cache.segs) and (st.pool.capped or st.pool.reserve):
                return None
        elif run.n_dec != len(run.ids) or self.decode_idle() is None:
            return None
        m = run.steps_to_finish()
        if cache is not None and cache.hashing:
            m = min(m, cache.steps_to_hash(run))
        return m

    def decode_step(self) -> Step:
        """The step these rules schedule when every running request decodes and nobody waits."""
        step = Step(None)
        step.tokens = step.decode = step.batch = len(self.state.running.ids)
        idle = self.decode_idle()
        assert idle is not None  # (asked only after `horizon` found the step uniform)
        step.reserve_idle = idle
        return step

    def decode_idle(self) -> int | None:
        """A step where every running request decodes and nobody waits: the reserved tokens it
        leaves idle, or None if the budget cuts some decodes short (not a uniform step)."""
        lim, run = self.lim, self.state.running
        n = len(run.ids)
        reserve = lim.token_reserve if not lim.reserve_lendable else 0  # nobody waits or prefills
        r = min(reserve, run.n_top)
        if n - r > lim.budget - reserve:
            return None
        shared_left, reserve_left = lim.budget - reserve - (n - r), reserve - r
        return reserve_left if reserve_left and shared_left == 0 else 0

    def waits_stand(self, last: Step | None) -> bool:
        """Async, the call after a finish, with requests waiting: in that call the finished
        requests still hold their blocks and seats, the others decode (KV room only shrinks),
        only the budget grows. If the last step was a pure decode step whose waiting requests
        waited for KV or seats only (not the budget, nor a reserve, nor a KV cap their class's
        growth could reach), they stand exactly as then (nobody is admitted) — if no alert is
        due meanwhile (the replica asks the wait log)."""
        lim = self.lim
        if last is None or self.state.pool.capped or lim.inheritance or lim.aging_s > 0 and self.policy.by_priority:
            return False
        codes = last.reasons
        return not ((codes == _TOKEN_BUDGET) | (codes == _RESERVE) | (codes == _PREEMPTED)).any()

    def still_waiting(self, step: Step) -> bool:
        """Async: the step's call took in finished requests' outputs, freeing their blocks and
        seats. Its waiting requests still stand as the call left them if each waits for KV that
        is still short even so (or behind one that does): then the step can start a run."""
        st = self.state
        if st.cache is not None and st.cache.any_prefix:
            return False  # (hits on the freed blocks: not worth proving)
        return st.pool.still_short(step.reasons, step.need, bool(st.running.ids))
