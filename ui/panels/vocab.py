"""How the app shows each wait reason: one row per `engine.core.reasons.Reason`, nowhere else.

The engine's `EXPLAIN` (the long sentence) stays the source of meaning; this table adds what only
the UI needs — a colour for the timeline and a short phrase for running text — keyed by the same
enum, so a new reason cannot be shown half-described (a test checks every reason has every entry).
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.core.reasons import EXPLAIN, Reason

from ..frame.i18n import N_, _


@dataclass(frozen=True)
class ReasonLook:
    color: str
    short: str  # fits in a sentence: "Top reasons: <short> (3.1 s)"
    explain: str  # the engine's full sentence
    name: str = ""  # a legend's name: the code in English (the vocabulary), a word in other languages


# The codes as legend names: English shows the code itself (DESIGN.md's vocabulary); the catalogue
# gives other languages a word for it, so a Chinese legend never shows `head_of_line`.
_NAMES = {Reason.NONE: N_("none"), Reason.KV_SHORT: N_("kv_short"), Reason.TOKEN_BUDGET: N_("token_budget"),
          Reason.MAX_SEQS: N_("max_seqs"), Reason.HEAD_OF_LINE: N_("head_of_line"), Reason.RESERVE: N_("reserve"),
          Reason.CLASS_CAP: N_("class_cap"), Reason.PREEMPTED: N_("preempted"), Reason.GATEWAY: N_("gateway")}


# Warm and neutral hues only: the classes own red, blue and purple (ui.charts.figures.CLASS_COLORS),
# so a waiting bar never reads as a class.
_COLORS_AND_PHRASES: dict[Reason, tuple[str, str]] = {
    Reason.NONE: ("#adb5bd", N_("no recorded reason")),
    Reason.KV_SHORT: ("#e8590c", N_("not enough free KV blocks")),
    Reason.TOKEN_BUDGET: ("#94d82d", N_("the step's token budget was used up")),
    Reason.MAX_SEQS: ("#20c997", N_("too many requests already running")),
    Reason.HEAD_OF_LINE: ("#fab005", N_("queued behind a request that does not fit")),
    Reason.RESERVE: ("#868e96", N_("what was left was reserved")),
    Reason.CLASS_CAP: ("#66d9e8", N_("its class was at a cap")),
    Reason.PREEMPTED: ("#8d5524", N_("evicted and waiting to come back")),
    Reason.GATEWAY: ("#495057", N_("held at the gateway")),
}

REASONS: dict[Reason, ReasonLook] = {
    r: ReasonLook(color, short, EXPLAIN.get(r, short), _NAMES[r]) for r, (color, short) in _COLORS_AND_PHRASES.items()
}


def look(label: str) -> ReasonLook:
    """The entry for a reason label as it appears in the frames (`kv_short`); unknown → NONE's.
    The phrases in the current language (the engine's sentences are extracted for translation by
    `ui.frame.i18n_extract`)."""
    try:
        reason = Reason[str(label).upper()]
    except KeyError:
        reason = Reason.NONE
    r = REASONS[reason]
    return ReasonLook(r.color, _(r.short), _(r.explain), _(_NAMES[reason]))


def shown() -> list[Reason]:
    """Reasons a wait segment can carry (NONE never appears in `waits`)."""
    return [r for r in Reason if r is not Reason.NONE]
