"""Reading a share link once, at the start of a session: what to keep, what to drop, and why.

A link is untrusted text. `check_link` sorts every parameter into: a scenario control's valid
value (kept), a page's view setting (left for that page, which knows its valid values), or a
problem — unknown name, malformed or out-of-range value (`inf`, `nan`, `1e400`, HTML…), a
repeated name — each with one message that names it. The frame then rewrites the URL (bad
values leave it) before any control reads it. `runnable_subset` does the same for values that
are each valid but cannot run together. Pure: no streamlit import, so it is fuzzed alone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from engine.config.scenario import Scenario, ScenarioError

from .codec import DEFAULT_PRESET, PRESET_KEY, Codec, fmt_number, fmt_value, parse
from .i18n import _
from .untrusted import plain, quoted


@dataclass
class LinkCheck:
    """The verdict on a link: the preset, the control values it sets, and what to change in it."""

    preset: str
    values: dict[str, Any] = field(default_factory=dict)  # control short name → widget value
    view: dict[str, str] = field(default_factory=dict)  # view parameters, for the page to judge
    notes: list[str] = field(default_factory=list)  # one sentence per problem
    drop: set[str] = field(default_factory=set)  # parameters to delete from the URL
    set: dict[str, str] = field(default_factory=dict)  # parameters to rewrite (a repeated one → its last value)


def _shown(v: Any) -> str:
    text = fmt_number(v)
    return quoted(text) if text else _("(none)")


def _last(value: Any) -> tuple[str, int]:
    if isinstance(value, (list, tuple)):
        return (str(value[-1]) if value else ""), len(value)
    return str(value), 1


def check_link(query: dict[str, Any], presets: list[str], codec_for: Callable[[str], Codec],
               view_keys: set[str] | frozenset[str] = frozenset()) -> LinkCheck:
    """Sort a link's parameters (values: a string or the list of a repeated key)."""
    text, times = _last(query.get(PRESET_KEY, DEFAULT_PRESET))
    out = LinkCheck(DEFAULT_PRESET)
    if PRESET_KEY in query:
        if text in presets:
            out.preset = text
            if times > 1:
                out.notes.append(_("{key} appears {n} times in the link; using the last one, {value}").format(
                    key=quoted(PRESET_KEY), n=times, value=quoted(text)))
                out.set[PRESET_KEY] = text
        else:
            out.notes.append(_("{key} = {value} is not a shipped scenario (use one of {names}); using "
                               "{default}").format(key=quoted(PRESET_KEY), value=quoted(text),
                                                   names=", ".join(presets), default=DEFAULT_PRESET))
            out.drop.add(PRESET_KEY)
    codec = codec_for(out.preset)
    for key, raw_value in query.items():
        if key == PRESET_KEY:
            continue
        text, times = _last(raw_value)
        p = codec.by_short.get(key)
        if p is None and key not in view_keys:
            out.notes.append(_("{key} is not a setting of this scenario or page; ignored").format(key=quoted(key)))
            out.drop.add(key)
            continue
        if times > 1:
            out.notes.append(_("{key} appears {n} times in the link; only the last value counts").format(
                key=quoted(key), n=times))
            out.set[key] = text
        if p is None:
            out.view[key] = text
            continue
        try:
            out.values[key] = parse(p, text)
        except ValueError:
            out.notes.append(_("{key} = {value} is not valid for {label} ({range}); using the preset's value "
                               "{default}").format(key=quoted(key), value=quoted(text), label=_(p.label),
                                                   range=p.describe_range(), default=_shown(codec.defaults[key])))
            out.drop.add(key)
            out.set.pop(key, None)
    return out


def runnable_subset(codec: Codec, values: dict[str, Any], why_not: Callable[[Scenario], str | None]
                    ) -> tuple[dict[str, Any], list[str]]:
    """The link's values that can run together, and one note per value left out.

    If the whole set cannot run, try leaving out one value at a time and drop the first whose
    absence fixes it; if none does, drop them all (the preset always runs).
    """

    def problem(vals: dict[str, Any]) -> str | None:
        try:
            reason = why_not(codec.scenario({**codec.defaults, **vals}))
        except ScenarioError as err:
            reason = str(err)
        return None if reason is None else plain(reason)

    reason = problem(values)
    if reason is None:
        return values, []
    for key in values:
        rest = {k: v for k, v in values.items() if k != key}
        if problem(rest) is None:
            return rest, [_("{key} = {value} cannot run with this scenario ({reason}); using the preset's value "
                            "{default}").format(key=quoted(key), value=quoted(fmt_number(values[key])),
                                                reason=reason, default=_shown(codec.defaults[key]))]
    shown = ", ".join(quoted(f"{k}={fmt_number(v)}") for k, v in values.items())
    return {}, [_("The link's settings {shown} cannot run together ({reason}); using the preset's values").format(
        shown=shown, reason=reason)]


def check_seeds(text: str | None, lo: int, hi: int, default: int) -> tuple[int | None, str | None]:
    """The link's seed count (`seeds`, how many seeds every figure is over): (value, None), or
    (None, a note naming it) for anything but a whole number from `lo` to `hi`; (None, None) if absent."""
    if text is None:
        return None, None
    s = str(text).strip()
    if s.isascii() and s.isdigit() and len(s) <= 6 and lo <= int(s) <= hi:
        return int(s), None
    return None, _("{key} = {value} is not a number of seeds ({range}); using {default}").format(
        key=quoted("seeds"), value=quoted(text), range=_("a whole number from {lo} to {hi}").format(lo=lo, hi=hi),
        default=default)


def check_view(params: list, defaults: dict[str, Any], texts: dict[str, str],
               ranges: tuple[tuple[str, str], ...] = ()) -> tuple[dict[str, Any], list[str]]:
    """A page's view settings from the link: valid values, and one note per bad one (left out).

    `ranges` names (start, end) pairs: a link whose start is not below its end (either value from
    the link, the other from the link or the default) gets one note and neither value is used."""
    by_short = {p.short: p for p in params}
    values: dict[str, Any] = {}
    notes: list[str] = []
    for key, text in texts.items():
        p = by_short.get(key)
        if p is None:
            notes.append(_("{key} is not a setting of this page; ignored").format(key=quoted(key)))
            continue
        try:
            values[key] = parse(p, text)
        except ValueError:
            notes.append(_("{key} = {value} is not valid for {label} ({range}); using {default}").format(
                key=quoted(key), value=quoted(text), label=_(p.label), range=p.describe_range(),
                default=_shown(fmt_value(p, defaults[key]))))
    for lo_key, hi_key in ranges:
        if lo_key not in values and hi_key not in values:
            continue
        lo, hi = values.get(lo_key, defaults[lo_key]), values.get(hi_key, defaults[hi_key])
        if lo < hi:
            continue
        notes.append(_("{lo_key} = {lo} and {hi_key} = {hi}: the start must be below the end; using {lo_default} "
                       "to {hi_default}").format(
            lo_key=quoted(lo_key), lo=quoted(fmt_number(lo)), hi_key=quoted(hi_key), hi=quoted(fmt_number(hi)),
            lo_default=_shown(defaults[lo_key]), hi_default=_shown(defaults[hi_key])))
        values.pop(lo_key, None)
        values.pop(hi_key, None)
    return values, notes
