"""A lesson's numeric prediction: one number typed before the reveal, scored against the seeds.

A multiple-choice answer says which way a thing goes; a number says how far. Each lesson's header
names one (`estimate: {run, metric}` — run `run`'s value of a metric — or `{run, metric, over}`,
the ratio of run `run`'s value to run `over`'s). It is scored against the **seed band**: the
metric's min–max over the lesson's runs on 20 seeds at the shipped load (`lessons/evidence.json`,
`ui.teach.lesson_evidence.band_of`), not against the one run shown, since another seed may give another
number. Inside the band is a hit; outside, the score is the factor to its nearer edge (×2.3 too
high). Pure: no streamlit import.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from engine import Result

from ..frame.i18n import _
from . import lessons


def kind(estimate: Mapping) -> str:
    """How the number is typed and shown: "ratio" (×), "share" (typed in %), "seconds" or "number"."""
    name = estimate["metric"]
    if "over" in estimate:
        return "ratio"
    if lessons.fmt_metric(name, 0.5).endswith("%"):
        return "share"
    if lessons.fmt_metric(name, 1.5).endswith(" s"):
        return "seconds"
    return "number"


UNITS = {"ratio": "×", "share": "%", "seconds": "s", "number": ""}


def question(estimate: Mapping, labels: Sequence[str]) -> str:
    """What to estimate, in words (with the run labels of the lesson in the page's language)."""
    metric = lessons.metric_label(estimate["metric"])
    if "over" in estimate:
        return _("**Estimate:** {metric} in “{run}” divided by the same in “{other}” (a ratio, ×)").format(
            metric=metric, run=labels[estimate["run"]], other=labels[estimate["over"]])
    unit = UNITS[kind(estimate)]
    return _("**Estimate:** {metric} in “{run}”{unit}").format(
        metric=metric, run=labels[estimate["run"]], unit=f" ({unit})" if unit else "")


def from_input(estimate: Mapping, typed: float) -> float:
    """The typed number in the metric's own units (a share is typed in percent)."""
    return typed / 100 if kind(estimate) == "share" else float(typed)


def shown(estimate: Mapping, value: float | None) -> str:
    """A value of the estimate as the page writes it: `×2.3`, `11.8 s`, `61%`."""
    if value is None or not math.isfinite(value):
        return "–"
    if kind(estimate) == "ratio":
        return f"×{value:.2g}" if value < 10 else f"×{value:,.0f}"
    return lessons.fmt_metric(estimate["metric"], value)


def actual(estimate: Mapping, results: Sequence[Result]) -> float | None:
    """The estimate's value on the runs shown (one seed)."""
    v = lessons.metric(results[estimate["run"]], estimate["metric"])
    if not isinstance(v, int | float):
        return None
    if "over" not in estimate:
        return float(v)
    ref = lessons.metric(results[estimate["over"]], estimate["metric"])
    return float(v) / ref if isinstance(ref, int | float) and ref > 0 else None


@dataclass(frozen=True)
class Score:
    inside: bool
    factor: float | None  # outside: how many times off the nearer edge (≥ 1); None when it cannot be said
    side: str  # "inside", "low" or "high"


def score(guess: float, lo: float, hi: float) -> Score:
    """A guess against the band [lo, hi]: inside, or the factor to the nearer edge. A guess of 0 or
    below under a positive band is "low" with no factor (no finite ratio says how far)."""
    if lo <= guess <= hi:
        return Score(True, 1.0, "inside")
    if guess < lo:
        return Score(False, lo / guess if guess > 0 else None, "low")
    return Score(False, guess / hi if hi > 0 else None, "high")


def words(estimate: Mapping, guess: float, band: Mapping) -> str:
    """The score in one sentence: the guess, the band (and over how many seeds), the verdict."""
    s = score(guess, band["min"], band["max"])
    head = _("Your estimate: {guess}. Over {n} seeds it lay between {lo} and {hi} (median {median}).").format(
        guess=shown(estimate, guess), n=band["seeds"], lo=shown(estimate, band["min"]),
        hi=shown(estimate, band["max"]), median=shown(estimate, band["median"]))
    if s.inside:
        return head + " " + _("**Inside the band.**")
    if s.factor is None:
        return head + " " + _("**Below the band.**")
    factor = f"×{s.factor:.2g}" if s.factor < 10 else f"×{s.factor:,.0f}"
    if s.side == "low":
        return head + " " + _("**{factor} too low** (against the band's low end).").format(factor=factor)
    return head + " " + _("**{factor} too high** (against the band's high end).").format(factor=factor)


def band_words(estimate: Mapping, band: Mapping) -> str:
    """The band alone (no guess was made)."""
    return _("Over {n} seeds it lay between {lo} and {hi} (median {median}).").format(
        n=band["seeds"], lo=shown(estimate, band["min"]), hi=shown(estimate, band["max"]),
        median=shown(estimate, band["median"]))


def curve_points(curve: Mapping, bands: Mapping, typed: Sequence[float | None]) -> list[dict]:
    """Each drawn point against its band: {at, guess, lo, hi, median, score (None: not drawn)}."""
    out = []
    for v, b, g in zip(curve["at"], bands["points"], typed):
        out.append({"at": v, "guess": g, "lo": b["min"], "hi": b["max"], "median": b["median"],
                    "score": score(float(g), b["min"], b["max"]) if g is not None else None})
    return out


def curve_words(points: Sequence[Mapping], seeds: int) -> str:
    """How many drawn points fell inside their band, in one sentence."""
    drawn = [p for p in points if p["score"] is not None]
    inside = sum(p["score"].inside for p in drawn)
    return _("Your curve: {k} of {n} points inside the band of {seeds} seeds.").format(
        k=inside, n=len(drawn), seeds=seeds)
