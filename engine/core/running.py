"""The running set: the requests an engine is running, in running order, kept in place.

Every step touches every running request (each gets a chunk or a decode token), so their
progress lives in the rows of one int64 matrix: whole rows are read and written with a handful
of numpy operations, and when a request leaves, one copy keeps every row aligned. Waiting and
finished requests keep their state in `Requests`; a request's progress is handed back to the
scheduler when it leaves (`remove_at`).

Blocks are not stored: between steps a running request holds exactly ceil(computed / block_size)
blocks, and during a step ceil((computed + tokens) / block_size).

This is where the engine is fast, below the scheduler's rules (vLLM specialises its model runner
the same way): `propose` describes what the running pass would hand out if no KV growth failed —
a `Plan` — and the scheduler accepts it only when the pool proves that. Decode steps cost O(1).
In a decode step every running request computes one token and samples the next, so COMP and SEQ
of every row grow by one. `advance` does not touch the rows: it adds one to `shift`, and the COMP
and SEQ rows hold their values minus `shift` until `settled()` folds it in (anything that reads
the rows asks for `settled()`). Two facts a decode step needs are kept up to date instead:
- who needs a new block: a request whose computed tokens fill whole blocks, i.e. whose stored
  COMP ≡ −shift (mod block size). `by_residue[r][c]` counts the requests of class c whose stored
  COMP ≡ r.
- who finishes: `clock` counts decode steps; a request with L outputs left at clock G finishes
  when the clock reaches G + L unless its progress changes otherwise, so a heap of those values,
  refreshed whenever a request's progress changes outside a decode step, names the requests that
  finish without a pass over the rows.
Running totals (Σ computed tokens, how many requests decode, how many are top priority) are kept
as requests come and go, so a decode step needs no pass over the rows either.

A request whose last token is sampled (SEQ = END) has nothing left to compute. Under sync
scheduling it leaves at once; under async scheduling it stays until the end of the next call
(`done`), wanting no tokens: the call's plan gives every other decoding request its token and
these none, and they leave before the step's totals are taken (`Plan.n` then shrinks).
"""

from __future__ import annotations

import heapq

import numpy as np

from .step import Budget, Plan

COMP, SEQ, TOK, FROM_R, PROMPT, END, TOP, ADM, GRANT, SAMPLE, SAMPLE0, ONEHOT = range(12)
# COMP: tokens computed · SEQ: prompt + generated (COMP and SEQ are adjacent, so one `+=` moves
# both) · TOK: tokens scheduled this step (0 between steps) · FROM_R: of those, drawn from the
# top-priority token reserve · PROMPT, END = prompt + output · TOP: 1 for the top class · ADM:
# the step it was admitted in · GRANT, SAMPLE, SAMPLE0: the last step it was given tokens in, the
# last two it sampled a token in, unless the step was a uniform decode step (see `hashed`) ·
# ONEHOT + c: 1 if the request is of class c (per-class sums are one matrix product).


def give(pool: int, want: np.ndarray) -> np.ndarray:
    """Sequential `min(want_i, what is left)` down the list, as one vectorised expression."""
    before = np.cumsum(want) - want
    out: np.ndarray = np.minimum(want, np.maximum(pool - before, 0))
    return out


