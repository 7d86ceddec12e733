"""A single run from its canonical scenario JSON (the app's cache key)."""

from __future__ import annotations

import json

from engine import Result, from_dict, simulate


def run_json(key: str) -> Result:
    """Scenario JSON → Result."""
    return simulate(from_dict(json.loads(key)))

