"""The traces shipped in `scenarios/traces/`: the files are what their provenance notes say, the
readers read them by short name, scenarios and the CLI name them, and `real-traffic` says what runs.

The byte-for-byte comparison with the originals uses `<repo>/../shared/traces` when it is there
(skipped otherwise); everything else needs only the repository.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from engine import ScenarioError, TraceError, from_dict, load, simulate
from engine.config.scenario import load_raw
from engine.config.shipped_traces import SHIPPED, TRACE_DIR
from engine.config.traces import read_trace

REPO = Path(__file__).resolve().parents[2]
ORIGINALS = REPO.parent / "shared" / "traces"
ORIGINAL = {"azure-code": "azure_llm_2023/AzureLLMInferenceTrace_code.csv",
            "azure-conv": "azure_llm_2023/AzureLLMInferenceTrace_conv.csv",
            "mooncake-conv": "mooncake_fast25/conversation_trace.jsonl"}


def git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def cli(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "engine", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env=env)


# ---------------------------------------------------------------------------------------------
# The files and their provenance


def test_exactly_the_three_licensed_traces_ship_each_beside_its_licence_and_provenance():
    files = sorted(str(p.relative_to(TRACE_DIR)) for p in TRACE_DIR.rglob("*") if p.is_file())
    assert files == sorted([
        "azure-llm-2023/AzureLLMInferenceTrace_code.csv", "azure-llm-2023/AzureLLMInferenceTrace_conv.csv",
        "azure-llm-2023/LICENSE-CC-BY-4.0.txt", "azure-llm-2023/PROVENANCE.md",
        "mooncake-fast25/LICENSE-APACHE.txt", "mooncake-fast25/PROVENANCE.md",
        "mooncake-fast25/conversation_trace.jsonl"])
    assert list(SHIPPED) == ["azure-code", "azure-conv", "mooncake-conv"]
    for t in SHIPPED.values():
        licence = (TRACE_DIR / t.licence_file).read_text(encoding="utf-8-sig")
        assert {"CC-BY-4.0": "Attribution 4.0 International", "Apache-2.0": "Apache License"}[t.licence] in licence
        assert (TRACE_DIR / t.licence_file).parent == t.path.parent


@pytest.mark.parametrize("name", list(SHIPPED))
def test_each_file_is_the_byte_copy_its_provenance_note_describes(name):
    t = SHIPPED[name]
    data = t.path.read_bytes()
    assert len(data) == t.bytes
    assert hashlib.sha256(data).hexdigest() == t.sha256
    assert git_blob_id(data) == t.blob  # a byte copy of the upstream blob: same git object
    note = (t.path.parent / "PROVENANCE.md").read_text(encoding="utf-8")
    for fact in (t.sha256, t.blob, f"{t.bytes:,}", f"{t.rows:,}", t.source.split(" @ ")[1].split(":")[0],
                 t.path.name, t.licence):
        assert fact in note, (name, fact)
    assert t.citation.split(",")[0].split(" et al.")[0] in note  # the first author of the paper to cite


@pytest.mark.parametrize(("name", "rows"), [("azure-code", 8819), ("azure-conv", 19366), ("mooncake-conv", None)])
def test_the_readers_read_every_row_by_short_name(name, rows):
    t = SHIPPED[name]
    if rows is None:  # Mooncake: one JSON request per non-empty line of the file
        rows = sum(1 for line in t.path.read_text(encoding="utf-8").splitlines() if line.strip())
    df = read_trace(name)
    assert len(df) == rows == t.rows
    assert df.equals(read_trace(t.path, t.format))  # the name is only a way to find the file
    assert (df["arrival_s"].diff().dropna() >= 0).all() and df["arrival_s"].iloc[0] == 0.0
    if name == "mooncake-conv":  # the 3 s buckets spread as the README says: no two at one instant
        assert (df["arrival_s"].diff().dropna() > 0).all() and "hash_ids" in df.columns


@pytest.mark.skipif(not ORIGINALS.is_dir(), reason=f"the original traces are not at {ORIGINALS}")
@pytest.mark.parametrize("name", list(SHIPPED))
def test_shipped_files_equal_the_shared_originals(name):
    assert SHIPPED[name].path.read_bytes() == (ORIGINALS / ORIGINAL[name]).read_bytes()


def test_the_package_and_git_carry_the_traces_unchanged():
    pyproject = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    assert '"traces/*/*"' in pyproject  # an installed engine has them (package data of `scenarios`)
    attrs = (REPO / ".gitattributes").read_text(encoding="utf-8")
    assert "scenarios/traces/**/*.csv binary" in attrs and "scenarios/traces/**/*.jsonl binary" in attrs


# ---------------------------------------------------------------------------------------------
# Naming a shipped trace


def test_a_short_name_means_the_shipped_trace_even_beside_a_file_of_that_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("azure-code").write_text("not a trace\n")
    assert len(read_trace("azure-code")) == 8819
    with pytest.raises(TraceError, match="unknown trace format"):
        read_trace("./azure-code")  # a file of that name is named with a path


def test_a_mistyped_name_is_one_line_naming_the_shipped_ones():
    with pytest.raises(TraceError) as info:
        read_trace("azure-cod")
    msg = str(info.value)
    assert "\n" not in msg and "not a shipped trace (azure-code, azure-conv, mooncake-conv)" in msg
    with pytest.raises(TraceError) as info:
        read_trace("/no/such/dir/trace.csv")
    assert "shipped" not in str(info.value)  # a path is a path


def test_trace_string_is_short_for_a_shipped_trace_only():
    sc = from_dict({"classes": {"A": {"arrival": {"rate": 0}}}, "trace": "azure-conv"})
    assert sc.trace.path == "azure-conv" and sc.trace.assign is None
    for bad in ("traces/x.csv", "/etc/passwd", "azure"):
        with pytest.raises(ScenarioError, match="is not a shipped trace") as info:
            from_dict({"trace": bad})
        assert "\n" not in str(info.value)


def test_a_scenario_file_anywhere_may_name_a_shipped_trace(tmp_path):
    f = tmp_path / "mine.yaml"
    f.write_text("duration_s: 20\nclasses: {A: {arrival: {rate: 0}}}\ntrace: {path: mooncake-conv, start_s: 100}\n")
    raw = load_raw(str(f))
    assert raw["trace"]["path"] == "mooncake-conv"  # kept as the name: portable, not this machine's path
    res = simulate(load(str(f)))
    df = read_trace("mooncake-conv")
    assert len(res.requests) == int(((df["arrival_s"] >= 100) & (df["arrival_s"] < 120)).sum()) > 0
    assert res.requests["cached_tokens"].sum() > 0  # Mooncake's hash_ids give prefix identity
    g = tmp_path / "short.yaml"
    g.write_text("duration_s: 20\nclasses: {A: {arrival: {rate: 0}}}\ntrace: azure-code\n")
    assert load(str(g)).trace.path == "azure-code"


# ---------------------------------------------------------------------------------------------
# The command line


def test_cli_runs_the_shipped_trace_scenario_and_switches_traces_with_set():
    proc = cli("run", "real-traffic", "--json")
    assert proc.returncode == 0, proc.stderr
    s = json.loads(proc.stdout)
    assert s["scenario"] == "real-traffic" and sum(c["n"] for c in s["classes"].values()) == 931
    proc = cli("run", "real-traffic", "--set", "trace.path=mooncake-conv", "--set", "duration_s=30", "--json")
    assert proc.returncode == 0, proc.stderr
    df = read_trace("mooncake-conv")
    n = int(((df["arrival_s"] >= 840) & (df["arrival_s"] < 870)).sum())
    assert sum(c["n"] for c in json.loads(proc.stdout)["classes"].values()) == n
    proc = cli("run", "default", "--set", "trace=azure-conv", "--set", "duration_s=20", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["classes"]["P0"]["n"] > 0  # no mapping: the rows go to the first class


@pytest.mark.parametrize(("sets", "must"), [
    (["trace.path=azure-cod"], ("trace.path", "not a shipped trace", "azure-code")),
    (["trace=traces/x.csv"], ("trace", "is not a shipped trace")),
    (["trace.assign.sample.P0=1.5"], ("sample shares",)),
    (["trace.assign.sample={P0: 0.6, P1: 0.6}"], ("add up to 1.2",)),
    (["trace.assign.sample.P9=0.1"], ("trace.assign.sample.P9", "'P9'", "P0, P1, P2")),
    (["trace.assign.classes=[P1, P7]"], ("trace.assign.classes", "'P7'")),
    (["trace.assign.edges=[4096, 100]", "trace.assign.classes=[P0, P1, P2]"], ("increasing",)),
])
def test_cli_bad_trace_choice_or_mapping_is_one_error_line(sets, must):
    args = [a for s in sets for a in ("--set", s)]
    proc = cli("run", "real-traffic", *args, "--json")
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in proc.stderr
    for word in must:
        assert word in lines[0], (word, lines[0])


def test_cli_validates_a_file_naming_a_shipped_trace_from_any_folder(tmp_path):
    f = tmp_path / "s.yaml"
    f.write_text("base: real-traffic\ntrace: {path: azure-conv}\n")
    proc = cli("validate", str(f), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    t = read_trace("azure-conv")["arrival_s"]
    n = int(((t >= 840) & (t < 960)).sum())  # real-traffic's window, now of the conversation trace
    assert proc.stdout.startswith("ok: real-traffic (3 classes") and f"about {n:,} requests" in proc.stdout


# ---------------------------------------------------------------------------------------------
# real-traffic: what its description says


def test_real_traffic_description_facts_come_from_the_trace():
    sc = load("real-traffic")
    text = " ".join(sc.description.split())
    df = read_trace("azure-code")
    t = df["arrival_s"].to_numpy()
    win = t[(t >= sc.trace.start_s) & (t < sc.trace.start_s + sc.duration_s)]
    assert f"{len(win)} requests" in text and sc.duration_s == 120 and "Two minutes" in text
    burst = int((np.searchsorted(win, win + 10.0) - np.arange(len(win))).max())
    assert f"{burst} of them within ten seconds" in text
    rate = len(t) / t[-1]
    assert f"averages {rate:.1f} requests/s" in text and f"about {rate * 10:.0f} in ten seconds" in text
    a = sc.trace.assign
    assert a.sample == {"P0": 0.15} and "15 % sample goes to P0" in text
    assert a.edges == [4096] and a.classes == ["P1", "P2"] and "4,096 tokens or more to P2" in text
    assert sc.model.name in text and "H100" in sc.hardware.gpu
    assert "Patel et al., Splitwise, ISCA 2024" in text and "CC BY 4.0" in text


def test_real_traffic_claims_hold_on_seeds_1_to_5():
    """FCFS: P0's P99 TTFT about 15 s; priority: under 1 s (its SLO), P1 gains, P2 later; ~140 P0 each."""
    for seed in range(1, 6):
        fcfs = simulate(load("real-traffic", {"seed": seed})).summary["classes"]
        prio = simulate(load("real-traffic", {"seed": seed, "scheduler.policy": "priority"})).summary["classes"]
        assert 125 <= fcfs["P0"]["n"] <= 155, seed
        assert 13.0 <= fcfs["P0"]["ttft_p99"] <= 17.0, (seed, fcfs["P0"]["ttft_p99"])
        assert prio["P0"]["ttft_p99"] < 1.0 and prio["P0"]["slo_attainment"] == 1.0, seed
        assert fcfs["P0"]["slo_attainment"] < 0.6, seed
        assert prio["P1"]["ttft_p99"] < fcfs["P1"]["ttft_p99"], seed
        assert prio["P2"]["ttft_p99"] > fcfs["P2"]["ttft_p99"], seed


def test_real_traffic_yaml_names_the_trace_by_its_short_name():
    data = yaml.safe_load((REPO / "scenarios" / "real-traffic.yaml").read_text(encoding="utf-8"))
    assert data["trace"]["path"] == "azure-code"
