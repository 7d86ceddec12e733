"""The input gate: hostile or absurd scenario text, values and file references are refused with one
bounded line that names the key; nothing outside the allowed folders, no URL, no device is read."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from engine import ScenarioError, TraceError, from_dict, load
from engine.config import safeyaml
from engine.config.literal import brief, clip, md_code, md_escape
from engine.config.safeio import FileRefused, check_local, read_bytes
from engine.config.scenario import MAX_SCENARIO_BYTES, SCENARIO_DIR, load_raw, parse_assignment, parse_yaml
from engine.config.traces import parse_trace, read_trace
from engine.config.workload import read_column


def laughs(levels: int, width: int = 9) -> str:
    lines = [f"l0: &l0 [{', '.join(['x'] * width)}]"]
    for k in range(1, levels):
        lines.append(f"l{k}: &l{k} [{', '.join([f'*l{k - 1}'] * width)}]")
    return "\n".join(lines) + "\n"


def one_line(msg: str, limit: int = 600) -> str:
    assert "\n" not in msg and "\r" not in msg, msg
    assert len(msg) <= limit, len(msg)
    return msg


# ---------------------------------------------------------------------------------------------
# YAML: aliases, cycles, nesting


def test_alias_expansion_is_counted_not_performed():
    # 9 levels of 9 → 9^9 ≈ 387M strings if expanded: refused by counting shared nodes once
    text = laughs(9)
    assert len(text) < 500
    with pytest.raises(safeyaml.YamlLimitError, match="expand to more than"):
        safeyaml.load(text)
    with pytest.raises(ScenarioError) as info:
        parse_yaml(text, "laughs.yaml")
    assert one_line(str(info.value)).startswith("laughs.yaml: aliases expand")


def test_small_alias_use_still_loads_and_shares():
    data = safeyaml.load(laughs(3))  # 9 + 81 + 729 strings expanded: fine
    assert len(data["l2"]) == 9 and data["l2"][0] is data["l2"][1]  # aliases stay shared objects
    assert sum(len(b) for b in data["l2"]) == 81


def test_expansion_limit_is_exact_on_a_hand_counted_graph():
    # root mapping (1) + key 'a' (1) + list (1) + 3 scalars (3) + key 'b' (1) + list (1) + 2 × 4 = 16
    text = "a: &a [1, 2, 3]\nb: [*a, *a]\n"
    assert safeyaml.load(text, max_values=16)["b"][1] == [1, 2, 3]
    with pytest.raises(safeyaml.YamlLimitError):
        safeyaml.load(text, max_values=15)


@pytest.mark.parametrize("text", ["a: &a [*a]\n", "a: &a {b: *a}\n", "a: &a [1, [2, [*a]]]\n"])
def test_recursive_aliases_are_refused(text):
    with pytest.raises(safeyaml.YamlLimitError, match="cycle"):
        safeyaml.load(text)


def test_deep_nesting_is_refused_without_recursion_error():
    for depth in (safeyaml.MAX_DEPTH + 1, 900, 5000):
        with pytest.raises(ScenarioError, match="nest"):
            parse_yaml("x: " + "[" * depth + "]" * depth, "deep.yaml")
    assert safeyaml.load("x: " + "[" * 10 + "]" * 10) == {"x": [[[[[[[[[[]]]]]]]]]]}


def test_unsafe_tags_are_not_constructed():
    with pytest.raises(ScenarioError, match="not valid YAML"):
        parse_yaml("x: !!python/object/apply:os.system ['true']\n")


# ---------------------------------------------------------------------------------------------
# Values: finite, bounded, named


@pytest.mark.parametrize(("key", "value"), [
    ("duration_s", ".inf"), ("duration_s", "-.inf"), ("mitigations.aging_s", ".nan"), ("duration_s", "1e999"),
    ("duration_s", "Infinity"), ("cost.mfu", "NaN"), ("classes.A.arrival.times", "[1, .inf]"),
    ("trace.start_s", ".inf"), ("classes.A.arrival.rate", "-.inf"),
])
def test_non_finite_numbers_are_refused_naming_the_key(key, value):
    data = {"classes": {"A": {}}, "trace": {"path": "t.csv"}} if key.startswith("trace") else {"classes": {"A": {}}}
    _, v = parse_assignment(f"{key}={value}")
    from engine.config.scenario import apply_overrides

    with pytest.raises(ScenarioError) as info:
        from_dict(apply_overrides(data, {key: v}))
    msg = one_line(str(info.value))
    assert key.split(".")[-1] in msg, msg


@pytest.mark.parametrize(("key", "value"), [
    ("seed", 10**120), ("seed", 2**70), ("seed", -(2**63) - 1), ("scheduler.max_num_batched_tokens", 2**64),
    ("kv.num_blocks", 10**30), ("classes.A.prompt.value", 2**63), ("hardware.num_gpus", 10**400),
    ("replicas.count", 2**31), ("classes.A.priority", 10**19),
])
def test_huge_integers_are_refused_in_bounds_with_a_short_message(key, value):
    from engine.config.scenario import apply_overrides

    with pytest.raises(ScenarioError) as info:
        from_dict(apply_overrides({"classes": {"A": {}}}, {key: value}))
    msg = one_line(str(info.value), 300)
    assert key in msg
    assert str(value) not in msg or len(str(value)) < 25  # a 120-digit number is described, not echoed


def test_huge_integer_strings_from_the_command_line_are_refused():
    key, v = parse_assignment("seed=" + "9" * 5000)
    with pytest.raises(ScenarioError) as info:
        from_dict({"seed": v})
    assert "seed" in one_line(str(info.value), 300)


def test_unbounded_lists_and_maps_of_numbers_are_bounded():
    base = {"classes": {"A": {}, "B": {}}, "trace": {"path": "t.csv"}}
    for assign, needle in [({"by": "fraction", "fractions": {"A": 1e308, "B": 1e308}}, "fractions"),
                           ({"by": "prompt_length", "edges": [2**70], "classes": ["A", "B"]}, "edges"),
                           ({"by": "prompt_length", "edges": [-5], "classes": ["A", "B"]}, "edges")]:
        with pytest.raises(ScenarioError, match=needle):
            from_dict({**base, "trace": {"path": "t.csv", "assign": assign}})


def test_error_messages_never_echo_a_huge_input():
    # a list of 100k bad items, a 1 MB string and a 1 MB key: the message stays short
    data = {"classes": {"A": {"arrival": {"process": "times", "times": ["x"] * 100_000}}},
            "title": "t" * 1_000_000, "k" * 1_000_000: 1}
    with pytest.raises(ScenarioError) as info:
        from_dict(data)
    msg = one_line(str(info.value), 1200)
    assert "more problem" in msg


@pytest.mark.parametrize(("key", "value"), [
    ("hardware.gpu", "<a href='https://evil.example'>H100</a>"), ("model.name", "x` [a](b) `"),
    ("name", "two\nlines"), ("title", "bell\x07"), ("hardware.gpu", "G" * 65)])
def test_names_shown_in_titles_are_plain(key, value):
    from engine.config.scenario import apply_overrides

    with pytest.raises(ScenarioError, match=key.replace(".", r"\.")):
        from_dict(apply_overrides({"hardware": {"memory_gib": 80, "bandwidth_tbs": 3, "peak_tflops": 900}},
                                  {key: value}))
    assert from_dict({"hardware": {"gpu": "MI300X (TP8)/v2", "memory_gib": 192, "bandwidth_tbs": 5.3,
                                   "peak_tflops": 1300}}).hardware.gpu == "MI300X (TP8)/v2"


def test_class_names_differing_only_in_case_are_refused():
    with pytest.raises(ScenarioError, match="'A' and 'a' differ only in letter case"):
        from_dict({"classes": {"A": {}, "a": {"priority": 1}}})


@pytest.mark.parametrize("name", ["x` [Log in](https://evil.example/login) `", "P\u0440", "a\nb", "", "x" * 41])
def test_hostile_class_names_are_refused_and_shown_bounded(name):
    with pytest.raises(ScenarioError) as info:
        from_dict({"classes": {name: {}}})
    msg = one_line(str(info.value))
    assert "class name" in msg


# ---------------------------------------------------------------------------------------------
# Files a scenario names: local, regular, bounded, inside an allowed folder


def test_urls_are_never_read(tmp_path):
    for url in ("http://127.0.0.1:9/x.csv", "https://evil.example/x", "file:///etc/passwd", "s3://b/k",
                "//host/share/x.csv"):
        with pytest.raises(FileRefused, match="URL"):
            check_local(url)
        with pytest.raises(ScenarioError, match="URL"):
            read_column(url, "x")
        with pytest.raises(TraceError, match="URL"):
            read_trace(url)


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero")
def test_device_files_and_fifos_are_refused_without_reading(tmp_path):
    fifo = tmp_path / "fifo.csv"
    os.mkfifo(fifo)  # opening a FIFO for reading would block forever
    for dev in ("/dev/zero", "/dev/urandom", str(fifo), str(tmp_path)):
        with pytest.raises(FileRefused, match="not a regular file"):
            read_bytes(dev, 1 << 20)
        with pytest.raises(TraceError, match="not a regular file"):
            read_trace(dev)
        with pytest.raises(ScenarioError, match="not a regular file"):
            read_column(dev, "x")


def test_size_limit_counts_bytes_really_read(tmp_path):
    p = tmp_path / "big.csv"
    p.write_bytes(b"x" * 1001)
    with pytest.raises(FileRefused, match="over the 1,000 bytes limit"):
        read_bytes(p, 1000)
    assert read_bytes(p, 1001) == b"x" * 1001
    if Path("/proc/self/status").exists():  # size 0 in stat, content really there
        assert read_bytes("/proc/self/status", 1 << 20)
        with pytest.raises(FileRefused, match="more than"):
            read_bytes("/proc/self/status", 10)


def _write(p: Path, text: str) -> Path:
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text, encoding="utf-8")
    return p


LENGTHS = "x\n100\n200\n300\n"


def test_files_next_to_the_scenario_are_allowed(tmp_path):
    _write(tmp_path / "data" / "lengths.csv", LENGTHS)
    sc = _write(tmp_path / "s.yaml",
                "classes:\n  A:\n    prompt: {dist: empirical, path: data/lengths.csv, column: x}\n")
    raw = load_raw(str(sc))
    assert raw["classes"]["A"]["prompt"]["path"] == str(tmp_path / "data" / "lengths.csv")
    assert sorted(read_column(raw["classes"]["A"]["prompt"]["path"], "x")) == [100, 200, 300]


@pytest.mark.parametrize("ref", ["../outside/lengths.csv", "{out}/lengths.csv", "/etc/passwd", "link/lengths.csv"])
def test_files_outside_the_allowed_folders_are_refused_naming_the_key(tmp_path, ref):
    out = _write(tmp_path / "outside" / "lengths.csv", LENGTHS).parent
    home = tmp_path / "home"
    home.mkdir()
    (home / "link").symlink_to(out)  # a symbolic link does not make a folder inside
    sc = _write(home / "s.yaml", "classes:\n  A:\n    prompt: {dist: empirical, path: '%s', column: x}\n"
                % ref.format(out=out))
    with pytest.raises(ScenarioError) as info:
        load_raw(str(sc))
    msg = one_line(str(info.value))
    assert msg.startswith("classes.A.prompt.path") and "outside the allowed folders" in msg
    # an explicitly allowed folder makes it readable
    if ref != "/etc/passwd":
        raw = load_raw(str(sc), allow_dirs=(out,))
        assert raw["classes"]["A"]["prompt"]["column"] == "x"


def test_trace_and_base_outside_are_refused(tmp_path):
    _write(tmp_path / "other" / "t.csv", "arrived_at,num_prefill_tokens,num_decode_tokens\n0,1,1\n")
    _write(tmp_path / "other" / "b.yaml", "seed: 3\n")
    home = tmp_path / "home"
    s1 = _write(home / "t.yaml", "trace: {path: ../other/t.csv}\n")
    s2 = _write(home / "b.yaml", "base: ../other/b.yaml\n")
    s3 = _write(home / "c.yaml", "base: default\nseed: 4\n")
    with pytest.raises(ScenarioError, match=r"^trace.path = .*outside"):
        load_raw(str(s1))
    with pytest.raises(ScenarioError, match=r"^base = .*outside"):
        load_raw(str(s2))
    assert load(str(s3)).seed == 4  # a shipped name is always allowed
    assert load(str(s2), allow_dirs=(tmp_path / "other",)).seed == 3


@pytest.mark.parametrize("base", ["/dev/zero", "http://x/y.yaml", "../../../../etc/passwd", "x" * 300])
def test_base_must_be_a_shipped_name_or_a_yaml_file(tmp_path, base):
    s = _write(tmp_path / "s.yaml", f"base: '{base}'\n")
    with pytest.raises(ScenarioError) as info:
        load_raw(str(s))
    one_line(str(info.value))


def test_shipped_names_cannot_traverse(tmp_path):
    from engine.config.scenario import load_shipped

    with pytest.raises(ScenarioError, match="no scenario"):
        load("../scenarios/default")
    assert (SCENARIO_DIR / "default.yaml").is_file()
    for name in ("../scenarios/default.yaml", str(SCENARIO_DIR / "default.yaml"), "/etc/passwd", "default.yaml"):
        with pytest.raises(ScenarioError, match="no shipped scenario"):
            load_shipped(name)
    assert load_shipped("default")["name"] == "default"


def test_scenario_files_are_bounded_and_utf8(tmp_path):
    big = tmp_path / "big.yaml"
    big.write_bytes(b"# " + b"x" * MAX_SCENARIO_BYTES)
    with pytest.raises(ScenarioError, match="limit"):
        load(str(big))
    latin = tmp_path / "latin.yaml"
    latin.write_bytes(b"name: caf\xe9\n")
    with pytest.raises(ScenarioError, match=r"not UTF-8 text \(byte 9 is 0xe9\)"):
        load(str(latin))
    bom = tmp_path / "bom.yaml"
    bom.write_bytes(b"\xef\xbb\xbfseed: 5\n")
    assert load(str(bom)).seed == 5


# ---------------------------------------------------------------------------------------------
# Traces: bounded integers, nesting, one-line parser errors


HEAD = "arrived_at,num_prefill_tokens,num_decode_tokens"


@pytest.mark.parametrize("value", ["1e19", "9223372036854775808", "18446744073709551616", "inf", "nan",
                                   "10000001", "1" + "0" * 40])
def test_trace_lengths_that_would_wrap_are_refused(value):
    with pytest.raises(TraceError) as info:
        parse_trace(f"{HEAD}\n0,10,5\n1,{value},5\n", origin="t.csv")
    msg = one_line(str(info.value))
    assert "line 3" in msg and "num_prefill_tokens" in msg and "10,000,000" in msg


@pytest.mark.parametrize(("rec", "needle"), [
    ({"timestamp": 0, "input_length": 10**19, "output_length": 5}, "input_length"),
    ({"timestamp": 0, "input_length": 2**64, "output_length": 5}, "input_length"),
    ({"timestamp": 10**400, "input_length": 5, "output_length": 5}, "timestamp"),
    ({"timestamp": 0, "input_length": True, "output_length": 5}, "input_length"),
    ({"timestamp": 0, "input_length": "5", "output_length": 5}, "input_length"),
    ({"timestamp": 0, "input_length": [5], "output_length": 5}, "input_length"),
    ({"timestamp": -1, "input_length": 5, "output_length": 5}, "timestamp"),
])
def test_mooncake_values_are_checked(rec, needle):
    good = json.dumps({"timestamp": 0, "input_length": 5, "output_length": 5})
    with pytest.raises(TraceError) as info:
        parse_trace(good + "\n" + json.dumps(rec) + "\n", origin="m.jsonl")
    msg = one_line(str(info.value))
    assert "line 2" in msg and needle in msg


def test_mooncake_nan_and_infinity_literals_are_refused():
    good = json.dumps({"timestamp": 0, "input_length": 5, "output_length": 5})
    for bad in ('{"timestamp": NaN, "input_length": 5, "output_length": 5}',
                '{"timestamp": 1, "input_length": Infinity, "output_length": 5}'):
        with pytest.raises(TraceError):
            parse_trace(good + "\n" + bad + "\n")


def test_deeply_nested_jsonl_is_a_trace_error():
    text = '{"timestamp": 0, "input_length": 5, "output_length": 5}\n' + "[" * 100_000 + "]" * 100_000 + "\n"
    with pytest.raises(TraceError) as info:
        parse_trace(text, origin="deep.jsonl")
    assert "line 2" in one_line(str(info.value))


def test_pandas_tokenizer_errors_are_one_line():
    with pytest.raises(TraceError) as info:
        parse_trace(f"{HEAD}\n0,1,1\n1,2,3,4,5\n", origin="ragged.csv")
    msg = one_line(str(info.value))
    assert msg == "ragged.csv: line 3: 5 fields, but the header has 3"
    with pytest.raises(TraceError) as info:
        parse_trace(f'{HEAD}\n0,1,"1\n', origin="quote.csv")
    one_line(str(info.value))


@pytest.mark.parametrize(("col", "value", "needle"), [("priority", "1001", "priority"), ("priority", "-1", "priority"),
                                                      ("class", "x` [a](b) `", "class"), ("class", "P" * 41, "class")])
def test_trace_priority_and_class_values_are_bounded(col, value, needle):
    with pytest.raises(TraceError) as info:
        parse_trace(f"{HEAD},{col}\n0,1,1,{value}\n", origin="t.csv")
    assert needle in one_line(str(info.value))


def test_one_line_of_many_commas_is_refused_at_once():
    # pandas would build one column per comma (300k columns: tens of seconds, a gigabyte)
    with pytest.raises(TraceError, match=r"^t.csv: line 2: 300,001 fields, but the header has 3$"):
        parse_trace(f"{HEAD}\n" + "," * 300_000 + "\n0,1,1\n", origin="t.csv")
    with pytest.raises(TraceError, match=r"^t.csv: line 1: 10,001 columns in the header \(at most 64\)$"):
        parse_trace("arrived_at," * 10_000 + "x\n0,1,1\n", origin="t.csv")
    # a quoted field with a comma in a good-looking file: refused too (no valid field has one)
    with pytest.raises(TraceError, match="line 2: 5 fields"):
        parse_trace(f"{HEAD},class\n0,1,1,\"a,b\"\n", origin="t.csv")


def test_binary_and_non_utf8_traces(tmp_path):
    with pytest.raises(TraceError, match="binary"):
        parse_trace(f"{HEAD}\n0,1\x00,1\n")
    p = tmp_path / "latin.csv"
    p.write_bytes(f"{HEAD}\n0,1,1\n".encode() + b"\xff\n")
    with pytest.raises(TraceError, match="not UTF-8"):
        read_trace(p)


def test_trace_cache_sees_a_changed_file(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text(f"{HEAD}\n0,10,1\n", encoding="utf-8")
    first = read_trace(p)
    first.loc[0, "prompt_tokens"] = 999  # callers get a copy: mutating it changes nothing cached
    assert read_trace(p)["prompt_tokens"].tolist() == [10]
    p.write_text(f"{HEAD}\n0,20,1\n0.5,30,1\n", encoding="utf-8")
    os.utime(p, ns=(1, 10**18))
    assert read_trace(p)["prompt_tokens"].tolist() == [20, 30]


# ---------------------------------------------------------------------------------------------
# Literal text helpers


INJECTIONS = ["x` [Log in again](https://evil.example/login) `", "[a](javascript:alert(1))", "<img src=x onerror=1>",
              "**bold** _it_ :red[x] :material/home: $x^2$", "```\ncode\n```", "www.evil.example", "a\u2028b\nc"]


@pytest.mark.parametrize("text", INJECTIONS)
def test_md_escape_leaves_no_markdown_syntax(text):
    out = md_escape(text)
    assert "\n" not in out
    # every ASCII punctuation character is escaped: no unescaped [, ], (, <, `, *, _, :, $ remain
    import re

    assert not re.search(r"(?<!\\)[\[\]()<>`*_:$!#|~]", out.replace("\\\\", "")), out


@pytest.mark.parametrize("text", INJECTIONS + ["````", "a`b``c"])
def test_md_code_fence_is_longer_than_any_backtick_run(text):
    out = md_code(text)
    fence = out.split(" ", 1)[0]
    assert set(fence) == {"`"} and out.endswith(" " + fence)
    inner = out[len(fence) + 1: -len(fence) - 1]
    assert all(len(run) < len(fence) for run in inner.replace("\\`", "").split() if set(run) == {"`"})
    assert "\n" not in out


def test_brief_and_clip_bound_everything():
    assert brief(10**120) == "a 121-digit integer"
    assert brief(2**70) == str(2**70)
    assert brief("x" * 1000).endswith("…") and len(brief("x" * 1000)) < 50
    assert brief(["a"] * 7) == "a list of 7 items" and brief({"a": 1}) == "a mapping of 1 key"
    assert clip("a\nb\x1b[31m") == "a\\nb\\x1b[31m"
    assert yaml  # imported for the loaders above
