"""`python -m engine sweep|plan`, run as users run them (subprocesses from the repo root),
including Ctrl-C and a hard kill in the middle of a sweep."""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from engine.sweeps.sweep_store import read_manifest, read_table
from tests.sweep_fixtures import comparable

REPO = Path(__file__).resolve().parents[2]


def cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "engine", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout)


def write_spec(path: Path, **data) -> Path:
    path.write_text(yaml.safe_dump({"base": "default", "set": {"duration_s": 8, "warmup_s": 1}, **data}))
    return path


def test_sweep_writes_table_csv_and_manifest(tmp_path):
    spec = write_spec(tmp_path / "s.yaml", grid={"scheduler.policy": ["fcfs", "priority"]}, seeds=2)
    dry = cli("sweep", str(spec), "--dry-run")
    assert dry.returncode == 0 and "4 runs (2 settings × 2 seeds); knobs: scheduler.policy" in dry.stdout
    out = tmp_path / "out"
    proc = cli("sweep", str(spec), "--out", str(out), "--workers", "2")
    assert proc.returncode == 0, proc.stderr
    assert "4 runs (0 already done, 4 run now" in proc.stdout and "local × 2" in proc.stdout
    table = pd.read_parquet(out / "runs.parquet")
    assert len(table) == 4 * 3 and table["run"].nunique() == 4
    assert pd.read_csv(out / "runs.csv").shape == table.shape
    assert read_manifest(out)["status"] == "complete"
    again = cli("sweep", str(spec), "--out", str(out))
    assert again.returncode == 0 and "(4 already done, 0 run now" in again.stdout


@pytest.mark.parametrize("data, needle", [
    ({"grid": {"scheduler.polcy": ["fcfs"]}}, "grid.scheduler.polcy"),
    ({"grid": {"scheduler.policy": ["lifo"]}}, "grid.scheduler.policy = 'lifo'"),
    ({"seeds": "three"}, "seeds = 'three'"),
])
def test_bad_spec_exits_2_with_one_line_naming_the_key(tmp_path, data, needle):
    proc = cli("sweep", str(write_spec(tmp_path / "bad.yaml", **data)))
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: ") and needle in proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert not (REPO / "runs" / "bad").exists()


@pytest.mark.parametrize("args, needle", [
    (["sweep", "no-such-spec.yaml"], "cannot read no-such-spec.yaml"),
    (["sweep", "SPEC", "--backend", "local", "--address", "1.2.3.4:6379"], "--address is for --backend ray"),
    (["sweep", "SPEC", "--workers", "0"], "--workers 0"),
    (["plan", "SPEC"], "replicas.count: the plan searches it"),  # the plan owns replicas.count
])
def test_bad_arguments_exit_2(tmp_path, args, needle):
    spec = write_spec(tmp_path / "s.yaml", grid={"replicas.count": [1]} if args[0] == "plan" else {})
    proc = cli(*[str(spec) if a == "SPEC" else a for a in args])
    assert proc.returncode == 2, proc.stdout
    assert proc.stderr.startswith("error: ") and needle in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.skipif(importlib.util.find_spec("ray") is not None, reason="Ray is installed here")
def test_ray_backend_without_ray_says_how_to_install_it(tmp_path):
    proc = cli("sweep", str(write_spec(tmp_path / "s.yaml")), "--backend", "ray", "--out", str(tmp_path / "o"))
    assert proc.returncode == 2
    assert "requirements-ray.txt" in proc.stderr and proc.stderr.count("\n") == 1


