"""Workshop lessons: `lessons/NN-slug.md` files with a YAML header, and the claims they make.

The header is the lesson's contract: which scenario + overrides to run, the time box and goal,
the question and its answer, machine-checkable claims (tests run them against the engine, so a
narrative cannot drift from what the simulator actually does), the chart, the discussion
prompts. `NN` orders the lessons; the slug (the name after it) is what a link carries, so the
order can change without breaking links. Pure: no streamlit import.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path

import pandas as pd
import yaml

from engine import Result, ScenarioError
from engine.config.scenario import Scenario, load, load_raw
from engine.sweeps import claims

from ..frame import codec
from ..frame.i18n import N_, _, folded, translate_markdown
from ..panels.text import percent, seconds
from ..panels.vocab import look

LESSON_DIR = Path(__file__).resolve().parents[2] / "lessons"
OPS = claims.OPS
CHARTS = ("timeline", "bars", "sweep", "dashboard", "step", "wait")
_PREFIX = re.compile(r"^\d+-")
# a number in a reveal, filled from the runs: {P0.ttft_p99@2} (run 2's value), {P0.ttft_p99@2/1} (run 2's ÷ run 1's)
SLOT = re.compile(r"\{([A-Za-z_][\w.]*)@(\d+)(?:/(\d+))?\}")


@dataclass(frozen=True)
class Lesson:
    slug: str
    title: str
    scenario: str
    runs: tuple[tuple[str, dict], ...]
    question: str
    options: tuple[str, ...]
    answer: int
    claims: tuple[dict, ...]
    reveal: str
    body: str
    minutes: int = 5
    goal: str = ""
    prompts: tuple[str, ...] = ()
    chart: dict = field(default_factory=lambda: {"kind": "bars"})
    show: tuple[str, ...] = ()
    article: dict | None = None  # {metric, runs: [a, b], says}: the article's illustrative number
    sizing: bool = False  # offer the reserve-sizing aid
    edge: str = ""  # why a claim marked `edge: true` is on an edge (engine.sweeps.story)
    estimate: dict | None = None  # {run, metric[, over]}: the number to predict before the reveal (ui.teach.estimate)
    curve: dict | None = None  # {metric, at: [knob values]}: "draw your curve" on a sweep chart (ui.teach.estimate)

    def scenarios(self) -> list[Scenario]:
        return [load(self.scenario, o) for _label, o in self.runs]

    def load_values(self) -> dict:
        """Sidebar values (short names) that reproduce the lesson's last run."""
        c = codec.Codec(load_raw(self.scenario))
        return c.changed(c.values_from_scenario(self.scenarios()[-1]))


def slug_of(path: Path) -> str:
    return _PREFIX.sub("", path.stem)


