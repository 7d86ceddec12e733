"""Running the engine from the app: cached single runs and parallel, cached sweeps.

Cache keys are the canonical scenario JSON (`Scenario.key()`): small, hashable, and equal for
equal scenarios whichever page or control produced them.
"""

from __future__ import annotations

import json
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Callable

import streamlit as st

from engine import Result, from_dict, simulate
from engine.scenario import Scenario

from .variants import baseline


def run_json(key: str) -> Result:
    """Top-level (picklable) worker: scenario JSON → Result."""
    return simulate(from_dict(json.loads(key)))


def summary_json(key: str) -> dict:
    """Top-level worker for sweeps: only the summary travels back between processes."""
    return run_json(key).summary


@st.cache_data(max_entries=64, show_spinner="Simulating…")
def _cached_run(key: str) -> Result:
    return run_json(key)


def result(sc: Scenario) -> Result:
    return _cached_run(sc.key())


def baseline_result(sc: Scenario) -> Result:
    return _cached_run(baseline(sc).key())


def _parallel(keys: tuple[str, ...], progress: Callable[[float], None] | None) -> list[dict]:
    out: list[dict | None] = [None] * len(keys)
    with ProcessPoolExecutor(max_workers=2) as pool:
        futs = {pool.submit(summary_json, k): i for i, k in enumerate(keys)}
        for done, fut in enumerate(as_completed(futs), 1):
            out[futs[fut]] = fut.result()
            if progress:
                progress(done / len(keys))
    return out  # type: ignore[return-value]


@st.cache_data(max_entries=16, show_spinner=False)
def summaries(keys: tuple[str, ...], _progress: Callable[[float], None] | None = None) -> list[dict]:
    """Summaries of many scenarios, two at a time in worker processes; cached as a batch.

    `_progress` (not part of the cache key) is called with the fraction done on a miss.
    """
    return _parallel(keys, _progress)
