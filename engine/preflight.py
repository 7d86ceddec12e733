"""Everything that can be known about a scenario before simulating it, checked in one call.

A scenario can validate key by key and still not run: a token reserve at least the budget, a
KV reserve that leaves the other classes nothing, a model that leaves no KV memory, a trace file
that is missing or whose class/priority values match no class, an empirical length column that
cannot be read — or so much work that the run would not end in reasonable time. `validate`,
the CLI's `run` and an app's upload all call `preflight`, so each refuses such a scenario with
one message before anything runs, instead of failing (or hanging) half-way.
"""

from __future__ import annotations

from .limits import Work, WorkLimits, check_work, estimate_work
from .memory import breakdown
from .scenario import Scenario, ScenarioError


def preflight(sc: Scenario, limits: WorkLimits | None = None) -> Work:
    """The work estimate, or ScenarioError naming what makes `sc` unable to run (or too big)."""
    from .simulation import check
    from .workload import _column

    check(sc)
    mem = breakdown(sc)
    priorities = {sc.request_class(n).priority for n in sc.class_names}
    if sc.mitigations.p0_kv_reserve >= mem.usable_blocks and len(priorities) > 1:
        raise ScenarioError(f"mitigations.p0_kv_reserve = {sc.mitigations.p0_kv_reserve} blocks leaves nothing of "
                            f"the {mem.usable_blocks} usable KV blocks for the other classes")
    for name, spec in sc.classes.items():
        for part in ("prompt", "output"):
            length = getattr(spec, part)
            if length.dist == "empirical":
                try:
                    _column(length.path, length.column)
                except ScenarioError as err:
                    raise ScenarioError(f"classes.{name}.{part}: {err}") from None
    work = estimate_work(sc)  # reads the trace: a missing file or unmatched classes fail here
    return check_work(sc, limits, work) if limits is not None else work
