"""Uploaded scenario and trace files: limits and one-line errors, and a trace that runs."""

import os
from pathlib import Path

import pytest

from engine import ScenarioError, TraceError, from_dict, simulate, to_yaml
from engine.config.scenario import load_raw
from ui.frame import uploads


def test_scenario_upload_round_trips_the_download():
    from engine import load

    raw = uploads.scenario_from_upload("mine.yaml", to_yaml(load("default")).encode())
    assert from_dict(raw).key() == load("default").key()


def test_a_shipped_scenario_file_uploads_without_its_story():
    """A shipped file carries a `story:` section (what its runs show, engine.sweeps.story); the scenario
    itself does not, so an upload of the file is the scenario, as loading it by name is."""
    from engine import load
    from engine.config.scenario import SCENARIO_DIR

    text = (SCENARIO_DIR / "default.yaml").read_bytes()
    assert b"story:" in text
    raw = uploads.scenario_from_upload("default.yaml", text)
    assert "story" not in raw and from_dict(raw).key() == load("default").key()


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


def test_a_downloaded_scenario_replaying_a_shipped_trace_uploads_back():
    """A shipped trace is named, not read from the user's or the server's files: its download round-trips."""
    from engine import load

    sc = load("default", {"trace": {"path": "azure-conv", "start_s": 60}, "duration_s": 30,
                          "classes.P1.arrival.rate": 0})
    raw = uploads.scenario_from_upload("mine.yaml", to_yaml(sc).encode())
    assert raw["trace"]["path"] == "azure-conv" and from_dict(raw).key() == sc.key()
    short = uploads.scenario_from_upload("short.yaml", b"classes: {A: {arrival: {rate: 0}}}\ntrace: mooncake-conv\n"
                                         b"duration_s: 10\n")
    assert from_dict(short).trace.path == "mooncake-conv"
    with pytest.raises(ScenarioError, match="cannot be uploaded"):  # a file on the server: still refused
        uploads.scenario_from_upload("f.yaml", b"trace: {path: ./azure-code}\n")


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


# ---------------------------------------------------------------------------------------------
# Refused at upload, with one line, leaving everything as it was (issues 12 and 15)


import copy  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402

import yaml  # noqa: E402

HEAD = "arrived_at,num_prefill_tokens,num_decode_tokens"


def _yaml(data: dict) -> bytes:
    return yaml.safe_dump(data).encode()


def _refused(result: uploads.Upload, *needles: str) -> str:
    assert result.raw is None and result.error, result
    assert "\n" not in result.error and len(result.error) < 700, result.error
    for n in needles:
        assert n in result.error, (n, result.error)
    return result.error


@pytest.mark.parametrize(("data", "needles"), [
    (_yaml({"mitigations": {"p0_token_reserve": 9000}}), ("p0_token_reserve",)),
    (_yaml({"classes": {"A": {}, "a": {"priority": 1}}}), ("letter case",)),
    (_yaml({"classes": {"A": {"prompt": {"dist": "empirical", "path": "http://127.0.0.1:9/x.csv", "column": "x"}}}}),
     ("classes.A.prompt.path", "cannot read files")),
    (_yaml({"classes": {"A": {"prompt": {"dist": "empirical", "path": "/etc/passwd", "column": "x"}}}}),
     ("classes.A.prompt.path",)),
    (_yaml({"base": "default"}), ("base",)),
    (_yaml({"trace": {"path": "/dev/zero"}}), ("trace",)),
    (_yaml({"classes": {f"C{i}": {"arrival": {"rate": 0.01}} for i in range(2000)}}), ("classes", "16 allowed")),
    (_yaml({"classes": {"P": {"arrival": {"rate": 1000}}}}), ("classes.P.arrival.rate",)),
    (b"l0: &l0 [x, x, x, x, x, x, x, x, x]\n" + b"".join(
        f"l{k}: &l{k} [{', '.join([f'*l{k - 1}'] * 9)}]\n".encode() for k in range(1, 9)), ("aliases expand",)),
    (_yaml({"name": "x` [Log in again](https://evil.example/login) `", "seed": 1.5}), ("seed",)),
])
def test_uploaded_scenarios_that_cannot_run_are_refused(data, needles):
    _refused(uploads.try_scenario("up.yaml", data), *needles)


