"""The running set: the requests an engine is running, in running order, kept in place.

Every step touches every running request (each gets a chunk or a decode token), so their
progress lives in the rows of one int64 matrix: the scheduler reads and writes whole rows with a
handful of numpy operations, and when a request leaves, one copy keeps every row aligned. The
waiting and finished requests keep their state in `Requests`; a request's row values are copied
back there when it leaves (`Scheduler._leave`).

Blocks are not stored: between steps a running request always holds exactly
ceil(computed / block_size) blocks, and during a step ceil((computed + tokens) / block_size).
"""

from __future__ import annotations

import numpy as np

COMP, SEQ, TOK, FROM_R, PROMPT, END, TOP, ONEHOT = range(8)
# COMP: tokens computed · SEQ: prompt + generated (COMP and SEQ are adjacent: one `+= 1` moves
# both on a decode step) · TOK: tokens scheduled this step (0 between steps) · FROM_R: of those,
# drawn from the top-priority token reserve · PROMPT, END = prompt + output · TOP: 1 for the top
# class · ONEHOT + c: 1 if the request is of class c (per-class sums are one matrix product).


class RunningSet:
    def __init__(self, n_classes: int, capacity: int = 64):
        self.n_classes = n_classes
        self.F = np.zeros((ONEHOT + n_classes, max(capacity, 1)), np.int64)
        self.ids: list[int] = []  # running order (admission order; inheritance may reorder)
        self.cls: list[int] = []  # class of each, same order

    def __len__(self) -> int:
        return len(self.ids)

    def __bool__(self) -> bool:
        return bool(self.ids)

    def row(self, r: int) -> np.ndarray:
        """A view of row r over the running requests."""
        return self.F[r, : len(self.ids)]

    def held(self, block_size: int) -> np.ndarray:
        """Blocks each running request holds (during a step: including this step's chunk)."""
        n = len(self.ids)
        return -(-(self.F[COMP, :n] + self.F[TOK, :n]) // block_size)

    def add(self, i: int, c: int, comp: int, seq: int, prompt: int, end: int, top: bool) -> int:
        """Append request i at the end of the running order; returns its position."""
        p = len(self.ids)
        if p == self.F.shape[1]:
            self.F = np.concatenate([self.F, np.zeros_like(self.F)], axis=1)
        col = [comp, seq, 0, 0, prompt, end, int(top)] + [0] * self.n_classes
        col[ONEHOT + c] = 1
        self.F[:, p] = col
        self.ids.append(i)
        self.cls.append(c)
        return p

    def remove_at(self, p: int) -> None:
        n = len(self.ids)
        self.F[:, p : n - 1] = self.F[:, p + 1 : n]
        del self.ids[p], self.cls[p]

    def keep(self, mask: np.ndarray) -> None:
        """Keep only the positions where `mask` is true (order preserved)."""
        n = len(self.ids)
        m = int(np.count_nonzero(mask))
        self.F[:, :m] = self.F[:, :n][:, mask]
        kept = mask.tolist()
        self.ids[:] = [i for i, k in zip(self.ids, kept) if k]
        self.cls[:] = [c for c, k in zip(self.cls, kept) if k]

    def reorder(self, positions: list[int]) -> None:
        """Put the running requests in the order of `positions` (a permutation)."""
        n = len(self.ids)
        self.F[:, :n] = self.F[:, positions]
        self.ids[:] = [self.ids[p] for p in positions]
        self.cls[:] = [self.cls[p] for p in positions]
