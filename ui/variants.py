"""The scenario a page compares against: the same traffic without any remedy.

"Remedy" covers everything this lab offers against inversion: the mitigations, class caps, the
scheduling policy (vLLM's default is `fcfs`), separate replicas (pinned routing), priority at a
gateway and another engine's rules (`scheduler.engine: sglang` compares against vLLM). The
baseline keeps the traffic, hardware and model, so a delta shows what the remedies did.
Pure functions on plain scenario data, so the same variant always has the same cache key.
"""

from __future__ import annotations

from engine.scenario import Scenario, from_dict, to_dict

from .i18n import _

_KEEP = ("alert_after_s",)  # observability, not a mitigation
DEFAULT_POLICY = "fcfs"  # vLLM v1's default scheduling policy
DEFAULT_ENGINE = "vllm"  # the engine whose defaults the baseline runs


def baseline(sc: Scenario) -> Scenario:
    """Same traffic and hardware on vLLM's defaults: vLLM's rules, fcfs, one engine unless
    replicas share the load, no mitigations, no class caps."""
    data = to_dict(sc)
    fresh = to_dict(from_dict({}))["mitigations"]
    data["mitigations"] = {**fresh, **{k: data["mitigations"][k] for k in _KEEP}}
    for cls in data.get("classes", {}).values():
        cls["caps"] = _no_caps()
    data["scheduler"]["policy"] = DEFAULT_POLICY
    data["scheduler"]["engine"] = DEFAULT_ENGINE
    if data["replicas"]["routing"] == "pinned":  # separation is the remedy: one engine serves everyone
        data["replicas"] = {"count": 1, "routing": "shared", "pin": None}
    if sc.gateway is not None and sc.gateway.enabled:  # priority at a gateway is a remedy too
        data["gateway"] = None
    return from_dict(data)


def _no_caps() -> dict:
    return {"max_prompt_tokens": None, "over_cap": "reject", "max_running": None, "max_kv_blocks": None}


def has_remedies(sc: Scenario) -> bool:
    return baseline(sc).key() != sc.key()


def remedies(sc: Scenario) -> list[str]:
    """What differs from the baseline, in words (for the caption under the deltas)."""
    out = []
    m, b = sc.mitigations, baseline(sc)
    if sc.scheduler.engine != b.scheduler.engine:
        out.append(_("{engine} engine").format(engine=sc.scheduler.engine))
    if sc.scheduler.policy != b.scheduler.policy:
        out.append(_("policy {policy}").format(policy=sc.scheduler.policy))
    if sc.gateway is not None and sc.gateway.enabled:
        out.append(_("gateway priority"))
    if sc.replicas != b.replicas:
        out.append(_("{n} replicas, {routing} routing").format(n=sc.replicas.count, routing=sc.replicas.routing))
    if m.p0_token_reserve:
        out.append(_("token reserve {n:,}").format(n=m.p0_token_reserve))
    if m.p0_kv_reserve:
        out.append(_("KV reserve {n:,} blocks").format(n=m.p0_kv_reserve))
    if m.inheritance:
        out.append(_("inheritance"))
    if m.aging_s:
        out.append(_("aging every {s} s").format(s=f"{m.aging_s:g}"))
    if m != b.mitigations and not out:
        out.append(_("mitigation settings"))
    caps = [n for n, c in sc.classes.items() if c.caps != b.classes[n].caps]
    if caps:
        out.append(_("caps on {classes}").format(classes=", ".join(caps)))
    return out
