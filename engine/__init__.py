"""Inversion Lab engine: an iteration-level LLM-serving scheduler simulation (no UI imports).

    from engine import load, simulate
    result = simulate(load("classic-inversion", {"scheduler.policy": "backfill"}))
    result.summary["classes"]["P0"]["ttft_p99"]

The names below are loaded on first use (PEP 562), not when the package is imported. Why: Python
takes a module's import lock *before* it imports the module's package, so a package whose
`__init__` imports its own submodules puts every submodule in one import cycle with it. Two threads
importing two of them at once (Streamlit runs each session's page in its own thread, and a room of
people opening the link starts a cold server's pages together) can then deadlock, and Python breaks
the deadlock by handing one thread a half-initialised module ("cannot import name 'Hardware' from
partially initialized module 'engine.config.scenario'"). `tests/test_imports.py` keeps the graph acyclic.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"  # pyproject reads it; sweep manifests record it

_WHERE = {"Result": "sim.result", "Scenario": "config.scenario", "ScenarioError": "config.scenario",
          "from_dict": "config.scenario", "load": "config.scenario", "scenario_names": "config.scenario",
          "to_yaml": "config.scenario", "simulate": "sim.simulation", "TraceError": "config.traces"}

__all__ = ["Result", "Scenario", "ScenarioError", "TraceError", "from_dict", "load", "scenario_names",
           "simulate", "to_yaml"]

if TYPE_CHECKING:  # for readers and type checkers only
    from .config.scenario import Scenario, ScenarioError, from_dict, load, scenario_names, to_yaml
    from .config.traces import TraceError
    from .sim.result import Result
    from .sim.simulation import simulate


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'engine' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_WHERE})
