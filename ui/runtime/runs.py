"""Running the engine from the app: cached single runs, and the shared pool for sweeps.

Cache keys are the canonical scenario JSON (`Scenario.key()`): small, hashable, and equal for
equal scenarios whichever page or control produced them. Nothing here draws anything: a cached
function that touched the UI would replay that UI on a cache hit (Streamlit's
CacheReplayClosureError); progress is shown by the page, from what the pool reports.
"""

from __future__ import annotations

import json
import os
import uuid
from concurrent.futures import CancelledError
from concurrent.futures.process import BrokenProcessPool

import streamlit as st

from engine import Result, from_dict
from engine.config.scenario import Scenario, ScenarioError
from engine.config.traces import TraceError

from ..frame.i18n import _
from ..frame.limits import why_not
from ..panels.variants import baseline
from .pool import RunPool
from .sweeps import Plan, plan
from .worker import SAMPLES, WorkerExecutor, WorkerTimeout


def _count(env: str, default: int) -> int:
    """A worker count: `default`, or the environment's (`deploy/serve.py` divides the cores between
    the Streamlit processes it starts, each of which has its own workers)."""
    try:
        return max(1, int(os.environ.get(env, default)))
    except ValueError:
        return default


WORKERS = _count("INVERSION_LAB_SWEEP_WORKERS", max(1, min(4, os.cpu_count() or 1)))
PAGE_WORKERS = _count("INVERSION_LAB_PAGE_WORKERS", max(1, min(2, os.cpu_count() or 1)))  # runs at once; more wait
RUN_TIMEOUT_S = 60.0  # a page run the work limit let through (≈ 5 s of CPU) yet still running is stopped


@st.cache_resource(on_release=lambda ex: ex.shutdown(wait=False, cancel_futures=True), show_spinner=False)
def page_workers() -> WorkerExecutor:
    """The process-wide worker processes that run the pages' scenarios (`ui.runtime.worker` says why not
    in the server); a queue in front of them bounds how many runs compete for the CPU."""
    return WorkerExecutor(PAGE_WORKERS, kind="result")


def _cached_run(key: str) -> Result:
    """A scenario's Result, cached; the spinner in the page's language (a spinner given to the
    cache decorator is fixed text, English on a Chinese page). Shown after half a second, so a
    cache hit shows none."""
    with st.spinner(_("Simulating…")):
        return _run_cached(key)


@st.cache_data(max_entries=64, max_size="600MB", show_spinner=False)
def _run_cached(key: str) -> Result:
    for _attempt in range(2):  # a worker that died (or was replaced) is started afresh once
        try:  # the Result, its derived frames included
            return page_workers().submit(key, timeout_s=RUN_TIMEOUT_S).result()
        except WorkerTimeout as err:
            raise ScenarioError(str(err)) from None
        except (BrokenProcessPool, CancelledError):
            continue
        except (ScenarioError, TraceError):
            raise
        except Exception as err:  # an engine bug: named, and the page goes back to what last ran
            raise ScenarioError(f"the simulation failed ({type(err).__name__}: {err})") from None
    raise ScenarioError("the simulation's worker process stopped twice (out of memory?)")


def result(sc: Scenario) -> Result:
    return _cached_run(sc.key())


def baseline_result(sc: Scenario) -> Result:
    return _cached_run(baseline(sc).key())


class _SamplesOnPageWorkers:
    """The page workers, asked for a run's `RunSamples` (`ui.runtime.worker.SAMPLES`) instead of its Result:
    the other seeds of a page's figures share the page runs' queue and processes, so they never
    start more workers, and a page run waits for at most one of them."""

    def __init__(self, ex: WorkerExecutor):
        self.ex = ex

    def submit(self, key: str):
        return self.ex.submit(SAMPLES + key, timeout_s=RUN_TIMEOUT_S)

    def shutdown(self, wait: bool = True, cancel_futures: bool = False) -> None:
        pass  # the page workers are shared; a child that died is restarted by their executor


@st.cache_resource(on_release=lambda pool: pool.close(), show_spinner=False)
def samples_pool() -> RunPool:
    """The process-wide pool of the pages' extra seeds (RunSamples by scenario key, shared by every
    session; at most as many in flight as there are page workers; a few hundred kept)."""
    ex = page_workers()
    return RunPool(lambda: _SamplesOnPageWorkers(ex), workers=PAGE_WORKERS, keep=600)


@st.cache_resource(on_release=lambda pool: pool.close(), show_spinner=False)
def run_pool() -> RunPool:
    """The process-wide pool of worker processes that runs sweep points for every session."""
    return RunPool(lambda: WorkerExecutor(WORKERS), workers=WORKERS)


def viewer_id() -> str:
    """This browser session's name in the pool (its wish list replaces its previous one)."""
    return st.session_state.setdefault("_viewer", uuid.uuid4().hex)


@st.cache_data(max_entries=64, show_spinner=False)
def sweep_plan(sc_key: str, knob: str, values: tuple[float, ...], seeds: tuple[int, ...], cls: str | None) -> Plan:
    """The sweep's points and run order (cached: building them validates every point)."""
    return plan(from_dict(json.loads(sc_key)), knob, list(values), list(seeds), cls, why_not=why_not)


def summaries(keys: list[str], purpose: str = "ws", timeout_s: float = 180.0) -> tuple[dict[str, dict], dict[str, str]]:
    """Summaries of many scenarios from the shared pool, waiting until all have finished (or the
    timeout): the workshop's sweeps, the sizing aid. Runs any session already made
    come back at once. A wish list of its own per purpose, so it never replaces a P99 sweep's."""
    return _all_of(run_pool(), keys, purpose, timeout_s)


def samples(keys: list[str], purpose: str = "ws", timeout_s: float = 180.0) -> tuple[dict[str, object], dict[str, str]]:
    """As `summaries`, but each run's `RunSamples` from the page workers (figures over seeds: the
    workshop's recap)."""
    return _all_of(samples_pool(), keys, purpose, timeout_s)


def _all_of(pool: RunPool, keys: list[str], purpose: str, timeout_s: float) -> tuple[dict, dict[str, str]]:
    import time

    viewer = f"{viewer_id()}-{purpose}"
    keys = list(dict.fromkeys(keys))
    deadline = time.monotonic() + timeout_s
    while True:
        pool.want(viewer, keys)
        done, failed = pool.results(viewer, keys)
        if len(done) + len(failed) >= len(keys) or time.monotonic() > deadline:
            pool.want(viewer, [])
            return done, failed
        time.sleep(0.1)
