"""A scenario's story as checkable claims, and how robust it is across seeds and load.

A shipped scenario teaches one thing (classic-inversion: FCFS and "fill what fits" let short P1
requests in ahead of a waiting P0; the priority policy stops that, and P0 still waits behind the
document that holds the KV). Its `story:` section says so in claims (`engine.sweeps.claims`) over a few
runs of the scenario:

    story:
      runs:                       # overrides on the scenario, like a lesson's runs
        - {label: fcfs, set: {}}
        - {label: priority, set: {scheduler.policy: priority}}
      claims:
        - {run: 0, metric: P0.inversion_s, op: ">", value: 0}
        - {run: 1, metric: P0.inversion_s, op: "==", value: 0}
      edge: ""                    # where the story stands on an edge, in words (the app may show it)

A claim marked `edge: true` is one the story knows not to be robust — it says so in `edge` — and
is reported like the others but not required to be robust; it must still hold on at least half
the seeds at the shipped load (`edge_broken`), or it is no longer the story.

The section belongs to its file: a scenario built on another (`base:`) does not inherit it, and
`engine.config.scenario.load_raw` leaves it out of the scenario itself. A lesson's header (scenario, runs,
claims) is a story too (`of_lesson`).

A story is a conclusion, so it is checked like one (`audit`): every run over N seeds — the
scenario's seed and the next N − 1, never picked — and at every load scale given (every class's
rate × s, a trace packed s times closer: `engine.config.scale`), each claim judged seed by seed (seed i of
one run against seed i of another: the same arrivals). A claim is **robust** at a scale when it
holds on all seeds but at most one in twenty (`required`): 19 of 20, 2 of 3.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config.scale import DEFAULT_SCALES, load_overrides
from ..config.scenario import (
    ScenarioError,
    apply_overrides,
    from_dict,
    load,
    read_yaml,
    resolve_path,
    scenario_names,
    to_dict,
)
from . import claims

STORY_KEY = "story"
MAX_SEEDS = 200
STORY_KEYS = {"runs", "claims", "edge"}


@dataclass(frozen=True)
class Story:
    """Runs of one scenario (label, dotted overrides) and the claims made about them."""

    name: str  # what reports call it: the scenario's name, or the lesson's file name
    scenario: str  # the shipped name or path the runs start from
    runs: tuple[tuple[str, dict], ...]
    claims: tuple[dict, ...]
    edge: str = ""

    @property
    def labels(self) -> list[str]:
        return [label for label, _o in self.runs]


def parse(data: Any, scenario: str, name: str, origin: str) -> Story:
    """A story from its plain data (a scenario's `story:` mapping, or a lesson header's runs and
    claims); ScenarioError naming what is wrong."""
    if not isinstance(data, Mapping):
        raise ScenarioError(f"{origin}: `story` must be a mapping with runs and claims")
    extra = set(data) - STORY_KEYS
    if extra:
        raise ScenarioError(f"{origin}: story: unknown key(s) {', '.join(sorted(map(str, extra)))}")
    runs = data.get("runs")
    if not isinstance(runs, list) or not runs:
        raise ScenarioError(f"{origin}: story.runs must list at least one run {{label, set}}")
    parsed = []
    for k, r in enumerate(runs):
        good = (isinstance(r, Mapping) and not set(r) - {"label", "set"} and isinstance(r.get("label"), str)
                and isinstance(r.get("set") or {}, dict))
        if not good:  # (a label with a comma in a YAML flow mapping needs quotes)
            raise ScenarioError(f"{origin}: story.runs[{k}] must be {{label: text, set: {{dotted.key: value}}}}")
        if any(r["label"] == label for label, _o in parsed):
            raise ScenarioError(f"{origin}: story.runs[{k}]: label {r['label']!r} is used twice")
        parsed.append((r["label"], dict(r.get("set") or {})))
    raw_claims = data.get("claims")
    if not isinstance(raw_claims, list) or not raw_claims:
        raise ScenarioError(f"{origin}: story.claims must list at least one claim")
    try:
        checked = tuple(claims.validate(c, len(parsed), f"{origin}: claim {k + 1}") for k, c in enumerate(raw_claims))
    except claims.ClaimError as err:
        raise ScenarioError(str(err)) from None
    edge = data.get("edge") or ""
    if not isinstance(edge, str):
        raise ScenarioError(f"{origin}: story.edge must be text")
    if any(c.get("edge") for c in checked) and not edge.strip():
        raise ScenarioError(f"{origin}: a claim marked edge: true needs story.edge to say why it is on an edge")
    return Story(name, scenario, tuple(parsed), checked, " ".join(edge.split()))


def of_scenario(name_or_path: str) -> Story | None:
    """The story a scenario file tells (its own `story:` section), or None if it has none."""
    path = resolve_path(name_or_path)
    data = read_yaml(path)
    if STORY_KEY not in data:
        return None
    name = str(data.get("name") or path.stem)
    return parse(data[STORY_KEY], name_or_path, name, path.name)


def of_lesson(path: str | Path) -> Story:
    """A workshop lesson (`lessons/NN-slug.md`) as a story: its scenario, runs and claims."""
    import yaml

    from ..config.safeio import FileRefused, read_bytes
    from ..config.safeyaml import load as yaml_load
    from ..config.scenario import MAX_SCENARIO_BYTES, decode_text

    path = Path(path)
    try:
        text = decode_text(read_bytes(path, MAX_SCENARIO_BYTES), path.name, ScenarioError)
    except (FileRefused, OSError) as err:
        raise ScenarioError(f"cannot read lesson {path.name}: {err}") from None
    try:
        _lead, head, _body = text.split("---", 2)
        h = yaml_load(head)
    except (ValueError, yaml.YAMLError) as err:  # too few --- lines, bad YAML, over the YAML limits
        raise ScenarioError(f"{path.name}: not a lesson (a YAML header between --- lines): {err}") from None
    if not isinstance(h, Mapping) or "scenario" not in h:
        raise ScenarioError(f"{path.name}: a lesson header names its scenario")
    data = {"runs": h.get("runs"), "claims": h.get("claims")}
    if h.get("edge"):
        data["edge"] = h["edge"]
    return parse(data, str(h["scenario"]), path.stem, path.name)


def shipped() -> list[Story]:
    """The stories of the shipped scenarios (in name order); scenarios without one are left out."""
    return [s for s in (of_scenario(n) for n in scenario_names()) if s is not None]


def load_story(name_or_path: str) -> Story:
    """A story by what the CLI is given: a lesson file (`.md`) or a scenario (name or YAML path)."""
    if str(name_or_path).endswith(".md"):
        return of_lesson(name_or_path)
    story = of_scenario(name_or_path)
    if story is None:
        raise ScenarioError(f"scenario {name_or_path!r} has no `story:` section")
    return story


def required(n: int) -> int:
    """The seeds (of n) a robust claim holds on: all but one in twenty (19 of 20, 38 of 40), and
    all but one of a few (2 of 3); one seed of one."""
    return max(1, n - max(1, n // 20))


def seeds_of(story: Story, n: int) -> list[int]:
    """The scenario's own seed and the next n − 1 (the same seeds every time: never picked)."""
    base = load(story.scenario).seed
    return [base + k for k in range(n)]


