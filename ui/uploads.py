"""Uploaded scenario YAML and trace files: size limits, parsing, clear one-line errors.

A trace is validated with the engine's own reader, then written to a temp file named by its
content hash (the same upload gives the same `trace.path`, hence the same cache key).
"""

from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path

from engine import ScenarioError, TraceError, from_dict
from engine.scenario import parse_yaml
from engine.traces import parse_trace

MAX_SCENARIO_BYTES = 1 << 20
MAX_TRACE_BYTES = 20 << 20


def _text(name: str, data: bytes, limit: int, err: type[Exception]) -> str:
    if len(data) > limit:
        raise err(f"{name}: {len(data) / 2**20:.1f} MiB is over the {limit >> 20} MiB upload limit")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise err(f"{name}: not a UTF-8 text file") from None


def scenario_from_upload(name: str, data: bytes) -> dict:
    """A validated scenario mapping from an uploaded YAML file (ScenarioError if not usable)."""
    raw = parse_yaml(_text(name, data, MAX_SCENARIO_BYTES, ScenarioError), name)
    raw.setdefault("name", Path(name).stem)
    if raw.get("trace"):
        raise ScenarioError(f"{name}: a scenario that reads a trace file cannot be uploaded; upload the trace "
                            "separately (Upload a trace)")
    from_dict(raw)  # validate now, so the error shows at upload time
    return raw


def with_trace(raw: dict, name: str, data: bytes) -> dict:
    """`raw` replaying an uploaded trace instead of its synthetic arrivals.

    Rows go to classes by their `class`/`priority` column if present, else at random in
    proportion to the scenario's arrival rates (so the class mix is kept).
    """
    df = parse_trace(_text(name, data, MAX_TRACE_BYTES, TraceError), None, name)
    digest = hashlib.sha256(data).hexdigest()[:16]
    folder = Path(tempfile.gettempdir()) / "inversion-lab-traces"
    folder.mkdir(exist_ok=True)
    path = folder / f"{digest}{Path(name).suffix or '.csv'}"
    if not path.exists():
        path.write_bytes(data)
    out = {**raw, "classes": {k: dict(v or {}) for k, v in (raw.get("classes") or {}).items()}}
    if not out["classes"]:
        out["classes"] = {"default": {"priority": 0}}
    rates = {k: float((v.get("arrival") or {}).get("rate", 1.0)) for k, v in out["classes"].items()}
    if "class" in df.columns or "priority" in df.columns:
        assign = {"by": "column"}
    else:
        assign = {"by": "fraction", "fractions": rates if sum(rates.values()) > 0 else {k: 1.0 for k in rates}}
    for v in out["classes"].values():
        v["arrival"] = {**(v.get("arrival") or {}), "rate": 0.0, "process": "poisson"}
    out["trace"] = {"path": str(path), "assign": assign}
    out["name"] = f"{raw.get('name', 'scenario')}+{Path(name).stem}"
    from_dict(out)
    return out
