"""Which engine runs (`engine.native`): the compiled build only when made from this very source."""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
import zipfile

import pytest

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
        assert where.endswith(native.SUFFIX) == compiled and (native.LIB.as_posix() in where) == compiled, where


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


SOURCE = ("pyproject.toml", "setup.py", "requirements.txt", "requirements-dev.txt", "requirements-ray.txt",
          "requirements-build.txt", "engine", "scenarios")
RUN = """import json, engine.native as n, engine.core.kv as kv
from engine import load, simulate
s = simulate(load("default", {"duration_s": 30})).summary
s.pop("wall_time_s")
print(json.dumps({"engine": n.ENGINE, "kv": kv.__file__, "summary": s}))"""


def _wheel(tmp_path, env: dict) -> tuple[zipfile.ZipFile, str, dict]:
    """`pip wheel .` on a copy of this source with its build (no isolation: .venv has the build
    requirements), the wheel unpacked as an installed package, and what a run there says."""
    src = tmp_path / "src"
    src.mkdir()
    for name in SOURCE:
        copy = shutil.copytree if (native.ROOT / name).is_dir() else shutil.copy
        copy(native.ROOT / name, src / name, **({"ignore": shutil.ignore_patterns("__pycache__", "_mypyc")}
                                                 if copy is shutil.copytree else {}))
    shutil.copytree(native.BUILD, src / ".build" / "mypyc")
    made = subprocess.run([sys.executable, "-m", "pip", "wheel", ".", "--no-deps", "--no-build-isolation",
                           "--disable-pip-version-check", "-v", "-w", str(tmp_path / "dist")],
                          cwd=src, env=env, capture_output=True, text=True)
    assert made.returncode == 0, made.stderr[-3000:]
    wheel = zipfile.ZipFile(next((tmp_path / "dist").glob("*.whl")))
    wheel.extractall(tmp_path / "site")
    clean = {k: v for k, v in os.environ.items() if k != "INVERSION_LAB_PURE"} | {"PYTHONPATH": str(tmp_path / "site")}
    ran = subprocess.run([sys.executable, "-c", RUN], cwd=tmp_path, env=clean, capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr
    return wheel, made.stdout + made.stderr, json.loads(ran.stdout)


@pytest.fixture(scope="module")
def checkout_build():
    stamp = native.BUILD / native.STAMP
    if not stamp.is_file() or json.loads(stamp.read_text()).get("digest") != native.digest():
        pytest.skip("no compiled build of this source to package (python3 tasks.py build)")


@pytest.mark.slow
def test_pip_install_carries_the_compiled_engine(tmp_path, checkout_build):
    """`pip install .` puts the build in the package (`engine/_mypyc`, a platform wheel) and the
    installed package runs it, deciding as the checkout does."""
    env = {k: v for k, v in os.environ.items() if k != "INVERSION_LAB_PURE"}
    wheel, said, got = _wheel(tmp_path, env)
    names = set(wheel.namelist())
    assert "engine/_mypyc/" + native.STAMP in names and wheel.filename.endswith(".whl")
    assert "-none-any" not in wheel.filename, "a wheel with C extensions is for this platform only"
    assert {f"engine/_mypyc/{p.removesuffix('.py')}{native.SUFFIX}" for p in COMPILED} <= names
    assert "compiled engine: copied from .build/mypyc" in said
    assert got["engine"] == f"compiled (mypyc, {len(COMPILED)} modules)"
    assert got["kv"].endswith(native.SUFFIX) and "/site/engine/_mypyc/" in got["kv"]
    from engine import load, simulate

    here = simulate(load("default", {"duration_s": 30})).summary
    here.pop("wall_time_s")
    assert got["summary"] == json.loads(json.dumps(here))


@pytest.mark.slow
def test_pip_install_with_pure_carries_the_interpreted_engine_and_says_so(tmp_path, checkout_build):
    wheel, said, got = _wheel(tmp_path, {**os.environ, "INVERSION_LAB_PURE": "1"})
    assert not any("_mypyc" in n for n in wheel.namelist())
    assert "-none-any" in wheel.filename
    assert "note: the package carries the interpreted engine only: INVERSION_LAB_PURE=1" in said
    assert got["engine"].startswith("pure Python (no compiled build") and got["kv"].endswith("engine/core/kv.py")
