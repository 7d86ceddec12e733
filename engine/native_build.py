"""Build the compiled engine: mypyc over `engine.compiled_modules.COMPILED` into `.build/mypyc`.

Run by `python3 tasks.py build` (and by `tasks.py test` first, `tasks.py app` in the background),
and by `pip install .` (setup.py calls `package`).
The build is made in a fresh folder and moved into place in one rename, with the digest of the
sources it compiled; a source changed while it ran makes it discard the result. Needs mypy (which
ships mypyc; requirements-build.txt) and a C compiler with Python's headers: without them it says
so in one line and the interpreted engine goes on running (`engine.native`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

from .compiled_modules import COMPILED
from .native import BUILD, GROUP, ROOT, STAMP, digest, why_pure

# mypyc's setuptools entry point, run in a child process (its build is long and noisy)
SETUP = """
import sys
from setuptools import setup
from mypyc.build import mypycify
out, tmp, *paths = sys.argv[1:]
setup(name="inversion-lab-engine", script_args=["build_ext", "--build-lib", out, "--build-temp", tmp, "-q"],
      ext_modules=mypycify(["--follow-imports=silent", *paths], opt_level="3", group_name=GROUP.removesuffix("__mypyc"),
                           target_dir=tmp + "/c"))
"""


def missing() -> str | None:
    """What a build lacks on this machine (None: it can build)."""
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if not shutil.which(cc):
        return f"no C compiler ({cc})"
    if not (Path(sysconfig.get_paths()["include"]) / "Python.h").is_file():
        return "no Python headers (Python.h)"
    try:
        import mypyc  # noqa: F401
    except ImportError:
        return "no mypyc (pip install -r requirements-build.txt)"
    return None


def build(out: Path = BUILD, verbose: bool = False) -> float:
    """Compile the event path into `out`; returns the seconds it took."""
    t0 = time.perf_counter()
    before = digest()
    new, old = out.with_name(out.name + f".new-{os.getpid()}"), out.with_name(out.name + f".old-{os.getpid()}")
    shutil.rmtree(new, ignore_errors=True)
    (new / "tmp").mkdir(parents=True)
    run = subprocess.run([sys.executable, "-c", SETUP.replace("GROUP", repr(GROUP)), str(new), str(new / "tmp"),
                          *COMPILED], cwd=ROOT, capture_output=not verbose, text=True)
    if run.returncode:
        shutil.rmtree(new, ignore_errors=True)
        tail = (run.stdout or "")[-3000:] + (run.stderr or "")[-3000:]
        raise RuntimeError(f"mypyc build failed (exit {run.returncode}):\n{tail}")
    shutil.rmtree(new / "tmp")
    if digest() != before:
        shutil.rmtree(new)
        raise RuntimeError("the source changed while it was compiled: build again")
    (new / STAMP).write_text(f'{{"digest": "{before}", "modules": {len(COMPILED)}}}\n')
    if out.exists():
        out.rename(old)
    new.rename(out)
    shutil.rmtree(old, ignore_errors=True)
    return time.perf_counter() - t0


def why_not_packaged() -> str | None:
    """Why `package` will leave the wheel interpreted (None: it copies or makes a compiled build)."""
    why = why_pure(BUILD)
    if why is None:
        return None
    return why if why == "INVERSION_LAB_PURE=1" else missing()


def package(out: Path) -> str:
    """For `pip install .`: the compiled build into the package folder `out` (`engine/_mypyc` of the
    wheel), copied from the checkout's build when that one matches the source, else made now.
    Never fails the install: says why in one line when the wheel carries the interpreted engine."""
    if (why := why_not_packaged()) is not None:
        return f"note: the package carries the interpreted engine only: {why}"
    if why_pure(BUILD) is None:
        shutil.copytree(BUILD, out)
        return f"compiled engine: copied from {BUILD.relative_to(ROOT)}"
    try:
        took = build(out)
    except RuntimeError as err:
        return f"note: the package carries the interpreted engine only: {err}"
    return f"compiled engine: {len(COMPILED)} modules in {took:.0f} s"


def main(argv: list[str]) -> int:
    if "--if-stale" in argv and why_pure() is None:
        return 0  # the build matches the source: nothing to do
    if (lack := missing()) is not None:
        print(f"note: the engine runs interpreted: {lack}", file=sys.stderr)
        return 0
    try:
        took = build(verbose="-v" in argv)
    except RuntimeError as err:
        print(f"note: the engine runs interpreted: {err}", file=sys.stderr)
        return 1
    print(f"compiled engine: {len(COMPILED)} modules in {took:.0f} s ({BUILD.relative_to(ROOT)})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
