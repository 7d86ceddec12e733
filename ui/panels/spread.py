"""A figure over seeds in words: its value, the seeds' min–max, the requests behind a percentile,
"n < 100" where some seed had fewer than 100 of them, and a comparison as "better on k of N seeds".

Every page says the same thing the same way (README, *The app*): the value pools every seed's
requests (a percentile of all N runs' requests together; a share over all of them; a run-level
figure the mean), the interval is the **seeds' min–max** (not a confidence interval: what another
seed may give), and a comparison is counted seed by seed against the same seed of the other
configuration — the same arrivals and lengths. `engine.sweeps.evidence` computes; this module only
writes. Pure: no streamlit import.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from engine.sweeps.evidence import FEW, Estimate, holds_on

from ..frame.i18n import _, ngettext


def few_note(e: Estimate) -> str:
    """"n < 100 requests (fewest in a seed: 28)": said next to a percentile some seed took over
    fewer than 100 requests (its P99 is then about their maximum)."""
    return _("n < {few} requests (fewest in a seed: {k})").format(few=FEW, k=e.n_min)


_UNIT = re.compile(r"^(.*?[\d–])(\s*[^\d\s–.,][^\d]*)$")  # "17.7 s" → ("17.7", " s"); "70%" → ("70", "%")


def seed_list(seeds: Sequence[int]) -> str:
    """7, 8, 9, 10, 11 → "7–11" (consecutive, as the pages take them); otherwise listed."""
    seeds = [int(s) for s in seeds]
    if not seeds:
        return ""
    if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[0] + len(seeds))):
        return f"{seeds[0]}–{seeds[-1]}"
    return _(", ").join(str(s) for s in seeds)


def span(lo: float | None, hi: float | None, fmt: Callable[[float], str]) -> str:
    """The seeds' range with one unit: "10.1–17.7 s", "55–70%"; one value when both ends read alike."""
    if lo is None or hi is None:
        return "–"
    a, b = fmt(lo), fmt(hi)
    if a == b:
        return a
    ma, mb = _UNIT.match(a), _UNIT.match(b)
    if ma and mb and ma.group(2) == mb.group(2):
        return f"{ma.group(1)}–{b}"
    return f"{a}–{b}"


def value(e: Estimate | None, fmt: Callable[[float], str]) -> str:
    """The figure as a card shows it: the pooled value (what it rests on is in `basis`, under it)."""
    if e is None or e.value is None:
        return "–"
    return fmt(e.value)


def requests(n: int) -> str:
    return ngettext("{n:,} request", "{n:,} requests", n).format(n=n)


def basis(e: Estimate | None, fmt: Callable[[float], str], seeds: Sequence[int], running: int = 0) -> str:
    """What a figure rests on, for the line under its card: "5 seeds: 10.1–17.7 s · 920 requests ·
    n < 100 requests (fewest in a seed: 28)", or for the shown run alone "seed 7 only · 4 more seeds running"."""
    parts = []
    n = len(seeds)
    if n == 1 or running:
        parts.append(_("seed {seed} only").format(seed=seeds[0]) if n else "")
        if running:
            parts.append(ngettext("{k} more seed running", "{k} more seeds running", running).format(k=running))
    elif e is not None and e.value is not None:
        parts.append(ngettext("{n} seed: {range}", "{n} seeds: {range}", n).format(n=n, range=span(e.lo, e.hi, fmt)))
    else:
        parts.append(ngettext("{n} seed", "{n} seeds", n).format(n=n))
    if e is not None and e.method == "pooled":
        parts.append(requests(e.n))
        if e.few:
            parts.append(few_note(e))
    return _(" · ").join(p for p in parts if p)


def sentence(label: str, e: Estimate | None, fmt: Callable[[float], str], seeds: Sequence[int]) -> str:
    """One figure inline: "P99 TTFT 16.5 s (5 seeds: 10.1–17.7 s; 920 requests) · n < 100 requests
    (fewest in a seed: 28)"."""
    if e is None or e.value is None:
        return f"{label} –"
    n = len(seeds)
    inside = [ngettext("{n} seed: {range}", "{n} seeds: {range}", n).format(n=n, range=span(e.lo, e.hi, fmt))
              if n > 1 else _("seed {seed}").format(seed=seeds[0])]
    if e.method == "pooled":
        inside.append(requests(e.n))
    text = _("{label} {value} ({basis})").format(label=label, value=fmt(e.value), basis=_("; ").join(inside))
    if e.few:
        text += " · " + few_note(e)
    return text


def cell(e: Estimate | None, fmt: Callable[[float], str]) -> str:
    """A table cell: "16.5 s (10.1–17.7 s) · n < 100"; the seeds' count is in the table's caption."""
    if e is None or e.value is None:
        return "–"
    shown = value(e, fmt)
    if e.seeds > 1:
        shown += f" ({span(e.lo, e.hi, fmt)})"
    if e.few:
        shown += " · " + _("n < {few}").format(few=FEW)
    return shown


def better_on(k: int, n: int) -> str:
    """"better on 4 of 5 seeds" (seed i against seed i of the other configuration)."""
    return ngettext("better on {k} of {n} seed", "better on {k} of {n} seeds", n).format(k=k, n=n)


def moved_on(direction: str, k: int, n: int) -> str:
    """"higher on 5 of 5 seeds" / "lower on 2 of 5 seeds": for figures where neither way is better."""
    if direction == "higher":
        return ngettext("higher on {k} of {n} seed", "higher on {k} of {n} seeds", n).format(k=k, n=n)
    return ngettext("lower on {k} of {n} seed", "lower on {k} of {n} seeds", n).format(k=k, n=n)


def compare(cur: Estimate | None, base: Estimate | None, better: str) -> tuple[int, int, int] | None:
    """(seeds where `cur` is better, seeds where it is worse, N), pairing seed i with seed i;
    `better` is "lower" or "higher". None without both figures."""
    if cur is None or base is None or len(cur.per_seed) != len(base.per_seed) or not cur.per_seed:
        return None
    worse = "higher" if better == "lower" else "lower"
    return (holds_on(cur.per_seed, base.per_seed, better).k, holds_on(cur.per_seed, base.per_seed, worse).k,
            len(cur.per_seed))


def colour(counts: tuple[int, int, int], rule: str) -> str:
    """A delta's colour: the rule's (green/red by its sign) only when every seed agrees, else grey —
    a pooled change that holds on 3 of 5 seeds is not a finding."""
    k, w, n = counts
    return rule if n and (k == n or w == n) else "off"