def scenario_key(story: Story, run: int, seed: int, scale: float) -> str:
    """The canonical scenario of one run of the story at a seed and a load scale."""
    sc = load(story.scenario, {**story.runs[run][1], "seed": seed})
    if scale != 1.0:
        sc = from_dict(apply_overrides(to_dict(sc), load_overrides(sc, scale)))
    return sc.key()


def measure_batch(items: list[str]) -> list[dict]:
    """The worker task: `{"key": scenario JSON, "metrics": [...]}` → `claims.measure` of its run
    (or `{"error": message}` if the engine refuses it)."""
    from ..config.traces import TraceError
    from .sweep_exec import _simulate

    out = []
    for item in items:
        job = json.loads(item)
        try:
            _sc, res = _simulate(job["key"])
            out.append(claims.measure(res, job["metrics"]))
        except (ScenarioError, TraceError, claims.ClaimError) as err:
            out.append({"error": str(err)})
    return out


@dataclass
class Tally:
    """One claim at one load scale over the seeds: the verdict and the requests behind each side,
    seed by seed (seed order)."""

    verdicts: list[claims.Verdict] = field(default_factory=list)
    support: list[tuple[int | None, int | None]] = field(default_factory=list)  # (value side, ref side)

    @property
    def k(self) -> int:
        return sum(v.ok for v in self.verdicts)

    @property
    def n(self) -> int:
        return len(self.verdicts)

    @property
    def robust(self) -> bool:
        return self.k >= required(self.n)

    def __str__(self) -> str:
        return f"holds on {self.k} of {self.n} seeds"


@dataclass
class Audit:
    """A story over seeds × scales: `tallies[scale][claim]`."""

    story: Story
    seeds: list[int]
    scales: list[float]
    tallies: dict[float, list[Tally]]

    @property
    def robust(self) -> bool:
        return not self.weak() and not self.edge_broken()

    def weak(self) -> list[tuple[int, float, Tally]]:
        """(claim index, scale, tally) of every claim not marked `edge` that is not robust at a scale."""
        return [(i, s, t) for s, per in self.tallies.items() for i, t in enumerate(per)
                if not t.robust and not self.story.claims[i].get("edge")]

    def edge_broken(self) -> list[tuple[int, float, Tally]]:
        """Claims marked `edge` that hold on fewer than half the seeds at the shipped load (×1)."""
        per = self.tallies.get(1.0, [])
        return [(i, 1.0, t) for i, t in enumerate(per) if self.story.claims[i].get("edge") and 2 * t.k < t.n]


