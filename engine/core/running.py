"""The running set: the requests an engine is running, in running order, kept in place.

Each request's progress is one entry in each of a few parallel lists, in running order (`comp`,
`seq`, `tok`, …: see `__init__`). Almost every step is a uniform decode step, handled in O(1)
below, plus a few requests read or written by position (admissions, finishes, evictions), and
plain lists of ints make those cheap: one list read, not a numpy scalar operation (the compiled
engine reads them in C). A pass over every row is left for the rare step that is not uniform.
Waiting and finished requests keep their state in `Requests`; a request's progress is handed back
to the scheduler when it leaves (`remove_at`).

Blocks are not stored: between steps a running request holds exactly ceil(computed / block_size)
blocks, and during a step ceil((computed + tokens) / block_size).

This is where the engine is fast, below the scheduler's rules (vLLM specialises its model runner
the same way): `propose` describes what the running pass would hand out if no KV growth failed —
a `Plan` — and the scheduler accepts it only when the pool proves that. Decode steps cost O(1).
In a decode step every running request computes one token and samples the next, so `comp` and
`seq` of every request grow by one. `advance` does not touch them: it adds one to `shift`, and
`comp` and `seq` hold their values minus `shift` until `settle()` folds it in (anything that
passes over all of them settles first). Two facts a decode step needs are kept up to date instead:
- who needs a new block: a request whose computed tokens fill whole blocks, i.e. whose stored
  `comp` ≡ −shift (mod block size). `by_residue[r][c]` counts the requests of class c whose stored
  `comp` ≡ r.
- who finishes: `clock` counts decode steps; a request with L outputs left at clock G finishes
  when the clock reaches G + L unless its progress changes otherwise, so a heap of those values,
  refreshed whenever a request's progress changes outside a decode step, names the requests that
  finish without a pass over the rows.
Running totals (Σ computed tokens, how many requests decode, how many are top priority) are kept
as requests come and go, so a decode step needs no pass over the rows either.

A request whose last token is sampled (`seq` = `end`) has nothing left to compute. Under sync
scheduling it leaves at once; under async scheduling it stays until the end of the next call
(`done`), wanting no tokens: the call's plan gives every other decoding request its token and
these none, and they leave before the step's totals are taken (`Plan.n` then shrinks).
"""

from __future__ import annotations

import heapq

import numpy as np

from .step import Budget, Plan


def give(pool: int, want: list[int]) -> list[int]:
    """Sequential `min(want_i, what is left)` down the list."""
    out = []
    for w in want:
        g = min(w, max(pool, 0))
        out.append(g)
        pool -= g
    return out


