"""The command line, run as users run it: `python -m engine ...` in a subprocess from the repo root."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from functools import cache
from pathlib import Path

import pandas as pd
import pytest

from engine import load, simulate
from engine.config.scenario import scenario_names
from engine.sim.metrics import clean

REPO = Path(__file__).resolve().parents[2]

TOP_KEYS = {"scenario", "seed", "kv_blocks", "steps", "sim_time_s", "wall_time_s", "served_tok_s",
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
    assert s["steps"] > 0 and s["sim_time_s"] > 0 and s["served_tok_s"] > 0
    assert 0 < s["kv_util_mean"] <= 1
    # the same numbers as an in-process run (the CLI adds only the loop's turns, and loses nothing)
    assert s.pop("loop_turns") == simulate(load("default")).loop_turns > 0
    assert _comparable(s) == in_process()
    assert proc.stderr == ""


PROBE = """
import gc, json, runpy, sys
sys.argv = ["engine", *sys.argv[1:]]
try:
    runpy.run_module("engine", run_name="__main__", alter_sys=True)
except SystemExit as done:
    code = done.code
print(json.dumps({"code": code, "gc_on": gc.isenabled(), "frozen": gc.get_freeze_count(),
                  "loaded": sorted(m for m in sys.modules if m.split(".")[0] in ("simpy", "engine"))}))
