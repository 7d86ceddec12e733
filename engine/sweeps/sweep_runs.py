"""What a sweep's spec, its output directory and its executor share: a run and its id, the
error, and the knob columns of a table. A module of its own so that `engine.sweeps.sweep` (the spec)
can use `engine.sweeps.sweep_store` (the output) at the top without the store importing the spec back.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..config.scenario import ScenarioError


class SweepError(ScenarioError):
    """A sweep or plan spec (or its output directory) that cannot be used; the message says why."""


# ---------------------------------------------------------------------------------------------
# Runs


@dataclass(frozen=True)
class Run:
    """One simulation of a sweep: its canonical scenario JSON, stable id, knob values and seed."""

    key: str
    run_id: str
    knobs: dict[str, Any]
    seed: int


def run_id(key: str) -> str:
    """A stable 16-hex-digit id of a scenario: sha256 of its canonical JSON (keys sorted)."""
    canon = json.dumps(json.loads(key), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canon.encode()).hexdigest()[:16]


def knob_columns(runs: Iterable[Run], knobs: Sequence[str]) -> dict[str, list]:
    """Knob values as table columns. A column mixing kinds (text and numbers) or holding lists is
    stored as JSON text so Parquet can type it."""
    runs = list(runs)
    cols = {}
    for k in knobs:
        vals = [r.knobs.get(k) for r in runs]
        kinds = {_kind(v) for v in vals if v is not None}
        if len(kinds) > 1 or "other" in kinds:
            vals = [None if v is None else json.dumps(v) for v in vals]
        cols[k] = vals
    return cols


def _kind(v: Any) -> str:
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int | float):
        return "number"
    if isinstance(v, str):
        return "text"
    return "other"
