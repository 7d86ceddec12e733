"""The KV block pool: how many blocks each class holds, and who may take more.

Three limits stack (DESIGN §2): the whole pool (`capacity`), the top-priority reserve
(`p0_kv_reserve`: blocks only the top class may allocate, so everyone else shares
`capacity − reserve`), and per-class caps (`caps.max_kv_blocks`). vLLM's `watermark` applies only
to admissions of waiting requests while something is running.

The pool counts blocks per class; which request holds how many follows from its progress
(`RunningSet.held`). The counts are plain Python ints: the scheduler asks about one request or
one class at a time, and scalar Python is faster than numpy there.
"""

from __future__ import annotations

import numpy as np

from .reasons import Reason

UNLIMITED = np.iinfo(np.int64).max // 4


class KVPool:
    """Block accounting per class; `shortfall`/`fits` answer "may it grow?"."""

    def __init__(self, capacity: int, block_size: int, class_is_top: np.ndarray, class_caps: np.ndarray,
                 top_reserve: int = 0, watermark_blocks: int = 0):
        self.capacity = int(capacity)
        self.block_size = int(block_size)
        self.class_is_top = class_is_top.astype(bool)
        self.class_caps = class_caps.astype(np.int64)
        self._top = self.class_is_top.tolist()
        self._caps = self.class_caps.tolist()
        self.reserve = int(top_reserve)
        self.watermark = int(watermark_blocks)
        self.used_cls = [0] * len(self._caps)
        self.used = 0
        self.used_other = 0  # blocks held by classes that are not top priority
        self.capped = bool(np.any(self.class_caps < UNLIMITED))

    def blocks(self, tokens):
        """Blocks needed to hold `tokens` tokens: ceil(tokens / block_size)."""
        return -(-tokens // self.block_size)

    @property
    def free(self) -> int:
        return self.capacity - self.used

    def view_capacity(self, c: int) -> int:
        """The most blocks one request of class c could ever hold (empty pool)."""
        cap = self.capacity if self._top[c] else self.capacity - self.reserve
        return int(min(cap, self._caps[c]))

    def shortfall(self, c: int, need: int, watermark: bool = False) -> Reason:
        """Why `need` more blocks for class c do not fit now (Reason.NONE if they do)."""
        if need > self._caps[c] - self.used_cls[c]:
            return Reason.CLASS_CAP
        if need + (self.watermark if watermark else 0) > self.capacity - self.used:
            return Reason.KV_SHORT
        if not self._top[c] and need > self.capacity - self.reserve - self.used_other:
            return Reason.RESERVE
        return Reason.NONE

    def free_for(self, c: int, watermark: bool = False) -> int:
        """Blocks class c could take right now (all limits applied)."""
        room = self.capacity - self.used - (self.watermark if watermark else 0)
        if not self._top[c]:
            room = min(room, self.capacity - self.reserve - self.used_other)
        return int(max(0, min(room, self._caps[c] - self.used_cls[c])))

    def fits(self, per_class: list[int]) -> bool:
        """Would all these growths (blocks per class) fit at once? Then no order of them can fail."""
        total = sum(per_class)
        if total == 0:
            return True
        if total > self.capacity - self.used:
            return False
        if self.reserve and sum(g for g, t in zip(per_class, self._top) if not t) > (
                self.capacity - self.reserve - self.used_other):
            return False
        if not self.capped:
            return True
        return all(g <= cap - u for g, cap, u in zip(per_class, self._caps, self.used_cls))

    def add(self, per_class: list[int]) -> None:
        """Apply growths already checked by `fits`."""
        for c, g in enumerate(per_class):
            if g:
                self.grow(c, g)

    def grow(self, c: int, n: int) -> None:
        if not n:
            return
        self.used_cls[c] += n
        self.used += n
        if not self._top[c]:
            self.used_other += n

    def release(self, c: int, n: int) -> None:
        self.grow(c, -n)
