"""Layering: the engine runs headless — it imports no streamlit, no plotly and nothing of the app."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FORBIDDEN = ("streamlit", "plotly", "ui", "pages", "app")


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_engine_sources_import_no_ui():
    files = sorted((REPO / "engine").glob("*.py"))
    assert len(files) > 10
    bad = {f.name: sorted(imported_modules(f) & set(FORBIDDEN)) for f in files}
    assert not {k: v for k, v in bad.items() if v}


def test_running_a_scenario_loads_no_ui_library():
    code = ("import sys; from engine import load, simulate; simulate(load('default', {'duration_s': 10}));"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('streamlit', 'plotly', 'ui')))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