def _trace(rows: list[str], head: str = HEAD) -> bytes:
    return (head + "\n" + "\n".join(rows) + "\n").encode()


@pytest.mark.parametrize(("data", "needles"), [
    (_trace(["0,100,10,P0", "1,100,10,p1"], HEAD + ",class"), ("p1",)),
    (_trace(["0,100,10,0", "1,100,10,7"], HEAD + ",priority"), ("priorities [7]",)),
    (_trace(["0,1e19,10"]), ("num_prefill_tokens", "line 2")),
    (_trace(["0,9223372036854775808,10"]), ("num_prefill_tokens",)),
    (b'{"timestamp": 0, "input_length": 5, "output_length": 5}\n' + b"[" * 50_000 + b"]" * 50_000 + b"\n",
     ("line 2",)),
    (_trace([f"{i * 0.001},100,10" for i in range(uploads.MAX_TRACE_ROWS + 5)]), ("row upload limit",)),
    (_trace([f"{i * 0.001},100,10" for i in range(60_000)]), ("requests",)),
    (b"\x00\x01\x02garbage", ("binary",)),
    (b"\xff\xfe" + "arrived_at".encode("utf-16-le"), ("UTF-8",)),
])
def test_uploaded_traces_that_cannot_run_are_refused_and_nothing_changes(tmp_path, data, needles):
    raw = load_raw("default")
    before = copy.deepcopy(raw)
    state: dict = {}
    _refused(uploads.try_trace(raw, "t.csv", data, state), *needles)
    assert raw == before  # the caller's scenario is untouched
    store = state.get(uploads.SESSION_KEY)
    assert store is None or store.files() == []  # nothing written


def test_a_good_trace_after_a_bad_one_works_and_lands_in_the_session_folder():
    state: dict = {}
    raw = load_raw("default")
    _refused(uploads.try_trace(raw, "bad.csv", _trace(["0,0,1"]), state), "num_prefill_tokens")
    good = _trace([f"{i * 0.5},{100 + i},20" for i in range(12)])
    up = uploads.try_trace(raw, "good trace!.csv", good, state)
    assert up.error is None, up.error
    store = state[uploads.SESSION_KEY]
    assert [p.name for p in store.files()] == [Path(up.raw["trace"]["path"]).name]
    assert up.raw["name"] == "default+good_trace"
    res = simulate(from_dict({**up.raw, "duration_s": 10.0, "warmup_s": 0.0}))
    assert len(res.requests) == 12
    # the same file again: the same path (same cache key), no second copy
    again = uploads.try_trace(raw, "again.csv", good, state)
    assert again.raw["trace"]["path"] == up.raw["trace"]["path"] and len(store.files()) == 1


def test_session_folder_is_removed_when_the_session_state_goes():
    state: dict = {}
    up = uploads.try_trace(load_raw("default"), "t.csv", _trace(["0,100,10"]), state)
    folder = state[uploads.SESSION_KEY].folder
    assert Path(up.raw["trace"]["path"]).parent == folder and folder.is_dir()
    del state, up
    gc.collect()
    assert not folder.exists()


def test_store_cap_drops_least_recent_first_and_refuses_rather_than_drop_recent(tmp_path):
    store = uploads.TraceStore(tmp_path / "s", max_bytes=250)
    a = store.put("a", ".csv", b"a" * 100)
    os.utime(a, (1, 1))  # long ago
    b = store.put("b", ".csv", b"b" * 100)
    c = store.put("c", ".csv", b"c" * 100)  # over 250: the oldest (a) goes
    assert not a.exists() and b.exists() and c.exists()
    assert store.used_bytes() == 200
    keep = uploads.TraceStore(tmp_path / "k", max_bytes=250, keep_s=3600)
    keep.put("a", ".csv", b"a" * 100)
    keep.put("b", ".csv", b"b" * 100)
    with pytest.raises(TraceError, match="upload space is full"):
        keep.put("c", ".csv", b"c" * 100)
    assert keep.used_bytes() == 200


