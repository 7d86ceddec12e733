"""Uploaded scenario YAML and trace files, and pasted model config.json: bounded, checked as a run
would check them, kept per session.

An upload is accepted only if the scenario it makes could run in the app: it parses (bounded YAML,
at most 1 MiB; a trace at most 20 MiB and 100,000 rows, parsed by the engine's own reader), names
no file (a scenario from a browser may not read the server's files), and passes the engine's
`preflight` with the app's work limits (reserves, KV memory, trace classes and priorities that
match, at most 16 classes, a few seconds of simulation). Otherwise it is refused with one line, and
nothing changes: the functions are pure until the very end, where an accepted trace is written.

A pasted config.json (`try_model_config`) replaces the model of the scenario the controls show,
through `engine.config.hfconfig`; it is accepted on the same terms.

`try_scenario` / `try_trace` / `try_model_config` never raise: they return an `Upload` with either
the new scenario mapping or the message, so a callback can keep the previous state on failure.

Traces are written into a `TraceStore`: a folder with a byte cap, files named by content hash.
`session_store(state)` gives each session its own folder, removed when the session's state is
dropped (the session ended) or the process exits; without a session, a shared folder keeps the
most recently used traces within its cap and refuses new ones rather than remove a recent one.
"""

from __future__ import annotations

import copy
import hashlib
import os
import re
import shutil
import tempfile
import time
import uuid
import weakref
from collections.abc import MutableMapping
from dataclasses import dataclass
from pathlib import Path

from engine import ScenarioError, TraceError, from_dict
from engine.config.hfconfig import model_from_text
from engine.config.literal import clip
from engine.config.memory import resolve_model
from engine.config.scenario import ModelSpec, decode_text, file_references, parse_yaml
from engine.config.shipped_traces import shipped_name
from engine.config.traces import parse_trace
from engine.sim.limits import INTERACTIVE, WorkLimits
from engine.sim.preflight import preflight

from .i18n import _

MAX_SCENARIO_BYTES = 1 << 20
MAX_TRACE_BYTES = 20 << 20
MAX_TRACE_ROWS = 100_000
ROOT = Path(tempfile.gettempdir()) / f"inversion-lab-uploads-{os.getuid() if hasattr(os, 'getuid') else 0}"
SESSION_KEY = "_upload_trace_store"


@dataclass(frozen=True)
class Upload:
    """The result of an upload: the new scenario mapping, or why it was refused (and notes on what
    was assumed)."""

    raw: dict | None = None
    error: str | None = None
    notes: tuple[str, ...] = ()


# ---------------------------------------------------------------------------------------------
# Checking an upload


def _text(name: str, data: bytes, limit: int, err: type[Exception]) -> str:
    if len(data) > limit:
        raise err(_("{name}: {size:.1f} MiB is over the {limit} MiB upload limit").format(
            name=name, size=len(data) / 2**20, limit=limit >> 20))
    return decode_text(data, name, err)


def _fit_to_run(raw: dict, limits: WorkLimits) -> None:
    """ScenarioError unless the mapping validates and would run within `limits`."""
    preflight(from_dict(raw), limits)


def scenario_from_upload(name: str, data: bytes, limits: WorkLimits = INTERACTIVE) -> dict:
    """A checked scenario mapping from an uploaded YAML file (ScenarioError/TraceError if not usable)."""
    name = clip(name or "upload.yaml", 80)
    try:
        raw = parse_yaml(_text(name, data, MAX_SCENARIO_BYTES, ScenarioError), name)
        raw.pop("story", None)  # a shipped file's story (engine.sweeps.story) is not part of the scenario, as load_raw
        raw.setdefault("name", _stem(name, "uploaded"))
        if "base" in raw:
            raise ScenarioError(_("{name}: an uploaded scenario cannot start from another (`base`); download the "
                                  "full scenario YAML from the app and upload that").format(name=name))
        if raw.get("trace") and shipped_name(raw["trace"]) is None:  # a shipped trace reads no user file
            raise ScenarioError(_("{name}: a scenario that reads a trace file cannot be uploaded; upload the trace "
                                  "separately (Upload a trace)").format(name=name))
        for key, _path in file_references(raw):
            raise ScenarioError(_("{key}: an uploaded scenario cannot read files on the server; use a lognormal or "
                                  "uniform length, or upload a trace").format(key=key))
        _fit_to_run(raw, limits)
        return raw
    except (ScenarioError, TraceError):
        raise
    except Exception as err:  # never leave a session stuck on a bug: report it as a refusal
        raise ScenarioError(_("{name}: could not be used ({what})").format(
            name=name, what=f"{type(err).__name__}: {clip(err, 120)}")) from None


