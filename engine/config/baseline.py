"""The same traffic without any remedy: what a remedy's effect and cost are measured against.

"Remedy" covers everything this lab offers against inversion: the mitigations, class caps, the
scheduling policy (vLLM's default is `fcfs`), separate replicas (pinned routing), priority at a
gateway and another engine's rules (`scheduler.engine: sglang` compares against vLLM). The
baseline keeps the traffic, hardware and model, so a delta shows what the remedies did. The app's
deltas (`ui.panels.variants`) and `engine capacity`'s cost both use it. Pure functions on plain scenario
data, so the same variant always has the same cache key.
"""

from __future__ import annotations

from .scenario import Scenario, from_dict, to_dict

KEEP = ("alert_after_s",)  # observability, not a mitigation
DEFAULT_POLICY = "fcfs"  # vLLM v1's default scheduling policy
DEFAULT_ENGINE = "vllm"  # the engine whose defaults the baseline runs


def baseline(sc: Scenario) -> Scenario:
    """Same traffic and hardware on vLLM's defaults: vLLM's rules, fcfs, one engine unless
    replicas share the load, no mitigations, no class caps."""
    data = to_dict(sc)
    fresh = to_dict(from_dict({}))["mitigations"]
    data["mitigations"] = {**fresh, **{k: data["mitigations"][k] for k in KEEP}}
    for cls in data.get("classes", {}).values():
        cls["caps"] = no_caps()
    data["scheduler"]["policy"] = DEFAULT_POLICY
    data["scheduler"]["engine"] = DEFAULT_ENGINE
    if data["replicas"]["routing"] == "pinned":  # separation is the remedy: one engine serves everyone
        data["replicas"] = {"count": 1, "routing": "shared", "pin": None}
    if sc.gateway is not None and sc.gateway.enabled:  # priority at a gateway is a remedy too
        data["gateway"] = None
    return from_dict(data)


def no_caps() -> dict:
    return {"max_prompt_tokens": None, "over_cap": "reject", "max_running": None, "max_kv_blocks": None}


def has_remedies(sc: Scenario) -> bool:
    return baseline(sc).key() != sc.key()
