"""A capacity search's answers as the pages show them: per configuration, the capacity (the
largest scale of the offered load within every SLO on every seed), what it loses or gains against
the configuration it is compared with (% of capacity per GPU), the GPUs that carry the same traffic
within the SLOs, and batch fill and KV use at the offered load (means over the seeds, with their
min–max) — the machine a remedy leaves idle, beside what it costs. Pure: no streamlit import.
"""

from __future__ import annotations

import pandas as pd

from ..frame.i18n import _
from . import spread
from .text import percent


def scale(f: dict) -> str:
    """"0.42×", "≥ 64×" (never failed), "< 0.125×" (fails at the smallest load), "≥ 2×" (the next
    load is over the app's limits), or "…" while searching."""
    cap = f.get("capacity")
    if f.get("below_min"):
        return _("< {s:g}×").format(s=0.125) if f.get("settled") else "…"
    if cap is None:
        return "…"
    text = f"{cap:.3g}×"
    if f.get("at_least_max") or f.get("limited"):
        return _("≥ {s}").format(s=text)
    return text if f.get("settled") else "… " + text


def change(f: dict, ref: dict | None) -> str:
    """The capacity per GPU gained or lost against `ref` (the configuration without the remedy):
    "−23 %", "+4 %", "no change"; "more (was < 0.125×)" when only `ref` fails at the smallest load."""
    if ref is None:
        return "–"
    if not (f.get("settled") and ref.get("settled")):
        return "…"
    pct = f.get("change_pct")
    if pct is None:
        if ref.get("below_min") and not f.get("below_min"):
            return _("more (without: {s})").format(s=scale(ref))
        if f.get("below_min") and not ref.get("below_min"):
            return _("less (without: {s})").format(s=scale(ref))
        return "–"
    if abs(pct) < 0.5:
        return _("no change")
    return f"{pct:+.0f} %".replace("-", "−")


def gpus(f: dict) -> str:
    n = f.get("gpus_for_offered_load")
    if n is None:
        return "…" if not f.get("settled") else "–"
    return f"{n:,}"


def at_load(f: dict, key: str) -> str:
    e = (f.get("at_load") or {}).get(key) or {}
    v = e.get("value")
    if v is None:
        return "…" if not f.get("settled") else "–"
    lo, hi = e.get("lo"), e.get("hi")
    shown = percent(v)
    if lo is not None and hi is not None and len(e.get("per_seed") or []) > 1:
        shown += f" ({spread.span(lo, hi, percent)})"
    return shown


def table(names: list[str], found: list[dict]) -> pd.DataFrame:
    """One row per configuration (`names`, in the order of `found`; a finding's `against` is the
    index of the one it is compared with)."""
    rows = []
    for name, f in zip(names, found):
        ref = found[int(f["against"])] if f.get("against") not in (None, "") else None
        rows.append({
            _("configuration"): name,
            _("capacity (× the offered load)"): scale(f),
            _("capacity change per GPU"): change(f, ref),
            _("GPUs for this traffic"): gpus(f),
            _("batch fill at 1×"): at_load(f, "batch_fill"),
            _("KV use at 1×"): at_load(f, "kv_util_mean"),
        })
    return pd.DataFrame(rows)


def settled(found: list[dict]) -> bool:
    return all(f.get("settled") for f in found)


def why(names: list[str], found: list[dict]) -> list[str]:
    """What fails at the first load over each capacity: "without remedies fails at 0.125×: P0: P99
    TTFT 0.654 s > 0.6 s (seed 4)"."""
    out = []
    for name, f in zip(names, found):
        top = f.get("bracket", [None, None])[1]
        reason = f.get("fails_at_bracket_top")
        if f.get("settled") and reason and top is not None:
            out.append(_("{name} fails at {s:.3g}×: {why}").format(name=name, s=top, why=reason))
    return out
