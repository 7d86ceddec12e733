"""Running the engine from the app: cached single runs and parallel, cached sweeps.

Cache keys are the canonical scenario JSON (`Scenario.key()`): small, hashable, and equal for
equal scenarios whichever page or control produced them.
"""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Callable

import streamlit as st

from engine import Result
from engine.scenario import Scenario

from .variants import baseline
from .work import run_json, summary_json


@st.cache_data(max_entries=64, max_size="600MB", show_spinner="Simulating…")
def _cached_run(key: str) -> Result:
    return run_json(key)


def result(sc: Scenario) -> Result:
    return _cached_run(sc.key())


def baseline_result(sc: Scenario) -> Result:
    return _cached_run(baseline(sc).key())


def _parallel(keys: tuple[str, ...], progress: Callable[[float], None] | None) -> list[dict]:
    out: list[dict | None] = [None] * len(keys)
    # fork: "spawn" would re-execute Streamlit's __main__ (the page script) in every worker.
    # The children only run engine code, which takes no lock the server threads could hold.
    with ProcessPoolExecutor(max_workers=2, mp_context=multiprocessing.get_context("fork")) as pool:
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
