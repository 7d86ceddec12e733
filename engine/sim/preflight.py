"""Everything that can be known about a scenario before simulating it, checked in one call.

A scenario can validate key by key and still not run: a token reserve at least the budget, a
KV reserve that leaves the other classes nothing, a model that leaves no KV memory, a trace file
that is missing or whose class/priority values match no class, an empirical length column that
cannot be read — or so much work that the run would not end in reasonable time. `validate` holds
the combinations (`simulate` and the sweeps call it); the CLI's `run` and an app's upload call
`preflight`, which adds the files and the work, so each refuses such a scenario with one message
before anything runs, instead of failing (or hanging) half-way.
"""

from __future__ import annotations

from ..config.memory import MemoryBreakdown, breakdown
from ..config.scenario import Scenario, ScenarioError
from ..config.workload import read_column
from .limits import Work, WorkLimits, check_work, estimate_work


def preflight(sc: Scenario, limits: WorkLimits | None = None) -> Work:
    """The work estimate, or ScenarioError naming what makes `sc` unable to run (or too big)."""
    validate(sc)
    for name, spec in sc.classes.items():
        for part in ("prompt", "output"):
            length = getattr(spec, part)
            if length.dist == "empirical":
                try:
                    read_column(length.path, length.column)
                except ScenarioError as err:
                    raise ScenarioError(f"classes.{name}.{part}: {err}") from None
    work = estimate_work(sc)  # reads the trace: a missing file or unmatched classes fail here
    return check_work(sc, limits, work) if limits is not None else work


def validate(sc: Scenario) -> MemoryBreakdown:
    """Combinations that validate key by key but cannot run together — the one check before a
    run (`simulate`, `preflight` and the sweeps call it). Returns the memory breakdown it needed."""
    if sc.scheduler.engine == "sglang":
        _check_sglang(sc)
    if sc.mitigations.p0_token_reserve >= sc.scheduler.max_num_batched_tokens:
        raise ScenarioError(
            f"mitigations.p0_token_reserve = {sc.mitigations.p0_token_reserve}: must be below "
            f"scheduler.max_num_batched_tokens ({sc.scheduler.max_num_batched_tokens}), "
            "or no other class could ever run"
        )
    mem = breakdown(sc)
    priorities = {sc.request_class(n).priority for n in sc.class_names}
    if sc.mitigations.p0_kv_reserve >= mem.usable_blocks and len(priorities) > 1:
        raise ScenarioError(f"mitigations.p0_kv_reserve = {sc.mitigations.p0_kv_reserve} blocks leaves nothing of "
                            f"the {mem.usable_blocks} usable KV blocks for the other classes")
    return mem


_SGLANG_POLICIES = ("fcfs", "priority")


def _check_sglang(sc: Scenario) -> None:
    """The `sglang` engine models SGLang's own rules: the lab's remedies and class caps are
    refused with it rather than silently ignored. (vLLM's own knobs — watermark,
    long_prefill_token_threshold, async scheduling, prefix caching — simply do not exist in
    SGLang; they have no effect, as the README says.)"""
    s, m = sc.scheduler, sc.mitigations
    problems = []
    if s.policy not in _SGLANG_POLICIES:
        problems.append(f"scheduler.policy = {s.policy!r}: the sglang engine knows fcfs and priority "
                        "(--enable-priority-scheduling)")
    for key, value, default in (("mitigations.p0_token_reserve", m.p0_token_reserve, 0),
                                ("mitigations.p0_kv_reserve", m.p0_kv_reserve, 0),
                                ("mitigations.inheritance", m.inheritance, False),
                                ("mitigations.aging_s", m.aging_s, 0.0),
                                ("mitigations.preempt_mode", m.preempt_mode, "recompute")):
        if value != default:
            problems.append(f"{key} is a vLLM-engine setting; the sglang engine does not model it")
    for name in sc.class_names:
        caps = sc.request_class(name).caps
        if caps.max_running is not None or caps.max_kv_blocks is not None:
            problems.append(f"classes.{name}.caps.max_running/max_kv_blocks: not modelled by the sglang engine")
    unknown = sorted(set(s.sglang.class_priority or {}) - set(sc.class_names))
    if unknown:
        problems.append(f"scheduler.sglang.class_priority names unknown class(es) {', '.join(unknown)[:200]}")
    if problems:
        raise ScenarioError("; ".join(problems[:5]))
