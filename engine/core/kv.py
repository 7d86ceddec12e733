"""The KV block pool: how many blocks each class holds, and who may take more.

Three limits stack (DESIGN §2), always checked in this order:
1. the class's cap (`caps.max_kv_blocks`) → `class_cap`;
2. the whole pool (`capacity`, minus vLLM's watermark when admitting while something runs)
   → `kv_short`;
3. the top-priority reserve (`p0_kv_reserve`: blocks only the top class may allocate, so every
   other class shares `capacity − reserve`) → `reserve`.

The rule is written here once, in two shapes side by side: `shortfall` for one request (the
scheduler's loops) and `shortfall_many` for a whole queue at once (vectorised; the pool state may
differ per row, which is how `reasons_at_turn` labels requests as they stood at their turn in a
walk). A test checks that the two shapes agree.

The pool counts blocks per class; which request holds how many follows from its progress
(`RunningSet.held`). The counts are plain Python ints: the scheduler asks about one request or
one class at a time, and scalar Python is faster than numpy there.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from .reasons import Reason

if TYPE_CHECKING:
    from .prefix import PrefixCache

UNLIMITED = np.iinfo(np.int64).max // 4
_NONE, _CAP, _SHORT, _RESERVE = int(Reason.NONE), int(Reason.CLASS_CAP), int(Reason.KV_SHORT), int(Reason.RESERVE)
_HOL = int(Reason.HEAD_OF_LINE)


class KVPool:
    """Block accounting per class; `shortfall`/`fits` answer "may it grow?"."""

    def __init__(self, capacity: int, block_size: int, class_is_top: np.ndarray, class_caps: np.ndarray,
                 top_reserve: int = 0, watermark_blocks: int = 0):
        self.capacity = int(capacity)
        self.block_size = int(block_size)
        self.class_is_top = class_is_top.astype(bool)
        self.class_caps = class_caps.astype(np.int64)
        self._top: list[bool] = self.class_is_top.tolist()
        self._caps: list[int] = self.class_caps.tolist()
        self.reserve = int(top_reserve)
        self.watermark = int(watermark_blocks)
        self.used_cls = [0] * len(self._caps)
        self.used = 0
        self.used_other = 0  # blocks held by classes that are not top priority
        self.capped = bool(np.any(self.class_caps < UNLIMITED))
        self.cache: PrefixCache | None = None  # the prefix cache (`engine.core.prefix`), when on

    def blocks(self, tokens: int) -> int:
        """Blocks needed to hold `tokens` tokens: ceil(tokens / block_size)."""
        return -(-tokens // self.block_size)

    def blocks_many(self, tokens: np.ndarray) -> np.ndarray:
        """`blocks` for an array of token counts."""
        return -(-tokens // self.block_size)

    @property
    def free(self) -> int:
        return self.capacity - self.used

    def view_capacity(self, c: int) -> int:
        """The most blocks one request of class c could ever hold (empty pool)."""
        cap = self.capacity if self._top[c] else self.capacity - self.reserve
        return int(min(cap, self._caps[c]))

    # -- how long decode steps keep within the limits (the replica's multi-step runs) -------------
    def steps_within(self, table: list[list[int]], at: int, m: int, total: float = math.inf,
                     rooms: dict[int, float] | None = None) -> list[int]:
        """Blocks per class during each of up to m decode steps (one step's per-class counts after
        another's; step j adds `table[(at - j) % block_size]`, `RunningSet.growth_table`), for as
        long as the growth fits all three limits, the whole pool stays within `total` blocks and
        each class c within `rooms[c]` (`waiting_limits`: where a waiting request's reason would
        change)."""
        bs, used, kv = self.block_size, self.used, self.used_cls
        out: list[int] = []
        if not self.reserve and not self.capped and rooms is None:  # only the pool's limit
            limit = min(self.capacity, total)
            if len(kv) == 1:  # one class: plain ints
                col = [g for g, in table]
                k0 = kv[0]
                for j in range(at, at - m, -1):
                    if g := col[j % bs]:
                        used += g
                        if used > limit:
                            break
                        k0 += g
                    out.append(k0)
                return out
            for j in range(at, at - m, -1):
                grow = table[j % bs]
                if g := sum(grow):
                    used += g
                    if used > limit:
                        break
                    kv = [a + b for a, b in zip(kv, grow)]
                out += kv
            return out
        limit = min(self.capacity, total)
        other_cap = self.capacity - self.reserve if self.reserve else None
        other, top = self.used_other, self._top
        caps = self._caps if self.capped else None
        for j in range(at, at - m, -1):
            grow = table[j % bs]
            if any(grow):
                kv = [a + g for a, g in zip(kv, grow)]
                used += sum(grow)
                if other_cap is not None:
                    other += sum(g for g, t in zip(grow, top) if not t)
                    if other > other_cap:
                        break
                if used > limit:
                    break
                if caps is not None and any(a > c for a, c in zip(kv, caps)):
                    break
                if rooms is not None and any(kv[c] > r for c, r in rooms.items()):
                    break
            out += kv
        return out

    def waiting_limits(self, need: np.ndarray, reasons: np.ndarray, cls: np.ndarray,
                       running: bool) -> tuple[float, dict[int, float] | None]:
        """How full the pool (and each capped class) may get before a waiting request's KV reason
        would change (`need`, `reasons`, `cls`: the waiting requests'): `reserve` turns `kv_short`
        once the whole pool is that short; with class caps, `kv_short`/`reserve` turn `class_cap`
        once the class holds that much."""
        checked = (need >= 0) & ((reasons == _SHORT) | (reasons == _RESERVE))
        if not checked.any():
            return math.inf, None
        need, why = need[checked], reasons[checked]
        res = why == _RESERVE
        total = math.inf
        if res.any():
            total = float(self.capacity - (self.watermark if running else 0) - int(need[res].max()))
        rooms: dict[int, float] | None = None
        if self.capped:
            rooms = {}
            for c, k in zip(cls[checked].tolist(), need.tolist()):
                rooms[c] = min(rooms.get(c, math.inf), self._caps[c] - k)
        return total, rooms

    def still_short(self, reasons: np.ndarray, need: np.ndarray, running: bool) -> bool:
        """Whether waiting requests (their reasons and needs) all still wait for KV that is short
        now, or behind one that does — checked only without class caps or a reserve."""
        if self.capped or self.reserve:
            return False
        if not ((reasons == _SHORT) | (reasons == _HOL)).all():
            return False
        short = reasons == _SHORT
        free = self.capacity - self.used - (self.watermark if running else 0)
        return bool(short.any() and (need[short] > free).all())

    # -- the rule, for one request ----------------------------------------------------------
    def shortfall(self, c: int, need: int, watermark: bool = False, freed: int = 0) -> Reason:
        """Why `need` more blocks for class c do not fit now (Reason.NONE if they do); with
        `freed`, as if that many blocks held by lower-priority (never top-class) requests were
        released first."""
        if need > self._caps[c] - self.used_cls[c]:
            return Reason.CLASS_CAP
        if need + (self.watermark if watermark else 0) > self.capacity - self.used + freed:
            return Reason.KV_SHORT
        if not self._top[c] and need > self.capacity - self.reserve - self.used_other + freed:
            return Reason.RESERVE
        return Reason.NONE

    def room(self, c: int, watermark: bool = False) -> int:
        """Blocks class c could take right now (all three limits applied)."""
        room = self.capacity - self.used - (self.watermark if watermark else 0)
        if not self._top[c]:
            room = min(room, self.capacity - self.reserve - self.used_other)
        return int(max(0, min(room, self._caps[c] - self.used_cls[c])))

    # -- the rule, for many requests at once ------------------------------------------------
    def shortfall_many(self, cls: np.ndarray, need: np.ndarray, watermark: bool = False, *,
                       used: np.ndarray | None = None, used_other: np.ndarray | None = None,
                       used_cls: np.ndarray | None = None,
                       watermark_blocks: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """`shortfall` and `room` for arrays of (class, need); the pool state is the current one,
        or per row when `used`, `used_other`, `used_cls` (the row's own class) and
        `watermark_blocks` are given as arrays. Returns (reason codes as int8, room)."""
        used_now: int | np.ndarray = self.used if used is None else used
        other: int | np.ndarray = self.used_other if used_other is None else used_other
        in_cls = np.asarray(self.used_cls, dtype=np.int64)[cls] if used_cls is None else used_cls
        wm: int | np.ndarray = (self.watermark if watermark else 0) if watermark_blocks is None else watermark_blocks
        top = self.class_is_top[cls]
        room_cls = self.class_caps[cls] - in_cls
        room_all = self.capacity - used_now - wm
        room_other = np.where(top, room_all, self.capacity - self.reserve - other)
        why = np.where(need > room_cls, _CAP, np.where(need > room_all, _SHORT,
                                                       np.where(need > room_other, _RESERVE, _NONE)))
        room = np.maximum(0, np.minimum(np.minimum(room_all, room_other), room_cls))
        return why.astype(np.int8), room

    def reasons_at_turn(self, cls: np.ndarray, need: np.ndarray, turn: np.ndarray,
                        start: tuple[int, int, list[int], bool],
                        admitted: tuple[np.ndarray, np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """The rule for queue positions `turn`, each with the pool as it stood at its turn in a walk
        that started from `start` = (used, used_other, used_cls list, something running) and then
        admitted `admitted` = (positions, blocks, classes) in walk order."""
        used0, other0, cls0, running0 = start
        a_pos, a_blocks, a_cls = admitted
        k = np.searchsorted(a_pos, turn)  # admissions before each turn

        def before(x: np.ndarray) -> np.ndarray:
            return np.concatenate([[0], np.cumsum(x)])[k]

        per_cls = np.zeros((len(a_pos) + 1, len(cls0)), np.int64)
        per_cls[np.arange(1, len(a_pos) + 1), a_cls] = a_blocks
        in_cls = np.asarray(cls0, dtype=np.int64)[cls] + np.cumsum(per_cls, axis=0)[k, cls]
        wm = np.where(running0 | (k > 0), self.watermark, 0)
        return self.shortfall_many(cls, need, used=used0 + before(a_blocks),
                                   used_other=other0 + before(a_blocks * ~self.class_is_top[a_cls]),
                                   used_cls=in_cls, watermark_blocks=wm)

    # -- growth -----------------------------------------------------------------------------
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
        """Apply growths already checked by `fits` (with prefix caching each class's new blocks
        may evict cached ones, in class order)."""
        for c, g in enumerate(per_class):
            if g:
                self.grow(c, g)

    def grow(self, c: int, n: int) -> None:
        """n new blocks for class c, from the free queue (with prefix caching: cached blocks may be
        evicted to give them)."""
        if not n:
            return
        cache = self.cache
        if cache is not None:
            if cache.q:
                cache.take(n, self.capacity - self.used)
            elif (evict := n - (self.capacity - self.used - cache.n_cached)) > 0:
                cache.n_cached -= evict  # only nameless cached blocks: evicting them forgets nothing
        self.used_cls[c] += n
        self.used += n
        if not self._top[c]:
            self.used_other += n

    def release(self, c: int, n: int) -> None:
        self.count(c, -n)

    def count(self, c: int, n: int) -> None:
        """The ledger: class c holds n more blocks (negative: fewer)."""
        if not n:
            return
        self.used_cls[c] += n
        self.used += n
        if not self._top[c]:
            self.used_other += n