def parse(path: Path) -> Lesson:
    text = path.read_text(encoding="utf-8")
    _lead, head, body = text.split("---", 2)
    h = yaml.safe_load(head)
    chart = dict(h.get("chart") or {"kind": "bars"})
    if chart.get("kind") not in CHARTS:
        raise ValueError(f"chart kind must be one of {', '.join(CHARTS)}")
    lesson = Lesson(
        slug=slug_of(path), title=h["title"], scenario=h["scenario"],
        runs=tuple((r["label"], dict(r.get("set") or {})) for r in h["runs"]),
        question=h["question"], options=tuple(h["options"]), answer=int(h["answer"]),
        claims=tuple(h.get("claims") or ()), reveal=folded(h["reveal"]), body=body.strip(),
        minutes=int(h.get("minutes", 5)), goal=folded(h.get("goal", "")),
        prompts=tuple(folded(p) for p in h.get("prompts") or ()), chart=chart,
        show=tuple(h.get("show") or ()), article=h.get("article"), sizing=bool(h.get("sizing", False)),
        edge=folded(h.get("edge", "")), estimate=_estimate(h.get("estimate"), len(h["runs"])),
        curve=_curve(h.get("curve"), chart),
    )
    for key in ("run", "pick"):
        if key in chart and not (isinstance(chart[key], int) and 0 <= chart[key] < len(lesson.runs)):
            raise ValueError(f"chart: {key} = {chart[key]!r} is not a run (0..{len(lesson.runs) - 1})")
    if "runs" in chart and not (isinstance(chart["runs"], list) and chart["runs"] and all(
            isinstance(k, int) and 0 <= k < len(lesson.runs) for k in chart["runs"])):
        raise ValueError(f"chart: runs = {chart['runs']!r} must list runs of the lesson (0..{len(lesson.runs) - 1})")
    if not 0 <= lesson.answer < len(lesson.options):
        raise ValueError("answer is not one of the options")
    for k, claim in enumerate(lesson.claims):
        claims.validate(claim, len(lesson.runs), f"claim {k + 1}")
    for m in SLOT.finditer(lesson.reveal):
        if any(r is not None and not 1 <= int(r) <= len(lesson.runs) for r in m.groups()[1:]):
            raise ValueError(f"reveal: {m.group(0)} names a run the lesson does not have (1..{len(lesson.runs)})")
    return lesson


ESTIMATE_KEYS = {"run", "metric", "over"}


def _estimate(raw, n_runs: int) -> dict | None:
    """The lesson's numeric prediction as written (`{run, metric}` or `{run, metric, over}` for a
    ratio of run `run` to run `over`), or ValueError naming what is wrong."""
    if raw is None:
        return None
    if not isinstance(raw, dict) or set(raw) - ESTIMATE_KEYS or not {"run", "metric"} <= set(raw):
        raise ValueError("estimate must be {run, metric} or {run, metric, over}")
    if not isinstance(raw["metric"], str) or not raw["metric"]:
        raise ValueError("estimate: metric must be a name such as P0.ttft_p99")
    for key in ("run", "over"):
        if key in raw and not (isinstance(raw[key], int) and 0 <= raw[key] < n_runs):
            raise ValueError(f"estimate: {key} = {raw[key]!r} is not a run (0..{n_runs - 1})")
    if raw.get("over") == raw["run"]:
        raise ValueError("estimate: a ratio needs two different runs")
    return dict(raw)


def _curve(raw, chart: dict) -> dict | None:
    """A sweep lesson's curve to draw: a class's P99 TTFT at a few of the sweep's values, or ValueError."""
    if raw is None:
        return None
    if chart.get("kind") != "sweep":
        raise ValueError("curve: only a lesson with a sweep chart draws a curve")
    if not isinstance(raw, dict) or set(raw) != {"metric", "at"}:
        raise ValueError("curve must be {metric, at: [values of the sweep]}")
    if not isinstance(raw["metric"], str) or not raw["metric"].endswith(".ttft_p99"):
        raise ValueError("curve: metric is a class's P99 TTFT (P0.ttft_p99)")
    at = raw["at"]
    if not isinstance(at, list) or not 2 <= len(at) <= 6 or any(v not in chart.get("values", []) for v in at):
        raise ValueError("curve: at lists 2 to 6 of the sweep chart's values")
    return {"metric": raw["metric"], "at": list(at)}


def localized(lesson: Lesson) -> Lesson:
    """The lesson's text in the current language (numbers, runs and claims unchanged)."""
    article = dict(lesson.article, says=_(lesson.article["says"])) if lesson.article else None
    return replace(
        lesson, title=_(lesson.title), question=_(lesson.question), options=tuple(_(o) for o in lesson.options),
        reveal=_(lesson.reveal), body=translate_markdown(lesson.body), goal=_(lesson.goal),
        prompts=tuple(_(p) for p in lesson.prompts), runs=tuple((_(label), o) for label, o in lesson.runs),
        article=article, edge=_(lesson.edge) if lesson.edge else "")


