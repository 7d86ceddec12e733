"""Which engine runs: the event path compiled with mypyc, or the same source interpreted.

The compiled build (`python3 tasks.py build`; `tasks.py test` makes it first, `tasks.py app` in
the background) lives in `.build/mypyc/`, beside the source and never in it: one extension module
per module of `engine.compiled_modules.COMPILED`, their shared library, and a stamp holding the
digest of the sources it was made from. `pip install .` puts the same build in the installed
package, as `engine/_mypyc/` (setup.py), beside the sources it was made from. `use()` (run once
by the first engine folder imported) puts a finder first on `sys.meta_path` that loads those
modules from the build — only if the stamp matches the source on disk now (a rule edited since
the build must never run as its old compiled self) and INVERSION_LAB_PURE is not set. Otherwise
nothing changes: the interpreted engine runs. `ENGINE` says which ran, and why; `python -m engine
bench` prints it.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import json
import os
import sys
from pathlib import Path

from .compiled_modules import COMPILED

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / ".build" / "mypyc"  # a checkout's build
PACKAGED = Path(__file__).resolve().parent / "_mypyc"  # an installed package's (made by `pip install .`)
STAMP = "stamp.json"
GROUP = "inversion_lab_engine__mypyc"  # the shared library the compiled modules import
SUFFIX = importlib.machinery.EXTENSION_SUFFIXES[0]
ENGINE = "pure Python (not yet decided)"
LIB = BUILD  # the build `use()` looked at


def found() -> Path:
    """Where the build is: the checkout's, else the one `pip install .` put in the package."""
    return PACKAGED if not (BUILD / STAMP).exists() and (PACKAGED / STAMP).exists() else BUILD


def digest(root: Path = ROOT) -> str:
    """What a build is valid for: the compiled modules' sources and this interpreter's ABI."""
    h = hashlib.sha256(sys.implementation.cache_tag.encode() + SUFFIX.encode())
    for path in COMPILED:
        h.update(path.encode() + b"\0" + (root / path).read_bytes() + b"\0")
    return h.hexdigest()


def module_name(path: str) -> str:
    return path.removesuffix(".py").replace("/", ".")


class CompiledFinder:
    """Finds the compiled event-path modules (and their shared library) in the build folder."""

    def __init__(self, lib: Path):
        self.files = {module_name(p): lib / (p.removesuffix(".py") + SUFFIX) for p in COMPILED}
        self.files[GROUP] = lib / (GROUP + SUFFIX)

    def find_spec(self, fullname: str, path=None, target=None):
        where = self.files.get(fullname)
        return None if where is None else importlib.util.spec_from_file_location(fullname, where)


def why_pure(lib: Path | None = None) -> str | None:
    """Why the interpreted engine must run (None: the compiled build may)."""
    lib = found() if lib is None else lib
    if os.environ.get("INVERSION_LAB_PURE") == "1":
        return "INVERSION_LAB_PURE=1"
    try:
        stamp = json.loads((lib / STAMP).read_text())
    except (OSError, ValueError):
        return "no compiled build (python3 tasks.py build)"
    if stamp.get("digest") != digest():
        return "the compiled build is older than the source (python3 tasks.py build)"
    if any(not p.is_file() for p in CompiledFinder(lib).files.values()):
        return "the compiled build is incomplete (python3 tasks.py build)"
    return None


def use(lib: Path | None = None) -> str:
    """Load the event path compiled when a valid build is there (before any of it is imported)."""
    global ENGINE, LIB
    if not ENGINE.endswith("(not yet decided)"):
        return ENGINE  # decided by the first engine folder imported (the digest is read once)
    LIB = lib = found() if lib is None else lib
    why = why_pure(lib)
    if why is None and not any(module_name(p) in sys.modules for p in COMPILED):
        sys.meta_path.insert(0, CompiledFinder(lib))
        ENGINE = f"compiled (mypyc, {len(COMPILED)} modules)"
    else:
        ENGINE = f"pure Python ({why or 'its modules were imported before the build was found'})"
    return ENGINE
