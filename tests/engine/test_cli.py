"""The command line, run as users run it: `python -m engine ...` in a subprocess from the repo root."""

from __future__ import annotations

import json
import subprocess
import sys
from functools import cache
from pathlib import Path

import pandas as pd
import pytest

from engine import load, simulate
from engine.metrics import clean
from engine.scenario import scenario_names

REPO = Path(__file__).resolve().parents[2]

TOP_KEYS = {"scenario", "seed", "kv_blocks", "steps", "sim_time_s", "wall_time_s", "throughput_tok_s",
            "kv_util_mean", "mean_batch_tokens", "preemptions", "rejected", "classes"}
CLASS_KEYS = {"priority", "n", "completed", "rejected", "ttft_p50", "ttft_p90", "ttft_p99", "tpot_p50",
              "tpot_p99", "e2e_p99", "queue_wait_mean", "queue_wait_p99", "blocked_s", "inversion_s",
              "inverted_requests", "slo_attainment"}


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "engine", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout)


@cache
def _in_process(seed: int | None = None, policy: str | None = None) -> str:
    over = {k: v for k, v in (("seed", seed), ("scheduler.policy", policy)) if v is not None}
    return json.dumps(_comparable(simulate(load("default", over)).summary))


def in_process(seed: int | None = None, policy: str | None = None) -> dict:
    return json.loads(_in_process(seed, policy))


def _comparable(summary: dict) -> dict:
    out = json.loads(json.dumps(clean(summary)))
    out.pop("wall_time_s")
    return out


