"""The KV block pool: who holds how many blocks, and who may take more.

Three limits stack (DESIGN §2): the whole pool (`capacity`), the top-priority reserve
(`p0_kv_reserve`: blocks only the top class may allocate, so everyone else shares
`capacity − reserve`), and per-class caps (`caps.max_kv_blocks`). vLLM's `watermark` applies only
to admissions of waiting requests while something is running.
"""

from __future__ import annotations

import numpy as np

from .reasons import Reason

UNLIMITED = np.iinfo(np.int64).max // 4


class KVPool:
    """Block accounting per request and per class; `room`/`shortfall` answer "may it grow?"."""

    def __init__(self, capacity: int, block_size: int, n_requests: int, class_is_top: np.ndarray,
                 class_caps: np.ndarray, top_reserve: int = 0, watermark_blocks: int = 0):
        self.capacity = int(capacity)
        self.block_size = int(block_size)
        self.class_is_top = class_is_top.astype(bool)
        self.class_caps = class_caps.astype(np.int64)
        self.reserve = int(top_reserve)
        self.watermark = int(watermark_blocks)
        self.held = np.zeros(n_requests, np.int64)
        self.used_cls = np.zeros(len(class_caps), np.int64)
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
        cap = self.capacity if self.class_is_top[c] else self.capacity - self.reserve
        return int(min(cap, self.class_caps[c]))

    def shortfall(self, c: int, need: int, watermark: bool = False) -> Reason:
        """Why `need` more blocks for class c do not fit now (Reason.NONE if they do)."""
        if need > self.class_caps[c] - self.used_cls[c]:
            return Reason.CLASS_CAP
        if need + (self.watermark if watermark else 0) > self.capacity - self.used:
            return Reason.KV_SHORT
        if not self.class_is_top[c] and need > self.capacity - self.reserve - self.used_other:
            return Reason.RESERVE
        return Reason.NONE

    def free_for(self, c: int, watermark: bool = False) -> int:
        """Blocks class c could take right now (all limits applied)."""
        room = self.capacity - self.used - (self.watermark if watermark else 0)
        if not self.class_is_top[c]:
            room = min(room, self.capacity - self.reserve - self.used_other)
        return int(max(0, min(room, self.class_caps[c] - self.used_cls[c])))

    def fits_batch(self, cls: np.ndarray, need: np.ndarray, total: int) -> bool:
        """Would all these growths (summing to `total`) fit at once? Then no order of them can fail."""
        if total == 0:
            return True
        if total > self.capacity - self.used:
            return False
        if self.reserve and int(need[~self.class_is_top[cls]].sum()) > self.capacity - self.reserve - self.used_other:
            return False
        if not self.capped:
            return True
        per_cls = np.bincount(cls, weights=need, minlength=len(self.used_cls))
        return bool(np.all(per_cls <= self.class_caps - self.used_cls))

    def grow(self, i: int, c: int, n: int) -> None:
        if not n:
            return
        self.held[i] += n
        self.used_cls[c] += n
        self.used += n
        if not self.class_is_top[c]:
            self.used_other += n

    def grow_batch(self, ids: np.ndarray, cls: np.ndarray, need: np.ndarray, total: int) -> None:
        """Apply growths already checked by `fits_batch` (few are non-zero: a loop is cheapest)."""
        if total == 0:
            return
        for j in np.flatnonzero(need).tolist():
            self.grow(int(ids[j]), int(cls[j]), int(need[j]))

    def release(self, i: int, c: int) -> int:
        n = int(self.held[i])
        self.held[i] = 0
        self.used_cls[c] -= n
        self.used -= n
        if not self.class_is_top[c]:
            self.used_other -= n
        return n
