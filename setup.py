"""`pip install .`: the package as pyproject.toml describes it, plus the engine's event path compiled
with mypyc into `engine/_mypyc` when this machine can (`engine.native_build.package`: a C compiler
and Python's headers; mypy, which ships mypyc, is a build requirement). Without them, or with
INVERSION_LAB_PURE=1, the wheel carries the interpreted engine alone and says so in one line."""

import sys
from pathlib import Path

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

sys.path.insert(0, str(Path(__file__).resolve().parent))  # `engine` from this source: its __init__ imports nothing
from engine import native_build  # noqa: E402


class BuildWithEngine(build_py):
    def run(self) -> None:
        super().run()
        if not self.dry_run:
            print(native_build.package(Path(self.build_lib) / "engine" / "_mypyc"), file=sys.stderr)


class MaybeBinary(Distribution):
    def has_ext_modules(self) -> bool:
        """A wheel with the compiled engine is for this platform and Python only."""
        return native_build.why_not_packaged() is None


setup(cmdclass={"build_py": BuildWithEngine}, distclass=MaybeBinary)