def _start(spec: Path, out: Path) -> subprocess.Popen:
    # its own process group, as a terminal's foreground job: Ctrl-C reaches the workers too
    return subprocess.Popen([sys.executable, "-m", "engine", "sweep", str(spec), "--out", str(out), "--workers", "1",
                             "--batch", "1", "--checkpoint-s", "0", "--quiet"], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def _wait_for_parts(out: Path, n: int, proc: subprocess.Popen, limit_s: float = 120) -> None:
    t0 = time.monotonic()
    while len(list((out / "parts").glob("part-*.parquet"))) < n:
        assert proc.poll() is None, "the sweep ended before it could be interrupted"
        assert time.monotonic() - t0 < limit_s, "no part written"
        time.sleep(0.02)


LONG = 200


@pytest.fixture
def long_spec(tmp_path):
    # LONG runs of 60 s of traffic on one worker (~25 ms each compiled, ~60 ms interpreted): long
    # enough to stop in the middle on either engine (80 runs of 30 s once finished before the signal)
    return write_spec(tmp_path / "long.yaml", set={"duration_s": 60}, seeds=LONG)


def test_ctrl_c_leaves_a_valid_partial_output_and_the_same_command_resumes(tmp_path, long_spec):
    out = tmp_path / "out"
    proc = _start(long_spec, out)
    _wait_for_parts(out, 2, proc)
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted:" in err and "rerun the same command to resume" in err and "Traceback" not in err
    m = read_manifest(out)
    assert m["status"] == "interrupted" and 2 <= m["done"] < LONG
    partial = pd.read_parquet(out / "runs.parquet")
    assert partial["run"].nunique() == m["done"] and len(partial) == 3 * m["done"]
    assert pd.read_csv(out / "runs.csv").shape == partial.shape
    rest = cli("sweep", str(long_spec), "--out", str(out), "--quiet")
    assert rest.returncode == 0, rest.stderr
    assert f"({m['done']} already done, {LONG - m['done']} run now" in rest.stdout
    assert pd.read_parquet(out / "runs.parquet")["run"].nunique() == LONG


def test_a_killed_sweep_is_readable_and_resumes_to_the_same_table(tmp_path, long_spec):
    out = tmp_path / "out"
    proc = _start(long_spec, out)
    _wait_for_parts(out, 3, proc)
    os.killpg(proc.pid, signal.SIGKILL)  # no chance to clean up: the machine went away
    proc.communicate(timeout=60)
    assert read_manifest(out)["status"] == "running"  # it never got to say otherwise
    partial = read_table(out)  # parts + manifest: knobs and seeds joined in
    done = partial["run"].nunique()
    assert 3 <= done < LONG and list(partial.columns[:3]) == ["run", "seed", "class"]
    # a write the kill cut leaves only a hidden temp file (readers skip it); every visible part is whole
    visible = [p for p in (out / "parts").iterdir() if not p.name.startswith(".")]
    assert visible and all(p.suffix == ".parquet" for p in visible)
    assert all(p.name.endswith(".tmp") for p in (out / "parts").iterdir() if p.name.startswith("."))
    rest = cli("sweep", str(long_spec), "--out", str(out), "--quiet")
    assert rest.returncode == 0 and f"({done} already done" in rest.stdout
    fresh = cli("sweep", str(long_spec), "--out", str(tmp_path / "fresh"), "--quiet")
    assert fresh.returncode == 0
    pd.testing.assert_frame_equal(comparable(read_table(out)), comparable(read_table(tmp_path / "fresh")))


def test_plan_prints_the_frontier_and_cheapest_and_exits_1_without_a_plan(tmp_path):
    spec = write_spec(tmp_path / "p.yaml", seeds=1, grid={"scheduler.policy": ["fcfs", "priority"]},
                      plan={"replicas": [1, 2]})
    proc = cli("plan", str(spec), "--out", str(tmp_path / "o"), "--quiet")
    assert proc.returncode == 0, proc.stderr
    assert "frontier (GPUs" in proc.stdout and "cheapest: 1 GPU(s)" in proc.stdout
    assert (tmp_path / "o" / "plan.json").is_file() and (tmp_path / "o" / "runs.parquet").is_file()
    # P0's 1 s TTFT at 40× the traffic on one H100: nothing meets it
    hard = write_spec(tmp_path / "h.yaml", seeds=1, set={"duration_s": 8, "warmup_s": 1,
                                                         "classes.P1.arrival.rate": 120}, plan={"replicas": [1, 1]})
    proc = cli("plan", str(hard), "--out", str(tmp_path / "h"), "--quiet")
    assert proc.returncode == 1, proc.stderr
    assert "no plan:" in proc.stdout


def _readme_sweep_block() -> list[str]:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    block = text.split("## Sweeps and capacity planning", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    return [line.split("#")[0].strip() for line in block.strip().splitlines() if line.strip()]


@pytest.mark.parametrize("command", _readme_sweep_block())
def test_readme_sweep_commands_validate(command, tmp_path):
    """Each command of the README's sweep block names a shipped spec that validates (--dry-run)."""
    import shlex

    args = shlex.split(command)
    assert args[:3] == ["python", "-m", "engine"] and args[3] in ("sweep", "plan")
    proc = cli(*args[3:], *([] if "--dry-run" in args else ["--dry-run"]))
    assert proc.returncode == 0, proc.stderr
    assert " runs" in proc.stdout


def test_readme_lists_every_spec_key():
    from engine.sweeps.sweep import SPEC_KEYS

    text = (REPO / "README.md").read_text(encoding="utf-8").split("## Sweeps and capacity planning", 1)[1]
    table = text.split("| key | meaning |", 1)[1].split("\n\n", 1)[0]
    listed = {k.strip("` ") for row in table.splitlines()[2:] for k in row.split("|")[1].split(",")}
    assert listed == set(SPEC_KEYS)
