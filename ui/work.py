"""Worker functions for process pools (top-level, picklable, no streamlit import)."""

from __future__ import annotations

import json

from engine import Result, from_dict, simulate


def run_json(key: str) -> Result:
    """Scenario JSON → Result."""
    return simulate(from_dict(json.loads(key)))


def summary_json(key: str) -> dict:
    """Scenario JSON → summary only (what travels back between processes in a sweep)."""
    return run_json(key).summary
