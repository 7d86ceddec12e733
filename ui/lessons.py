"""Workshop lessons: `lessons/NN-*.md` files with a YAML header (scenario, runs, question, claims).

The header is the lesson's contract: which scenario + overrides to run, the question and its
answer, and machine-checkable claims (tests run them against the engine, so a narrative cannot
drift from what the simulator actually does). Pure: no streamlit import.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import yaml

from engine import Result, ScenarioError
from engine.scenario import Scenario, load, load_raw

from . import codec
from .text import percent, seconds, top_holder_classes

LESSON_DIR = Path(__file__).resolve().parent.parent / "lessons"
OPS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq}


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

    def scenarios(self) -> list[Scenario]:
        return [load(self.scenario, o) for _, o in self.runs]

    def load_values(self) -> dict:
        """Sidebar values (short names) that reproduce the lesson's last run."""
        c = codec.Codec(load_raw(self.scenario))
        return c.changed(c.values_from_scenario(self.scenarios()[-1]))


def parse(path: Path) -> Lesson:
    text = path.read_text(encoding="utf-8")
    _, head, body = text.split("---", 2)
    h = yaml.safe_load(head)
    return Lesson(
        slug=path.stem, title=h["title"], scenario=h["scenario"],
        runs=tuple((r["label"], dict(r.get("set") or {})) for r in h["runs"]),
        question=h["question"], options=tuple(h["options"]), answer=int(h["answer"]),
        claims=tuple(h.get("claims") or ()), reveal=" ".join(str(h["reveal"]).split()), body=body.strip(),
    )


def all_lessons(folder: Path = LESSON_DIR) -> list[Lesson]:
    return [parse(p) for p in sorted(folder.glob("*.md"))]


def metric(res: Result, name: str):
    """`P0.ttft_p99` (class metric), `throughput_tok_s` (summary) or `top_holder` (top class)."""
    s = res.summary
    if name == "top_holder":
        top = next(iter(s["classes"].values()))
        holders = top_holder_classes(res.waits, res.holders, top["priority"])
        return holders[0][0] if holders else None
    if "." in name:
        cls, key = name.split(".", 1)
        return s["classes"][cls][key]
    return s[name]


def check(claim: dict, results: list[Result]) -> tuple[bool, str]:
    """(holds, sentence) for one claim against the lesson's results."""
    v = metric(results[claim["run"]], claim["metric"])
    if "other" in claim:
        ref = metric(results[claim["other"]], claim["metric"]) * claim.get("factor", 1.0)
    else:
        ref = claim["value"]
    ok = v is not None and OPS[claim["op"]](v, ref)
    return ok, f"{claim['metric']} of run {claim['run'] + 1} = {_fmt(v)} {claim['op']} {_fmt(ref)}"


def _fmt(v) -> str:
    return f"{v:.3g}" if isinstance(v, float) else str(v)


def reveal_table(lesson: Lesson, results: list[Result]) -> pd.DataFrame:
    """The numbers the reveal shows: one column per run."""
    cols = {}
    for (label, _), res in zip(lesson.runs, results):
        s = res.summary
        top, c = next(iter(s["classes"].items()))
        low, d = list(s["classes"].items())[-1]
        cols[label] = {
            f"{top} P99 TTFT": seconds(c["ttft_p99"]),
            f"{top} SLO met": percent(c["slo_attainment"]),
            f"{top} inversion time": f"{c['inversion_s']:.1f} s",
            f"{top} blocked time": f"{c['blocked_s']:.1f} s",
            f"{low} P99 TTFT": seconds(d["ttft_p99"]),
            "Throughput": f"{s['throughput_tok_s']:,.0f} tok/s",
            "Alerts": f"{s['alerts']}",
            "Main KV holder when it waits": str(metric(res, "top_holder") or "–"),
        }
    return pd.DataFrame(cols)


def safe_lessons() -> tuple[list[Lesson], list[str]]:
    """All lessons that parse and load, plus one message per broken file."""
    good, bad = [], []
    for p in sorted(LESSON_DIR.glob("*.md")):
        try:
            lesson = parse(p)
            lesson.scenarios()
            good.append(lesson)
        except (ScenarioError, KeyError, ValueError, yaml.YAMLError) as err:
            bad.append(f"{p.name}: {err}")
    return good, bad


def stamp(folder: Path = LESSON_DIR) -> tuple:
    """(name, modification time) of every lesson file: a cache key that changes with the files."""
    return tuple((p.name, p.stat().st_mtime_ns) for p in sorted(folder.glob("*.md")))
