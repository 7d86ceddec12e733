"""Compare's configurations: what each sets on top of the sidebar's scenario, and unique names.

Column 1 is always the sidebar's scenario (it follows every sidebar change); columns 2 and 3 set
the policy, both reserves, inheritance and the lowest class's prompt cap on the same traffic.
Two columns may never share a name: a duplicate would silently merge them in the tables.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

from engine.config.scenario import Scenario, apply_overrides, from_dict, to_dict

from ..frame.i18n import N_, _
from ..frame.untrusted import quoted
from ..frame.views import COMPARE_SLOTS, STORE

SIDEBAR = N_("Sidebar")  # column 1's name (shown translated; the key stays this)


def sidebar_config(sc: Scenario, low: str) -> list[tuple[str, str]]:
    """The sidebar's values of the settings the other columns choose (read-only)."""
    m = sc.mitigations
    cap = sc.request_class(low).caps.max_prompt_tokens
    return [(_("Policy"), sc.scheduler.policy), (_("Token reserve"), f"{m.p0_token_reserve:,}"),
            (_("KV reserve"), _("{n:,} blocks").format(n=m.p0_kv_reserve)),
            (_("Inheritance"), _("on") if m.inheritance else _("off")),
            (_("{cls} prompt cap").format(cls=low), f"{cap:,}" if cap else _("none"))]


def config_of(state: MutableMapping[str, Any], i: int) -> dict[str, Any]:
    return {f: state[f"c{i}_{f}"] for f in ("name", "pol", "res", "kv", "inh", "cap")}


def overrides(sc: Scenario, c: dict[str, Any], low: str) -> Scenario:
    """The sidebar's scenario with configuration `c` applied (same traffic, same seed)."""
    o = {"scheduler.policy": c["pol"], "mitigations.p0_token_reserve": int(c["res"]),
         "mitigations.p0_kv_reserve": int(c["kv"]), "mitigations.inheritance": bool(c["inh"]),
         f"classes.{low}.caps.max_prompt_tokens": int(c["cap"]) or None}
    return from_dict(apply_overrides(to_dict(sc), o))


def refuse_duplicate(state: MutableMapping[str, Any], defaults: dict[str, Any], entering: bool = False,
                     only: int | None = None) -> list[str]:
    """Give back a name that is empty or already taken (the previous one, else the default).

    As an `on_change` callback (`only` = the edited column) the refusal is shown at the input; when
    a link is read (`entering`), it becomes a note about the link.
    """
    stored = state.get(STORE, {}).get("compare", {})
    notes = []
    taken = {SIDEBAR, _(SIDEBAR)}
    for i in COMPARE_SLOTS:
        key = f"c{i}_name"
        if only is not None and i != only:
            taken.add(str(state.get(key, "")).strip())
            continue
        state.pop(f"_{key}_error", None)
    for i in COMPARE_SLOTS:
        if only is not None and i != only:
            continue
        key = f"c{i}_name"
        name = str(state.get(key, "")).strip()
        if name and name not in taken:
            state[key] = name
            taken.add(name)
            continue
        back = stored.get(key, defaults[key])
        if back in taken:
            back = defaults[key] if defaults[key] not in taken else f"{defaults[key]} {i}"
        state[key] = back
        taken.add(back)
        if entering:
            why = _("a name is needed") if not name else _("{name} is already the name of another column").format(
                name=quoted(name))
            notes.append(_("{key}: {why}; using {back}").format(key=quoted(key), why=why, back=quoted(back)))
        else:
            why = _("A name is needed") if not name else _("{name} is already the name of another column").format(
                name=quoted(name))
            state[f"_{key}_error"] = _("{why}: names must differ. Back to {back}.").format(why=why, back=quoted(back))
    return notes
