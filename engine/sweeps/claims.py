"""The claim language: what a lesson or a scenario's story says about its runs, checkable.

A claim is a mapping `{run, metric, op, value}` or `{run, metric, op, other, factor}`: the metric
of run `run` compared with a constant, or with `factor` × the same metric of run `other` (runs
are indices into the lesson's or the story's list of runs). `edge: true` marks a claim its story
knows to be on an edge (`engine.sweeps.story`). Lessons (`lessons/*.md`) and stories
(`story:` in a scenario's YAML, `engine.sweeps.story`) write them the same way, so one checker serves
the Workshop page, the tests and `python -m engine story`.

Metric names: `P0.ttft_p99` (a class's summary field), `served_tok_s` (a run's summary
field), `top_holder` (the class of the biggest KV holder the top class waited on, by wait time)
or a number derived from the result frames (`engine.sim.derived.metric`: `dash.kv_use`,
`overtaken_later`, `wrong_holder_share`, `replica0.kv_use`). Checking is split in two —
`measure` (a Result → the values a run's claims need, in a worker process) and `compare` (values
→ verdict) — so many runs can be measured in parallel and judged in one place.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..sim import derived
from ..sim.metrics import logical_requests
from ..sim.result import Result

OPS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq}
# a class's percentile fields and the per-request column each is taken over (for `support`)
PERCENTILE_COLUMNS = {"ttft": "ttft_s", "tpot": "tpot_s", "e2e": "e2e_s", "queue_wait": "queue_wait_s",
                      "blocked": "blocked_s"}
KEYS = {"run", "metric", "op", "value", "other", "factor", "edge"}


class ClaimError(ValueError):
    """A claim that cannot be checked as written (unknown run, operator, missing operand)."""


def validate(claim: Any, n_runs: int, where: str = "claim") -> dict:
    """The claim as a plain dict, or ClaimError naming what is wrong with it."""
    if not isinstance(claim, Mapping):
        raise ClaimError(f"{where}: a claim is a mapping {{run, metric, op, value | other}}")
    extra = set(claim) - KEYS
    if extra:
        raise ClaimError(f"{where}: unknown key(s) {', '.join(sorted(map(str, extra)))}")
    for key in ("run", "metric", "op"):
        if key not in claim:
            raise ClaimError(f"{where}: `{key}` is missing")
    if claim["op"] not in OPS:
        raise ClaimError(f"{where}: op {claim['op']!r} is not one of {' '.join(OPS)}")
    if not isinstance(claim["metric"], str) or not claim["metric"]:
        raise ClaimError(f"{where}: metric must be a name such as P0.ttft_p99")
    if ("other" in claim) == ("value" in claim):
        raise ClaimError(f"{where}: give exactly one of `value` (a constant) or `other` (a run)")
    for key in ("run", "other"):
        if key in claim and not (isinstance(claim[key], int) and 0 <= claim[key] < n_runs):
            raise ClaimError(f"{where}: {key} = {claim[key]!r} is not a run (0..{n_runs - 1})")
    if "factor" in claim and ("other" not in claim or not isinstance(claim["factor"], int | float)):
        raise ClaimError(f"{where}: `factor` is a number, and only with `other`")
    if "edge" in claim and not isinstance(claim["edge"], bool):
        raise ClaimError(f"{where}: `edge` is true or false")
    return dict(claim)


def metric(res: Result, name: str):
    """The value of metric `name` in a run (see the module docstring); KeyError if unknown."""
    s = res.summary
    if name == "top_holder":
        top = next(iter(s["classes"].values()))
        holders = derived.top_holder_classes(res.waits, res.holders, top["priority"])
        return holders[0][0] if holders else None
    head = name.split(".", 1)[0]
    if head in s["classes"]:
        return s["classes"][head][name.split(".", 1)[1]]
    if name in s:
        return s[name]
    return derived.metric(res, name)


def support(res: Result, name: str) -> int | None:
    """How many requests stand behind a class percentile (`P0.ttft_p99`: the class's measured
    requests that have a TTFT); None for any other metric."""
    head, _, field = name.partition(".")
    stat, _, q = field.rpartition("_")
    if head not in res.summary["classes"] or stat not in PERCENTILE_COLUMNS or not q.startswith("p"):
        return None
    req = logical_requests(res.requests)
    rows = req[(req["class"] == head) & req["measured"]]
    return int(np.isfinite(rows[PERCENTILE_COLUMNS[stat]].to_numpy(float)).sum())


def needs(claims: Sequence[Mapping], n_runs: int) -> list[list[str]]:
    """For each run, the metric names its claims read (either side of a comparison)."""
    out: list[list[str]] = [[] for _ in range(n_runs)]
    for c in claims:
        for run in (c["run"], c.get("other")):
            if run is not None and c["metric"] not in out[run]:
                out[run].append(c["metric"])
    return out


def measure(res: Result, names: Sequence[str]) -> dict:
    """`{"values": {name: value}, "support": {name: n}}` for one run (support: percentiles only)."""
    values = {}
    for n in names:
        try:
            values[n] = _plain(metric(res, n))
        except KeyError:
            raise ClaimError(f"unknown metric {n!r}: a class field (P0.ttft_p99), a run field "
                             "(served_tok_s) or a derived number (engine.sim.derived.metric)") from None
    return {"values": values, "support": {n: k for n in names if (k := support(res, n)) is not None}}


def _plain(v):
    """numpy scalars as Python numbers (the value crosses processes and becomes JSON)."""
    return v.item() if isinstance(v, np.generic) else v


@dataclass(frozen=True)
class Verdict:
    """One claim against one set of runs: whether it holds, the metric's value (`value`) and what
    it was compared with (`ref`: the constant, or factor × the other run's value)."""

    ok: bool
    value: Any
    ref: Any


def compare(claim: Mapping, values: Sequence[Mapping[str, Any]]) -> Verdict:
    """Judge a claim from each run's metric values (`values[run][metric]`). A missing value (a
    class with no requests, no KV wait) makes the claim fail: nothing was shown."""
    v = values[claim["run"]].get(claim["metric"])
    if "other" in claim:
        other = values[claim["other"]].get(claim["metric"])
        ref = None if other is None else other * claim.get("factor", 1.0)
    else:
        ref = claim["value"]
    try:
        ok = v is not None and ref is not None and bool(OPS[claim["op"]](v, ref))
    except TypeError:  # a class name against a number: the claim is wrong, not the run
        ok = False
    return Verdict(ok, v, ref)


def check(claim: Mapping, results: Sequence[Result]) -> Verdict:
    """Judge a claim against the runs themselves (one seed, in this process)."""
    names = {claim["run"], *(() if "other" not in claim else (claim["other"],))}
    values = [{claim["metric"]: metric(results[i], claim["metric"])} if i in names else {}
              for i in range(len(results))]
    return compare(claim, values)


def describe(claim: Mapping, labels: Sequence[str] | None = None) -> str:
    """The claim in one line of plain text: `P0.ttft_p99 [backfill] >= 2 × [priority]`."""
    def run(i: int) -> str:
        return f"[{labels[i]}]" if labels else f"(run {i + 1})"

    rhs = (f"{claim.get('factor', 1.0):g} × {run(claim['other'])}" if "other" in claim
           else str(claim["value"]))
    return f"{claim['metric']} {run(claim['run'])} {claim['op']} {rhs}"
