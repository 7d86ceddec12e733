"""Layering of the app's code (`ui/`), as `tests/engine/test_layers.py` does for the engine.

Streamlit is the dividing line. A module that imports streamlit is a *view* (the frame's page shell
and sidebar, the polling fragments, the pages' panels, the workshop's views); every other module is
*pure* and imports no view — at the top or inside a function — so it loads, runs and is tested
without a Streamlit session (the worker processes, the command-line tools, the figure builders).
Among pure modules the folders import one way: `frame` (codec, links, seeds, languages, untrusted
text) is the base; `runtime` (sweep plans, pools, workers) and `panels` (words and tables) each build
on it alone; `teach` (lessons, decisions) on those three; `charts` (figure builders, all pure) on all
of them. Views, and the pages, may import anything. Imports under `if TYPE_CHECKING:` never run
and do not count. No import cycles anywhere in `ui/`: `tests/test_imports.py`.

Why not one order of the folders, as in the engine: measured with this file's `layers` before it was
written (61 modules, 13 views), every order of the five folders was broken by at least 19 of the 107
imports between them (the frame's shell imports the runtime's fragments, which import panels...),
while only 5 imports broke this split, and small moves fixed them.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support.imports import runtime_imports

REPO = Path(__file__).resolve().parents[2]
UI = REPO / "ui"

MAY_IMPORT = {"frame": {"frame"}, "runtime": {"frame", "runtime"}, "panels": {"frame", "panels"},
              "teach": {"frame", "runtime", "panels", "teach"},
              "charts": {"frame", "runtime", "panels", "teach", "charts"}}


def _ui_module(root: Path, parts: list[str]) -> str | None:
    """`folder.module` for a dotted path inside the app (`["panels", "text"]`), `folder` for a folder's
    package itself, None outside the five folders."""
    if not parts or parts[0] not in MAY_IMPORT:
        return None
    if len(parts) > 1 and (root / parts[0] / f"{parts[1]}.py").is_file():
        return f"{parts[0]}.{parts[1]}"
    return parts[0]


def imports(path: Path, root: Path = UI) -> tuple[set[str], set[str]]:
    """(top-level names of the libraries, app modules as `folder.module`) that the module at
    root/<folder>/<name>.py imports at run time."""
    own = path.parent.name
    libs: set[str] = set()
    mods: set[str] = set()
    for node in runtime_imports(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for a in node.names:
                p = a.name.split(".")
                if p[0] == root.name:
                    mods.add(_ui_module(root, p[1:]) or root.name)
                else:
                    libs.add(p[0])
            continue
        if node.level == 0:
            p = (node.module or "").split(".")
            if p[0] != root.name:
                libs.add(p[0])
                continue
            base = p[1:]
        else:  # relative: `.` is the module's own folder, `..` the app's root
            base = ([own] if node.level == 1 else []) + (node.module.split(".") if node.module else [])
        if len(base) == 1:  # `from ..panels import text, vocab`: the names may be modules
            targets = [_ui_module(root, base + [a.name]) for a in node.names]
        else:
            targets = [_ui_module(root, base)]
        mods.update(t or root.name for t in targets)
    return libs, mods


def layers(root: Path = UI) -> dict[str, tuple[bool, set[str]]]:
    """`folder.module` → (is a view, the app modules it imports), for every module in the five folders."""
    out = {}
    for folder in MAY_IMPORT:
        for f in sorted((root / folder).glob("*.py")):
            if f.name == "__init__.py":
                continue
            libs, mods = imports(f, root)
            out[f"{folder}.{f.stem}"] = ("streamlit" in libs, mods - {f"{folder}.{f.stem}"})
    return out


def chart_views(root: Path = UI) -> list[str]:
    """Figure builders that import streamlit (there should be none)."""
    return [m for m, (view, _) in layers(root).items() if view and m.startswith("charts.")]


def wrong_way(root: Path = UI) -> dict[str, list[str]]:
    """Module → the imports that break the layering (a pure one importing a view, or a folder it may not)."""
    found = layers(root)
    views = {m for m, (view, _) in found.items() if view}
    bad = {}
    for m, (view, mods) in found.items():
        if view:
            continue
        folder = m.split(".")[0]
        wrong = sorted(t for t in mods if t in views or t.split(".")[0] not in MAY_IMPORT[folder])
        if wrong:
            bad[m] = wrong
    return bad


def test_the_app_is_measured_whole():
    found = layers()
    assert all(len(list((UI / f).glob("*.py"))) > 5 for f in MAY_IMPORT)
    assert len(found) == sum(1 for f in MAY_IMPORT for p in (UI / f).glob("*.py") if p.name != "__init__.py")
    views = {m for m, (view, _) in found.items() if view}
    assert {"frame.state", "frame.sidebar", "runtime.runs", "runtime.live", "teach.workshop"} <= views
    assert {"frame.i18n", "panels.text", "runtime.worker", "teach.lessons"} <= set(found) - views
    assert {"frame.i18n", "panels.vocab", "panels.inversions"} <= found["charts.fig_timeline"][1]  # sees real imports
    assert {"charts.sweep_data", "charts.sweep_figures"} <= found["panels.sweep_view"][1]


def test_figure_builders_import_no_streamlit():
    assert chart_views() == []


def test_pure_modules_import_no_view_and_folders_import_one_way():
    assert wrong_way() == {}


def test_the_layering_check_sees_a_wrong_way_import(tmp_path):
    """Guard against a vacuous test: on a planted app, a view imported by a pure module (even inside a
    function), a chart importing streamlit, and a folder importing one above it are each caught; an
    import only for type checking is not."""
    app = tmp_path / "ui"
    files = {
        "frame/state.py": "import streamlit as st\n",
        "frame/i18n.py": "",
        "panels/text.py": "from ..frame.i18n import _\n",
        "panels/kpis.py": "def f():\n    from ..frame import state\n",  # a view, inside a function
        "runtime/sweeps.py": "from ui.panels.text import _\n",  # runtime may not import panels
        "teach/lessons.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..charts.fig import x\n",
        "charts/fig.py": "import streamlit\nfrom . import other\n",
        "charts/other.py": "from ..teach import lessons\nfrom ..frame.i18n import _\n",  # may
        "charts/uses.py": "from .fig import draw\n",  # a pure chart drawing with a view's help
    }
    for name, text in files.items():
        (app / name).parent.mkdir(parents=True, exist_ok=True)
        (app / name).write_text(text)
    assert wrong_way(app) == {"panels.kpis": ["frame.state"], "runtime.sweeps": ["panels.text"],
                              "charts.uses": ["charts.fig"]}
    assert chart_views(app) == ["charts.fig"] and layers(app)["charts.fig"] == (True, {"charts.other"})
    assert layers(app)["charts.other"] == (False, {"teach.lessons", "frame.i18n"})
    assert layers(app)["teach.lessons"] == (False, set())