def all_lessons(folder: Path = LESSON_DIR) -> list[Lesson]:
    return [parse(p) for p in sorted(folder.glob("*.md"))]


metric = claims.metric  # the claim language is the engine's (engine.sweeps.claims): lessons and stories share it


def fill(text: str, results: list[Result]) -> str:
    """The reveal with its numbers taken from the runs shown beside it, so the words and the chart
    cannot disagree: `{P0.ttft_p99@2}` is run 2's value formatted as the reveal table does,
    `{P0.ttft_p99@2/1}` run 2's value over run 1's (`×2.9`). A number missing from a run (a class
    with no requests) reads "–"."""
    def one(m: re.Match) -> str:
        name, run, over = m.group(1), int(m.group(2)) - 1, m.group(3)
        v = metric(results[run], name)
        if over is None:
            return fmt_metric(name, v)
        ref = metric(results[int(over) - 1], name)
        if not isinstance(v, int | float) or not isinstance(ref, int | float) or ref == 0:
            return "–"
        r = v / ref
        return f"×{r:.2g}" if r < 10 else f"×{r:,.0f}"

    return SLOT.sub(one, text)


FIELD_LABELS = {  # a class's summary field, in words (`P0.ttft_p99` → "P0 P99 TTFT")
    "ttft_p99": N_("{cls} P99 TTFT"), "ttft_p50": N_("{cls} median TTFT"), "e2e_p99": N_("{cls} P99 end to end"),
    "tpot_p50": N_("{cls} median TPOT"), "tpot_p99": N_("{cls} P99 TPOT"), "slo_attainment": N_("{cls} SLO met"),
    "inversion_s": N_("{cls} inversion time"), "blocked_s": N_("{cls} blocked time"),
    "cache_hit_rate": N_("{cls} cache hit rate"),
}
OP_WORDS = {"<": N_("below"), "<=": N_("at most"), ">": N_("above"), ">=": N_("at least"), "==": N_("equal to")}


def check(claim: dict, results: list[Result], labels: list[str] | None = None) -> tuple[bool, str]:
    """(holds, sentence) for one claim against the lesson's results, in words: "P0 P99 TTFT in
    fill what fits: 17.2 s — at least 2 × vLLM priority's (5.78 s)"."""
    verdict = claims.check(claim, results)
    names = labels or [_("run {n}").format(n=k + 1) for k in range(len(results))]
    name = claim["metric"]
    if "other" in claim:
        factor = claim.get("factor", 1.0)
        rhs = _("{op} {factor}{other}’s ({value})").format(
            op=_(OP_WORDS[claim["op"]]), factor="" if factor == 1 else f"{factor:g} × ",
            other=names[claim["other"]], value=fmt_metric(name, verdict.ref))
    else:
        rhs = f"{_(OP_WORDS[claim['op']])} {fmt_metric(name, verdict.ref)}"
    return verdict.ok, _("{metric} in {run}: {value} — {rhs}").format(
        metric=metric_label(name), run=names[claim["run"]], value=fmt_metric(name, verdict.value), rhs=rhs)


METRIC_LABELS = {  # extra reveal rows a lesson may ask for (`show:`); formats below
    "overtaken_later": N_("Lower-priority admissions ahead of a waiting P0 that arrived after it"),
    "wrong_holder_share": N_("P0 KV-wait time that ended while its biggest holder still ran"),
    "dash.gpu_busy": N_("Dashboard: GPU busy"),
    "dash.kv_use": N_("Dashboard: KV use (mean)"),
    "dash.waiting_mean": N_("Dashboard: requests waiting (mean)"),
    "dash.waiting_peak": N_("Dashboard: requests waiting (highest 15-s mean)"),
    "dash.throughput": N_("Dashboard: throughput (tok/s)"),
    "batch_fill": N_("Batch fill"),
    "reserve_idle_token_frac": N_("Idle reserve (share of the budget)"),
    "replica0.kv_use": N_("Replica 0: KV use (mean)"),
    "replica1.kv_use": N_("Replica 1: KV use (mean)"),
    "P2.e2e_p99": N_("P2 P99 end to end"),
    "wait_s.kv_short": N_("P0 time waiting for KV blocks"),
    "wait_share.kv_short": N_("Share of P0's wait short of KV blocks"),
    "wait_share.token_budget": N_("Share of P0's wait for the step's token budget"),
}
_SHARE = {"wrong_holder_share", "dash.gpu_busy", "dash.kv_use", "batch_fill", "reserve_idle_token_frac",
          "replica0.kv_use", "replica1.kv_use"}


