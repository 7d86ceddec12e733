"""What the app agrees to run: the engine's preflight with the app's (interactive) work limits.

A control's callback, a link's values, each sweep point and each Compare configuration ask
`why_not` *before* anything runs: the same checks `python -m engine run` makes (a reserve the
budget cannot hold, no KV memory, a KV reserve that leaves nothing, unreadable files) and a cap
on the work the scenario implies — estimated seconds, memory, requests and classes — small
enough that one interactive run stays within seconds.
"""

from __future__ import annotations

from engine.config.scenario import Scenario, ScenarioError
from engine.config.traces import TraceError
from engine.sim.limits import INTERACTIVE
from engine.sim.preflight import preflight

APP_MAX_REQUESTS = int(INTERACTIVE.requests)


def why_not(sc: Scenario) -> str | None:
    """Why the app will not run `sc`, in one sentence; None when it will."""
    try:
        preflight(sc, INTERACTIVE)
    except (ScenarioError, TraceError) as err:
        return str(err)
    return None
