"""How often each lesson's claims hold over seeds and load: the audit the Workshop quotes.

The test suite checks a lesson's claims on its own seed, but a claim is a conclusion, so the
Workshop states it over seeds: `python -m ui.teach.lesson_evidence` runs every lesson's runs on the
scenario's seed and the next 19 (never picked) at load ×0.9, ×1 and ×1.1 (`engine.sweeps.story.audit`,
about five minutes on two cores) and writes `lessons/evidence.json`. The page then says of each
claim "holds on 20 of 20 seeds at every load", with the median and range of its value, without
running 600 simulations while a room waits.

The file names what it was computed from (a fingerprint of each lesson's scenarios, runs and
claims); `tests/ui/test_lesson_evidence.py` fails when a lesson or its scenario changed since, and
when a claim in it is not robust (`engine.sweeps.story.required`: all seeds but one in twenty at every
scale) — so a lesson cannot quote a figure that rests on its seed. Pure: no streamlit import.
"""

from __future__ import annotations

import functools
import hashlib
import json
import statistics
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.sweeps import story as stories

from .lessons import LESSON_DIR, parse, slug_of

FILE = LESSON_DIR / "evidence.json"
SEEDS = 20
SCALES = stories.DEFAULT_SCALES


def fingerprint(story: stories.Story) -> str:
    """What the audit of a lesson depends on: the canonical scenario of each run (at the first
    seed) and the claims. A change to the lesson or to the scenario file changes it."""
    seed = stories.seeds_of(story, 1)[0]
    parts = [stories.scenario_key(story, r, seed, 1.0) for r in range(len(story.runs))]
    parts.append(json.dumps(list(story.claims), sort_keys=True))
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def _range(values: list[Any]) -> dict | None:
    nums = [v for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
    if not nums:
        return None
    return {"median": statistics.median(nums), "min": min(nums), "max": max(nums)}


def _support(pairs: list[list[int | None]]) -> int | None:
    got = [n for pair in pairs for n in pair if n is not None]
    return min(got) if got else None


def summarize(a: stories.Audit) -> dict:
    """One lesson's audit, compact: per claim and scale, how often it held, its value's and the
    compared value's median and range, and the fewest requests behind a percentile in it."""
    data = stories.to_json(a)
    out = []
    for c in data["claims"]:
        per = {}
        for x, t in c["scales"].items():
            per[x] = {"holds": t["holds"], "seeds": t["seeds"], "robust": t["robust"],
                      "value": _range(t["values"]), "ref": _range(t["refs"]), "fewest": _support(t["support"])}
        out.append({"claim": c["claim"], "text": c["text"], "scales": per})
    return {"fingerprint": fingerprint(a.story), "seeds": a.seeds, "claims": out}


@dataclass(frozen=True)
class ClaimEvidence:
    """One claim over the audit's seeds: at each scale (×0.9, ×1, ×1.1) how many held."""

    holds: dict[str, int]
    seeds: int
    robust: bool
    value: dict | None  # at ×1: median, min, max of the claim's left-hand side
    fewest: int | None  # the fewest requests behind a percentile in it (at ×1)

    @property
    def worst(self) -> int:
        return min(self.holds.values())


def read(path: Path = FILE) -> dict:
    """The audit file as written, or {} when there is none or it does not parse (parsed once per
    version of the file: every lesson page asks for it)."""
    try:
        st = path.stat()
        return _parsed(path, st.st_mtime_ns, st.st_size)
    except OSError:
        return {}


@functools.lru_cache(maxsize=4)
def _parsed(path: Path, _mtime: int, _size: int) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def of_lesson(slug: str, claims: tuple[dict, ...], data: Mapping | None = None) -> list[ClaimEvidence | None]:
    """Each claim's evidence from the audit file (None for a claim the file does not hold as
    written: the lesson changed since)."""
    entry = (data if data is not None else read()).get("lessons", {}).get(slug) or {}
    by_claim = {json.dumps(c["claim"], sort_keys=True): c for c in entry.get("claims", [])}
    out: list[ClaimEvidence | None] = []
    for claim in claims:
        c = by_claim.get(json.dumps(dict(claim), sort_keys=True))
        if c is None:
            out.append(None)
            continue
        scales = c["scales"]
        one = scales.get("1", next(iter(scales.values())))
        out.append(ClaimEvidence(holds={x: t["holds"] for x, t in scales.items()}, seeds=one["seeds"],
                                 robust=all(t["robust"] for t in scales.values()), value=one["value"],
                                 fewest=one["fewest"]))
    return out


def estimate_story(story: stories.Story, estimate: Mapping) -> stories.Story:
    """A lesson's numeric prediction as a story of one claim whose verdicts carry the number over
    the seeds: the metric of run `run` (its `value`), and for a ratio the same metric of run `over`
    (its `ref`). The claim's operator is irrelevant; only the values are read."""
    e = dict(estimate)
    claim = ({"run": e["run"], "metric": e["metric"], "op": ">=", "other": e["over"], "factor": 1.0}
             if "over" in e else {"run": e["run"], "metric": e["metric"], "op": ">=", "value": 0})
    return stories.Story(f"{story.name}#estimate", story.scenario, story.runs, (claim,))


def estimate_fingerprint(story: stories.Story, estimate: Mapping) -> str:
    return fingerprint(stories.Story(story.name, story.scenario, story.runs, (dict(estimate),)))


def band_of(a: stories.Audit, estimate: Mapping) -> dict:
    """The estimate's values over the audit's seeds at the shipped load (×1), seed by seed (a ratio:
    seed i of one run over seed i of the other, the same arrivals), and their min–max: the band a
    prediction is scored against."""
    values = []
    for v in a.tallies[1.0][0].verdicts:
        if "over" in estimate:
            ok = isinstance(v.value, int | float) and isinstance(v.ref, int | float) and v.ref > 0
            values.append(v.value / v.ref if ok else None)
        else:
            values.append(v.value if isinstance(v.value, int | float) else None)
    got = [x for x in values if x is not None]
    return {"estimate": dict(estimate), "fingerprint": estimate_fingerprint(a.story, estimate), "scale": 1.0,
            "seeds": len(values), "values": values, "band": "min-max",
            "min": min(got) if got else None, "max": max(got) if got else None,
            "median": statistics.median(got) if got else None}


def estimate_band(slug: str, estimate: Mapping | None, data: Mapping | None = None) -> dict | None:
    """The band a lesson's numeric prediction is scored against (None when the audit does not hold
    this estimate as written: the lesson changed since, or it has none)."""
    if not estimate:
        return None
    entry = (data if data is not None else read()).get("lessons", {}).get(slug) or {}
    band = entry.get("estimate")
    if not band or band.get("estimate") != dict(estimate) or band.get("min") is None:
        return None
    return band


def curve_story(story: stories.Story, chart: Mapping, curve: Mapping) -> stories.Story:
    """A sweep lesson's curve as a story: one run per point (the sweep chart's run with the knob
    set to the point's value, as the chart's sweep sets it) and one claim per run whose verdicts
    carry the metric over the seeds."""
    from engine.config.scenario import load

    from ..runtime.sweeps import KNOBS

    k = int(chart.get("run", 0))
    label, base = story.runs[k]
    sc = load(story.scenario, base)
    knob = KNOBS[chart["knob"]]
    runs = tuple((f"{chart['knob']}={v:g}", {**base, **knob.overrides(sc, float(v), chart.get("cls"))})
                 for v in curve["at"])
    claims = tuple({"run": i, "metric": curve["metric"], "op": ">=", "value": 0} for i in range(len(runs)))
    return stories.Story(f"{story.name}#curve", story.scenario, runs, claims)


def curve_bands_of(a: stories.Audit, curve: Mapping, knob: str) -> dict:
    """Each point's values over the seeds at ×1 and their min–max (the band a drawn point is scored against)."""
    points = []
    for v, tally in zip(curve["at"], a.tallies[1.0]):
        values = [x.value if isinstance(x.value, int | float) else None for x in tally.verdicts]
        got = [x for x in values if x is not None]
        points.append({"at": v, "values": values, "min": min(got) if got else None,
                       "max": max(got) if got else None, "median": statistics.median(got) if got else None})
    return {"curve": dict(curve), "knob": knob, "fingerprint": fingerprint(a.story), "scale": 1.0, "band": "min-max",
            "seeds": len(a.seeds), "points": points}


def curve_bands(slug: str, curve: Mapping | None, data: Mapping | None = None) -> dict | None:
    """The bands of a lesson's curve as the audit holds them (None if it does not hold this curve)."""
    if not curve:
        return None
    entry = (data if data is not None else read()).get("lessons", {}).get(slug) or {}
    got = entry.get("curve")
    if not got or got.get("curve") != dict(curve) or any(p["min"] is None for p in got["points"]):
        return None
    return got


def write(paths: list[Path], seeds: int = SEEDS, out: Path = FILE) -> dict:
    """Audit the lessons at `paths` and write the file (sorted keys: a diff shows what moved).
    Each lesson's numeric prediction runs in the same audit (identical runs run once)."""
    lessons = [(slug_of(p), stories.of_lesson(p), parse(p).estimate) for p in paths]
    extra = [(i, estimate_story(s, e), e) for i, (_slug, s, e) in enumerate(lessons) if e]
    audits = stories.audit([s for _slug_, s, _e in lessons] + [s for _i, s, _e in extra], seeds, SCALES)
    entries = {slug: summarize(a) for (slug, _s, _e), a in zip(lessons, audits)}
    for (i, _s, e), a in zip(extra, audits[len(lessons):]):
        entries[lessons[i][0]]["estimate"] = band_of(a, e)
    parsed = [parse(p) for p in paths]
    curves = [(i, curve_story(s, parsed[i].chart, parsed[i].curve), parsed[i].curve)
              for i, (_slug, s, _e) in enumerate(lessons) if parsed[i].curve]
    if curves:  # the shipped load only: a point's band is what the page scores
        for (i, _s, c), a in zip(curves, stories.audit([s for _i, s, _c in curves], seeds, (1.0,))):
            entries[lessons[i][0]]["curve"] = curve_bands_of(a, c, parsed[i].chart["knob"])
    data = {"seeds": seeds, "scales": list(SCALES), "command": "python -m ui.teach.lesson_evidence",
            "lessons": entries}
    out.write_text(json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
    return data


def _num(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.3g}" if abs(v) < 100 else f"{v:,.0f}"
    return str(v)


def markdown(data: Mapping) -> str:
    """The README's table of every lesson claim over the audit's seeds: per load scale, the seeds
    it held on and the median of its value (from the file, so the README cannot drift from it)."""
    scales = [f"{x:g}" for x in data["scales"]]
    rows = ["| lesson | claim | " + " | ".join(f"×{x}" for x in scales) + " |",
            "|---|---|" + "---|" * len(scales)]
    order = [slug_of(p) for p in sorted(LESSON_DIR.glob("*.md"))]
    for slug in sorted(data["lessons"], key=lambda x: order.index(x) if x in order else len(order)):
        for c in data["lessons"][slug]["claims"]:
            cells = []
            for x in scales:
                t = c["scales"][x]
                v = t["value"]
                cells.append(f"{t['holds']}/{t['seeds']}" + (f" ({_num(v['median'])})" if v else ""))
            edge = " (edge)" if c["claim"].get("edge") else ""
            rows.append(f"| {slug} | `{c['text']}`{edge} | " + " | ".join(cells) + " |")
    bands = [(slug, data["lessons"][slug].get("estimate")) for slug in
             sorted(data["lessons"], key=lambda x: order.index(x) if x in order else len(order))]
    bands = [(slug, b) for slug, b in bands if b and b.get("min") is not None]
    if bands:
        rows += ["", "| lesson | number to predict | seeds | min | median | max |", "|---|---|---|---|---|---|"]
        for slug, b in bands:
            e = b["estimate"]
            what = f"{e['metric']} (run {e['run'] + 1})" + (f" / (run {e['over'] + 1})" if "over" in e else "")
            rows.append(f"| {slug} | `{what}` | {b['seeds']} | " + " | ".join(
                _num(b[k]) for k in ("min", "median", "max")) + " |")
            curve = data["lessons"][slug].get("curve")
            for pt in (curve or {}).get("points", []):
                if pt.get("min") is not None:
                    rows.append(f"| {slug} | `{curve['curve']['metric']} at {curve['knob']}="
                                f"{pt['at']:g}` (curve) | {curve['seeds']} | "
                                + " | ".join(_num(pt[k]) for k in ("min", "median", "max")) + " |")
    return "\n".join(rows)


def main(argv: list[str]) -> int:
    if argv[:1] == ["--markdown"]:
        print(markdown(read()))
        return 0
    seeds = int(argv[0]) if argv else SEEDS
    data = write(sorted(LESSON_DIR.glob("*.md")), seeds)
    weak = [f"{slug}: {c['text']} at ×{x}: {t['holds']}/{t['seeds']}" for slug, e in data["lessons"].items()
            for c in e["claims"] for x, t in c["scales"].items() if not t["robust"] and not c["claim"].get("edge")]
    print(f"wrote {FILE.name}: {len(data['lessons'])} lessons × {seeds} seeds × {len(SCALES)} load scales")
    for w in weak:
        print("not robust:", w)
    return 1 if weak else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