class RunningSet:
    def __init__(self, n_classes: int, block_size: int, capacity: int = 64):
        self.n_classes, self.bs = n_classes, block_size
        self.F = np.zeros((ONEHOT + n_classes, max(capacity, 1)), np.int64)
        self.ids: list[int] = []  # running order (admission order; inheritance may reorder)
        self.cls: list[int] = []  # class of each, same order
        self.ctx = 0  # Σ computed tokens
        self.n_dec = 0  # requests in decode: prompt done, one token to compute
        self.n_top = 0  # requests of the top class
        self.done: list[int] = []  # ids whose last token is sampled, not yet taken out (async)
        self.shift = 0
        self.clock = 0
        self.cur = 0  # the step being built (steps done so far)
        self.track = False  # keep GRANT / SAMPLE up to date (async scheduling with a prefix cache)
        self.ufrom, self.upto = 0, -1  # the last run of uniform decode steps (step numbers)
        self.by_residue = [[0] * n_classes for _ in range(block_size)]
        self._due: list[tuple[int, int]] = []  # heap of (clock at which it finishes, id); stale ones skipped
        self._due_at: dict[int, int] = {}  # id → its current entry
        self._blank = np.array([0, 0, 0, 0, 0, 0, 0, 0, -2, -2, -2] + [0] * n_classes, np.int64)  # a new row

    def __len__(self) -> int:
        return len(self.ids)

    def __bool__(self) -> bool:
        return bool(self.ids)

    # -- reading ------------------------------------------------------------------------------
    def settled(self) -> np.ndarray:
        """The matrix with every row at its true value (the pending decode shift folded in)."""
        s = self.shift
        if s:
            self.F[COMP : SEQ + 1, : len(self.ids)] += s
            r = s % self.bs
            if r:
                self.by_residue = self.by_residue[-r:] + self.by_residue[:-r]
            self.shift = 0
        return self.F

    def row(self, r: int) -> np.ndarray:
        """A view of row r over the running requests (true values)."""
        return self.settled()[r, : len(self.ids)]

    def held(self) -> np.ndarray:
        """Blocks each running request holds (during a step: including this step's chunk)."""
        n = len(self.ids)
        F = self.settled()
        held: np.ndarray = -(-(F[COMP, :n] + F[TOK, :n]) // self.bs)
        return held

    def comp_seq(self, p: int) -> tuple[int, int]:
        """True (computed, prompt + generated) of the request at position p."""
        item, s = self.F.item, self.shift
        return item(COMP, p) + s, item(SEQ, p) + s

    def todo(self, p: int) -> tuple[int, int]:
        """(computed, tokens it wants) of the request at position p: none once its last token is
        sampled."""
        comp, seq = self.comp_seq(p)
        return comp, (seq - comp if seq < int(self.F[END, p]) else 0)

    def snapshot(self, budget: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(ids, classes, blocks held, steps left) of the running requests, for observers: steps
        left = remaining prefill at the full budget plus the remaining decode steps."""
        seq, comp = self.row(SEQ), self.row(COMP)
        prefill_left = np.maximum(seq - comp - 1, 0)
        steps_left = -(-prefill_left // budget) + (self.row(END) - seq)
        return (np.array(self.ids, dtype=np.int64), np.array(self.cls, dtype=np.int64), self.held(), steps_left)

    # -- planning a step ----------------------------------------------------------------------
    def crossings(self) -> list[int]:
        """Per class: running requests whose computed tokens fill whole blocks (a decode token
        needs a new block)."""
        return list(self.by_residue[-self.shift % self.bs])

    def propose(self, budget: Budget, threshold: int) -> Plan:
        """Tokens per running request in running order, each min(remaining, threshold, budget
        left), the top class drawing its reserve first — what vLLM's running loop hands out
        when no growth fails."""
        n = len(self.ids)
        if self.n_dec == n:  # every request decodes (or is done): one token each, O(1)
            m, top, grow = n, self.n_top, self.crossings()
            if self.done:
                m, top = self._minus_done(grow)
            r = min(budget.reserve, top)
            if m - r <= budget.shared:
                return Plan(True, n, grow, r, m - r, done=n - m)
        F = self.settled()
        comp = F[COMP, :n]
        need = F[SEQ, :n] - comp
        if self.done:
            need = np.where(F[SEQ, :n] < F[END, :n], need, 0)
        if threshold:
            need = np.minimum(need, threshold)
        demand = int(need.sum())
        if budget.reserve == 0 and demand <= budget.shared:  # common: everyone gets all it needs
            alloc, from_r, used_r = need, None, 0
        else:
            from_r = give(budget.reserve, np.where(F[TOP, :n] == 1, need, 0)) if budget.reserve \
                else np.zeros(n, np.int64)
            alloc = from_r + give(budget.shared, need - from_r)
            used_r = int(from_r.sum())
        new = -(-(comp + alloc) // self.bs) - (-(-comp // self.bs))  # blocks per request
        return Plan(False, n, (F[ONEHOT:, :n] @ new).tolist(), used_r, int(alloc.sum()) - used_r, alloc, from_r)

    def call_growth(self) -> list[int]:
        """Per class: the new blocks the next call's decode tokens need (done requests take none)."""
        grow = self.crossings()
        if self.done:
            self._minus_done(grow)
        return grow

    def _minus_done(self, grow: list[int]) -> tuple[int, int]:
        """The decoders other than the done requests: (how many, of the top class); `grow` (per
        class, from `crossings`) loses the done requests that would have needed a block."""
        F, bs, at = self.F, self.bs, -self.shift % self.bs
        m, top = len(self.ids), self.n_top
        for i in self.done:
            p = self.ids.index(i)
            m -= 1
            top -= int(F[TOP, p])
            if int(F[COMP, p]) % bs == at:
                grow[self.cls[p]] -= 1
        return m, top

    def accept(self, plan: Plan) -> None:
        """Record the plan's tokens on the rows (an eviction later in the step gives them back)."""
        n, F = plan.n, self.F
        if plan.uniform:
            F[TOK, :n] = 1
            for i in self.done:
                F[TOK, self.ids.index(i)] = 0
            if plan.reserve_used:  # the first top-class decoders in running order drew the reserve
                top = (F[TOP, :n] == 1) & (F[TOK, :n] == 1)
                F[FROM_R, :n] = top & (np.cumsum(top) <= plan.reserve_used)
        else:
            assert plan.tokens is not None  # (a plan that is not uniform lists its tokens)
            F[TOK, :n] = plan.tokens
            if plan.from_reserve is not None:
                F[FROM_R, :n] = plan.from_reserve

    def set_tokens(self, p: int, n: int, from_r: int) -> None:
        """The sequential loop's (or an admission's) tokens for position p."""
        self.F[TOK, p] = n
        self.F[FROM_R, p] = from_r

    def tokens_of(self, p: int) -> tuple[int, int]:
        """(tokens this step, of them from the reserve) at position p."""
        return int(self.F[TOK, p]), int(self.F[FROM_R, p])

    def totals(self, plan: Plan | None) -> tuple[int, int, int, int, float]:
        """(tokens, decode tokens, requests, context tokens, attention work) of the step.

        A uniform plan's part is known without the rows (n decode tokens on `ctx` context);
        only the rows after it — this step's admissions, a few — are read one by one."""
        n = len(self.ids)
        if not n:
            return 0, 0, 0, 0, 0.0
        if plan is not None and plan.uniform:
            lo, context = plan.n, self.ctx
            if lo == n:  # nobody admitted: n decode tokens on the whole context
                return lo, lo, lo, context, float(context) + 0.5 * float(lo)
            item, s = self.F.item, self.shift
            tokens, decode, batch, dot, sq = lo, lo, lo, context, lo  # the decode rows: 1 × context
            for p in range(lo, n):  # admitted this step: each has tokens > 0
                tok, comp = item(TOK, p), item(COMP, p) + s
                tokens += tok
                decode += tok if comp >= item(PROMPT, p) else 0
                batch += 1
                dot += tok * comp - comp  # (its context is not a decode row's)
                sq += tok * tok
            return tokens, decode, batch, context, float(dot) + 0.5 * float(sq)
        F = self.settled()
        toks, comps = F[TOK, :n], F[COMP, :n]
        on = toks > 0
        return (int(toks.sum()), int(toks[comps >= F[PROMPT, :n]].sum()), int(np.count_nonzero(on)),
                int(comps[on].sum()), float(int(toks @ comps)) + 0.5 * float(int(toks @ toks)))

    # -- applying a step ----------------------------------------------------------------------
    def advance(self, plan: Plan | None) -> list[int]:
        """Apply the finished step's tokens; returns the ids whose first output token it sampled."""
        n = len(self.ids)
        F = self.F
        first: list[int] = []
        if plan is not None and plan.uniform:  # the decode rows move together; admissions one by one
            admitted = [(p, *self.comp_seq(p)) for p in range(plan.n, n)]
            self.shift += 1
            self.clock += 1
            self.ctx += plan.n
            item = F.item
            for p, was_comp, was_seq in admitted:
                comp, seq = was_comp + item(TOK, p), was_seq
                F[GRANT, p] = self.cur
                if comp == seq:  # the chunk completed the sequence: one new token
                    seq += 1
                    if self.track:
                        F[SAMPLE0, p], F[SAMPLE, p] = F[SAMPLE, p], self.cur
                    if seq - item(PROMPT, p) == 1:
                        first.append(self.ids[p])
                self._put(p, comp, seq, (was_comp, was_seq))
            cur = self.cur  # (`_uniform(1)`, inline: every decode step passes here)
            if self.upto != cur - 1:
                self.ufrom = cur
            self.cur = self.upto = cur + 1
            self.upto = cur
        else:
            F = self.settled()
            comps, seqs = F[COMP, :n], F[SEQ, :n]  # (views: the rows move in place)
            self.ctx += int(F[TOK, :n].sum())
            comps += F[TOK, :n]
            sampled = comps == seqs
            seqs += sampled
            if self.track:
                F[GRANT, :n][F[TOK, :n] > 0] = self.cur
                F[SAMPLE0, :n][sampled] = F[SAMPLE, :n][sampled]
                F[SAMPLE, :n][sampled] = self.cur
            self.cur += 1
            gen = seqs - F[PROMPT, :n]
            new = (sampled & (gen == 1)).nonzero()[0]
            if len(new):
                first = [self.ids[p] for p in new.tolist()]
            self.n_dec = int(np.count_nonzero((seqs - comps == 1) & (gen > 0)))
            self._reindex()
        F[TOK:FROM_R + 1, :n] = 0
        return first

    def skip(self, k: int) -> None:
        """k more decode steps like the last one (nobody finishes before the last of them)."""
        self.shift += k
        self.clock += k
        self.ctx += k * len(self.ids)
        self._uniform(k)

    def _uniform(self, k: int) -> None:
        """The next k steps were uniform decode steps: every request running at a step's start
        (admitted before it) was given one token and sampled one."""
        cur = self.cur
        if self.upto != cur - 1:
            self.ufrom = cur
        self.cur = self.upto = cur + k
        self.upto -= 1

    def hashed(self, p: int, lag: bool) -> int:
        """How many tokens of the request at position p vLLM has hashed at this point of the call
        (this step's tokens included): every computed token, except under async scheduling
        (`lag`) the newest while its value — the token sampled the step before — is in flight."""
        F = self.F
        comp, tok = int(F[COMP, p]) + self.shift, int(F[TOK, p])
        if not lag:
            return comp + tok
        k, adm = self.cur - 1, int(F[ADM, p])

        def did(row: int, s: int) -> bool:  # sampled (SAMPLE) or given tokens (GRANT) in step s
            return int(F[row, p]) == s or row == SAMPLE and int(F[SAMPLE0, p]) == s or (
                self.ufrom <= s <= self.upto and adm < s)

        if tok:  # this call's grant: its last token is known unless sampled in the last step
            return comp + tok - did(SAMPLE, k)
        return comp - (did(GRANT, k) and did(SAMPLE, k - 1))

    def taken_in(self, p: int, lag: bool) -> int:
        """`hashed` once the last step's outputs are taken in (the end of an async call)."""
        if not lag or self.F[TOK, p]:
            return self.hashed(p, lag)
        return int(self.F[COMP, p]) + self.shift

    def growth_table(self) -> tuple[list[list[int]], int, int]:
        """(table, at, block size): the blocks per class that decode step j from now (asked between
        steps) adds are table[(at − j) mod block size] — a block for each request whose computed
        tokens fill whole blocks by then (counted by residue, so nothing is built per step)."""
        return self.by_residue, -self.shift % self.bs, self.bs

    def steps_to_finish(self) -> int:
        """Decode steps from now until the next request finishes (inf when none is due)."""
        due, at = self._due, self._due_at
        while due and at.get(due[0][1]) != due[0][0]:
            heapq.heappop(due)  # stale entry
        return due[0][0] - self.clock if due else 1 << 62

    def finished(self) -> list[int]:
        """Positions of the requests with no output left to sample, in running order."""
        due, at, clock = self._due, self._due_at, self.clock
        if not due or due[0][0] > clock:
            return []
        done = []
        while due and due[0][0] <= clock:
            key, i = heapq.heappop(due)
            if at.get(i) == key:
                done.append(i)
                del at[i]  # a second entry with the same key is stale
        self.done += done
        return sorted(self.ids.index(i) for i in done)

    def _due_in(self, i: int, left: int) -> None:
        key = self.clock + left
        self._due_at[i] = key
        heapq.heappush(self._due, (key, i))

    # -- membership -----------------------------------------------------------------------------
    def add(self, i: int, c: int, comp: int, seq: int, prompt: int, end: int, top: bool) -> int:
        """Append request i at the end of the running order; returns its position."""
        p = len(self.ids)
        if p == self.F.shape[1]:
            self.F = np.concatenate([self.F, np.zeros_like(self.F)], axis=1)
        s = self.shift
        col = self._blank.copy()  # TOK, FROM_R 0; GRANT, SAMPLE, SAMPLE0 −2; ONEHOT + c 1
        col[COMP], col[SEQ], col[PROMPT], col[END], col[TOP], col[ADM] = comp - s, seq - s, prompt, end, top, self.cur
        col[ONEHOT + c] = 1
        self.F[:, p] = col
        self.ids.append(i)
        self.cls.append(c)
        self.by_residue[(comp - s) % self.bs][c] += 1
        self._due_in(i, end - seq)
        self.ctx += comp
        self.n_top += top
        if seq - comp == 1 and seq > prompt:
            self.n_dec += 1
        return p

    def _put(self, p: int, comp: int, seq: int, was: tuple[int, int] | None = None) -> None:
        """Set the true computed and sequence lengths of the request at position p (`was`: its
        values before, when the shift has moved on without it)."""
        s, F, c, item = self.shift, self.F, self.cls[p], self.F.item
        old_comp, old_seq = was or self.comp_seq(p)
        prompt = item(PROMPT, p)
        self.ctx += comp - old_comp
        self.n_dec += (seq - comp == 1 and seq > prompt) - (old_seq - old_comp == 1 and old_seq > prompt)
        table, bs = self.by_residue, self.bs
        table[item(COMP, p) % bs][c] -= 1
        table[(comp - s) % bs][c] += 1
        F[COMP, p] = comp - s
        F[SEQ, p] = seq - s
        self._due_in(self.ids[p], item(END, p) - seq)

    def _reindex(self) -> None:
        """Recount `by_residue` and the finish heap from the rows (after rows changed in bulk)."""
        n, C = len(self.ids), self.n_classes
        F = self.settled()
        counts = np.bincount((F[COMP, :n] % self.bs) * C + np.array(self.cls, dtype=np.int64),
                             minlength=self.bs * C)
        self.by_residue = counts.reshape(self.bs, C).tolist()
        keys = (F[END, :n] - F[SEQ, :n] + self.clock).tolist()
        self._due_at = dict(zip(self.ids, keys))
        self._due = list(zip(keys, self.ids))
        heapq.heapify(self._due)

    def remove_at(self, p: int) -> tuple[int, int, int, int]:
        """Take the request at position p out; returns its (id, class, computed, prompt + generated)."""
        n = len(self.ids)
        i, c = self.ids[p], self.cls[p]
        F, s = self.F, self.shift
        item = F.item
        stored = item(COMP, p)
        comp, seq = stored + s, item(SEQ, p) + s
        self.by_residue[stored % self.bs][c] -= 1
        self._due_at.pop(i, None)
        self.ctx -= comp
        self.n_top -= item(TOP, p)
        if seq - comp == 1 and seq > item(PROMPT, p):
            self.n_dec -= 1
        if seq >= item(END, p):
            self.done.remove(i)
        if p < n - 1:
            F[:, p : n - 1] = F[:, p + 1 : n]
        del self.ids[p], self.cls[p]
        return i, c, comp, seq

    def reorder(self, positions: list[int]) -> None:
        """Put the running requests in the order of `positions` (a permutation)."""
        n = len(self.ids)
        self.F[:, :n] = self.F[:, positions]
        self.ids[:] = [self.ids[p] for p in positions]
        self.cls[:] = [self.cls[p] for p in positions]
