"""The workshop's decision, pure: the candidates as scenarios, each judged over the seeds, and
the choice — the cheapest remedy that brings the top class within its SLO on the most seeds.

`engine.sweeps.diagnosis` says what P0 waited on and `engine.sweeps.remedy_rule` what to try; here each
candidate becomes a scenario (the configuration *as is* plus the remedy's overrides) and is
judged on the same N seeds as the configuration as is (seed i against seed i: same traffic):

- the benefit: each class's P99 TTFT pooled over the seeds with the seeds' min–max and the
  requests behind it, P0's "better on k of N seeds" against as is, and on how many seeds P0 meets
  its SLO (`engine.sweeps.slo`: P99 TTFT/TPOT within it, nothing rejected or unfinished);
- the cost: capacity (`engine.sweeps.capacity` through `ui.runtime.capacity_jobs`: the largest load scale at
  which every class meets its SLO on every seed) and its change per GPU against as is.

`choose`: if the configuration as is already meets P0's SLO on every seed, keep it. Otherwise,
among the candidates meeting it on the most seeds (all N if any does; more than half, or there is
no decision), the one with the most capacity per GPU (the least lost); a tie goes to the fewer
parts. Until every such candidate's
capacity is known the choice is marked provisional. Words and numbers only; no streamlit import.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from engine.config.scenario import Scenario, apply_overrides, from_dict, to_dict
from engine.sweeps.evidence import Estimate, Holds, RunSamples, holds_on, percentile
from engine.sweeps.remedy_rule import Remedy
from engine.sweeps.slo import classes_ok

AS_IS = "as_is"


@dataclass(frozen=True)
class Option:
    """A configuration to judge: as is (`remedy` None) or with a remedy."""

    key: str
    remedy: Remedy | None
    scenario: Scenario


def options(base: Scenario, remedies: Sequence[Remedy]) -> tuple[list[Option], dict[str, str]]:
    """As is first, then one option per remedy; a remedy the schema refuses on this scenario is
    left out, with why (key → message)."""
    out, refused = [Option(AS_IS, None, base)], {}
    data = to_dict(base)
    for r in remedies:
        try:
            out.append(Option(r.key, r, from_dict(apply_overrides(data, r.overrides))))
        except Exception as err:  # a reserve the schema refuses for this cache, a class it lacks
            refused[r.key] = str(err).splitlines()[0]
    return out, refused


@dataclass(frozen=True)
class Judged:
    """One option over the seeds: `p99` per class (TTFT, pooled), `meets`: on how many seeds the top
    class meets its SLO, `better`: seeds on which its P99 is lower than as is (None for as is),
    `lost`: requests rejected or unfinished over every seed, `capacity`: the capacity search's
    finding (`engine.sweeps.capacity.findings` + `settled`), None until asked."""

    option: Option
    p99: dict[str, Estimate]
    meets: Holds
    better: Holds | None
    lost: int
    capacity: dict | None = None

    @property
    def top(self) -> str:
        return self.option.scenario.class_names[0]

    @property
    def capacity_known(self) -> bool:
        return bool(self.capacity and self.capacity.get("settled"))

    @property
    def capacity_per_gpu(self) -> float | None:
        """What the choice ranks by: capacity per GPU once settled (0 when it fails at the smallest load)."""
        if not self.capacity_known:
            return None
        if self.capacity.get("below_min"):
            return 0.0
        return self.capacity.get("capacity_per_gpu")


def meets_slo(run: RunSamples, sc: Scenario, cls: str) -> bool:
    """Does `cls` meet its SLO in this run (`engine.sweeps.slo`)? True for a class without one."""
    return bool(classes_ok(run.summary, sc).get(cls, True))


def judge(opts: Sequence[Option], runs: dict[str, list[RunSamples]],
          found: Sequence[dict] | None = None) -> list[Judged]:
    """Every option whose seeds are all in (`runs`: key → its runs in seed order; the as is runs
    first), with its capacity finding when `found` (one per option, in order) is given."""
    base = runs.get(AS_IS)
    out = []
    for i, o in enumerate(opts):
        rs = runs.get(o.key)
        if not rs:
            continue
        sc = o.scenario
        top = sc.class_names[0]
        p99 = {c: percentile(rs, c, "ttft_s", 99) for c in sc.class_names}
        meets = Holds(sum(meets_slo(r, sc, top) for r in rs), len(rs))
        better = None
        if o.remedy is not None and base and len(base) == len(rs):
            better = holds_on(p99[top].per_seed, percentile(base, top, "ttft_s", 99).per_seed, "lower")
        lost = sum(int(c.counts["rejected"]) + int(c.counts["unfinished"]) for r in rs for c in r.classes.values())
        cap = found[i] if found is not None and i < len(found) else None
        out.append(Judged(o, p99, meets, better, lost, cap))
    return out


@dataclass(frozen=True)
class Choice:
    """`kind`: "keep" (as is meets the SLO on every seed), "remedy" (`pick`, meeting it on `k` of
    `n` seeds), "none" (no candidate meets it on more than half the seeds; `pick` is the closest —
    most seeds, then the lowest P0 P99 — for the words). `final`: every candidate the choice
    compared has its capacity."""

    kind: str
    pick: Judged | None
    k: int
    n: int
    final: bool


def choose(judged: Sequence[Judged]) -> Choice | None:
    """The decision (module docstring); None until the configuration as is has been judged."""
    as_is = next((j for j in judged if j.option.remedy is None), None)
    if as_is is None:
        return None
    n = as_is.meets.n
    if as_is.meets.k == n:
        return Choice("keep", as_is, n, n, True)
    cands = [j for j in judged if j.option.remedy is not None]
    if not cands:
        return Choice("none", None, 0, n, True)
    best = max(j.meets.k for j in cands)
    if 2 * best <= n:  # not on most seeds: no decision, only the closest
        closest = min(cands, key=lambda j: (-j.meets.k, j.p99[j.top].value if j.p99[j.top].value is not None
                                            else float("inf")))
        return Choice("none", closest, closest.meets.k, n, True)
    eligible = [j for j in cands if j.meets.k == best]
    known = [j for j in eligible if j.capacity_per_gpu is not None]
    pool = known or eligible
    pick = max(pool, key=lambda j: (j.capacity_per_gpu or 0.0, -len(j.option.remedy.parts)))
    return Choice("remedy", pick, best, n, len(known) == len(eligible))
