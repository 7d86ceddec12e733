"""Uploaded scenario and trace files: limits and one-line errors, and a trace that runs."""

import pytest

from engine import ScenarioError, TraceError, from_dict, simulate, to_yaml
from engine.scenario import load_raw
from ui import uploads


def test_scenario_upload_round_trips_the_download():
    from engine import load

    raw = uploads.scenario_from_upload("mine.yaml", to_yaml(load("default")).encode())
    assert from_dict(raw).key() == load("default").key()


@pytest.mark.parametrize("data, needle", [
    (b"a: [1, 2", "not valid YAML"),
    (b"- just a list", "mapping"),
    (b"seed: -1", "seed"),
    (b"\xff\xfe", "UTF-8"),
    (b"x" * (uploads.MAX_SCENARIO_BYTES + 1), "upload limit"),
])
def test_bad_scenario_uploads_say_why(data, needle):
    with pytest.raises(ScenarioError, match=needle):
        uploads.scenario_from_upload("bad.yaml", data)


def test_trace_upload_replays_the_file():
    rows = "\n".join(f"{i * 0.5},{200 + i},{20}" for i in range(12))
    data = f"arrived_at,num_prefill_tokens,num_decode_tokens\n{rows}\n".encode()
    raw = uploads.with_trace(load_raw("default"), "t.csv", data)
    sc = from_dict({**raw, "duration_s": 10.0, "warmup_s": 0.0})
    res = simulate(sc)
    assert len(res.requests) == 12
    assert set(res.requests["prompt_tokens"]) == {200 + i for i in range(12)}


def test_bad_trace_upload_says_why():
    with pytest.raises(TraceError, match="unknown trace format"):
        uploads.with_trace(load_raw("default"), "t.csv", b"a,b\n1,2\n")
