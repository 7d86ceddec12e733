"""Trace readers (Azure LLM 2023 CSV, Mooncake JSONL, simulator CSV) and trace replay.

The readers are checked against the original files in `<repo>/../shared/traces` (see its README.md);
the tests that need them are skipped with a reason when that folder is absent. The copies shipped in
`scenarios/traces/` are checked in test_shipped_traces.py. Small synthetic files
for formats and malformed input are written to tmp_path.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest

from engine import ScenarioError, TraceError, from_dict, simulate
from engine.config.traces import MOONCAKE_BUCKET_S, detect_format, parse_trace, read_trace

TRACES = Path(__file__).resolve().parents[2].parent / "shared" / "traces"
AZURE_CODE = TRACES / "azure_llm_2023" / "AzureLLMInferenceTrace_code.csv"
AZURE_CONV = TRACES / "azure_llm_2023" / "AzureLLMInferenceTrace_conv.csv"
MOONCAKE_CONV = TRACES / "mooncake_fast25" / "conversation_trace.jsonl"

needs_traces = pytest.mark.skipif(
    not (TRACES / "stats.json").is_file(),
    reason=f"real traces not found at {TRACES} (shared/traces next to the repository)",
)


@pytest.fixture(scope="module")
def stats() -> dict:
    return json.loads((TRACES / "stats.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def traces() -> dict:
    return {"code": read_trace(AZURE_CODE), "conv": read_trace(AZURE_CONV), "mooncake": read_trace(MOONCAKE_CONV)}


# ---------------------------------------------------------------------------------------------
# Real traces


@needs_traces
@pytest.mark.parametrize(("key", "rows"), [("code", 8819), ("conv", 19366)])
def test_azure_rows_arrivals_and_percentiles_match_stats(traces, stats, key, rows):
    df = traces[key]
    st = stats[f"azure_llm_2023/{key}"]
    assert len(df) == st["requests"] == rows
    t = df["arrival_s"].to_numpy()
    assert t[0] == 0.0
    assert np.all(np.diff(t) >= 0)
    assert np.all(np.diff(t) > 0)  # stats.json: no zero inter-arrivals in the Azure traces
    assert t[-1] == pytest.approx(st["duration_s"], abs=1e-3)
    for col, name in (("prompt_tokens", "prompt_tokens"), ("output_tokens", "output_tokens")):
        x = df[col].to_numpy()
        assert x.min() == st[name]["min"] and x.max() == st[name]["max"]
        for q in (50, 90, 99):
            assert np.percentile(x, q) == pytest.approx(st[name][f"p{q}"], rel=1e-9), (col, q)
        assert x.mean() == pytest.approx(st[name]["mean"], abs=0.01)


@needs_traces
def test_azure_rows_keep_file_order_and_values(traces):
    """Row k of the file is row k of the frame (the file is sorted), tokens unchanged."""
    lines = AZURE_CONV.read_text(encoding="utf-8").splitlines()
    assert lines[0].split(",") == ["TIMESTAMP", "ContextTokens", "GeneratedTokens"]
    df = traces["conv"]
    for k in (0, 1, 2, 5000, len(lines) - 2):
        _, ctx, gen = lines[k + 1].split(",")
        assert df["prompt_tokens"].iloc[k] == int(ctx)
        assert df["output_tokens"].iloc[k] == int(gen)
    # 7-digit fractions (100 ns) are kept: recompute arrivals independently (whole seconds with
    # datetime, the 7-digit fraction as an integer count of 100 ns) and compare at 100 ns
    def seconds(stamp: str) -> float:
        whole, frac = stamp.split(".")
        assert len(frac) == 7
        return datetime.strptime(whole, "%Y-%m-%d %H:%M:%S").timestamp() + int(frac) * 1e-7

    t0 = seconds(lines[1].split(",")[0])
    for k in (1, 2, 3, 777, len(lines) - 2):
        expect = seconds(lines[k + 1].split(",")[0]) - t0
        assert df["arrival_s"].iloc[k] == pytest.approx(expect, abs=2e-7), k
    assert df["arrival_s"].iloc[1] == pytest.approx(4.314579, abs=1e-7)  # README: longest gap 4.31 s, first


@needs_traces
def test_mooncake_bucket_spreading_rule(traces, stats):
    rows = [json.loads(line) for line in MOONCAKE_CONV.read_text(encoding="utf-8").splitlines() if line.strip()]
    df = traces["mooncake"]
    assert len(df) == len(rows) == stats["mooncake_fast25/conversation"]["requests"] == 12031
    ts = np.array([r["timestamp"] for r in rows], dtype=float) / 1000.0
    # order preserved: frame row k is file line k
    assert np.array_equal(df["prompt_tokens"].to_numpy(), [r["input_length"] for r in rows])
    assert np.array_equal(df["output_tokens"].to_numpy(), [r["output_length"] for r in rows])
    t = df["arrival_s"].to_numpy()
    assert t[0] == 0.0 and ts[0] == 0.0
    assert np.all(np.diff(t) > 0), "spreading leaves no two requests at the same instant"
    buckets = np.unique(ts)
    assert len(buckets) == 1180
    sizes = []
    for b in buckets:
        idx = np.flatnonzero(ts == b)
        n = len(idx)
        sizes.append(n)
        tb = t[idx]
        assert np.all(tb >= b - 1e-9) and np.all(tb < b + MOONCAKE_BUCKET_S), b
        assert np.all(np.diff(tb) > 0)
        # request k of n at t + 3 k / n (deterministic, even spacing)
        np.testing.assert_allclose(tb, b + MOONCAKE_BUCKET_S * np.arange(n) / n, atol=1e-9)
    assert max(sizes) == 28  # README: bursts of up to 28 requests in one millisecond
    # prompt/output distributions are untouched by the spreading
    st = stats["mooncake_fast25/conversation"]
    assert np.percentile(df["prompt_tokens"], 50) == pytest.approx(st["prompt_tokens"]["p50"])
    assert np.percentile(df["prompt_tokens"], 99) == pytest.approx(st["prompt_tokens"]["p99"])
    assert np.percentile(df["output_tokens"], 99) == pytest.approx(st["output_tokens"]["p99"])


@needs_traces
def test_format_detection_on_real_files():
    assert detect_format(AZURE_CODE.read_text(encoding="utf-8")[:4096]) == "azure"
    assert detect_format(AZURE_CONV.read_text(encoding="utf-8")[:4096]) == "azure"
    assert detect_format(MOONCAKE_CONV.read_text(encoding="utf-8")[:4096]) == "mooncake"
    # auto-detection reads the same frame as naming the format
    text = MOONCAKE_CONV.read_text(encoding="utf-8")
    a, b = parse_trace(text), parse_trace(text, "mooncake")
    assert a.equals(b)
    # naming the wrong format is an error, not a silent misread
    with pytest.raises(TraceError):
        parse_trace(AZURE_CODE.read_text(encoding="utf-8"), "mooncake")


# ---------------------------------------------------------------------------------------------
# Small files: formats


SIM = "arrived_at,num_prefill_tokens,num_decode_tokens\n0.0,100,10\n0.5,200,20\n0.25,300,30\n"


def test_simulator_csv_basic_and_sorted(tmp_path):
    p = tmp_path / "sim.csv"
    p.write_text(SIM, encoding="utf-8")
    assert detect_format(SIM) == "simulator"
    df = read_trace(p)
    assert list(df["arrival_s"]) == [0.0, 0.25, 0.5]
    assert list(df["prompt_tokens"]) == [100, 300, 200]
    assert list(df["output_tokens"]) == [10, 30, 20]
    assert "priority" not in df.columns and "class" not in df.columns


def test_simulator_csv_with_priority_and_class_columns(tmp_path):
    text = ("arrived_at,num_prefill_tokens,num_decode_tokens,priority,class\n"
            "0.0,100,10,0,P0\n0.1,200,20,2, P2\n0.2,300,30,1,P1\n")
    p = tmp_path / "sim.csv"
    p.write_text(text, encoding="utf-8")
    df = read_trace(p)
    assert list(df["priority"]) == [0, 2, 1]
    assert list(df["class"]) == ["P0", "P2", "P1"]  # whitespace stripped


def test_azure_and_mooncake_small_files(tmp_path):
    az = ("TIMESTAMP,ContextTokens,GeneratedTokens\n"
          "2023-11-16 18:17:03.9799600,4808,10\n2023-11-16 18:17:04.0319600,3180,8")  # no final newline
    assert detect_format(az) == "azure"
    df = parse_trace(az)
    assert df["arrival_s"].tolist() == pytest.approx([0.0, 0.052])
    assert df["prompt_tokens"].tolist() == [4808, 3180]
    mc = "\n".join(json.dumps({"timestamp": t, "input_length": i, "output_length": o, "hash_ids": [1]})
                   for t, i, o in [(1000, 10, 1), (1000, 20, 2), (1000, 30, 3), (4000, 40, 4)])
    assert detect_format(mc) == "mooncake"
    df = parse_trace(mc)
    # shifted to start at 0; the 3-request bucket spread over [0, 3 s)
    assert df["arrival_s"].tolist() == pytest.approx([0.0, 1.0, 2.0, 3.0])
    assert df["prompt_tokens"].tolist() == [10, 20, 30, 40]


def test_unknown_format_is_a_trace_error():
    with pytest.raises(TraceError, match="unknown trace format"):
        parse_trace("a,b,c\n1,2,3\n")


# ---------------------------------------------------------------------------------------------
# Malformed files: TraceError, one line, naming the file and the row/column


def _err(tmp_path: Path, name: str, text: str, fmt: str | None = None) -> str:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    with pytest.raises(TraceError) as info:
        read_trace(p, fmt)
    msg = str(info.value)
    assert "\n" not in msg, msg
    assert name in msg, msg
    return msg


def test_empty_file(tmp_path):
    assert "empty" in _err(tmp_path, "empty.csv", "")
    assert "empty" in _err(tmp_path, "blank.csv", "\n  \n")


def test_header_only_file(tmp_path):
    assert "no requests" in _err(tmp_path, "head.csv", "arrived_at,num_prefill_tokens,num_decode_tokens\n")


def test_wrong_columns(tmp_path):
    msg = _err(tmp_path, "cols.csv", "arrived_at,prompt,num_decode_tokens\n0,1,1\n")
    assert "num_prefill_tokens" in msg and "missing" in msg
    msg = _err(tmp_path, "az.csv", "TIMESTAMP,ContextTokens,Generated\n2023-11-16 18:17:03.9799600,1,1\n", "azure")
    assert "GeneratedTokens" in msg


@pytest.mark.parametrize(
    ("value", "col_in_header"),
    [("abc", "num_prefill_tokens"), ("-5", "num_prefill_tokens"), ("0", "num_prefill_tokens"),
     ("2.5", "num_prefill_tokens"), ("0", "num_decode_tokens")],
)
def test_bad_token_counts_name_row_and_column(tmp_path, value, col_in_header):
    rows = [["0.0", "10", "5"], ["0.1", "10", "5"], ["0.2", "10", "5"]]
    col = ["arrived_at", "num_prefill_tokens", "num_decode_tokens"].index(col_in_header)
    rows[2][col] = value  # third data row = line 4 of the file
    text = "arrived_at,num_prefill_tokens,num_decode_tokens\n" + "\n".join(",".join(r) for r in rows) + "\n"
    msg = _err(tmp_path, "bad.csv", text)
    assert col_in_header in msg
    assert value in msg
    assert "line 4" in msg, msg


def test_non_numeric_arrival_names_the_line(tmp_path):
    msg = _err(tmp_path, "t.csv", "arrived_at,num_prefill_tokens,num_decode_tokens\n0,1,1\nsoon,1,1\n")
    assert "line 3" in msg and "arrived_at" in msg


def test_bad_azure_timestamp_names_the_line(tmp_path):
    text = "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.9799600,1,1\nyesterday,1,1\n"
    msg = _err(tmp_path, "az.csv", text)
    assert "line 3" in msg and "yesterday" in msg


def test_azure_negative_tokens(tmp_path):
    text = "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.9799600,-1,1\n"
    msg = _err(tmp_path, "az.csv", text)
    assert "ContextTokens" in msg and "-1" in msg


def test_broken_json_line_names_the_line(tmp_path):
    good = json.dumps({"timestamp": 0, "input_length": 5, "output_length": 5})
    msg = _err(tmp_path, "m.jsonl", good + "\n" + good + "\n{\"timestamp\": 3000, \"input_len\n")
    assert "line 3" in msg
    msg = _err(tmp_path, "m2.jsonl", good + "\n" + json.dumps({"timestamp": 1, "input_length": 5}) + "\n")
    assert "line 2" in msg


def test_mooncake_zero_or_negative_lengths(tmp_path):
    rows = [{"timestamp": 0, "input_length": 5, "output_length": 5},
            {"timestamp": 10, "input_length": 0, "output_length": 5}]
    msg = _err(tmp_path, "z.jsonl", "\n".join(map(json.dumps, rows)))
    assert "input_length" in msg and "line 2" in msg and "= 0 " in msg


def test_unsorted_mooncake_timestamps(tmp_path):
    rows = [{"timestamp": t, "input_length": 5, "output_length": 5} for t in (0, 3000, 1000)]
    msg = _err(tmp_path, "u.jsonl", "\n".join(map(json.dumps, rows)))
    assert "timestamp" in msg and "sorted" in msg and "line 3" in msg


def test_missing_trace_file(tmp_path):
    with pytest.raises(TraceError, match="cannot read trace"):
        read_trace(tmp_path / "absent.csv")


def test_bad_trace_in_a_scenario_is_a_scenario_error(tmp_path):
    p = tmp_path / "bad.csv"
    p.write_text("arrived_at,num_prefill_tokens,num_decode_tokens\n0,x,1\n", encoding="utf-8")
    sc = from_dict({"trace": {"path": str(p)}, "kv": {"num_blocks": 100}, "cost": {"model": "fixed"}})
    with pytest.raises(ScenarioError, match="trace.path"):
        simulate(sc)


# ---------------------------------------------------------------------------------------------
# Replay end to end


def _replay(duration_s: float, limit: int | None = 300) -> dict:
    return {
        "name": "replay",
        "duration_s": duration_s,
        "kv": {"num_blocks": 4000, "block_size": 16},
        "cost": {"model": "fixed", "step_time_s": 0.005},
        "scheduler": {"policy": "priority", "max_num_batched_tokens": 8192, "max_num_seqs": 64},
        "classes": {
            "P1": {"priority": 1, "arrival": {"process": "poisson", "rate": 0}},
            "P2": {"priority": 2, "arrival": {"process": "poisson", "rate": 0}},
        },
        "trace": {"path": str(AZURE_CONV), "limit": limit,
                  "assign": {"by": "prompt_length", "edges": [2000], "classes": ["P1", "P2"]}},
    }


@needs_traces
def test_replay_azure_conv_within_duration(traces):
    df = traces["conv"]
    duration = 20.0
    within = df[df["arrival_s"] < duration]
    assert 0 < len(within) < 300  # the duration, not the limit, decides here
    res = simulate(from_dict(_replay(duration)))
    r = res.requests.sort_values(["arrival_s", "id"]).reset_index(drop=True)
    assert len(r) == len(within)
    np.testing.assert_allclose(r["arrival_s"].to_numpy(), within["arrival_s"].to_numpy())
    assert r["prompt_tokens"].tolist() == within["prompt_tokens"].tolist()
    assert r["output_tokens"].tolist() == within["output_tokens"].tolist()
    expected = np.where(within["prompt_tokens"].to_numpy() >= 2000, "P2", "P1")
    assert r["class"].astype(str).tolist() == expected.tolist()
    assert set(expected) == {"P1", "P2"}  # both classes really occur
    assert r["priority"].tolist() == [1 if c == "P1" else 2 for c in expected]
    assert (r["status"] == "finished").all()
    s = res.summary["classes"]
    assert s["P1"]["n"] + s["P2"]["n"] == len(within)


@needs_traces
def test_replay_limit_caps_the_rows(traces):
    res = simulate(from_dict(_replay(120.0, limit=300)))
    df = traces["conv"]
    assert (df["arrival_s"] < 120.0).sum() > 300
    assert len(res.requests) == 300
    np.testing.assert_allclose(np.sort(res.requests["arrival_s"].to_numpy()), df["arrival_s"].to_numpy()[:300])