class RunningSet:
    def __init__(self, n_classes: int, block_size: int):
        self.n_classes, self.bs = n_classes, block_size
        self.ids: list[int] = []  # running order (admission order; inheritance may reorder)
        self.cls: list[int] = []  # class of each, same order
        # per request, in running order:
        self.comp: list[int] = []  # tokens computed (minus `shift`)
        self.seq: list[int] = []  # prompt + generated (minus `shift`)
        self.tok: list[int] = []  # tokens scheduled this step (0 between steps)
        self.from_r: list[int] = []  # of those, drawn from the top-priority token reserve
        self.prompt: list[int] = []
        self.end: list[int] = []  # prompt + output
        self.top: list[int] = []  # 1: of the top class
        self.adm: list[int] = []  # the step it was admitted in
        # the last step it was given tokens in, the last two it sampled a token in (−2: none),
        # unless the step was a uniform decode step (see `hashed`); kept only when `track`:
        self.grant: list[int] = []
        self.sample: list[int] = []
        self.sample0: list[int] = []
        self.ctx = 0  # Σ computed tokens
        self.n_dec = 0  # requests in decode: prompt done, one token to compute
        self.n_top = 0  # requests of the top class
        self.done: list[int] = []  # ids whose last token is sampled, not yet taken out (async)
        self.shift = 0
        self.clock = 0
        self.cur = 0  # the step being built (steps done so far)
        self.track = False  # keep grant / sample up to date (async scheduling with a prefix cache)
        self.ufrom, self.upto = 0, -1  # the last run of uniform decode steps (step numbers)
        self.by_residue = [[0] * n_classes for _ in range(block_size)]
        self._due: list[tuple[int, int]] = []  # heap of (clock at which it finishes, id); stale ones skipped
        self._due_at: dict[int, int] = {}  # id → its current entry

    def __len__(self) -> int:
        return len(self.ids)

    def __bool__(self) -> bool:
        return bool(self.ids)

    def _columns(self) -> tuple[list[int], ...]:
        """Every per-request list (what leaving and reordering move together)."""
        return (self.ids, self.cls, self.comp, self.seq, self.tok, self.from_r, self.prompt, self.end,
                self.top, self.adm, self.grant, self.sample, self.sample0)

    # -- reading ------------------------------------------------------------------------------
    def settle(self) -> None:
        """Fold the pending decode shift into `comp` and `seq` (every entry at its true value)."""
        s = self.shift
        if s:
            self.comp[:] = [c + s for c in self.comp]
            self.seq[:] = [q + s for q in self.seq]
            r = s % self.bs
            if r:
                self.by_residue = self.by_residue[-r:] + self.by_residue[:-r]
            self.shift = 0

    def computed(self) -> list[int]:
        """Tokens computed by each running request, in running order."""
        s = self.shift
        return [c + s for c in self.comp]

    def held(self) -> list[int]:
        """Blocks each running request holds (during a step: including this step's chunk)."""
        s, bs = self.shift, self.bs
        return [-(-(c + s + t) // bs) for c, t in zip(self.comp, self.tok)]

    def top_prefilling(self) -> bool:
        """Whether a running request of the top class has prompt tokens left to compute."""
        s = self.shift
        return any(t and c + s < q for t, c, q in zip(self.top, self.comp, self.prompt))

    def comp_seq(self, p: int) -> tuple[int, int]:
        """True (computed, prompt + generated) of the request at position p."""
        s = self.shift
        return self.comp[p] + s, self.seq[p] + s

    def todo(self, p: int) -> tuple[int, int]:
        """(computed, tokens it wants) of the request at position p: none once its last token is
        sampled."""
        comp, seq = self.comp_seq(p)
        return comp, (seq - comp if seq < self.end[p] else 0)

    def snapshot(self, budget: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(ids, classes, blocks held, steps left) of the running requests, for observers: steps
        left = remaining prefill at the full budget plus the remaining decode steps."""
        s = self.shift
        seq = np.array(self.seq, dtype=np.int64) + s
        comp = np.array(self.comp, dtype=np.int64) + s
        prefill_left = np.maximum(seq - comp - 1, 0)
        steps_left = -(-prefill_left // budget) + (np.array(self.end, dtype=np.int64) - seq)
        return (np.array(self.ids, dtype=np.int64), np.array(self.cls, dtype=np.int64),
                np.array(self.held(), dtype=np.int64), steps_left)

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
        self.settle()
        comp, seq, end = self.comp, self.seq, self.end
        need = [q - c if q < e or not self.done else 0 for c, q, e in zip(comp, seq, end)]
        if threshold:
            need = [min(x, threshold) for x in need]
        from_r: list[int] | None = None
        if budget.reserve == 0 and sum(need) <= budget.shared:  # common: everyone gets all it needs
            alloc, used_r = need, 0
        else:
            from_r = give(budget.reserve, [x if t else 0 for x, t in zip(need, self.top)]) if budget.reserve \
                else [0] * n
            alloc = [f + g for f, g in zip(from_r, give(budget.shared, [x - f for x, f in zip(need, from_r)]))]
            used_r = sum(from_r)
        bs, growth = self.bs, [0] * self.n_classes
        for c, a, k in zip(comp, alloc, self.cls):
            growth[k] += -(-(c + a) // bs) + (-c // bs)  # blocks after − blocks before
        return Plan(False, n, growth, used_r, sum(alloc) - used_r, alloc, from_r)

    def call_growth(self) -> list[int]:
        """Per class: the new blocks the next call's decode tokens need (done requests take none)."""
        grow = self.crossings()
        if self.done:
            self._minus_done(grow)
        return grow

    def _minus_done(self, grow: list[int]) -> tuple[int, int]:
        """The decoders other than the done requests: (how many, of the top class); `grow` (per
        class, from `crossings`) loses the done requests that would have needed a block."""
        bs, at = self.bs, -self.shift % self.bs
        m, top = len(self.ids), self.n_top
        for i in self.done:
            p = self.ids.index(i)
            m -= 1
            top -= self.top[p]
            if self.comp[p] % bs == at:
                grow[self.cls[p]] -= 1
        return m, top

    def accept(self, plan: Plan) -> None:
        """Record the plan's tokens (an eviction later in the step gives them back)."""
        n = plan.n
        if plan.uniform:
            self.tok[:n] = [1] * n
            for i in self.done:
                self.tok[self.ids.index(i)] = 0
            k = plan.reserve_used  # the first top-class decoders in running order drew the reserve
            for p in range(n):
                if not k:
                    break
                if self.top[p] and self.tok[p]:
                    self.from_r[p] = 1
                    k -= 1
        else:
            assert plan.tokens is not None  # (a plan that is not uniform lists its tokens)
            self.tok[:n] = plan.tokens
            if plan.from_reserve is not None:
                self.from_r[:n] = plan.from_reserve

    def set_tokens(self, p: int, n: int, from_r: int) -> None:
        """The sequential loop's (or an admission's) tokens for position p."""
        self.tok[p] = n
        self.from_r[p] = from_r

    def tokens_of(self, p: int) -> tuple[int, int]:
        """(tokens this step, of them from the reserve) at position p."""
        return self.tok[p], self.from_r[p]

    def totals(self, plan: Plan | None) -> tuple[int, int, int, int, float]:
        """(tokens, decode tokens, requests, context tokens, attention work) of the step.

        A uniform plan's part is known without the rows (n decode tokens on `ctx` context);
        only the rows after it — this step's admissions, a few — are read one by one."""
        n = len(self.ids)
        if not n:
            return 0, 0, 0, 0, 0.0
        s, comp, tok, prompt = self.shift, self.comp, self.tok, self.prompt
        if plan is not None and plan.uniform:
            lo, context = plan.n, self.ctx
            if lo == n:  # nobody admitted: n decode tokens on the whole context
                return lo, lo, lo, context, float(context) + 0.5 * float(lo)
            tokens, decode, batch, dot, sq = lo, lo, lo, context, lo  # the decode rows: 1 × context
            for p in range(lo, n):  # admitted this step: each has tokens > 0
                t, c = tok[p], comp[p] + s
                tokens += t
                decode += t if c >= prompt[p] else 0
                batch += 1
                dot += t * c - c  # (its context is not a decode row's)
                sq += t * t
            return tokens, decode, batch, context, float(dot) + 0.5 * float(sq)
        tokens = decode = batch = context = dot = sq = 0
        for p in range(n):
            t = tok[p]
            if t:
                c = comp[p] + s
                tokens += t
                decode += t if c >= prompt[p] else 0
                batch += 1
                context += c
                dot += t * c
                sq += t * t
        return tokens, decode, batch, context, float(dot) + 0.5 * float(sq)

    # -- applying a step ----------------------------------------------------------------------
    def advance(self, plan: Plan | None) -> list[int]:
        """Apply the finished step's tokens; returns the ids whose first output token it sampled."""
        n = len(self.ids)
        first: list[int] = []
        tok, prompt, cur = self.tok, self.prompt, self.cur
        if plan is not None and plan.uniform:  # the decode rows move together; admissions one by one
            admitted = [(p, *self.comp_seq(p)) for p in range(plan.n, n)]
            self.shift += 1
            self.clock += 1
            self.ctx += plan.n
            for p, was_comp, was_seq in admitted:
                comp, seq = was_comp + tok[p], was_seq
                self.grant[p] = cur
                if comp == seq:  # the chunk completed the sequence: one new token
                    seq += 1
                    if self.track:
                        self.sample0[p], self.sample[p] = self.sample[p], cur
                    if seq - prompt[p] == 1:
                        first.append(self.ids[p])
                self._put(p, comp, seq, (was_comp, was_seq))
            if self.upto != cur - 1:  # (`_uniform(1)`, inline: every decode step passes here)
                self.ufrom = cur
            self.cur = cur + 1
            self.upto = cur
        else:
            self.settle()
            comps, seqs, n_dec, ctx = self.comp, self.seq, 0, self.ctx
            for p in range(n):
                t = tok[p]
                c = comps[p] + t
                ctx += t
                comps[p] = c
                q = seqs[p]
                if c == q:  # sampled a token
                    q += 1
                    seqs[p] = q
                    if self.track:
                        self.sample0[p], self.sample[p] = self.sample[p], cur
                    if q - prompt[p] == 1:
                        first.append(self.ids[p])
                if self.track and t > 0:
                    self.grant[p] = cur
                n_dec += q - c == 1 and q > prompt[p]
            self.ctx, self.n_dec = ctx, n_dec
            self.cur = cur + 1
            self._reindex()
        tok[:n] = [0] * n
        self.from_r[:n] = [0] * n
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
        comp, tok = self.comp[p] + self.shift, self.tok[p]
        if not lag:
            return comp + tok
        k, adm = self.cur - 1, self.adm[p]

        def did(rows: list[int], s: int) -> bool:  # sampled (`sample`) or given tokens (`grant`) in step s
            return rows[p] == s or rows is self.sample and self.sample0[p] == s or (
                self.ufrom <= s <= self.upto and adm < s)

        if tok:  # this call's grant: its last token is known unless sampled in the last step
            return comp + tok - did(self.sample, k)
        return comp - (did(self.grant, k) and did(self.sample, k - 1))

    def taken_in(self, p: int, lag: bool) -> int:
        """`hashed` once the last step's outputs are taken in (the end of an async call)."""
        if not lag or self.tok[p]:
            return self.hashed(p, lag)
        return self.comp[p] + self.shift

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
        p, s = len(self.ids), self.shift
        self.ids.append(i)
        self.cls.append(c)
        self.comp.append(comp - s)
        self.seq.append(seq - s)
        self.tok.append(0)
        self.from_r.append(0)
        self.prompt.append(prompt)
        self.end.append(end)
        self.top.append(int(top))
        self.adm.append(self.cur)
        self.grant.append(-2)
        self.sample.append(-2)
        self.sample0.append(-2)
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
        s, c = self.shift, self.cls[p]
        old_comp, old_seq = was or self.comp_seq(p)
        prompt = self.prompt[p]
        self.ctx += comp - old_comp
        self.n_dec += (seq - comp == 1 and seq > prompt) - (old_seq - old_comp == 1 and old_seq > prompt)
        table, bs = self.by_residue, self.bs
        table[self.comp[p] % bs][c] -= 1
        table[(comp - s) % bs][c] += 1
        self.comp[p] = comp - s
        self.seq[p] = seq - s
        self._due_in(self.ids[p], self.end[p] - seq)

    def _reindex(self) -> None:
        """Recount `by_residue` and the finish heap from the rows (after rows changed in bulk)."""
        self.settle()
        bs, table = self.bs, [[0] * self.n_classes for _ in range(self.bs)]
        for c, k in zip(self.comp, self.cls):
            table[c % bs][k] += 1
        self.by_residue = table
        clock = self.clock
        keys = [e - q + clock for e, q in zip(self.end, self.seq)]
        self._due_at = dict(zip(self.ids, keys))
        self._due = list(zip(keys, self.ids))
        heapq.heapify(self._due)

    def remove_at(self, p: int) -> tuple[int, int, int, int]:
        """Take the request at position p out; returns its (id, class, computed, prompt + generated)."""
        i, c = self.ids[p], self.cls[p]
        stored = self.comp[p]
        comp, seq = self.comp_seq(p)
        self.by_residue[stored % self.bs][c] -= 1
        self._due_at.pop(i, None)
        self.ctx -= comp
        self.n_top -= self.top[p]
        if seq - comp == 1 and seq > self.prompt[p]:
            self.n_dec -= 1
        if seq >= self.end[p]:
            self.done.remove(i)
        for column in self._columns():
            del column[p]
        return i, c, comp, seq

    def reorder(self, positions: list[int]) -> None:
        """Put the running requests in the order of `positions` (a permutation)."""
        for column in self._columns():
            column[:] = [column[p] for p in positions]
