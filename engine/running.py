"""The running set: the requests an engine is running, in running order, kept in place.

Every step touches every running request (each gets a chunk or a decode token), so their
progress lives in the rows of one int64 matrix: the scheduler reads and writes whole rows with a
handful of numpy operations, and when a request leaves, one copy keeps every row aligned. The
waiting and finished requests keep their state in `Requests`; a request's values are copied back
there when it leaves (`Scheduler._leave`).

Blocks are not stored: between steps a running request always holds exactly
ceil(computed / block_size) blocks, and during a step ceil((computed + tokens) / block_size).

Decode steps cost O(1). In a decode step every running request computes one token and samples
the next, so COMP and SEQ of every row grow by one. `decode()` does not touch the rows: it adds
one to `shift`, and the COMP and SEQ rows hold their values minus `shift` until `settled()`
folds it in (anything that reads the rows asks for `settled()`). Two facts a decode step needs
are kept up to date instead:
- who needs a new block: a request whose computed tokens fill whole blocks, i.e. whose stored
  COMP ≡ −shift (mod block size). `by_residue[r][c]` counts the requests of class c whose stored
  COMP ≡ r.
- who finishes: `clock` counts decode steps; a request with L outputs left at clock G finishes
  when the clock reaches G + L unless its progress changes otherwise, so a heap of those
  values, refreshed whenever a request's progress changes outside a decode step, names the
  requests that finish without a pass over the rows.
"""

from __future__ import annotations

import heapq

import numpy as np

COMP, SEQ, TOK, FROM_R, PROMPT, END, TOP, ONEHOT = range(8)
# COMP: tokens computed · SEQ: prompt + generated (COMP and SEQ are adjacent, so one `+=` moves
# both) · TOK: tokens scheduled this step (0 between steps) · FROM_R: of those, drawn from the
# top-priority token reserve · PROMPT, END = prompt + output · TOP: 1 for the top class ·
# ONEHOT + c: 1 if the request is of class c (per-class sums are one matrix product).

class RunningSet:
    def __init__(self, n_classes: int, block_size: int, capacity: int = 64):
        self.n_classes, self.bs = n_classes, block_size
        self.F = np.zeros((ONEHOT + n_classes, max(capacity, 1)), np.int64)
        self.ids: list[int] = []  # running order (admission order; inheritance may reorder)
        self.cls: list[int] = []  # class of each, same order
        self.shift = 0
        self.clock = 0
        self.by_residue = [[0] * n_classes for _ in range(block_size)]
        self._due: list[tuple[int, int]] = []  # heap of (clock at which it finishes, id); stale ones skipped
        self._due_at: dict[int, int] = {}  # id → its current entry

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
        return -(-(F[COMP, :n] + F[TOK, :n]) // self.bs)

    def comp_seq(self, p: int) -> tuple[int, int]:
        """True (computed, prompt + generated) of the request at position p."""
        return int(self.F[COMP, p]) + self.shift, int(self.F[SEQ, p]) + self.shift

    # -- decode steps -------------------------------------------------------------------------
    def crossings(self) -> list[int]:
        """Per class: running requests whose computed tokens fill whole blocks (a decode token
        needs a new block)."""
        return self.by_residue[-self.shift % self.bs]

    def decode(self) -> None:
        """Every running request computed one token and sampled the next."""
        self.shift += 1
        self.clock += 1

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
        return sorted(self.ids.index(i) for i in done)

    def _due_in(self, i: int, left: int) -> None:
        key = self.clock + left
        self._due_at[i] = key
        heapq.heappush(self._due, (key, i))

    # -- writing ------------------------------------------------------------------------------
    def add(self, i: int, c: int, comp: int, seq: int, prompt: int, end: int, top: bool) -> int:
        """Append request i at the end of the running order; returns its position."""
        p = len(self.ids)
        if p == self.F.shape[1]:
            self.F = np.concatenate([self.F, np.zeros_like(self.F)], axis=1)
        s = self.shift
        col = [comp - s, seq - s, 0, 0, prompt, end, int(top)] + [0] * self.n_classes
        col[ONEHOT + c] = 1
        self.F[:, p] = col
        self.ids.append(i)
        self.cls.append(c)
        self.by_residue[(comp - s) % self.bs][c] += 1
        self._due_in(i, end - seq)
        return p

    def put(self, p: int, comp: int, seq: int) -> None:
        """Set the true computed and sequence lengths of the request at position p."""
        s, F, c = self.shift, self.F, self.cls[p]
        self.by_residue[int(F[COMP, p]) % self.bs][c] -= 1
        self.by_residue[(comp - s) % self.bs][c] += 1
        F[COMP, p], F[SEQ, p] = comp - s, seq - s
        self._due_in(self.ids[p], int(F[END, p]) - seq)

    def reindex(self) -> None:
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

    def remove_at(self, p: int) -> None:
        n = len(self.ids)
        self.by_residue[int(self.F[COMP, p]) % self.bs][self.cls[p]] -= 1
        self._due_at.pop(self.ids[p], None)
        self.F[:, p : n - 1] = self.F[:, p + 1 : n]
        del self.ids[p], self.cls[p]

    def reorder(self, positions: list[int]) -> None:
        """Put the running requests in the order of `positions` (a permutation)."""
        n = len(self.ids)
        self.F[:, :n] = self.F[:, positions]
        self.ids[:] = [self.ids[p] for p in positions]
        self.cls[:] = [self.cls[p] for p in positions]
