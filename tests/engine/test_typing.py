"""The engine's event path (`engine.compiled_modules.COMPILED`) passes `mypy --strict`: the mypyc
build enforces those annotations at run time, so a wrong one is a crash (or a silently converted
value) in the compiled engine. One mypy run checks the list and a planted module, so the check is
seen to catch a missing annotation and a wrong type under the project's settings."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from engine.compiled_modules import COMPILED

REPO = Path(__file__).resolve().parents[2]
PLANTED = '''def untyped(x):
    return x


def wrong(n: int) -> int:
    return str(n)
'''


def test_the_compiled_modules_pass_mypy_strict(tmp_path, pytestconfig):
    planted = tmp_path / "planted_module.py"
    planted.write_text(PLANTED)
    store = getattr(pytestconfig, "cache", None)  # (pytest's cache: a warm mypy run takes about a second)
    cache = store.mkdir("mypy") if store is not None else tmp_path / "mypy"
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent", "--no-error-summary",
         "--config-file", str(REPO / "pyproject.toml"), "--cache-dir", str(cache),
         *(str(REPO / p) for p in COMPILED), str(planted)],
        cwd=REPO, capture_output=True, text=True)
    errors = [line for line in out.stdout.splitlines() if ": error:" in line]
    ours = [e for e in errors if "planted_module.py" not in e]
    assert not ours, "\n".join(ours)
    planted_codes = sorted(re.findall(r"\[([a-z-]+)\]$", e)[0] for e in errors if "planted_module.py" in e)
    assert planted_codes == ["no-untyped-def", "return-value"], out.stdout + out.stderr


def test_the_list_is_the_engine_core_and_the_replica_loop():
    """Every listed file exists; every module of `engine/core` (one engine's rules and state) is listed,
    and no package `__init__` (they boot `engine.native` and stay interpreted)."""
    assert all((REPO / p).is_file() for p in COMPILED)
    assert len(set(COMPILED)) == len(COMPILED)
    core = {p.relative_to(REPO).as_posix() for p in (REPO / "engine" / "core").glob("*.py") if p.name != "__init__.py"}
    assert core <= set(COMPILED) and not any(p.endswith("__init__.py") for p in COMPILED)


def test_no_blanket_type_ignores():
    """An ignore in the compiled modules names its error code (and says why, in its comment)."""
    bare = [f"{p}:{k}" for p in COMPILED for k, line in enumerate((REPO / p).read_text().splitlines(), 1)
            if re.search(r"type:\s*ignore(?!\[)", line)]
    assert not bare