def test_sweep_removes_folders_of_dead_processes(tmp_path, monkeypatch):
    monkeypatch.setattr(uploads, "ROOT", tmp_path)
    dead = tmp_path / "session-999999999-abc"
    dead.mkdir()
    mine = tmp_path / f"session-{os.getpid()}-abc"
    mine.mkdir()
    other = tmp_path / "unrelated"
    other.mkdir()
    uploads._sweep_dead()
    assert not dead.exists() and mine.exists() and other.exists()


def test_unexpected_errors_become_a_refusal(monkeypatch):
    def boom(*a, **k):
        raise RuntimeError("boom\nline two")

    monkeypatch.setattr(uploads, "parse_trace", boom)
    err = _refused(uploads.try_trace(load_raw("default"), "t.csv", b"x", {}), "RuntimeError")
    assert "line two" in err
    monkeypatch.setattr(uploads, "parse_yaml", boom)
    _refused(uploads.try_scenario("s.yaml", b"seed: 1"), "RuntimeError")


def test_an_unnamed_upload_is_named_after_its_file_plainly():
    up = uploads.try_scenario("my\nscenario` [x](y).yaml", b"seed: 2\n")
    assert up.error is None and up.raw["name"] == "my_nscenario_x_y"  # the line break was escaped first


def test_uploaded_scenario_without_files_is_accepted_with_its_values():
    data = _yaml({"name": "mine", "classes": {"A": {"arrival": {"rate": 2}}, "B": {"priority": 1}}})
    up = uploads.try_scenario("mine.yaml", data)
    assert up.error is None and from_dict(up.raw).class_names == ["A", "B"]
    assert json.loads(from_dict(up.raw).key())["classes"]["A"]["arrival"]["rate"] == 2


def test_a_pasted_config_becomes_the_model_of_what_the_controls_show():
    import json

    from engine import load
    from engine.config.scenario import to_dict
    from tests.engine.hf_configs import DEEPSEEK_V2_LITE, DEEPSEEK_V3, LLAMA_31_70B

    current = to_dict(load("default", {"scheduler.policy": "priority"}))
    up = uploads.try_model_config(current, json.dumps(DEEPSEEK_V2_LITE), "V2 Lite")
    assert up.error is None and up.notes == ()
    sc = from_dict(up.raw)
    assert sc.model.name == "V2 Lite" and sc.model.kv_lora_rank == 512 and sc.scheduler.policy == "priority"
    assert up.raw["name"] == "default+V2_Lite"
    # too big for one H100: the fewest GPUs on which it fits, said in a note
    up = uploads.try_model_config(current, json.dumps(LLAMA_31_70B))
    assert up.raw["hardware"]["num_gpus"] == 2 and "GPUs per replica set to 2" in up.notes[-1]
    # too big for eight: refused, nothing changes
    up = uploads.try_model_config(current, json.dumps(DEEPSEEK_V3))
    assert up.raw is None and "leaves no KV memory even on 8× H100-80G" in up.error and "B200" in up.error
    up = uploads.try_model_config(current, "{not json")
    assert up.raw is None and up.error.startswith("config.json: not valid JSON")


def test_a_pasted_config_that_breaks_unexpectedly_is_a_refusal(monkeypatch):
    def boom(*a, **k):
        raise RuntimeError("bug")

    monkeypatch.setattr(uploads, "model_from_text", boom)
    up = uploads.try_model_config({}, "{}")
    assert up.raw is None and "RuntimeError" in up.error
