"""The seeds behind a page's figures: which runs, and what has come back.

A number on a page that is a conclusion is over N seeds (DESIGN §6): the scenario's own seed and
the next N − 1 (`engine.sweeps.evidence.default_seeds`, as `run --seeds N` takes them), so a figure can
be reproduced from the command line. The charts draw one run, the scenario's seed; its `Result`
is on the server already, and its `RunSamples` is taken there. The other seeds run in the page
workers and send back only their `RunSamples` (`ui.runtime.worker.SAMPLES`). A `Gathered` is what a page
has of them at one moment: the figures switch from the shown run to all N at once, when the last
one is in, so a number changes once and never drifts. Pure: no streamlit import.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from engine.config.scenario import Scenario, apply_overrides, from_dict, to_dict
from engine.sweeps.evidence import RunSamples, default_seeds

KEY = "seeds"  # the share link's parameter; the default leaves none
DEFAULT = 5
MAX = 20  # a page's figures over more seeds than this would keep its workers busy for long


@lru_cache(maxsize=256)
def _keys(sc_key: str, n: int) -> tuple[str, ...]:
    import json

    sc = from_dict(json.loads(sc_key))
    data = to_dict(sc)
    return tuple(from_dict(apply_overrides(data, {"seed": int(s)})).key() for s in default_seeds(sc.seed, n))


def seed_keys(sc: Scenario, n: int) -> tuple[str, ...]:
    """The scenario keys of `sc`'s N seeds, its own first (equal to `sc.key()`)."""
    return _keys(sc.key(), int(n))


@dataclass
class Gathered:
    """One configuration's N seeds as far as they have come back (`runs[i]` is seed i's, or None)."""

    seeds: tuple[int, ...]
    runs: list[RunSamples | None]
    failed: dict[int, str] = field(default_factory=dict)  # seed → why its run failed

    @property
    def settled(self) -> bool:
        """Every seed has finished or failed."""
        return all(r is not None or s in self.failed for s, r in zip(self.seeds, self.runs))

    @property
    def done(self) -> int:
        return sum(r is not None for r in self.runs)

    @property
    def shown(self) -> RunSamples | None:
        return self.runs[0] if self.runs else None

    def complete(self) -> list[RunSamples]:
        """Every seed that ran, in seed order (empty until all have settled: figures change once)."""
        return [r for r in self.runs if r is not None] if self.settled else []

    def usable(self) -> list[RunSamples]:
        """All seeds once settled, else the shown run alone."""
        runs = self.complete()
        if runs:
            return runs
        return [self.runs[0]] if self.runs and self.runs[0] is not None else []


def gather(seeds: Sequence[int], keys: Sequence[str], first: RunSamples | None, done: dict[str, RunSamples],
           failed: dict[str, str]) -> Gathered:
    """The seeds' runs from what the pool has finished (`first`: the shown run's, taken on the server)."""
    runs: list[RunSamples | None] = []
    bad: dict[int, str] = {}
    for i, (s, k) in enumerate(zip(seeds, keys)):
        r = first if i == 0 and first is not None else done.get(k)
        runs.append(r)
        if r is None and k in failed:
            bad[int(s)] = failed[k]
    return Gathered(tuple(int(s) for s in seeds), runs, bad)
