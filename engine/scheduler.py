"""One engine's iteration-level scheduler, with vLLM v1 semantics (DESIGN §2).

Each call to `schedule()` decides one step:
1. running requests first, in running-list (admission) order, each getting
   min(remaining, budget, long_prefill_token_threshold); a request that cannot get blocks
   preempts a victim (policy's rule, possibly itself) and then Phase A stops;
2. waiting requests in queue order, only if nothing was preempted: admitted if blocks for the
   whole sequence (+ watermark) are free, then only the first chunk is allocated; the first
   misfit stops admission (fcfs, priority) or is skipped (backfill).
`complete()` applies the step's results once its time has passed.

Three ways through Phase A give the same decisions, cheapest first: a decode step (every running
request decodes and every growth fits) costs O(1) through the running set's bookkeeping
(`running.py`); a general step is a few vectorised numpy operations over the running rows; the
exact sequential loop runs only in steps where KV runs out. Admissions are handled one request at
a time, as in vLLM. Mitigations (token/KV reserves, class caps, inheritance, aging, preemption
for waiting requests, swap) are parameters of the same two phases, not separate code paths.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .kv import KVPool
from .policies import Policy
from .queue import WaitingQueue
from .reasons import Reason
from .running import COMP, FROM_R, ONEHOT, PROMPT, SEQ, TOK, TOP, RunningSet
from .state import FINISHED, RUNNING, WAITING, Requests


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


class Step:
    """What one step scheduled (as totals), and how the requests left waiting stand."""

    __slots__ = ("tokens", "decode", "batch", "context", "attn", "admitted", "preempted", "waiting", "reasons",
                 "need", "free", "blocker", "swap_s", "reserve_idle")

    def __init__(self, tokens: int, decode: int, batch: int, context: int, attn: float, admitted: list[int],
                 preempted: list[int], waiting: np.ndarray, reasons: np.ndarray, need: np.ndarray,
                 free: np.ndarray, blocker: int = -1, swap_s: float = 0.0, reserve_idle: int = 0):
        self.tokens, self.decode, self.batch = tokens, decode, batch  # tokens, of them decode, requests
        self.context, self.attn = context, attn  # KV read (tokens) and attention work (token pairs)
        self.admitted, self.preempted = admitted, preempted
        self.waiting, self.reasons = waiting, reasons
        self.need = need  # per waiting request: KV blocks its whole sequence needs (−1: not checked)
        self.free = free  # per waiting request: blocks it could take when checked (−1: not checked)
        self.blocker, self.swap_s, self.reserve_idle = blocker, swap_s, reserve_idle


_EMPTY = np.empty(0, np.int64)
_NO_REASONS = np.empty(0, np.int8)
_NONE = int(Reason.NONE)
SKIP_SCAN_MIN_QUEUE = 32  # queues longer than this get the vectorised pre-filter (skipping policies)
SHORT_QUEUE = 16  # queues up to this long keep their walk's results in lists, longer ones in arrays
DECODE_STEP = True  # the O(1) decode step (False: every step takes the general path; for tests)
VECTOR_STEP = True  # the vectorised general step (False: the sequential loop every step; for tests)


def _give(pool: int, want: np.ndarray) -> np.ndarray:
    """Sequential `min(want_i, what is left)` over the list, as one vectorised expression."""
    before = np.cumsum(want) - want
    return np.minimum(want, np.maximum(pool - before, 0))


class Scheduler:
    def __init__(self, rs: Requests, pool: KVPool, policy: Policy, limits: Limits):
        self.rs, self.pool, self.policy, self.lim = rs, pool, policy, limits
        n_cls = len(pool.used_cls)
        self.queue = WaitingQueue()
        self.run = RunningSet(n_cls, pool.block_size, min(limits.max_seqs, 1024))
        self.running = self.run.ids  # the running order (the same list, for readers)
        self.evicted = np.zeros(rs.n, bool)  # waiting again after a preemption
        self.n_evicted = 0
        self.n_running_cls = [0] * n_cls
        self._counter = 0
        self._running_caps = any(cap is not None for cap in limits.class_max_running)
        # Kept up to date as requests come and go, so a decode step needs no pass over the rows:
        self._ctx = 0  # Σ computed tokens of the running requests
        self._n_dec = 0  # running requests in decode (prompt done, one token to compute)
        self._fast = False  # this step is a decode step plus admissions (totals kept as scalars):
        self._n_a = 0  # how many running requests the decode step covers (the rest were admitted)
        self._agg: list[int] = []  # the step's totals, as `_totals` returns them
        # Arrival check, done once for all requests: can prompt + max_tokens ever fit this engine?
        view = np.array([pool.view_capacity(c) for c in range(n_cls)], dtype=np.int64)
        budget = np.where(rs.is_top, limits.budget, limits.budget - limits.token_reserve)
        self._never = (pool.blocks(rs.prompt + rs.output - 1) > view[rs.cls]) | (
            (rs.prompt > budget) if not limits.chunked else False)

    # -- arrivals ---------------------------------------------------------------------------
    def enqueue(self, i: int) -> bool:
        """Accept an arrival into the waiting queue, or reject one that can never run."""
        rs = self.rs
        if self._never[i]:
            rs.reject(i, self._never_fits(i, int(rs.cls[i])))
            return False
        rs.status[i] = WAITING
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
        if not lim.chunked and rs.prompt[i] > budget:
            return f"prompt {rs.prompt[i]} tokens exceeds the step budget {budget} with chunked prefill off"
        return ""

    # -- one step ---------------------------------------------------------------------------
    def schedule(self, now: float) -> Step:
        lim = self.lim
        if lim.aging_s > 0 and self.policy.by_priority and self.queue:
            self.queue.rekey(lambda i: self._aged_key(i, now))
        if lim.inheritance and self._top_blocked_on_kv():
            self._boost_holders()
        self.swap_s = 0.0
        self.evicted_now: list[int] = []
        self._fast = False
        self.rem_r = self._reserve_now()
        self.rem_s = lim.budget - self.rem_r
        preempted, cause = self._schedule_running(now)
        admitted: list[int] = []
        if not self.queue:
            order, reasons, need, free, blocker = _EMPTY, _NO_REASONS, _EMPTY, _EMPTY, -1
        elif preempted:  # no admission this step: the head waits for KV, the rest behind it
            order = np.array(self.queue.ids(), dtype=np.int64)
            behind = Reason.HEAD_OF_LINE if self.policy.stops_at_misfit else cause
            reasons = np.full(len(order), behind, np.int8)
            reasons[0] = cause
            need = free = np.full(len(order), -1, np.int64)
            blocker = int(order[0])
        else:
            order, reasons, need, free, blocker, admitted = self._schedule_waiting(now)
        if self.evicted_now:
            seen = set(order.tolist())
            late = [v for v in self.evicted_now if v not in seen]
            if late:  # evicted in Phase B (preempt policy), after the queue was read: waiting too
                more = np.full(len(late), -1, np.int64)
                order = np.concatenate([order, np.array(late, dtype=np.int64)])
                reasons = np.concatenate([reasons, np.full(len(late), Reason.PREEMPTED, np.int8)])
                need, free = np.concatenate([need, more]), np.concatenate([free, more])
        if self.n_evicted and len(order):
            reasons[self.evicted[order]] = Reason.PREEMPTED
        tokens, decode, batch, context, dot, sq = self._agg if self._fast else self._totals()
        idle = self.rem_r if (self.rem_r and self.rem_s == 0 and not lim.reserve_lendable) else 0
        return Step(tokens, decode, batch, context, float(dot) + 0.5 * float(sq), admitted, self.evicted_now,
                    order, reasons, need, free, blocker, self.swap_s, int(idle))

    def _totals(self) -> tuple[int, int, int, int, int, int]:
        """(tokens, decode tokens, requests, context tokens, Σ tokens·context, Σ tokens²) of the
        step, from the rows (decode tokens: those of requests whose prompt is already in KV)."""
        run = self.run
        if not run:
            return 0, 0, 0, 0, 0, 0
        tok, comp = run.row(TOK), run.row(COMP)
        on = tok > 0
        return (int(tok.sum()), int(tok[comp >= run.row(PROMPT)].sum()), int(np.count_nonzero(on)),
                int(comp[on].sum()), int(tok @ comp), int(tok @ tok))

    def _aged_key(self, i: int, now: float) -> tuple:
        rs = self.rs
        levels = int((now - rs.arrival[i]) // self.lim.aging_s)
        return (max(self.lim.top_priority, int(rs.prio[i]) - levels), float(rs.arrival[i]))

    def _reserve_now(self) -> int:
        """Tokens held back for the top class this step (lendable: only while one needs them)."""
        lim, rs, run = self.lim, self.rs, self.run
        if not lim.token_reserve:
            return 0
        if not lim.reserve_lendable:
            return lim.token_reserve
        waiting_top = any(rs.is_top[i] for i in self.queue.ids())
        prefilling_top = bool(np.any((run.row(TOP) == 1) & (run.row(COMP) < run.row(PROMPT))))
        return lim.token_reserve if (waiting_top or prefilling_top) else 0

    def _top_blocked_on_kv(self) -> bool:
        """Is a waiting top-priority request unable to fit its whole sequence in free KV now?"""
        rs, pool = self.rs, self.pool
        return any(rs.is_top[i] and pool.shortfall(int(rs.cls[i]), int(pool.blocks(rs.seq_len(i))))
                   for i in self.queue.ids())

    def _boost_holders(self) -> None:
        """Priority inheritance: lower-priority KV holders move to the front of the running order."""
        top, run = self.rs.is_top, self.run
        held = run.held().tolist()
        holders = [p for p, i in enumerate(run.ids) if not top[i] and held[p] > 0]
        holders.sort(key=lambda p: -held[p])
        rest = [p for p, i in enumerate(run.ids) if top[i] or held[p] == 0]
        run.reorder(holders + rest)

    # -- Phase A: running requests ------------------------------------------------------------
    def _schedule_running(self, now: float) -> tuple[list[int], Reason]:
        run, pool = self.run, self.pool
        n = len(run)
        if not n:
            return [], Reason.NONE
        if DECODE_STEP and self._n_dec == n and self.rem_r == 0 and n <= self.rem_s:
            # Decode step: each request gets its one token; those whose computed tokens fill
            # whole blocks need one more block.
            grow = run.crossings()
            if not pool.fits(grow):
                return self._schedule_running_exact(now)
            pool.add(grow)
            run.F[TOK, :n] = 1
            self.rem_s -= n
            self._fast, self._n_a = True, n
            self._agg = [n, n, n, self._ctx, self._ctx, n]
            return [], Reason.NONE
        if not VECTOR_STEP:
            return self._schedule_running_exact(now)
        F = run.settled()
        comp = F[COMP, :n]
        remaining = F[SEQ, :n] - comp
        need = np.minimum(remaining, self.lim.threshold) if self.lim.threshold else remaining
        demand = int(need.sum())
        if self.rem_r == 0 and demand <= self.rem_s:  # common: everyone gets all it needs
            from_r, from_s, alloc = None, None, need
        else:
            from_r, from_s = self._split(need, F[TOP, :n])
            alloc = from_r + from_s
        grow = pool.blocks(comp + alloc) - pool.blocks(comp)
        per_class = (F[ONEHOT:, :n] @ grow).tolist()
        if not pool.fits(per_class):
            return self._schedule_running_exact(now)
        pool.add(per_class)
        F[TOK, :n] = alloc
        if from_r is None:
            self.rem_s -= demand
        else:
            F[FROM_R, :n] = from_r
            self.rem_r -= int(from_r.sum())
            self.rem_s -= int(from_s.sum())
        return [], Reason.NONE

    def _split(self, need: np.ndarray, top: np.ndarray):
        """Budget per request in list order: the top class draws from the reserve first."""
        from_r = _give(self.rem_r, np.where(top, need, 0)) if self.rem_r else np.zeros(len(need), np.int64)
        return from_r, _give(self.rem_s, need - from_r)

    def _schedule_running_exact(self, now: float) -> tuple[list[int], Reason]:
        """The sequential vLLM loop, used when some growth does not fit (preemption)."""
        run, pool, F = self.run, self.pool, self.run.settled()
        preempted: list[int] = []
        cause = Reason.NONE
        p = 0
        while p < len(run) and self.rem_s + self.rem_r > 0:
            r, c, top = run.ids[p], run.cls[p], bool(F[TOP, p])
            comp = int(F[COMP, p])
            left = int(F[SEQ, p]) - comp
            n = min(left, self.lim.threshold) if self.lim.threshold else left
            n = min(n, self.rem_s + (self.rem_r if top else 0))
            if n <= 0:
                p += 1
                continue
            grow = pool.blocks(comp + n) - pool.blocks(comp)
            while (why := pool.shortfall(c, grow)) != Reason.NONE:
                cause = why
                victim = self._victim(r, c, why)
                vi = run.ids.index(victim)
                self._evict(victim, now)
                preempted.append(victim)
                if vi < p:
                    p -= 1
                if victim == r:
                    break
            if preempted and preempted[-1] == r:
                break
            pool.grow(c, grow)
            self._take(p, n, top)
            p += 1
        return preempted, cause

    def _victim(self, r: int, c: int, why: Reason) -> int:
        """The policy's victim among the running requests whose eviction relieves `why`."""
        rs = self.rs
        if why == Reason.CLASS_CAP:
            cands = [i for i in self.running if rs.cls[i] == c]
        elif why == Reason.RESERVE:
            cands = [i for i in self.running if not rs.is_top[i]]
        else:
            cands = self.running
        return self.policy.victim(cands, rs.prio, rs.arrival)

    def _take(self, p: int, n: int, top: bool) -> None:
        """Give the request at position p n tokens of the step budget (the top class uses its
        reserve first)."""
        r = min(n, self.rem_r) if self.rem_r and top else 0
        self.rem_r -= r
        self.rem_s -= n - r
        F = self.run.F
        F[TOK, p] = n
        if r:
            F[FROM_R, p] = r

    def _evict(self, v: int, now: float) -> None:
        """Preempt a running request: its tokens go back to the budget, its blocks are freed;
        recompute (progress lost) or swap."""
        rs, pool, run = self.rs, self.pool, self.run
        p = run.ids.index(v)
        F = run.settled()
        tok, from_r, comp = int(F[TOK, p]), int(F[FROM_R, p]), int(F[COMP, p])
        self.rem_r += from_r
        self.rem_s += tok - from_r
        c = run.cls[p]
        freed = pool.blocks(comp + tok)
        pool.release(c, freed)
        self._leave(p)
        self.n_running_cls[c] -= 1
        rs.preemptions[v] += 1
        if self.lim.swap_bytes_per_s > 0:
            rs.swapped[v] = True
            self.swap_s += freed * self.lim.block_bytes / self.lim.swap_bytes_per_s
            rs.computed[v] = comp
        else:
            rs.recomputed[v] += comp
            rs.computed[v] = 0
        rs.status[v] = WAITING
        self._counter += 1
        self.queue.push(v, self.policy.requeue_key(int(rs.prio[v]), float(rs.arrival[v]), v, self._counter))
        if not self.evicted[v]:
            self.evicted[v] = True
            self.n_evicted += 1
        self.evicted_now.append(v)
        self._fast = False

    def _leave(self, p: int) -> None:
        """Take the request at position p out of the running set, writing its progress back."""
        run, rs = self.run, self.rs
        F = run.settled()
        comp, seq, prompt = int(F[COMP, p]), int(F[SEQ, p]), int(F[PROMPT, p])
        i = run.ids[p]
        rs.computed[i], rs.generated[i] = comp, seq - prompt
        self._ctx -= comp
        if seq - comp == 1 and seq > prompt:
            self._n_dec -= 1
        run.remove_at(p)

    # -- Phase B: waiting requests ------------------------------------------------------------
    def _schedule_waiting(self, now: float):
        """Walk the queue in order; returns (ids, reasons, need, free, blocker, admitted) of the
        requests left waiting (need/free: KV blocks at their check, −1 where not checked).

        A skipping policy (backfill) with a long queue first marks, in one vectorised pass, who
        cannot fit in KV at all this step (room only shrinks during the pass, so they stay out)
        and walks only the others; when seats or budget run out (or already have) it walks every
        position, so decisions and reasons are those of the plain sequential walk."""
        rs, pool, pol, lim = self.rs, self.pool, self.policy, self.lim
        top_l, cls_l, prompt_l = rs.top_l, rs.cls_l, rs.prompt_l
        order = self.queue.ids()
        n_w = len(order)
        pre = None
        limits_bind = len(self.running) >= lim.max_seqs or self.rem_s <= 0
        if not pol.stops_at_misfit and lim.chunked and n_w > SKIP_SCAN_MIN_QUEUE and not limits_bind:
            pre, pre_need = self._kv_reasons(np.array(order, dtype=np.int64))
            walk = np.flatnonzero(pre == _NONE).tolist()
            walked = np.zeros(n_w, bool)
        else:
            walk = range(n_w)
        # Per-position results as lists for the usual short queue (cheaper), as arrays otherwise.
        short = n_w <= SHORT_QUEUE and pre is None
        if short:
            codes, need_at, free_at = [0] * n_w, [-1] * n_w, [-1] * n_w
            top_left = sum(top_l[w] for w in order)
        else:
            ids = np.array(order, dtype=np.int64)
            codes, need_at, free_at = np.zeros(n_w, np.int8), np.full(n_w, -1, np.int64), np.full(n_w, -1, np.int64)
            top_left = int(np.count_nonzero(rs.is_top[ids]))
        admitted: list[int] = []
        start = (pool.used, pool.used_other, np.array(pool.used_cls), bool(self.running)) if pre is not None else None
        adm_pos: list[int] = []
        adm_blocks: list[int] = []
        block_other, block_from, blocker = Reason.NONE, n_w, -1
        closed_at: dict[int, int] = {}
        if self._running_caps:
            closed_at = {c: -1 for c in range(len(pool.used_cls)) if self._at_running_cap(c)}
        stop_at, tail, dense_from = n_w, Reason.NONE, n_w
        k = 0
        while k < len(walk):
            p = walk[k]
            k += 1
            w = order[p]
            if pre is not None:
                walked[p] = True
            top = top_l[w]
            top_left -= top
            if len(self.running) >= lim.max_seqs and not self._evict_for_seat(w, now):
                stop_at, tail = p, Reason.MAX_SEQS
                break
            if not top and block_other:
                codes[p] = block_other
                if top_left == 0:
                    stop_at, tail = p + 1, block_other
                    break
                continue
            c = cls_l[w]
            if c in closed_at or self._at_running_cap(c):
                closed_at.setdefault(c, p)
                codes[p] = Reason.CLASS_CAP
                continue
            avail = self.rem_s + (self.rem_r if top else 0)
            if avail <= 0:
                if top or self.rem_r == 0:
                    stop_at, tail = p, Reason.TOKEN_BUDGET
                    break
                block_other, block_from = Reason.RESERVE, p
                codes[p] = Reason.RESERVE
                continue
            seq, done = prompt_l[w] + int(rs.generated[w]), int(rs.computed[w])
            n = seq - done if not lim.threshold else min(seq - done, lim.threshold)
            why = Reason.TOKEN_BUDGET if (not lim.chunked and n > avail) else Reason.NONE
            n = min(n, avail)
            need = pool.blocks(seq)
            if not why:
                why = pool.shortfall(c, need, watermark=bool(self.running))
                if why in (Reason.KV_SHORT, Reason.RESERVE) and pol.preempts_for_waiting:
                    why = self._evict_for_blocks(w, c, need, now)
            if why:
                codes[p] = int(why)
                need_at[p], free_at[p] = need, pool.free_for(c, watermark=bool(self.running))
                if pre is not None and dense_from == n_w and k < len(walk):
                    # room shrank since the pre-filter: drop the candidates that no longer fit either
                    rest = np.array(walk[k:], dtype=np.int64)
                    walk = walk[:k] + rest[self._kv_reasons(ids[rest])[0] == _NONE].tolist()
                # Over its class's KV cap: skipped (a smaller one of its class may still fit).
                if why != Reason.CLASS_CAP and pol.stops_at_misfit:
                    blocker = w
                    if top or why != Reason.RESERVE:
                        stop_at, tail = p + 1, Reason.HEAD_OF_LINE
                        break
                    block_other, block_from = Reason.HEAD_OF_LINE, p
                continue
            adm_blocks.append(self._admit(w, c, n, now, done, seq - done))
            adm_pos.append(p)
            admitted.append(w)
            if self._at_running_cap(c):
                closed_at.setdefault(c, p)
            if pre is not None and dense_from == n_w and (len(self.running) >= lim.max_seqs or self.rem_s <= 0):
                dense_from = p + 1  # a global limit now binds: walk every later position
                walk = walk[:k] + list(range(p + 1, n_w))
        if short:
            codes[stop_at:] = [int(tail)] * (n_w - stop_at)
            left = [p for p in range(n_w) if codes[p]]
            if not left:
                return _EMPTY, _NO_REASONS, _EMPTY, _EMPTY, blocker, admitted
            return (np.array([order[p] for p in left], np.int64), np.array([codes[p] for p in left], np.int8),
                    np.array([need_at[p] for p in left], np.int64), np.array([free_at[p] for p in left], np.int64),
                    blocker, admitted)
        codes[stop_at:] = tail
        if pre is not None:
            admissions = (np.array(adm_pos, dtype=np.int64), np.array(adm_blocks, dtype=np.int64),
                          rs.cls[np.array(admitted, dtype=np.int64)])
            self._label_unwalked(ids, codes, need_at, free_at, walked, pre_need, min(stop_at, dense_from),
                                 start, admissions, closed_at, block_other, block_from)
        keep = codes != _NONE
        if admitted or not keep.all():
            ids, codes, need_at, free_at = ids[keep], codes[keep], need_at[keep], free_at[keep]
        return ids, codes, need_at, free_at, blocker, admitted

    def _kv_reasons(self, ids: np.ndarray):
        """Vectorised `KVPool.shortfall` for whole sequences: (reason per request, blocks needed)."""
        rs, pool = self.rs, self.pool
        cls = rs.cls[ids]
        need = pool.blocks(rs.prompt[ids] + rs.generated[ids])
        wm = pool.watermark if self.running else 0
        out = np.zeros(len(ids), np.int8)
        out[~rs.is_top[ids] & (need > pool.capacity - pool.reserve - pool.used_other)] = Reason.RESERVE
        out[need + wm > pool.capacity - pool.used] = Reason.KV_SHORT
        out[need > (pool.class_caps - np.array(pool.used_cls))[cls]] = Reason.CLASS_CAP
        return out, need

    def _label_unwalked(self, ids, codes, need_at, free_at, walked, pre_need, upto, start, admissions,
                        closed_at, block_other, block_from):
        """Reasons (and KV detail) for the requests the walk skipped, exactly as the sequential walk
        would have found them at their turn: the pool as it stood after the admissions before them."""
        rs, pool = self.rs, self.pool
        pos = np.arange(len(ids))
        q = np.flatnonzero(~walked & (pos < upto))
        if q.size:
            used0, other0, cls0, running0 = start
            a_pos, a_blocks, a_cls = admissions
            c = rs.cls[ids[q]]
            top = rs.is_top[ids[q]]
            k = np.searchsorted(a_pos, q)  # admissions before each position
            before = lambda x: np.concatenate([[0], np.cumsum(x)])[k]  # noqa: E731
            used = used0 + before(a_blocks)
            other = other0 + before(a_blocks * ~pool.class_is_top[a_cls])
            onehot = np.zeros((len(a_pos) + 1, len(cls0)), np.int64)
            onehot[np.arange(1, len(a_pos) + 1), a_cls] = a_blocks
            in_cls = cls0[c] + np.cumsum(onehot, axis=0)[k, c]
            wm = np.where(running0 | (k > 0), pool.watermark, 0)
            need = pre_need[q]
            room_total = pool.capacity - used - wm
            room_other = np.where(top, room_total, pool.capacity - pool.reserve - other)
            room_cls = pool.class_caps[c] - in_cls
            why = np.where(need > room_cls, Reason.CLASS_CAP,
                           np.where(need > room_total, Reason.KV_SHORT, Reason.RESERVE)).astype(np.int8)
            codes[q], need_at[q] = why, need
            free_at[q] = np.maximum(0, np.minimum(np.minimum(room_total, room_other), room_cls))
        rest = np.zeros(len(ids), bool)
        rest[q] = True
        cls = rs.cls[ids]
        for cl, p in closed_at.items():
            m = rest & (cls == cl) & (pos > p)
            codes[m], need_at[m], free_at[m] = Reason.CLASS_CAP, -1, -1
        if block_other:
            m = rest & ~rs.is_top[ids] & (pos > block_from)
            codes[m], need_at[m], free_at[m] = block_other, -1, -1

    def _at_running_cap(self, c: int) -> bool:
        if not self._running_caps:
            return False
        cap = self.lim.class_max_running[c]
        return cap is not None and self.n_running_cls[c] >= cap

    def _admit(self, w: int, c: int, n: int, now: float, computed: int, remaining: int) -> int:
        """Move w from the queue to the running set; allocate blocks for its first chunk only
        (returns how many)."""
        rs, pool = self.rs, self.pool
        self.queue.remove(w)
        seq, prompt, top = computed + remaining, rs.prompt_l[w], rs.top_l[w]
        end = prompt + rs.output_l[w]
        p = self.run.add(w, c, computed, seq, prompt, end, top)
        self.n_running_cls[c] += 1
        rs.status[w] = RUNNING
        if rs.swapped[w]:
            rs.swapped[w] = False
            self.swap_s += pool.blocks(computed) * self.lim.block_bytes / self.lim.swap_bytes_per_s
        blocks = pool.blocks(computed + n)
        pool.grow(c, blocks)
        self._take(p, n, top)
        if rs.first_sched[w] != rs.first_sched[w]:  # NaN: first admission
            rs.first_sched[w] = now
        if self.evicted[w]:
            self.evicted[w] = False
            self.n_evicted -= 1
        self._ctx += computed
        if remaining == 1 and seq > prompt:
            self._n_dec += 1
        if self._fast:
            agg = self._agg
            agg[0] += n
            agg[1] += n if computed >= prompt else 0
            agg[2] += 1
            agg[3] += computed
            agg[4] += n * computed
            agg[5] += n * n
        return blocks

    def _lower(self, w: int) -> list[int]:
        return [i for i in self.running if self.rs.prio[i] > self.rs.prio[w]]

    def _evict_for_seat(self, w: int, now: float) -> bool:
        """`preempt` policy: a full running set gives up its worst lower-priority request."""
        if not self.policy.preempts_for_waiting:
            return False
        cands = self._lower(w)
        if not cands:
            return False
        self._evict(self.policy.victim(cands, self.rs.prio, self.rs.arrival), now)
        return True

    def _evict_for_blocks(self, w: int, c: int, need: int, now: float) -> Reason:
        """`preempt` policy: evict lower-priority running requests until w's prompt fits."""
        rs, pool = self.rs, self.pool
        cands = self._lower(w)
        freed = self._held_by(cands)
        wm = pool.watermark
        if need + wm > pool.free + freed or (
            not rs.is_top[w] and need > pool.capacity - pool.reserve - pool.used_other + freed
        ):
            return pool.shortfall(c, need, watermark=bool(self.running))
        why = pool.shortfall(c, need, watermark=bool(self.running))
        while why in (Reason.KV_SHORT, Reason.RESERVE) and cands:
            v = self.policy.victim(cands, rs.prio, rs.arrival)
            cands.remove(v)
            self._evict(v, now)
            why = pool.shortfall(c, need, watermark=bool(self.running))
        return why

    def _held_by(self, ids: list[int]) -> int:
        """Blocks the running requests `ids` hold now."""
        if not ids:
            return 0
        held = self.run.held()
        pos = {i: p for p, i in enumerate(self.run.ids)}
        return int(held[[pos[i] for i in ids]].sum())

    # -- after the step ---------------------------------------------------------------------
    def complete(self, step: Step, t_end: float) -> list[int]:
        """Apply a finished step: progress, sampled tokens, finished requests (blocks freed)."""
        run, rs = self.run, self.rs
        n = len(run)
        if not step.batch:
            return []
        if self._fast:  # the decode rows move together; the few admitted requests one by one
            na, F = self._n_a, run.F
            admitted = [(p, *run.comp_seq(p)) for p in range(na, n)]
            run.decode()
            self._ctx += na
            for p, comp, seq in admitted:
                tok, prompt = int(F[TOK, p]), int(F[PROMPT, p])
                decoding = seq - comp == 1 and seq > prompt
                comp += tok
                self._ctx += tok
                if comp == seq:  # the chunk completed the sequence: one new token
                    seq += 1
                    if not decoding:
                        self._n_dec += 1
                    i = run.ids[p]
                    if seq - prompt == 1 and rs.first_token[i] != rs.first_token[i]:
                        rs.first_token[i] = t_end
                run.put(p, comp, seq)
            F[TOK:FROM_R + 1, :n] = 0
        else:
            F = run.settled()
            comp, seq = F[COMP, :n], F[SEQ, :n]
            comp += F[TOK, :n]
            self._ctx += step.tokens
            sampled = comp == seq
            seq += sampled
            gen = seq - F[PROMPT, :n]
            new = (sampled & (gen == 1)).nonzero()[0]
            if len(new):
                ids = np.array(run.ids, dtype=np.int64)[new]
                rs.first_token[ids[np.isnan(rs.first_token[ids])]] = t_end
            self._n_dec = int(np.count_nonzero((seq - comp == 1) & (gen > 0)))
            F[TOK:FROM_R + 1, :n] = 0
            run.reindex()
        fin_pos = run.finished()
        if not fin_pos:
            return []
        pool, F = self.pool, run.F
        fin = [run.ids[p] for p in fin_pos]
        for p, i in zip(fin_pos, fin):
            c, (comp, seq) = run.cls[p], run.comp_seq(p)
            pool.release(c, pool.blocks(comp))
            self.n_running_cls[c] -= 1
            rs.status[i] = FINISHED
            rs.finish[i] = t_end
            rs.computed[i], rs.generated[i] = comp, seq - int(F[PROMPT, p])
            self._ctx -= comp
        self._n_dec -= len(fin)
        for p in reversed(fin_pos):
            run.remove_at(p)
        return fin
