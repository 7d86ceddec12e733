"""Scaling the offered load by one factor: every class's arrival rate × s, or, on a trace, its
arrivals packed s times closer over the same stretch of it.

The P99 page's *Total load* knob and `engine capacity` both scale load through `load_overrides`,
so "2× the load" means the same scenario wherever it is said. Classes whose arrivals are a fixed
list of times (`process: times`, e.g. classic-inversion's three documents) keep them: their rate
is not a rate. The trace's time scale is capped at 1000 (the schema's limit).
"""

from __future__ import annotations

from .scenario import Scenario

MAX_TIME_SCALE = 1000.0
DEFAULT_SCALES = (0.9, 1.0, 1.1)  # the loads a story's claims are checked at unless told (engine.sweeps.story)


def load_overrides(sc: Scenario, s: float) -> dict:
    """Dotted overrides that scale `sc`'s offered load by `s` (s ≤ 0 leaves no arrivals)."""
    out: dict = {f"classes.{c}.arrival.rate": sc.classes[c].arrival.rate * s for c in sc.classes}
    if sc.trace is not None:  # a trace's arrivals packed s times closer, over the same stretch of it
        out["trace"] = None if s <= 0 else {**sc.trace.model_dump(mode="json"),
                                            "time_scale": min(sc.trace.time_scale / s, MAX_TIME_SCALE),
                                            "start_s": sc.trace.start_s / s}
    return out
