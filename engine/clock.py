"""An engine's clock: exact grid points on a fixed step, float sums of step times otherwise.

With `cost.model: fixed` every step lasts the same time dt, so step k starts at exactly k·dt:
time is an integer number of ticks and a start time is always the product `k * dt` (never a
running sum, whose rounding errors would drift off the grid and pick up an arrival at k·dt a
step late). An arrival belongs to the first grid point at or after it (a time within 10⁻⁹ of a
step of a grid point counts as on it, so 0.3 on a 0.1 s grid is step 3 whatever binary rounding
does): an idle engine wakes there, a busy one takes it at that step. A step that also moves KV
to or from host memory (`preempt_mode: swap`) stalls the engine for whole steps: it lasts
ceil((dt + transfer) / dt) ticks, so the grid stays exact.

With the roofline cost every step has its own time, the clock is the float sum of them, and an
arrival is taken at the first step that starts at or after it.
"""

from __future__ import annotations

import math

import numpy as np

_TOL = 9  # decimals of a step to which times are rounded before snapping to the grid


class Clock:
    """`grid` = the fixed step time (None: no grid). The replica counts the grid's ticks itself."""

    def __init__(self, grid: float | None):
        self.grid = grid

    def snap(self, t: float) -> float:
        """The first grid point at or after t (t itself without a grid)."""
        if self.grid is None or not math.isfinite(t):
            return t
        return math.ceil(round(t / self.grid, _TOL)) * self.grid

    def snap_many(self, t: np.ndarray) -> np.ndarray:
        if self.grid is None:
            return t
        return np.ceil(np.round(np.asarray(t, dtype=float) / self.grid, _TOL)) * self.grid

    def ticks(self, dt: float) -> int:
        """Whole grid steps a step of dt seconds stalls the engine for (at least one)."""
        return max(1, math.ceil(round(dt / self.grid, _TOL)))

    def to_sim(self, t: float) -> float:
        """SimPy's time for t: grid ticks on a grid (exact integers), seconds otherwise."""
        return t if self.grid is None else round(t / self.grid)