def run_keys(story: Story, seed_list: Sequence[int], scales: Sequence[float]
             ) -> tuple[dict[tuple[int, int, float], str], list[list[str]]]:
    """The scenario key of every run the claims read, by (run, seed, scale), and each run's
    metrics (`claims.needs`): what `audit` runs, and what the app asks its pool for."""
    per_run = claims.needs(story.claims, len(story.runs))
    keys = {(run, seed, s): scenario_key(story, run, seed, s)
            for run in range(len(story.runs)) if per_run[run] for seed in seed_list for s in scales}
    return keys, per_run


def job(key: str, metrics: Sequence[str]) -> str:
    """One item of `measure_batch`: a run's scenario key and the metrics to measure in it."""
    return json.dumps({"key": key, "metrics": list(metrics)})


def audit(stories: Sequence[Story], seeds: int, scales: Sequence[float] = DEFAULT_SCALES, *,
          workers: int | None = None, backend=None, progress: Callable[[int], None] | None = None
          ) -> list[Audit]:
    """Run every story's runs over `seeds` seeds at every scale (in a process pool: identical runs
    across stories run once) and judge every claim seed by seed."""
    from .sweep_runner import OwnBackend, run_batches

    if not 1 <= seeds <= MAX_SEEDS:
        raise ScenarioError(f"--seeds {seeds}: expected 1..{MAX_SEEDS}")
    if not scales or any(not 0 < s <= 100 for s in scales):
        raise ScenarioError("load scales must be numbers in (0, 100]")
    plan = []  # (story index, seed list, {(run, seed, scale): key})
    wanted: dict[str, list[str]] = {}
    for i, story in enumerate(stories):
        seed_list = seeds_of(story, seeds)
        keys, per_run = run_keys(story, seed_list, scales)
        for (run, _seed, _s), key in keys.items():
            have = wanted.setdefault(key, [])
            have.extend(m for m in per_run[run] if m not in have)
        plan.append((i, seed_list, keys))
    items = [job(k, m) for k, m in wanted.items()]
    if progress is not None and hasattr(progress, "grow"):  # a bar: its total is the distinct runs
        progress.grow(len(items))
    measured: dict[str, dict] = {}

    def on_batch(batch: list[str], results: list[dict]) -> None:
        for item, res in zip(batch, results):
            if "error" in res:
                raise ScenarioError(res["error"])
            measured[json.loads(item)["key"]] = res
        if progress:
            progress(len(batch))

    with OwnBackend(backend, workers) as b:
        run_batches(items, b, on_batch, task=measure_batch)
    return [judge(stories[i], seed_list, scales, keys, measured) for i, seed_list, keys in plan]


def judge(story: Story, seed_list: Sequence[int], scales: Sequence[float],
          keys: Mapping[tuple[int, int, float], str], measured: Mapping[str, dict]) -> Audit:
    """Judge every claim seed by seed from measured runs (`measure_batch` results by scenario key).
    A seed whose runs at a scale have not all been measured yet is left out of that scale's
    tallies (the app judges while its runs come in); `audit` passes them all."""
    tallies: dict[float, list[Tally]] = {}
    for s in scales:
        per = [Tally() for _ in story.claims]
        for seed in seed_list:
            mine = [keys[r, seed, s] for r in range(len(story.runs)) if (r, seed, s) in keys]
            if any(k not in measured for k in mine):
                continue
            runs = [measured[keys[r, seed, s]] if (r, seed, s) in keys else {"values": {}, "support": {}}
                    for r in range(len(story.runs))]
            for c, tally in zip(story.claims, per):
                tally.verdicts.append(claims.compare(c, [r["values"] for r in runs]))
                other = runs[c["other"]]["support"].get(c["metric"]) if "other" in c else None
                tally.support.append((runs[c["run"]]["support"].get(c["metric"]), other))
        tallies[s] = per
    return Audit(story, list(seed_list), list(scales), tallies)


# ---------------------------------------------------------------------------------------------
# Reports


def _num(v: Any) -> str:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return str(v)
    if v == 0:
        return "0"
    return f"{v:.3g}" if abs(v) < 100 else f"{v:,.0f}"


