"""An engine's clock: busy, steps run back to back; idle, the next request starts one at once.

vLLM's engine core blocks on its input queue while it has nothing to do and starts a step the
moment a request arrives; while it is busy it runs steps back to back, and a request that arrives
during a step is taken at the next step boundary. So time is continuous between busy periods and
stepped within one: a busy period that starts at t0 has its steps at t0, t0 + dt₁, ...

With `cost.model: fixed` every step lasts the same dt, and the k-th step of a busy period starts
at exactly `origin + k * dt` (a product, never a running sum, whose rounding errors would drift
and pick up an arrival at a boundary a step late). An arrival within 10⁻⁹ of a step after a
boundary counts as at it (`eps`), so an arrival at 0.3 meets the boundary 0 + 3 × 0.1 whatever
binary rounding does. A step that also moves KV to or from host memory (`preempt_mode: swap`)
stalls the engine for whole steps: it lasts ceil((dt + transfer) / dt) ticks, so the boundaries
stay on the busy period's grid.

With the roofline cost every step has its own time and the clock is the float sum of them.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..config.cost import StepCost

_TOL = 9  # decimals of a step to which a step's length is rounded before counting whole ticks


class Clock:
    """`grid`: the fixed step time (None: no grid). `now` is the current boundary; on a grid it is
    `origin + tick * grid`, where `origin` is when the busy period began."""

    def __init__(self, grid: float | None):
        self.grid = grid
        self.eps = grid * 10.0**-_TOL if grid is not None else 0.0  # arrivals this close after a boundary are at it
        self.origin = 0.0
        self.tick = 0
        self.now = 0.0

    def start(self, t: float) -> None:
        """An idle engine wakes at t: a new busy period begins there."""
        self.origin, self.tick, self.now = t, 0, t

    def at(self, ticks: int) -> float:
        """The boundary `ticks` steps after the current one (grid only)."""
        assert self.grid is not None
        return self.origin + (self.tick + ticks) * self.grid

    def advance(self, ticks: int, dt: float) -> None:
        """Move on by one step of `ticks` grid steps (grid) or of `dt` seconds (no grid)."""
        if self.grid is None:
            self.now = self.now + dt
        else:
            self.tick += ticks
            self.now = self.origin + self.tick * self.grid

    def run_end(self, m: int, summed: float) -> float:
        """When a run of m steps from here ends: m ticks on (grid), else `summed`, the float sum of
        its step times that stepping makes."""
        return self.at(m) if self.grid is not None else summed

    def pass_run(self, m: int, t_end: float) -> float:
        """Move to the end of a run of m steps (on the grid m ticks on; otherwise `t_end`, the float
        sum stepping makes); returns the new boundary."""
        if self.grid is None:
            self.now = t_end
        else:
            self.advance(m, 0.0)
        return self.now

    def on_grid(self, dt: float) -> tuple[int, float]:
        """A step of dt seconds: (the whole ticks it takes, its length) on the grid; (0, dt) without one."""
        if self.grid is None:
            return 0, dt
        ticks = 1 if dt == self.grid else self.ticks(dt)
        return ticks, ticks * self.grid

    def ticks(self, dt: float) -> int:
        """Whole grid steps a step of dt seconds stalls the engine for (at least one)."""
        assert self.grid is not None
        return max(1, math.ceil(round(dt / self.grid, _TOL)))

    def steps_before(self, start_by: float, end_by: float, most: int) -> int:
        """On the grid: how many steps from this boundary (at most `most`) start before `start_by`
        and end before `end_by` — the same float comparisons stepping makes, at the boundary."""
        g, o, k = self.grid, self.origin, self.tick
        assert g is not None
        j = k + most  # the last step j that may run: o + j·g < start_by and o + (j + 1)·g < end_by
        if start_by < math.inf:
            j = min(j, math.floor((start_by - o) / g) + 1)
            while o + j * g >= start_by:
                j -= 1
        if end_by < math.inf:
            j = min(j, math.floor((end_by - o) / g))
            while o + (j + 1) * g >= end_by:
                j -= 1
        return max(0, j - k + 1)

    def fit(self, m: int, start_by: float, end_by: float, first_dt: float) -> int:
        """Of the next m steps, at most how many start before `start_by` and end before `end_by`:
        exact on the grid; otherwise a bound from the first step's time (`first_dt`: decode steps
        only get longer as the context grows)."""
        by = min(start_by, end_by)
        if self.grid is not None:
            return min(m, self.steps_before(start_by, end_by, m)) if by < self.at(m + 2) else m
        return min(m, int((by - self.now) / first_dt) + 2) if by < math.inf else m

    def decode_times(self, m: int, cost: StepCost, n: int, ctx: int, start_by: float,
                     end_by: float) -> tuple[list[float], list[float]]:
        """Start and step times of m decode steps of n requests from here (`cost`: a `StepCost`;
        without a grid, only those that start before `start_by` and end before `end_by`)."""
        if self.grid is not None:
            return [self.at(j) for j in range(m)], [self.grid] * m
        return cost.decode_times(self.now, m, n, ctx, start_by, end_by)