"""


@pytest.mark.parametrize("args, absent", [
    (("run", "default", "--json"), {"simpy", "engine.sweeps.story", "engine.sweeps.evidence"}),
    (("run", "two-gpus", "--json"), {"engine.sweeps.story", "engine.sweeps.evidence"}),
])
def test_the_process_loads_what_the_command_needs_and_collects_its_garbage(args, absent):
    """`run` loads neither the stories nor the figures over seeds, nor SimPy for one replica (it
    does for two); the imports are frozen out of the collector, which is on for the command."""
    proc = subprocess.run([sys.executable, "-c", PROBE, *args], cwd=REPO, capture_output=True, text=True,
                          timeout=120)
    probe = json.loads(proc.stdout.strip().splitlines()[-1])
    assert probe["code"] == 0, proc.stderr
    assert probe["gc_on"] and probe["frozen"] > 10_000
    assert not absent & set(probe["loaded"])
    assert "engine.sim.simulation" in probe["loaded"]
    assert ("simpy" in probe["loaded"]) == (args[1] == "two-gpus")


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
    pri.pop("loop_turns")
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


# ---------------------------------------------------------------------------------------------
# Malformed input of every kind: one `error:` line, exit 2 (in-process for speed, a few for real)


def _main(capsys, *args: str, **seams) -> tuple[int, str, str]:
    from engine.cli import main

    code = main(list(args), **seams)
    out, err = capsys.readouterr()
    return code, out, err


def _one_error(capsys, *args: str, must: tuple[str, ...] = (), code: int = 2, **seams) -> str:
    rc, out, err = _main(capsys, *args, **seams)
    assert rc == code, (rc, out, err)
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert out == "" and len(lines[0]) < 2100
    for word in must:
        assert word in lines[0], (word, lines[0])
    return lines[0]


def _laughs(levels: int = 9) -> bytes:
    lines = ["l0: &l0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"l{k}: &l{k} [{', '.join([f'*l{k - 1}'] * 9)}]" for k in range(1, levels)]
    return ("\n".join(lines) + "\n").encode()


BAD_FILES = {
    "garbage.yaml": bytes(range(256)) * 8,
    "latin1.yaml": "name: café\n".encode("latin-1"),
    "utf16.yaml": "seed: 3\n".encode("utf-16"),
    "laughs.yaml": _laughs(),
    "cycle.yaml": b"a: &a [*a]\n",
    "deep.yaml": b"x: " + b"[" * 3000 + b"]" * 3000,
    "list.yaml": b"- 1\n- 2\n",
    "types.yaml": b"seed: [1]\nduration_s: {a: 1}\nclasses: 5\n",
    "absurd.yaml": b"seed: 1" + b"0" * 120 + b"\nduration_s: .inf\nclasses: {A: {arrival: {rate: .nan}}}\n",
    "tags.yaml": b"seed: !!python/object/apply:os.getpid []\n",
    "nul.yaml": b"seed: 3\x00\n",
    "huge.yaml": b"#" * (1 << 20) + b"\nseed: 1\n",
}


@pytest.mark.parametrize("name", sorted(BAD_FILES))
def test_malformed_scenario_files_are_one_error_line(tmp_path, capsys, name):
    p = tmp_path / name
    p.write_bytes(BAD_FILES[name])
    _one_error(capsys, "validate", str(p))
    _one_error(capsys, "run", str(p), "--json")


def test_malformed_files_in_a_real_process(tmp_path):
    for name in ("garbage.yaml", "laughs.yaml"):
        p = tmp_path / name
        p.write_bytes(BAD_FILES[name])
        _assert_one_line_error(cli("validate", str(p), timeout=60))


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero")
def test_device_files_are_refused(tmp_path, capsys):
    _one_error(capsys, "validate", "/dev/zero", must=("not a regular file",))
    sc = tmp_path / "s.yaml"
    sc.write_text("trace: {path: /dev/zero}\n")
    _one_error(capsys, "validate", str(sc), must=("trace.path", "outside"))
    _one_error(capsys, "validate", str(sc), "--allow-dir", "/dev", must=("trace.path", "not a regular file"))
    fifo = tmp_path / "fifo.csv"
    os.mkfifo(fifo)
    sc.write_text("trace: {path: fifo.csv}\n")
    _one_error(capsys, "run", str(sc), must=("not a regular file",))
    sc.write_text("classes: {A: {prompt: {dist: empirical, path: fifo.csv, column: x}}}\n")
    _one_error(capsys, "validate", str(sc), must=("classes.A.prompt", "not a regular file"))


def test_validate_reads_the_trace(tmp_path, capsys):
    sc = tmp_path / "s.yaml"
    sc.write_text("trace: {path: absent.csv}\n")
    _one_error(capsys, "validate", str(sc), must=("trace.path", "absent.csv"))
    (tmp_path / "t.csv").write_text("arrived_at,num_prefill_tokens,num_decode_tokens,class\n0,10,5,P9\n")
    sc.write_text("classes: {P0: {arrival: {rate: 0}}}\ntrace: {path: t.csv, assign: {by: column}}\n")
    _one_error(capsys, "validate", str(sc), must=("P9",))


@pytest.mark.parametrize(("rows", "must"), [
    ("0,1,1\n1,2,3,4\n", ("line 3", "4 fields, but the header has 3")),
    ("0,9223372036854775808,1\n", ("num_prefill_tokens", "10,000,000")),
    ("0,1,18446744073709551617\n", ("num_decode_tokens",)),
    ("0,1e19,1\n", ("num_prefill_tokens",)),
])
def test_bad_trace_rows_are_one_error_line(tmp_path, capsys, rows, must):
    (tmp_path / "t.csv").write_text("arrived_at,num_prefill_tokens,num_decode_tokens\n" + rows)
    sc = tmp_path / "s.yaml"
    sc.write_text("trace: {path: t.csv}\n")
    _one_error(capsys, "validate", str(sc), must=must)
    _one_error(capsys, "run", str(sc), "--json", must=must)


def test_work_cap_names_the_key_and_can_be_lifted(capsys, monkeypatch):
    line = _one_error(capsys, "run", "default", "--set", "classes.P1.arrival.rate=5000",
                      must=("classes.P1.arrival.rate", "--no-work-limit"))
    assert "requests" in line or "steps" in line
    _one_error(capsys, "run", "default", "--set", "duration_s=1e6", must=("classes.P1.arrival.rate",))
    # the cap is on the estimate only: with the flag, validate accepts it (no run needed)
    rc, out, err = _main(capsys, "validate", "scenarios/default.yaml", "--no-work-limit")
    assert rc == 0 and out.startswith("ok: default") and err == ""
    from engine.sim.limits import WorkLimits

    _one_error(capsys, "validate", "scenarios/default.yaml", must=("classes", "3 classes", "2 allowed"),
               limits=WorkLimits(requests=100, classes=2, seconds=None, memory_mib=None))


def test_a_bug_is_one_line_with_exit_1(capsys, monkeypatch):
    def boom(sc, **_options):
        raise RuntimeError("boom\nsecond line")

    line = _one_error(capsys, "run", "default", code=1, must=("internal error", "RuntimeError", "boom second line"),
                      simulate=boom)
    assert "Traceback" not in line
    monkeypatch.setenv("INVERSION_LAB_DEBUG", "1")
    with pytest.raises(RuntimeError):
        _main(capsys, "run", "default", simulate=boom)


def test_bad_out_folder_is_refused_before_the_run(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    _one_error(capsys, "run", "default", "--out", str(blocker / "sub"), must=("--out", "cannot write"),
               simulate=lambda sc, **_: pytest.fail("ran before checking --out"))


def test_names_with_control_characters_are_refused_without_echoing_them(tmp_path, capsys):
    sc = tmp_path / "s.yaml"
    sc.write_text('base: default\nname: "x\\e[2Jy\\nz"\nduration_s: 10\nwarmup_s: 0\n')
    line = _one_error(capsys, "run", str(sc), must=("name = ",))
    assert "\x1b" not in line and "\\x1b[2Jy\\nz" in line


# ---------------------------------------------------------------------------------------------
# --seeds N: figures over seeds


def test_seeds_json_reports_each_figure_over_the_seeds():
    """`--seeds 2` = the scenario's seed and the next; each per-seed value is that seed's own run
    (what `run --seed S --json` prints), the value pools both runs' requests."""
    proc = cli("run", "default", "--set", "duration_s=30", "--seeds", "2", "--json")
    assert proc.returncode == 0, proc.stderr
    rep = json.loads(proc.stdout)
    seed = load("default").seed
    assert rep["seeds"] == [seed, seed + 1]
    one = [json.loads(cli("run", "default", "--set", "duration_s=30", "--seed", str(s), "--json").stdout)
           for s in rep["seeds"]]
    for name in ("P0", "P1"):
        got = rep["classes"][name]
        for key in ("ttft_p99", "ttft_p50", "tpot_p99", "e2e_p99"):
            e = got[key]
            assert e["per_seed"] == [o["classes"][name][key] for o in one], (name, key)
            assert (e["lo"], e["hi"]) == (min(e["per_seed"]), max(e["per_seed"]))
            assert set(e) == {"value", "lo", "hi", "per_seed", "n", "n_min", "few"}
        assert got["n"] == {"total": sum(o["classes"][name]["n"] for o in one),
                            "per_seed": [o["classes"][name]["n"] for o in one]}
        att = got["slo_attainment"]
        within = sum(round(o["classes"][name]["slo_attainment"] * o["classes"][name]["n"]) for o in one)
        assert att["value"] == pytest.approx(within / got["n"]["total"])
    assert rep["classes"]["P0"]["ttft_p99"]["few"] is True  # ~13 P0 requests a run
    assert rep["served_tok_s"]["per_seed"] == [o["served_tok_s"] for o in one]
    assert not any("throughput" in k for k in rep)  # the run-length rate is named for what it is


def test_seeds_table_marks_percentiles_of_few_requests():
    proc = cli("run", "default", "--set", "duration_s=30", "--seeds", "2")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert "(2 runs)" in lines[0]
    p0 = next(ln for ln in lines if ln.startswith("P0"))
    assert "†" in p0 and "[" in p0
    assert any(ln.startswith("† a percentile of fewer than 100 requests") for ln in lines)
    single = cli("run", "default")  # one run: P0 has 43 requests, P1 250
    rows = {ln.split()[0]: ln for ln in single.stdout.splitlines()[2:5]}
    assert "†" in rows["P0"] and "†" not in rows["P1"]


@pytest.mark.parametrize("args, must", [
    (("--seeds", "0"), "--seeds 0"),
    (("--seeds", "101"), "--seeds 101"),
    (("--seeds", "2", "--out", "x"), "--out"),
])
def test_bad_seeds_is_one_error_line(args, must):
    proc = cli("run", "default", *args)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("error:") and must in proc.stderr