def with_trace(raw: dict, name: str, data: bytes, store: TraceStore | None = None,
               limits: WorkLimits = INTERACTIVE) -> dict:
    """`raw` replaying an uploaded trace instead of its synthetic arrivals.

    Rows go to classes by their `class`/`priority` column if present, else at random in
    proportion to the scenario's arrival rates (so the class mix is kept). The trace is written
    to `store` (the shared one if None) only once everything else has passed.
    """
    name = clip(name or "trace.csv", 80)
    try:
        text = _text(name, data, MAX_TRACE_BYTES, TraceError)
        rows = text.count("\n")
        if rows > MAX_TRACE_ROWS + 1:
            raise TraceError(_("{name}: about {rows:,} rows is over the {limit:,}-row upload limit").format(
                name=name, rows=rows, limit=MAX_TRACE_ROWS))
        df = parse_trace(text, None, name)
        if len(df) > MAX_TRACE_ROWS:
            raise TraceError(_("{name}: {rows:,} rows is over the {limit:,}-row upload limit").format(
                name=name, rows=len(df), limit=MAX_TRACE_ROWS))
        digest = hashlib.sha256(data).hexdigest()[:16]
        suffix = ".jsonl" if Path(name).suffix.lower() in (".jsonl", ".json") else ".csv"
        store = store or shared_store()
        path = store.path_for(digest, suffix)
        out = _replay(raw, df, str(path), name)
        # check against the parsed rows before writing anything: the store only sees good traces
        probe = store.folder / f".probe-{uuid.uuid4().hex}{suffix}"
        store.folder.mkdir(parents=True, exist_ok=True)
        probe.write_bytes(data)
        try:
            _fit_to_run({**out, "trace": {**out["trace"], "path": str(probe)}}, limits)
        finally:
            probe.unlink(missing_ok=True)
        store.put(digest, suffix, data)
        return out
    except (ScenarioError, TraceError):
        raise
    except Exception as err:
        raise TraceError(_("{name}: could not be used ({what})").format(
            name=name, what=f"{type(err).__name__}: {clip(err, 120)}")) from None


def _replay(raw: dict, df, path: str, name: str) -> dict:
    out = {**raw, "classes": {k: dict(v or {}) for k, v in (raw.get("classes") or {}).items()}}
    if not out["classes"]:
        out["classes"] = {"default": {"priority": 0}}
    rates = {k: _rate(v) for k, v in out["classes"].items()}
    if "class" in df.columns or "priority" in df.columns:
        assign = {"by": "column"}
    else:
        assign = {"by": "fraction", "fractions": rates if sum(rates.values()) > 0 else {k: 1.0 for k in rates}}
    for v in out["classes"].values():
        v["arrival"] = {**(v.get("arrival") or {}), "rate": 0.0, "process": "poisson"}
    out["trace"] = {"path": path, "assign": assign}
    out["name"] = f"{clip(raw.get('name', 'scenario'), 80)}+{_stem(name, 'trace')}"
    return out


def _stem(file_name: str, default: str) -> str:
    """A browser-supplied file name as a short, plain part of a scenario name."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", Path(file_name).stem)[:40].strip("_") or default


def _rate(cls: dict) -> float:
    try:
        rate = float((cls.get("arrival") or {}).get("rate", 1.0))
    except (TypeError, ValueError, AttributeError):
        return 0.0
    return rate if 0 <= rate < float("inf") else 0.0


def try_scenario(name: str, data: bytes, limits: WorkLimits = INTERACTIVE) -> Upload:
    """`scenario_from_upload` that returns the refusal instead of raising."""
    try:
        return Upload(raw=scenario_from_upload(name, data, limits))
    except (ScenarioError, TraceError) as err:
        return Upload(error=str(err))


def with_model_config(current: dict, text: str | bytes, name: str | None = None,
                      limits: WorkLimits = INTERACTIVE) -> tuple[dict, tuple[str, ...]]:
    """`current` (a full scenario mapping, `to_dict` of what the controls show) with the model a
    pasted config.json describes. If it leaves no KV memory on the current GPUs, the fewest GPUs per
    replica (2, 4 or 8) on which it fits are taken, and a note says so."""
    model = model_from_text(text, name)
    out = copy.deepcopy(current)
    out["model"] = dict(model.section)
    out["name"] = f"{clip(current.get('name', 'scenario'), 80)}+{_stem(model.section['name'], 'model')}"
    notes = list(model.notes)
    hardware = out.setdefault("hardware", {})
    tp = int(hardware.get("num_gpus") or 1)
    for more in [tp] + [n for n in (2, 4, 8) if n > tp]:
        hardware["num_gpus"] = more
        try:
            _fit_to_run(out, limits)
        except ScenarioError as err:
            if "no memory for KV cache" not in str(err):
                raise
            if more < 8:
                continue
            gpu = hardware.get("gpu", "the GPU")
            per_gpu = resolve_model(ModelSpec(**model.section)).weight_bytes / 8 / 2**30
            fp8 = "" if model.section["dtype_bytes"] == 1 else " or FP8 weights (Weights in the sidebar)"
            raise ScenarioError(f"{model.section['name']} leaves no KV memory even on 8× {gpu} (the most the lab "
                                f"models): its weights are {per_gpu:,.0f} GiB per GPU; pick a GPU with more memory "
                                f"(H200, B200, MI300X) first{fp8}") from None
        if more != tp:
            notes.append(f"it leaves no KV memory on {tp} GPU(s): GPUs per replica set to {more}")
        return out, tuple(notes)
    raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises


def try_model_config(current: dict, text: str | bytes, name: str | None = None,
                     limits: WorkLimits = INTERACTIVE) -> Upload:
    """`with_model_config` that returns the refusal instead of raising (never anything else)."""
    try:
        raw, notes = with_model_config(current, text, name, limits)
        return Upload(raw=raw, notes=notes)
    except (ScenarioError, TraceError) as err:
        return Upload(error=str(err))
    except Exception as err:  # never leave a session stuck on a bug: report it as a refusal
        return Upload(error=f"config.json could not be used ({type(err).__name__}: {clip(err, 120)})")


def try_trace(raw: dict, name: str, data: bytes, state: MutableMapping | None = None,
              limits: WorkLimits = INTERACTIVE) -> Upload:
    """`with_trace` that returns the refusal instead of raising; `state` (a session's state
    mapping) keeps the trace in that session's own folder."""
    try:
        store = session_store(state) if state is not None else None
        return Upload(raw=with_trace(raw, name, data, store, limits))
    except (ScenarioError, TraceError) as err:
        return Upload(error=str(err))


