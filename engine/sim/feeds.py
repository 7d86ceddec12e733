"""Where a replica's arrivals come from (the `Feed` of `engine.sim.ports`): the sorted arrays of a
lone replica, the router's hand-outs, or a gateway's dispatches. Polled at every turn of the step
loop, so they are compiled with it (`engine.compiled_modules`)."""

from __future__ import annotations

import bisect
import heapq
import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from .gateway import Gateway

WINDOW = 4096  # arrivals turned into Python numbers at a time (feeds and the router)


class StaticFeed:
    """Arrivals known in advance (sorted), plus follow-up pieces released while running.
    `next_t` is the time of the next arrival (inf: none known).

    The arrays stay numpy; only a window of `window` arrivals at a time is a Python list (what
    `bisect` and slicing are fast on), so a million arrivals do not cost a million Python floats."""

    strict: bool = False  # polled at step boundaries: an arrival at a boundary is taken at that boundary

    def __init__(self, ids: np.ndarray, times: np.ndarray, tidy: Callable[[], None] | None = None,
                 window: int = WINDOW):
        self._ids, self._times, self.window = ids, times, window
        self.tidy = tidy  # called at each poll, between steps (the step log compacts itself)
        self.ids: list[int] = []
        self.times: list[float] = []
        self._load(0)
        self.later: list[tuple[float, int]] = []
        self.next_t: float = self.times[0] if self.times else math.inf

    def _load(self, start: int) -> None:
        """Make arrivals [start, start + window) the current window."""
        self.base, self.pos = start, 0
        self.ids = self._ids[start:start + self.window].tolist()
        self.times = self._times[start:start + self.window].tolist()

    def add(self, i: int, t: float) -> None:
        heapq.heappush(self.later, (t, i))
        self.next_t = min(self.next_t, t)

    def __call__(self, now: float) -> list[int]:
        """The ids due by `now` (and `next_t` moves on)."""
        if self.tidy is not None:
            self.tidy()
        due: list[int] = []
        while True:
            j = bisect.bisect_right(self.times, now, self.pos)
            due += self.ids[self.pos:j]
            self.pos = j
            if j < len(self.times) or self.base + j >= len(self._times):
                break
            self._load(self.base + j)  # the window is used up: the next one
        while self.later and self.later[0][0] <= now:
            due.append(heapq.heappop(self.later)[1])
        nxt = self.times[self.pos] if self.pos < len(self.times) else math.inf
        self.next_t = min(nxt, self.later[0][0]) if self.later else nxt
        return due


class RouterFeed:
    """A replica fed by the router: nothing to poll, but `next_t` tells when the router hands out
    the next arrival (a SimPy event, so a run of skipped steps must end strictly before it)."""

    strict: bool = True

    def __init__(self, times: np.ndarray):
        self.times = times
        self.pos = 0
        self.next_t: float = float(self.times[0]) if len(self.times) else math.inf

    def routed(self) -> None:
        self.pos += 1
        self.next_t = float(self.times[self.pos]) if self.pos < len(self.times) else math.inf

    def __call__(self, now: float) -> list[int]:
        return []


class GatewayFeed:
    """Replicas behind a gateway: at every step boundary the gateway looks at the metrics and
    dispatches what may go (into any replica); nothing is known in advance."""

    strict: bool = True

    def __init__(self, gateway: Gateway, tidy: Callable[[], None]):
        self.gateway = gateway
        self.tidy = tidy  # called at each boundary (the step log compacts itself)
        self.next_t = -math.inf  # called at every boundary

    def __call__(self, now: float) -> list[int]:
        self.tidy()
        self.gateway.pump(now)
        return []
