"""The waiting pass's bookkeeping (`Walk`) and the long-queue pre-filter: representation and speed
below the waiting walk of vLLM's rules (`VLLMRules._walk` states the rules).

A skipping policy's long queue is pre-filtered on KV in one vectorised check (`Walk.prefilter`)
and only the requests that can fit are walked; `Walk.label_skipped` gives the others the reason
they would have had at their turn. A request a prefix-cache hit may help is always walked (its
need can shrink).
"""

from __future__ import annotations

import numpy as np

from .reasons import Reason
from .state import EngineState
from .step import Budget

PREFILTER_MIN_QUEUE = 32  # a skipping policy's queue longer than this is pre-filtered on KV (`VLLMRules`)
_NONE = int(Reason.NONE)
_NO_IDS, _NO_CODES, _NO_FLAGS = np.empty(0, np.int64), np.empty(0, np.int8), np.empty(0, bool)


class Walk:
    """The waiting pass's bookkeeping: per queue position a reason (and KV detail), where the walk
    stopped, and what a pre-filtered walk needs to label the positions it skipped. Plain lists
    while walking (one position at a time: `codes`, `need`, `room`); arrays for labelling skipped
    positions in bulk (`as_arrays`: `codes_a`, `need_a`, `room_a`)."""

    def __init__(self, order: list[int], top_left: int):
        n = len(order)
        self.order, self.top_left = order, top_left
        self.ids = _NO_IDS  # the queue's ids as an array (once the walk needs it)
        self.codes: list[int] = [0] * n
        self.need: list[int] = [-1] * n
        self.room: list[int] = [-1] * n
        self.arrays = False  # `as_arrays` ran: the arrays below hold the walk's values
        self.codes_a, self.need_a, self.room_a = _NO_CODES, _NO_IDS, _NO_IDS
        self.stop_at, self.tail, self.dense_from = n, Reason.NONE, n
        self.block_other, self.block_from, self.blocker = Reason.NONE, n, -1
        self.closed_at: dict[int, int] = {}  # class → position where its running cap closed it
        self.adm_pos: list[int] = []
        self.adm_blocks: list[int] = []
        self.adm_cls: list[int] = []
        self.todo: list[int] = []
        self.walked = _NO_FLAGS  # positions the pre-filtered walk visited
        self.findable: np.ndarray | None = None  # positions a prefix-cache hit may help (always walked)
        self.start: tuple[int, int, list[int], bool] | None = None  # the pool when a pre-filtered walk began

    def prefilter(self, st: EngineState, budget: Budget) -> tuple[np.ndarray, np.ndarray] | None:
        """A skipping policy with a long queue and free seats and budget: mark, in one vectorised
        check, who cannot fit in KV now (room only shrinks while it walks, so they stay out) and
        walk only the others, until seats or budget run out (then every later position, as the
        plain walk would). Returns (reasons, needs) or None."""
        rs, pool, lim, n_w = st.rs, st.pool, st.lim, len(self.order)
        if not lim.chunked or budget.shared <= 0 or len(st.running) >= lim.max_seqs:
            return None
        ids = np.array(self.order, dtype=np.int64)
        need = pool.blocks_many(rs.prompt[ids] + rs.generated[ids])
        codes, _ = pool.shortfall_many(rs.cls[ids], need, watermark=bool(st.running))
        cache = st.cache
        if cache is not None and (cache.any_prefix or cache.segs):
            self.findable = np.fromiter((cache.findable(i) for i in self.order), bool, n_w)
        self.ids, self.todo = ids, self.to_walk(codes, np.arange(n_w)).tolist()
        self.walked = np.zeros(n_w, bool)
        self.start = (pool.used, pool.used_other, list(pool.used_cls), bool(st.running))
        return codes, need

    def label_skipped(self, st: EngineState, pre: tuple[np.ndarray, np.ndarray]) -> None:
        """Reasons for the requests the pre-filter kept out of the walk, as the sequential walk
        would have found them at their turn (the pool as it stood after the admissions before)."""
        rs, pos = st.rs, np.arange(len(self.ids))
        q = np.flatnonzero(~self.walked & (pos < min(self.stop_at, self.dense_from)))
        if q.size:
            assert self.start is not None  # (set by `prefilter`)
            admitted = (np.array(self.adm_pos, dtype=np.int64), np.array(self.adm_blocks, dtype=np.int64),
                        np.array(self.adm_cls, dtype=np.int64))
            codes, room = st.pool.reasons_at_turn(rs.cls[self.ids[q]], pre[1][q], q, self.start, admitted)
            self.codes_a[q], self.need_a[q], self.room_a[q] = codes, pre[1][q], room
        rest = np.zeros(len(self.ids), bool)
        rest[q] = True
        cls = rs.cls[self.ids]
        for c, p in self.closed_at.items():
            m = rest & (cls == c) & (pos > p)
            self.codes_a[m], self.need_a[m], self.room_a[m] = Reason.CLASS_CAP, -1, -1
        if self.block_other:
            m = rest & ~rs.is_top[self.ids] & (pos > self.block_from)
            self.codes_a[m], self.need_a[m], self.room_a[m] = self.block_other, -1, -1

    def to_walk(self, codes: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """Of `positions` (with their KV shortfall `codes` now), those the walk must visit: the
        ones that fit, and any a prefix-cache hit may help (a hit can shrink what it needs)."""
        keep = codes == _NONE
        if self.findable is not None:
            keep |= self.findable[positions]
        kept: np.ndarray = positions[keep]
        return kept

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
        self.codes_a = np.array(self.codes, dtype=np.int8)
        self.need_a = np.array(self.need, dtype=np.int64)
        self.room_a = np.array(self.room, dtype=np.int64)
        self.arrays = True

    def left_waiting(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(ids, reasons, need, room) of the requests left waiting, in queue order."""
        n = len(self.order)
        if not self.arrays:
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
        self.codes_a[self.stop_at:] = self.tail
        keep = self.codes_a != _NONE
        return self.ids[keep], self.codes_a[keep], self.need_a[keep], self.room_a[keep]