def spread(values: Sequence[Any]) -> str:
    """`median [min–max]` of numbers (missing ones counted apart); counts of each value otherwise."""
    nums = [v for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
    missing = sum(v is None for v in values)
    if nums and len(nums) + missing == len(values):
        text = f"{_num(statistics.median(nums))} [{_num(min(nums))}–{_num(max(nums))}]"
    else:
        counts: dict[str, int] = {}
        for v in values:
            if v is not None:
                counts[str(v)] = counts.get(str(v), 0) + 1
        text = ", ".join(f"{k} ×{n}" for k, n in sorted(counts.items(), key=lambda kv: -kv[1]))
    return text + (f" ({missing} none)" if missing else "")


def _n_range(ns: Sequence[int | None]) -> str:
    got = [n for n in ns if n is not None]
    if not got:
        return ""
    return f"n {min(got)}" if min(got) == max(got) else f"n {min(got)}–{max(got)}"


def tally_text(claim: Mapping, t: Tally) -> str:
    """`19/20  5.78 [3.1–19.8] vs 4.62 [...]  n 28–45 / 28–45` for one claim at one scale."""
    vals = spread([v.value for v in t.verdicts])
    parts = [f"{t.k}/{t.n}", vals]
    if "other" in claim:
        parts.append(f"vs {spread([v.ref for v in t.verdicts])}")
    else:
        parts.append(f"vs {_num(claim['value'])}")
    n_val, n_ref = _n_range([s[0] for s in t.support]), _n_range([s[1] for s in t.support])
    if n_val or n_ref:
        parts.append(" / ".join(x for x in (n_val, n_ref) if x))
    return "  ".join(parts)


def format_audit(a: Audit) -> str:
    """The audit as text: per claim, one line per scale with k/N, the values and the requests."""
    s = a.story
    lines = [f"{s.name} — {len(a.seeds)} seeds ({a.seeds[0]}–{a.seeds[-1]}) × load "
             + ", ".join(f"×{x:g}" for x in a.scales) + f"; robust: holds on ≥ {required(len(a.seeds))} "
             f"of {len(a.seeds)} seeds at every scale"]
    lines.append("  runs: " + "; ".join(f"[{label}] {_overrides(o)}" for label, o in s.runs))
    if s.edge:
        lines.append(f"  edge: {s.edge}")
    for i, c in enumerate(s.claims):
        ok = all(a.tallies[x][i].robust for x in a.scales)
        mark = "✓" if ok else "~" if c.get("edge") else "✗"
        lines.append(f"  {mark} {claims.describe(c, s.labels)}{'  (on an edge: see above)' if c.get('edge') else ''}")
        for x in a.scales:
            t = a.tallies[x][i]
            lines.append(f"      ×{x:<4g} {tally_text(c, t)}{'' if t.robust else '   ← not robust'}")
    return "\n".join(lines)


def _overrides(o: Mapping) -> str:
    return ", ".join(f"{k}={json.dumps(v)}" for k, v in o.items()) or "(as shipped)"


def markdown(audits: Sequence[Audit]) -> str:
    """One table row per claim: the story, the claim, and per scale `k/N` with the median value."""
    scales = audits[0].scales if audits else []
    head = "| story | claim | " + " | ".join(f"×{x:g}" for x in scales) + " |"
    rows = [head, "|" + "---|" * (2 + len(scales))]
    for a in audits:
        for i, c in enumerate(a.story.claims):
            cells = []
            for x in scales:
                t = a.tallies[x][i]
                mark = "" if t.robust else " ~" if c.get("edge") else " ✗"
                cells.append(f"{t.k}/{t.n}{mark} ({spread([v.value for v in t.verdicts]).split(' [')[0]})")
            text = claims.describe(c, a.story.labels).replace("|", "\\|")
            edge = " (edge)" if c.get("edge") else ""
            rows.append(f"| {a.story.name} | `{text}`{edge} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def to_json(a: Audit) -> dict:
    """The audit as plain data (`--json`)."""
    return {
        "story": a.story.name, "scenario": a.story.scenario, "seeds": a.seeds, "scales": a.scales,
        "required": required(len(a.seeds)), "robust": a.robust, "edge": a.story.edge,
        "runs": [{"label": label, "set": o} for label, o in a.story.runs],
        "claims": [{
            "claim": c, "text": claims.describe(c, a.story.labels),
            "scales": {f"{x:g}": {
                "holds": a.tallies[x][i].k, "seeds": a.tallies[x][i].n, "robust": a.tallies[x][i].robust,
                "ok": [v.ok for v in a.tallies[x][i].verdicts],
                "values": [v.value for v in a.tallies[x][i].verdicts],
                "refs": [v.ref for v in a.tallies[x][i].verdicts],
                "support": [list(s) for s in a.tallies[x][i].support],
            } for x in a.scales},
        } for i, c in enumerate(a.story.claims)],
    }
