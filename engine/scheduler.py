"""One engine's iteration-level scheduler: vLLM v1's rules (README "Semantics", DESIGN §2).

Each call to `schedule()` decides one step, as vLLM's `Scheduler.schedule()` does:
1. the running pass: running requests in running (admission) order, each getting
   min(remaining, threshold, budget left) tokens; a request whose KV growth does not fit preempts
   the policy's victim (possibly itself; then the pass stops);
2. the waiting pass, only if nothing was preempted: waiting requests in queue order, each
   admitted if blocks for its whole sequence (+ watermark) are free, with only its first chunk
   allocated; the first misfit stops admission (fcfs, priority) or is skipped (backfill).
`complete()` applies the step once its time has passed.

The rules are written once, here. Speed lives below them: the running set proposes the running
pass's outcome as a `Plan` (O(1) when every running request decodes) and the scheduler accepts it
when the pool proves no growth fails — then the loop would have preempted nobody and handed out
exactly the plan. A skipping policy's long queue is pre-filtered on KV in one vectorised check.
`shortcuts=False` runs the plain loops every step (tests compare the two).
Mitigations (token/KV reserves, class caps, inheritance, aging, preemption for waiting requests,
swap) are parameters of the same two passes, not separate code paths.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .kv import KVPool
from .policies import Policy
from .queue import WaitingQueue
from .reasons import Reason
from .requests import Requests
from .running import COMP, PROMPT, TOP, RunningSet
from .step import Budget, Step

PREFILTER_MIN_QUEUE = 32  # a skipping policy's queue longer than this is pre-filtered on KV
_NONE = int(Reason.NONE)
_NO_IDS, _NO_CODES = np.empty(0, np.int64), np.empty(0, np.int8)


@dataclass(frozen=True)
class Limits:
    """The knobs the scheduler obeys (engine settings plus mitigations)."""

    budget: int
    max_seqs: int
    threshold: int = 0
    chunked: bool = True
    token_reserve: int = 0
    reserve_lendable: bool = False
    class_max_running: tuple = ()
    inheritance: bool = False
    aging_s: float = 0.0
    top_priority: int = 0
    swap_bytes_per_s: float = 0.0  # > 0: preemption swaps KV to host instead of recomputing
    block_bytes: float = 0.0


class Scheduler:
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
        # Arrival check, once for all requests: can prompt + max_tokens ever fit this engine?
        view = np.array([pool.view_capacity(c) for c in range(n_cls)], dtype=np.int64)
        budget = np.where(requests.is_top, limits.budget, limits.budget - limits.token_reserve)
        self._never = (pool.blocks(requests.prompt + requests.output - 1) > view[requests.cls]) | (
            (requests.prompt > budget) if not limits.chunked else False)

    # -- arrivals ---------------------------------------------------------------------------
    def enqueue(self, i: int) -> bool:
        """Accept an arrival into the waiting queue, or reject one that can never run."""
        rs = self.rs
        if self._never[i]:
            rs.reject(i, self._never_fits(i, int(rs.cls[i])))
            return False
        rs.wait(i)
        self.queue.push(i, self.policy.order_key(int(rs.prio[i]), float(rs.arrival[i]), i))
        return True

    def _never_fits(self, i: int, c: int) -> str:
        rs, pool, lim = self.rs, self.pool, self.lim
        tokens = int(rs.prompt[i] + rs.output[i] - 1)
        cap = pool.view_capacity(c)
        if pool.blocks(tokens) > cap:
            return (f"prompt + max_tokens = {tokens} tokens needs {pool.blocks(tokens)} KV blocks; "
                    f"at most {cap} can ever be free for class {rs.class_names[c]}")
        budget = lim.budget - (0 if rs.is_top[i] else lim.token_reserve)
        return f"prompt {rs.prompt[i]} tokens exceeds the step budget {budget} with chunked prefill off"

    # -- one step ---------------------------------------------------------------------------
    def schedule(self, now: float) -> Step:
        lim = self.lim
        if lim.aging_s > 0 and self.policy.by_priority and self.queue:
            self.queue.rekey(lambda i: self._aged_key(i, now))
        if self.boosting():
            self._boost_holders()
        reserve = self._reserve_now()
        budget = Budget(reserve, lim.budget - reserve)
        step = self._step = Step(None)
        cause = self._schedule_running(budget, now)
        if step.preempted and self.queue:  # vLLM: no admission in a step that preempted
            self._all_wait(cause)
        elif self.queue:
            self._schedule_waiting(budget, now)
        if self.n_evicted and len(step.waiting):
            step.reasons[self.evicted[step.waiting]] = Reason.PREEMPTED
        step.tokens, step.decode, step.batch, step.context, step.attn = self.running.totals(step.plan)
        if budget.reserve and budget.shared == 0 and not lim.reserve_lendable:
            step.reserve_idle = budget.reserve
        return step

    def _aged_key(self, i: int, now: float) -> tuple:
        rs = self.rs
        levels = int((now - rs.arrival[i]) // self.lim.aging_s)
        return (max(self.lim.top_priority, int(rs.prio[i]) - levels), float(rs.arrival[i]))

    def _reserve_now(self) -> int:
        """Tokens held back for the top class this step (lendable: only while one needs them)."""
        lim, rs, run = self.lim, self.rs, self.running
        if not lim.token_reserve or not lim.reserve_lendable:
            return lim.token_reserve
        if any(rs.is_top[i] for i in self.queue.ids()):
            return lim.token_reserve
        prefilling_top = (run.row(TOP) == 1) & (run.row(COMP) < run.row(PROMPT))
        return lim.token_reserve if bool(np.any(prefilling_top)) else 0

    def boosting(self) -> bool:
        """Inheritance is on and a waiting top-priority request cannot fit its sequence in KV."""
        if not self.lim.inheritance:
            return False
        rs, pool = self.rs, self.pool
        return any(rs.is_top[i] and pool.shortfall(int(rs.cls[i]), int(pool.blocks(rs.seq_len(i))))
                   for i in self.queue.ids())

    def _boost_holders(self) -> None:
        """Priority inheritance: lower-priority KV holders move to the front of the running order."""
        top, run = self.rs.is_top, self.running
        held = run.held().tolist()
        holders = [p for p, i in enumerate(run.ids) if not top[i] and held[p] > 0]
        holders.sort(key=lambda p: -held[p])
        rest = [p for p, i in enumerate(run.ids) if top[i] or held[p] == 0]
        run.reorder(holders + rest)

    # -- the running pass ---------------------------------------------------------------------
    def _schedule_running(self, budget: Budget, now: float) -> Reason:
        run, pool = self.running, self.pool
        if not run:
            self._step.plan = run.propose(budget, self.lim.threshold)  # empty: admissions ride on it
            return Reason.NONE
        if self.shortcuts:
            plan = run.propose(budget, self.lim.threshold)
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
            comp, seq = run.comp_seq(p)
            n = min(seq - comp, self.lim.threshold) if self.lim.threshold else seq - comp
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
            if step.preempted and step.preempted[-1] == r:
                break  # preempted itself: the running pass stops
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
        rs, pool, run, step = self.rs, self.pool, self.running, self._step
        p = run.ids.index(v)
        tok, from_r = run.tokens_of(p)
        budget.reserve += from_r
        budget.shared += tok - from_r
        _, c, comp, seq = run.remove_at(p)
        freed = pool.blocks(comp + tok)
        pool.release(c, freed)
        self.n_running_cls[c] -= 1
        rs.generated[v] = seq - int(rs.prompt[v])
        rs.preemptions[v] += 1
        if self.lim.swap_bytes_per_s > 0:
            rs.swapped[v] = True
            step.swap_s += freed * self.lim.block_bytes / self.lim.swap_bytes_per_s
            rs.computed[v] = comp
        else:
            rs.recomputed[v] += comp
            rs.computed[v] = 0
        rs.wait(v)
        self._requeued += 1
        self.queue.push(v, self.policy.requeue_key(int(rs.prio[v]), float(rs.arrival[v]), v, self._requeued))
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
        walk = _Walk(order, sum(rs.top_l[w] for w in order))
        if self._running_caps:  # classes already at their running cap wait from the start
            walk.closed_at = {c: -1 for c in range(len(self.n_running_cls)) if self._at_running_cap(c)}
        pre = self._prefilter(walk, budget)
        evicted_before = len(step.preempted)
        self._walk(walk, order, budget, now, pre)
        if pre is not None:
            walk.as_arrays()
            self._label_skipped(walk, pre)
        step.waiting, step.reasons, step.need, step.room = walk.left_waiting()
        step.blocker = walk.blocker
        late = step.preempted[evicted_before:]  # evicted by the walk (preempt policy): waiting now
        if late:
            step.waiting = np.concatenate([step.waiting, np.array(late, dtype=np.int64)])
            step.reasons = np.concatenate([step.reasons, np.full(len(late), Reason.PREEMPTED, np.int8)])
            step.need = np.concatenate([step.need, np.full(len(late), -1, np.int64)])
            step.room = np.concatenate([step.room, np.full(len(late), -1, np.int64)])

    def _prefilter(self, walk: _Walk, budget: Budget):
        """A skipping policy with a long queue and free seats and budget: mark, in one vectorised
        check, who cannot fit in KV now (room only shrinks while it walks, so they stay out) and
        walk only the others, until seats or budget run out (then every later position, as the
        plain walk would). Returns (reasons, needs) or None."""
        rs, pool, lim, n_w = self.rs, self.pool, self.lim, len(walk.order)
        if (not self.shortcuts or self.policy.stops_at_misfit or not lim.chunked or n_w <= PREFILTER_MIN_QUEUE
                or budget.shared <= 0 or len(self.running) >= lim.max_seqs):
            return None
        ids = np.array(walk.order, dtype=np.int64)
        need = pool.blocks(rs.prompt[ids] + rs.generated[ids])
        codes, _ = pool.shortfall_many(rs.cls[ids], need, watermark=bool(self.running))
        walk.ids, walk.todo = ids, np.flatnonzero(codes == _NONE).tolist()
        walk.walked = np.zeros(n_w, bool)
        walk.start = (pool.used, pool.used_other, list(pool.used_cls), bool(self.running))
        return codes, need

    def _walk(self, walk: _Walk, order: list[int], budget: Budget, now: float, pre) -> None:
        rs, lim, run, stops = self.rs, self.lim, self.running, self.policy.stops_at_misfit
        todo = walk.todo if pre is not None else range(len(order))
        k = 0
        while k < len(todo):
            p, k = todo[k], k + 1
            w, top = order[p], rs.top_l[order[p]]
            walk.top_left -= top
            if pre is not None:
                walk.walked[p] = True
            if len(run) >= lim.max_seqs and not self._evict_for_seat(w, now, budget):
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
                    todo = todo[:k] + rest[codes == _NONE].tolist()
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
        rs, pool, lim = self.rs, self.pool, self.lim
        seq, done = rs.prompt_l[w] + int(rs.generated[w]), int(rs.computed[w])
        n = seq - done if not lim.threshold else min(seq - done, lim.threshold)
        avail = budget.available(top)
        why = Reason.TOKEN_BUDGET if (not lim.chunked and n > avail) else Reason.NONE
        need = pool.blocks(seq)
        if not why:
            why = pool.shortfall(c, need, watermark=bool(self.running))
            if why in (Reason.KV_SHORT, Reason.RESERVE) and self.policy.preempts_for_waiting:
                why = self._evict_for_blocks(w, c, need, now, budget)
        return why, min(n, avail), need, done, seq

    def _label_skipped(self, walk: _Walk, pre) -> None:
        """Reasons for the requests the pre-filter kept out of the walk, as the sequential walk
        would have found them at their turn (the pool as it stood after the admissions before)."""
        rs, pos = self.rs, np.arange(len(walk.ids))
        q = np.flatnonzero(~walk.walked & (pos < min(walk.stop_at, walk.dense_from)))
        if q.size:
            admitted = (np.array(walk.adm_pos, dtype=np.int64), np.array(walk.adm_blocks, dtype=np.int64),
                        np.array(walk.adm_cls, dtype=np.int64))
            codes, room = self.pool.reasons_at_turn(rs.cls[walk.ids[q]], pre[1][q], q, walk.start, admitted)
            walk.codes[q], walk.need[q], walk.room[q] = codes, pre[1][q], room
        rest = np.zeros(len(walk.ids), bool)
        rest[q] = True
        cls = rs.cls[walk.ids]
        for c, p in walk.closed_at.items():
            m = rest & (cls == c) & (pos > p)
            walk.codes[m], walk.need[m], walk.room[m] = Reason.CLASS_CAP, -1, -1
        if walk.block_other:
            m = rest & ~rs.is_top[walk.ids] & (pos > walk.block_from)
            walk.codes[m], walk.need[m], walk.room[m] = walk.block_other, -1, -1

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
        rs.run(w, now)
        if rs.swapped[w]:
            rs.swapped[w] = False
            self._step.swap_s += pool.blocks(computed) * self.lim.block_bytes / self.lim.swap_bytes_per_s
        blocks = pool.blocks(computed + n)
        pool.grow(c, blocks)
        self.running.set_tokens(p, n, budget.take(n, top))
        self._step.admitted.append(w)
        if self.evicted[w]:
            self.evicted[w] = False
            self.n_evicted -= 1
        return blocks

    def _lower(self, w: int) -> list[int]:
        prio = self.rs.prio
        return [i for i in self.running.ids if prio[i] > prio[w]]

    def _evict_for_seat(self, w: int, now: float, budget: Budget) -> bool:
        """`preempt` policy: a full running set gives up its worst lower-priority request."""
        if not self.policy.preempts_for_waiting:
            return False
        cands = self._lower(w)
        if not cands:
            return False
        self._evict(self.policy.victim(cands, self.rs.prio, self.rs.arrival), now, budget)
        return True

    def _evict_for_blocks(self, w: int, c: int, need: int, now: float, budget: Budget) -> Reason:
        """`preempt` policy: evict lower-priority running requests until w's sequence fits — only
        if evicting all of them would make it fit."""
        rs, pool, run = self.rs, self.pool, self.running
        cands = self._lower(w)
        if cands:
            at = {i: p for p, i in enumerate(run.ids)}
            freed = int(run.held()[[at[i] for i in cands]].sum())
            if pool.shortfall(c, need, watermark=True, freed=freed) in (Reason.KV_SHORT, Reason.RESERVE):
                cands = []  # even evicting every one of them would not make room
        why = pool.shortfall(c, need, watermark=bool(run))
        while why in (Reason.KV_SHORT, Reason.RESERVE) and cands:
            v = self.policy.victim(cands, rs.prio, rs.arrival)
            cands.remove(v)
            self._evict(v, now, budget)
            why = pool.shortfall(c, need, watermark=bool(run))
        return why

    # -- after the step ---------------------------------------------------------------------
    def complete(self, step: Step, t_end: float) -> list[int]:
        """Apply a finished step: progress, sampled tokens, finished requests (blocks freed)."""
        if not step.batch:
            return []
        rs = self.rs
        for i in self.running.advance(step.plan):
            if rs.first_token[i] != rs.first_token[i]:
                rs.first_token[i] = t_end
        return self._finish(t_end)

    def repeat(self, k: int, growth: list[int], t_end: float) -> list[int]:
        """k more pure decode steps like the last one (the replica proved nothing else happens
        before the last of them ends at t_end): blocks grow, then who is done finishes."""
        self.pool.add(growth)
        self.running.skip(k)
        return self._finish(t_end)

    def _finish(self, t_end: float) -> list[int]:
        run, pool = self.running, self.pool
        done = run.finished()
        if not done:
            return done
        fin = []
        for p in reversed(done):
            i, c, comp, seq = run.remove_at(p)
            pool.release(c, pool.blocks(comp))
            self.n_running_cls[c] -= 1
            self.rs.complete(i, t_end, comp, seq - self.rs.prompt_l[i])
            fin.append(i)
        return fin[::-1]


class _Walk:
    """The waiting pass's bookkeeping: per queue position a reason (and KV detail), where the walk
    stopped, and what a pre-filtered walk needs to label the positions it skipped. Plain lists
    while walking (one position at a time); arrays for labelling skipped positions in bulk."""

    def __init__(self, order: list[int], top_left: int):
        n = len(order)
        self.order, self.top_left = order, top_left
        self.ids: np.ndarray | None = None
        self.codes: list[int] | np.ndarray = [0] * n
        self.need: list[int] | np.ndarray = [-1] * n
        self.room: list[int] | np.ndarray = [-1] * n
        self.stop_at, self.tail, self.dense_from = n, Reason.NONE, n
        self.block_other, self.block_from, self.blocker = Reason.NONE, n, -1
        self.closed_at: dict[int, int] = {}  # class → position where its running cap closed it
        self.adm_pos: list[int] = []
        self.adm_blocks: list[int] = []
        self.adm_cls: list[int] = []
        self.todo: list[int] = []
        self.walked: np.ndarray | None = None
        self.start = None

    def stop(self, at: int, reason: Reason) -> None:
        """Admission stops: everyone from `at` on waits for `reason`."""
        self.stop_at, self.tail = at, reason

    def block(self, p: int, reason: Reason) -> None:
        """After position p, requests other than the top class wait for `reason` (the top class may go on)."""
        if not self.block_other:
            self.block_other, self.block_from = reason, p

    def admitted(self, p: int, blocks: int, c: int) -> None:
        self.adm_pos.append(p)
        self.adm_blocks.append(blocks)
        self.adm_cls.append(c)

    def as_arrays(self) -> None:
        self.codes = np.array(self.codes, dtype=np.int8)
        self.need = np.array(self.need, dtype=np.int64)
        self.room = np.array(self.room, dtype=np.int64)

    def left_waiting(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(ids, reasons, need, room) of the requests left waiting, in queue order."""
        n = len(self.order)
        if isinstance(self.codes, list):
            if self.stop_at < n:
                self.codes[self.stop_at:] = [int(self.tail)] * (n - self.stop_at)
            left = [p for p in range(n) if self.codes[p]]
            if not left:
                return _NO_IDS, _NO_CODES, _NO_IDS, _NO_IDS
            if len(left) < n:
                return (np.array([self.order[p] for p in left], dtype=np.int64),
                        np.array([self.codes[p] for p in left], dtype=np.int8),
                        np.array([self.need[p] for p in left], dtype=np.int64),
                        np.array([self.room[p] for p in left], dtype=np.int64))
            self.ids = np.array(self.order, dtype=np.int64)
            self.as_arrays()
        self.codes[self.stop_at:] = self.tail
        keep = self.codes != _NONE
        return self.ids[keep], self.codes[keep], self.need[keep], self.room[keep]
