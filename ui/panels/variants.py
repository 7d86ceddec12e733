"""The scenario a page compares against: the same traffic without any remedy (`engine.config.baseline`,
which `engine capacity` uses too), and what differs from it in words."""

from __future__ import annotations

from engine.config.baseline import baseline, has_remedies
from engine.config.scenario import Scenario

from ..frame.i18n import _

__all__ = ["baseline", "has_remedies", "remedies"]


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
