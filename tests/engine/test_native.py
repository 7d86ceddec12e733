"""Which engine runs (`engine.native`): the compiled build only when made from this very source."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys

import engine
from engine import native
from engine.compiled_modules import COMPILED


def _fake_build(lib, digest: str, complete: bool = True) -> None:
    for path in native.CompiledFinder(lib).files.values():
        path.parent.mkdir(parents=True, exist_ok=True)
        if complete:
            path.write_bytes(b"")
    (lib / native.STAMP).write_text(json.dumps({"digest": digest}))


def test_the_modules_that_run_are_the_ones_it_names():
    """Compiled: every event-path module is loaded from the build; pure: from the source."""
    compiled = native.ENGINE.startswith("compiled")
    for path in COMPILED:
        where = importlib.import_module(native.module_name(path)).__file__
        assert where.endswith(native.SUFFIX) == compiled and (native.BUILD.as_posix() in where) == compiled, where


def test_a_build_is_used_only_when_it_matches_the_source(tmp_path, monkeypatch):
    monkeypatch.delenv("INVERSION_LAB_PURE", raising=False)
    assert "no compiled build" in native.why_pure(tmp_path)
    _fake_build(tmp_path, "0" * 64)
    assert "older than the source" in native.why_pure(tmp_path)
    _fake_build(tmp_path, native.digest())
    assert native.why_pure(tmp_path) is None
    monkeypatch.setenv("INVERSION_LAB_PURE", "1")
    assert native.why_pure(tmp_path) == "INVERSION_LAB_PURE=1"


def test_an_incomplete_build_is_not_used(tmp_path, monkeypatch):
    monkeypatch.delenv("INVERSION_LAB_PURE", raising=False)
    _fake_build(tmp_path, native.digest(), complete=False)
    assert "incomplete" in native.why_pure(tmp_path)


def test_the_digest_follows_every_compiled_source(tmp_path):
    for path in COMPILED:
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_bytes((native.ROOT / path).read_bytes())
    same = native.digest(tmp_path)
    assert same == native.digest()
    edited = tmp_path / COMPILED[-1]
    edited.write_bytes(edited.read_bytes() + b"\n# a rule changed\n")
    assert native.digest(tmp_path) != same


def test_pure_is_honoured_in_a_fresh_process():
    env = {**os.environ, "INVERSION_LAB_PURE": "1"}
    code = "import engine, engine.core.state as s; print(engine.native.ENGINE); print(s.__file__)"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True,
                         cwd=native.ROOT).stdout.splitlines()
    assert out[0] == "pure Python (INVERSION_LAB_PURE=1)" and out[1].endswith("engine/core/state.py")
    assert engine.native is native


def test_a_result_crosses_processes_whichever_engine_made_it():
    """Results are pickled to and from workers (the app's pool, sweeps); a compiled class has no
    `__dict__` for pickle's default, so the step log says how it is rebuilt."""
    import pickle

    from engine import load, simulate

    res = simulate(load("default", {"duration_s": 20}))
    back = pickle.loads(pickle.dumps(res))
    assert back.steps.equals(res.steps) and back.summary == res.summary
