"""The README's command-line block runs as written (SimPy's docs run their examples the same way)."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def readme_commands() -> list[str]:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    block = text.split("## Command line", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    return [line.split("#")[0].strip() for line in block.strip().splitlines() if line.strip()]


def test_the_block_has_every_subcommand():
    subs = {shlex.split(c)[3] for c in readme_commands()}
    assert subs == {"list", "run", "validate", "bench"}


@pytest.mark.parametrize("command", readme_commands())
def test_readme_command_runs(command, tmp_path):
    args = shlex.split(command.replace("runs/x", str(tmp_path / "x")))
    assert args[:3] == ["python", "-m", "engine"]
    proc = subprocess.run([sys.executable, *args[1:]], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip()
    if "--json" in args:
        assert re.match(r"^\{.*\}$", proc.stdout.strip())
    if "--out" in args:
        assert sorted(p.name for p in (tmp_path / "x").iterdir()) == sorted(
            f"{n}.csv" for n in ("requests", "steps", "waits", "holders", "admissions", "episodes", "alerts"))