# ---------------------------------------------------------------------------------------------
# Where uploaded traces live


class TraceStore:
    """A folder of uploaded traces named by content hash, at most `max_bytes` in all.

    Putting a trace over the cap removes the least recently put ones first — but none put less
    than `keep_s` seconds ago: then the upload is refused (a session may still be using it).
    """

    def __init__(self, folder: Path, max_bytes: int, keep_s: float = 0.0):
        self.folder, self.max_bytes, self.keep_s = Path(folder), max_bytes, keep_s

    def path_for(self, digest: str, suffix: str) -> Path:
        return self.folder / f"{digest}{suffix}"

    def files(self) -> list[Path]:
        try:
            return [p for p in self.folder.iterdir() if p.is_file() and not p.name.startswith(".")]
        except FileNotFoundError:
            return []

    def used_bytes(self) -> int:
        return sum(_size(p) for p in self.files())

    def put(self, digest: str, suffix: str, data: bytes) -> Path:
        """Write (or touch) the trace; TraceError if the cap leaves no room."""
        if len(data) > self.max_bytes:
            raise TraceError(_("the trace is larger than the {n} MiB upload space").format(n=self.max_bytes >> 20))
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.path_for(digest, suffix)
        if path.exists():
            os.utime(path)
            return path
        now = time.time()
        others = sorted(self.files(), key=_mtime)  # least recently put first
        used = sum(_size(p) for p in others)
        for old in others:
            if used + len(data) <= self.max_bytes:
                break
            if now - _mtime(old) < self.keep_s:
                break
            used -= _size(old)
            old.unlink(missing_ok=True)
        if used + len(data) > self.max_bytes:
            raise TraceError(_("the server's upload space is full ({n} MiB of recent traces); try again later").format(
                n=used >> 20))
        tmp = self.folder / f".{digest}.{uuid.uuid4().hex}.part"
        tmp.write_bytes(data)
        os.replace(tmp, path)  # readers never see half a file
        return path

    def remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def _mtime(p: Path) -> float:
    try:
        return p.stat().st_mtime
    except OSError:
        return 0.0


def _size(p: Path) -> int:
    try:
        return p.stat().st_size
    except OSError:
        return 0


_shared: TraceStore | None = None


def shared_store() -> TraceStore:
    """The process-wide store for callers without a session: 256 MiB, recent traces kept 6 h."""
    global _shared
    if _shared is None:
        _shared = TraceStore(ROOT / f"shared-{os.getpid()}", 256 << 20, keep_s=6 * 3600)
        weakref.finalize(_shared, shutil.rmtree, str(_shared.folder), True)
        _sweep_dead()
    return _shared


def session_store(state: MutableMapping) -> TraceStore:
    """The session's own store (two traces' worth), created on first use; its folder is removed
    when `state` drops it — when the session ends — or when the process exits."""
    store = state.get(SESSION_KEY)
    if not isinstance(store, TraceStore):
        store = TraceStore(ROOT / f"session-{os.getpid()}-{uuid.uuid4().hex}", 2 * MAX_TRACE_BYTES)
        weakref.finalize(store, shutil.rmtree, str(store.folder), True)
        state[SESSION_KEY] = store
        _sweep_dead()
    return store


def _sweep_dead() -> None:
    """Remove folders left by processes that no longer run (a crash skips the finalizers)."""
    try:
        folders = list(ROOT.iterdir())
    except FileNotFoundError:
        return
    for folder in folders:
        m = re.fullmatch(r"(?:shared|session)-(\d+)(?:-[0-9a-f]+)?", folder.name)
        if m and int(m.group(1)) != os.getpid() and not _alive(int(m.group(1))):
            shutil.rmtree(folder, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
