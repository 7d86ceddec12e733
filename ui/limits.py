"""What the app agrees to run: a cheap check made before a control's value is accepted.

The engine raises `ScenarioError` for combinations it cannot run, but only once it starts; the
app must know *before* (in a control's callback, for a link's values, for each sweep point)
without simulating. `why_not` repeats the engine's up-front checks (`simulation.check`, the
memory breakdown, the KV reserve against the cache) and adds the app's size limit.
"""

from __future__ import annotations

from engine.memory import breakdown
from engine.scenario import Scenario, ScenarioError
from engine.simulation import check
from engine.workload import expected_requests

APP_MAX_REQUESTS = 50_000  # keeps one interactive run to a few seconds; the CLI has no such limit


def too_big(sc: Scenario) -> str | None:
    """The size limit alone (synthetic arrivals; a trace's rows are limited at upload)."""
    size = expected_requests(sc)
    if size > APP_MAX_REQUESTS:
        return (f"it would simulate about {size:,.0f} requests; the app runs at most {APP_MAX_REQUESTS:,} "
                "(lower a rate or the duration, or use the CLI)")
    return None


def why_not(sc: Scenario) -> str | None:
    """Why the app will not run `sc`, in one sentence; None when it will."""
    if reason := too_big(sc):
        return reason
    try:
        check(sc)
        mem = breakdown(sc)
    except ScenarioError as err:
        return str(err)
    priorities = {c.priority for c in sc.classes.values()}
    if sc.mitigations.p0_kv_reserve >= mem.blocks and len(priorities) > 1:
        return (f"a KV reserve of {sc.mitigations.p0_kv_reserve:,} blocks leaves nothing of the "
                f"{mem.blocks:,}-block KV cache for the other classes")
    return None
