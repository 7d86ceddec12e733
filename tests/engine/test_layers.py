"""Layering: the engine runs headless — it imports no streamlit, no plotly and nothing of the app —
and its folders import one way: `core` (one engine's state and rules) nothing else of the engine,
`config` (what a run is given) only `core`, `sim` (a run in time) `core` and `config`, `sweeps`
(many runs) those three; only the package's top (CLI, bench) imports everything. One exception: a
folder's `__init__` boots `engine.native` (which decides whether the event path loads compiled, and
imports nothing of the engine but the list of those modules)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FORBIDDEN = ("streamlit", "plotly", "ui", "pages", "app")


MAY_IMPORT = {"core": {"core"}, "config": {"core", "config"}, "sim": {"core", "config", "sim"},
              "sweeps": {"core", "config", "sim", "sweeps"}}


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def _type_checking_only(tree: ast.Module) -> set[int]:
    """Line numbers of imports under `if TYPE_CHECKING:` (annotations only, never run)."""
    lines = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            lines.update(n.lineno for b in node.body for n in ast.walk(b) if isinstance(n, ast.ImportFrom))
    return lines


def engine_folders_imported(path: Path) -> set[str]:
    """The engine folders (core, config, sim, sweeps; "top" for the package itself) that a module
    under engine/<folder>/ imports at run time."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip, own = _type_checking_only(tree), path.parent.name
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and [a.name for a in node.names] == ["__version__"]:
            continue  # the package's version (a run's manifest records it)
        if isinstance(node, ast.ImportFrom) and node.lineno not in skip:
            if node.level == 0 and node.module and node.module.split(".")[0] == "engine":
                parts = node.module.split(".")
                found.add(parts[1] if len(parts) > 1 and parts[1] in MAY_IMPORT else "top")
            elif node.level == 1:
                found.add(own)
            elif node.level == 2:
                first = (node.module or "").split(".")[0]
                found.add(first if first in MAY_IMPORT else "top")
        elif isinstance(node, ast.Import):
            for a in node.names:
                parts = a.name.split(".")
                if parts[0] == "engine":
                    found.add(parts[1] if len(parts) > 1 and parts[1] in MAY_IMPORT else "top")
    return found


def test_engine_folders_import_one_way():
    seen = {}
    for folder, allowed in MAY_IMPORT.items():
        files = sorted((REPO / "engine" / folder).glob("*.py"))
        assert len(files) > 3, folder
        for f in files:
            extra = engine_folders_imported(f) - allowed - ({"top"} if f.name == "__init__.py" else set())
            if extra:
                seen[f"{folder}/{f.name}"] = sorted(extra)
    assert not seen


def test_only_native_is_booted_from_the_top():
    """What a folder's `__init__` may take from the package's top: `native`, nothing else."""
    for folder in MAY_IMPORT:
        tree = ast.parse((REPO / "engine" / folder / "__init__.py").read_text(encoding="utf-8"))
        tops = [(n.module, [a.name for a in n.names]) for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
        assert tops in ([], [(None, ["native"])]), (folder, tops)
    assert imported_modules(REPO / "engine" / "native.py") <= {"__future__", "hashlib", "importlib", "json", "os",
                                                                "sys", "pathlib"}


def test_the_layering_check_sees_a_wrong_way_import(tmp_path):
    """Guard against a vacuous test: a core module importing the simulation is caught."""
    core = tmp_path / "core"
    core.mkdir()
    bad = core / "bad.py"
    bad.write_text("from ..sim.simulation import simulate\nfrom .kv import KVPool\n")
    assert engine_folders_imported(bad) == {"sim", "core"}
    ok = core / "ok.py"
    ok.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..config.workload import Workload\n")
    assert engine_folders_imported(ok) == set()


def test_engine_sources_import_no_ui():
    files = sorted((REPO / "engine").rglob("*.py"))
    assert len(files) > 40
    bad = {f.name: sorted(imported_modules(f) & set(FORBIDDEN)) for f in files}
    assert not {k: v for k, v in bad.items() if v}


def test_running_a_scenario_loads_no_ui_library():
    code = ("import sys; from engine import load, simulate; simulate(load('default', {'duration_s': 10}));"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('streamlit', 'plotly', 'ui')))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_package_ships_every_engine_folder():
    """`pip install .` installs what `packages` lists: every folder with an `__init__` (engine's four
    once shipped as `engine` alone, so an installed engine could not import its own core)."""
    import tomllib

    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    folders = {".".join(p.parent.relative_to(REPO).parts) for p in (REPO / "engine").rglob("__init__.py")}
    assert folders and folders <= listed, sorted(folders - listed)
