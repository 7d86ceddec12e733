"""Inversion Lab engine: an iteration-level LLM-serving scheduler simulation (no UI imports).

    from engine import load, simulate
    result = simulate(load("classic-inversion", {"scheduler.policy": "backfill"}))
    result.summary["classes"]["P0"]["ttft_p99"]
"""

__version__ = "0.1.0"  # pyproject reads it; sweep manifests record it

from .result import Result
from .scenario import Scenario, ScenarioError, from_dict, load, scenario_names, to_yaml
from .simulation import simulate
from .traces import TraceError

__all__ = ["Result", "Scenario", "ScenarioError", "TraceError", "from_dict", "load", "scenario_names",
           "simulate", "to_yaml"]