@pytest.fixture(scope="module")
def default_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("out")
    proc = cli("run", "default", "--json", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    return proc, out


def test_run_default_json_has_the_documented_keys(default_run):
    proc, _ = default_run
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1, "--json prints exactly one JSON object"
    s = json.loads(lines[0])
    assert TOP_KEYS <= set(s), TOP_KEYS - set(s)
    assert s["scenario"] == "default"
    assert s["seed"] == load("default").seed
    assert list(s["classes"]) == ["P0", "P1", "P2"]
    for name, c in s["classes"].items():
        assert CLASS_KEYS <= set(c), (name, CLASS_KEYS - set(c))
        assert c["n"] > 0 and 0 <= c["completed"] <= c["n"]
    assert [c["priority"] for c in s["classes"].values()] == [0, 1, 2]
    assert s["steps"] > 0 and s["sim_time_s"] > 0 and s["throughput_tok_s"] > 0
    assert 0 < s["kv_util_mean"] <= 1
    # the same numbers as an in-process run (the CLI adds nothing and loses nothing)
    assert _comparable(s) == in_process()
    assert proc.stderr == ""


def test_run_out_writes_the_frames_as_csv(default_run):
    proc, out = default_run
    s = json.loads(proc.stdout)
    for name in ("requests", "steps", "waits", "episodes"):
        assert (out / f"{name}.csv").is_file(), name
    req = pd.read_csv(out / "requests.csv")
    steps = pd.read_csv(out / "steps.csv")
    waits = pd.read_csv(out / "waits.csv")
    # class n counts the measured requests (arrival >= warmup_s); the CSV has every request
    assert int(req["measured"].sum()) == sum(c["n"] for c in s["classes"].values())
    assert len(req) > int(req["measured"].sum())  # default has a 5 s warmup
    assert len(steps) == s["steps"]
    assert {"id", "class", "arrival_s", "ttft_s", "status"} <= set(req.columns)
    assert {"t_s", "dt_s", "kv_used", "kv_free"} <= set(steps.columns)
    assert {"request", "start_s", "end_s", "reason"} <= set(waits.columns)
    assert steps["kv_used"].max() <= s["kv_blocks"] and steps["kv_used"].max() > 0.5 * s["kv_blocks"]


def test_set_policy_and_seed_change_the_run():
    proc = cli("run", "default", "--set", "scheduler.policy=priority", "--seed", "3", "--json")
    assert proc.returncode == 0, proc.stderr
    pri = json.loads(proc.stdout)
    assert pri["seed"] == 3
    pri.pop("wall_time_s")
    fcfs = in_process(seed=3)
    assert pri == in_process(seed=3, policy="priority")
    # same traffic (seed 3 in both), different schedule
    assert {c: v["n"] for c, v in pri["classes"].items()} == {c: v["n"] for c, v in fcfs["classes"].items()}
    assert pri["classes"] != fcfs["classes"]
    # priority order helps P0 and hurts P2 compared with FCFS on this scenario
    assert pri["classes"]["P0"]["queue_wait_mean"] < fcfs["classes"]["P0"]["queue_wait_mean"]
    assert pri["classes"]["P2"]["queue_wait_mean"] > fcfs["classes"]["P2"]["queue_wait_mean"]
    # and seed 3 is not the default seed's traffic
    assert pri["classes"]["P1"]["n"] != in_process()["classes"]["P1"]["n"]


def test_list_prints_the_shipped_scenarios():
    proc = cli("list")
    assert proc.returncode == 0, proc.stderr
    shipped = sorted(p.stem for p in (REPO / "scenarios").glob("*.yaml"))
    assert shipped == scenario_names()
    assert {"default", "classic-inversion"} <= set(shipped)
    lines = proc.stdout.strip().splitlines()
    bench = sorted(p.stem for p in (REPO / "scenarios" / "bench").glob("*.yaml"))
    assert {"stress-100k", "vidur-2k"} <= set(bench)
    assert [ln.split()[0] for ln in lines] == shipped + bench  # the app's presets, then the CLI-only benchmarks
    assert all(ln.endswith("(CLI only)") for ln in lines[len(shipped):])
    default_line = next(ln for ln in lines if ln.split()[0] == "default")
    assert load("default").title in default_line


def test_validate_a_good_file():
    proc = cli("validate", "scenarios/default.yaml")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("ok: default")
    assert proc.stderr == ""


def _assert_one_line_error(proc: subprocess.CompletedProcess, *must: str) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error:"), lines[0]
    for word in must:
        assert word in lines[0], (word, lines[0])
    assert proc.stdout == ""
    return lines[0]


@pytest.mark.parametrize(
    ("assignment", "must"),
    [
        ("scheduler.nope=1", ["scheduler.nope", "unknown"]),
        ("scheduler.max_num_seqs=0", ["scheduler.max_num_seqs", "0"]),
        ("noequals", ["noequals", "key=value"]),
        ("scheduler.policy=lifo", ["scheduler.policy", "lifo", "fcfs"]),
        ("classes.P0.priority.x=1", ["classes.P0.priority.x"]),
    ],
)
def test_bad_set_is_one_error_line_naming_the_key(assignment, must):
    _assert_one_line_error(cli("run", "default", "--set", assignment, "--json"), *must)


def test_broken_yaml_file_is_one_error_line(tmp_path):
    bad = tmp_path / "broken.yaml"
    bad.write_text("name: x\nclasses: [1, 2\nseed: 3\n", encoding="utf-8")
    line = _assert_one_line_error(cli("run", str(bad), "--json"), "broken.yaml", "YAML")
    assert "line" in line
    _assert_one_line_error(cli("validate", str(bad)), "broken.yaml", "YAML")


def test_invalid_scenario_file_is_one_error_line(tmp_path):
    bad = tmp_path / "invalid.yaml"
    bad.write_text("scheduler: {max_num_batched_tokens: -5}\n", encoding="utf-8")
    _assert_one_line_error(cli("validate", str(bad)), "scheduler.max_num_batched_tokens")


def test_missing_file_is_one_error_line(tmp_path):
    missing = tmp_path / "nope.yaml"
    _assert_one_line_error(cli("run", str(missing), "--json"), "nope.yaml")
    _assert_one_line_error(cli("validate", str(missing)), "nope.yaml")


def test_unknown_scenario_name_lists_the_shipped_ones():
    line = _assert_one_line_error(cli("run", "no-such-scenario"), "no-such-scenario")
    assert "default" in line
