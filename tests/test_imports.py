"""No import cycles in `engine/` and `ui/`, and every module imports alone, in any order, and from
many threads at once in a fresh interpreter.

Why threads: Streamlit runs each session's page in its own thread, so when a room opens the link
on a cold server the pages import the app's modules concurrently. Python takes a module's import
lock before importing its package, and breaks a lock cycle between two threads by handing one of
them a half-initialised module ("cannot import name 'Hardware' from partially initialized module
'engine.config.scenario'"). A cycle that a single thread survives is therefore a crash under a room's
first minute. The static check below counts every import a module can run (top-level and inside
functions, not `if TYPE_CHECKING:`), the edge from a module to its package, and `from engine import
X` as the submodule that defines X (`engine.__getattr__` loads it).
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.imports import runtime_imports

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("engine", "ui")


def modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for f in sorted((ROOT / pkg).rglob("*.py")):
            parts = f.relative_to(ROOT).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    return out


def _lazy_names() -> dict[str, str]:
    """`engine`'s lazily loaded names → the submodule that defines each."""
    tree = ast.parse((ROOT / "engine" / "__init__.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.AnnAssign | ast.Assign):
            target = node.target if isinstance(node, ast.AnnAssign) else node.targets[0]
            if getattr(target, "id", "") == "_WHERE":
                return {k: f"engine.{v}" for k, v in ast.literal_eval(node.value).items()}
    return {}


def import_graph() -> dict[str, set[str]]:
    mods = modules()
    lazy = _lazy_names()
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        is_pkg = path.name == "__init__.py"
        edges: set[str] = set()
        for node in runtime_imports(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                if node.level:
                    base = name.split(".") if is_pkg else name.split(".")[:-1]
                    base = base[: len(base) - (node.level - 1)]
                    mod = ".".join(base + ([node.module] if node.module else []))
                else:
                    mod = node.module or ""
                targets = [mod]
                for a in node.names:
                    if f"{mod}.{a.name}" in mods:
                        targets.append(f"{mod}.{a.name}")
                    elif mod == "engine" and a.name in lazy:
                        targets.append(lazy[a.name])
            for t in targets:
                parts = t.split(".")
                edges |= {".".join(parts[:i]) for i in range(1, len(parts) + 1)} & set(mods)
        parts = name.split(".")
        edges |= {".".join(parts[:i]) for i in range(1, len(parts))}  # its package (imported under its lock)
        edges.discard(name)
        graph[name] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_cycle_finder_finds_a_cycle_through_a_package():
    """The checker itself: a package that imports its submodule, which imports a sibling that
    imports the first back through the package, is one cycle; a chain is none."""
    g = {"p": {"p.a"}, "p.a": {"p", "p.b"}, "p.b": {"p"}, "q": set(), "q.x": {"q"}}
    assert cycles(g) == [["p", "p.a", "p.b"]]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_no_import_cycles_in_engine_and_ui():
    graph = import_graph()
    assert {"engine", "engine.config.scenario", "engine.config.memory", "ui.frame.state", "ui.frame.sidebar",
            "ui.frame.lab"} <= set(graph)
    assert "engine.config.scenario" in graph["engine.config.memory"]  # the graph does see real imports
    # `from engine import Result, simulate`:
    assert {"engine.sim.simulation", "engine.sim.result"} <= graph["ui.runtime.work"]
    found = cycles(graph)
    assert found == [], "import cycles: " + "; ".join(" ↔ ".join(c) for c in found)


def test_engine_exports_its_names_lazily():
    import engine

    for name in engine.__all__:
        assert getattr(engine, name) is not None
    assert sorted(engine.__all__) == sorted(_lazy_names())
    with pytest.raises(AttributeError):
        engine.no_such_name  # noqa: B018


# A fresh interpreter: import every module (third-party packages first, as a running server has
# them) in an order drawn from the seed, either one after the other or all at once from threads
# released together. Prints a JSON list of failures.
_IMPORTER = r"""
import importlib, json, random, sys, threading
seed, mode, names = int(sys.argv[1]), sys.argv[2], sys.argv[3].split(",")
for third in ("numpy", "pandas", "pydantic", "yaml", "simpy", "plotly.graph_objects", "streamlit"):
    importlib.import_module(third)
random.Random(seed).shuffle(names)
errors = []
def load(name, gate=None):
    if gate is not None:
        gate.wait()
    try:
        importlib.import_module(name)
    except BaseException as err:
        errors.append(f"{name}: {type(err).__name__}: {err}")
if mode == "serial":
    for n in names:
        load(n)
else:
    gate = threading.Barrier(len(names))
    threads = [threading.Thread(target=load, args=(n, gate)) for n in names]
    for t in threads: t.start()
    for t in threads: t.join()
print(json.dumps(errors))
"""


def _import_all(seed: int, mode: str, names: list[str]) -> list[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", _IMPORTER, str(seed), mode, ",".join(names)], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


# Every module but `engine.__main__` (the command line: it runs when imported). The workers and
# tools are imported too (they are modules like any other).
ALL = sorted(m for m in modules() if not m.endswith(".__main__"))


@pytest.mark.parametrize("seed", [0, 1])
def test_every_module_imports_in_a_random_order(seed):
    assert _import_all(seed, "serial", ALL) == []


@pytest.mark.parametrize("seed", range(4))
def test_every_module_imports_from_many_threads_at_once(seed):
    """Failed 4 runs of 4 before the cycles went (ImportError from a partially initialised
    engine.config.scenario / engine.config.memory, or a detected deadlock)."""
    assert _import_all(seed, "threads", ALL) == []