def metric_label(name: str) -> str:
    if name in METRIC_LABELS:
        return _(METRIC_LABELS[name])
    head, _dot, tail = name.partition(".")
    if tail in FIELD_LABELS:
        return _(FIELD_LABELS[tail]).format(cls=head)
    return {"alerts": _("Alerts"), "top_holder": _("Main KV holder when it waits"), "top_reason": _("Main wait reason"),
            "served_tok_s": _("Served rate")}.get(name, name)


def fmt_metric(name: str, v) -> str:
    if v is None:
        return "–"
    if name in _SHARE or name.endswith((".slo_attainment", "kv_use", "_share")) or name.startswith("wait_share."):
        return f"{v:.1%}" if name == "reserve_idle_token_frac" else percent(v)
    if name.endswith("throughput") or name == "served_tok_s":
        return f"{v:,.0f} tok/s"
    if name.endswith(("_p99", "_p50", "_s")) or name.startswith("wait_s."):
        return seconds(v)
    if name == "top_reason":
        return look(v).short
    if isinstance(v, float):
        return f"{v:,.1f}"
    return f"{v:,}" if isinstance(v, int) else str(v)


def reveal_table(lesson: Lesson, results: list[Result]) -> pd.DataFrame:
    """The numbers the reveal shows: one column per run (labels as given), one row per number."""
    cols = {}
    for (label, _o), res in zip(lesson.runs, results):
        s = res.summary
        top, c = next(iter(s["classes"].items()))
        col = {}
        for name, k in s["classes"].items():
            col[_("{cls} P99 TTFT").format(cls=name)] = seconds(k["ttft_p99"])
        col[_("{cls} SLO met").format(cls=top)] = percent(c["slo_attainment"])
        col[_("{cls} inversion time").format(cls=top)] = f"{c['inversion_s']:.1f} s"
        col[_("{cls} blocked time").format(cls=top)] = f"{c['blocked_s']:.1f} s"
        col[_("Served rate")] = f"{s['served_tok_s']:,.0f} tok/s"
        col[_("GPUs")] = f"{s.get('gpus', 1)}"
        col[_("Alerts")] = f"{s['alerts']}"
        col[_("Main KV holder when it waits")] = str(metric(res, "top_holder") or "–")
        for name in lesson.show:
            col[metric_label(name)] = fmt_metric(name, metric(res, name))
        cols[label] = col
    return pd.DataFrame(cols)


def safe_lessons() -> tuple[list[Lesson], list[str]]:
    """All lessons that parse and load, plus one message per broken file."""
    good, bad = [], []
    for p in sorted(LESSON_DIR.glob("*.md")):
        try:
            lesson = parse(p)
            lesson.scenarios()
            good.append(lesson)
        except (ScenarioError, KeyError, ValueError, TypeError, yaml.YAMLError) as err:
            bad.append(f"{p.name}: {err}")
    return good, bad


def stamp(folder: Path = LESSON_DIR) -> tuple:
    """(name, modification time) of every lesson file: a cache key that changes with the files."""
    return tuple((p.name, p.stat().st_mtime_ns) for p in sorted(folder.glob("*.md")))


def total_minutes(items: list[Lesson], recap: int = 0) -> int:
    return sum(lesson.minutes for lesson in items) + recap
