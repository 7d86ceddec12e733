"""A single run from its canonical scenario JSON (the app's cache key)."""

from __future__ import annotations

import json
import os

from engine import Result, from_dict, simulate

# A test hook, read by the worker process: a run with this seed raises as an engine bug would, so
# the browser tests can check what the app does then (the controls and the URL go back to what
# last ran). Unset in normal use.
FAIL_SEED = "INVERSION_LAB_FAIL_SEED"


def run_json(key: str) -> Result:
    """Scenario JSON → Result."""
    data = json.loads(key)
    if os.environ.get(FAIL_SEED) and str(data.get("seed")) == os.environ[FAIL_SEED]:
        raise RuntimeError(f"{FAIL_SEED}: a run with seed {data.get('seed')} fails (test hook)")
    return simulate(from_dict(data))
