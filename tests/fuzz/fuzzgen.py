"""Deterministic generators of hostile inputs: mutated scenario files and corrupt traces.

`scenario_case(seed, i)` and `trace_case(seed, i)` return case i of a seed's stream as
(label, file name, bytes): the same arguments always give the same bytes, so a failure found by
the large budget is reproduced by its (seed, index). Cases cycle through families — byte-level
damage of a shipped file, a key set to a hostile value, known attacks (alias bombs, deep nesting,
URLs and devices as paths, huge files), and valid-but-heavy scenarios that only the work cap
stops — so any budget samples all of them.

`workdir_files(folder)` lays out the files the cases name (a good trace and lengths CSV, a FIFO,
a directory, a link to a device, a sparse 65 MiB file), next to where the case file is written.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
SHIPPED = sorted((REPO / "scenarios").glob("*.yaml"))

HOSTILE_VALUES = [
    float("inf"), float("-inf"), float("nan"), "1e999", "-1e999", "Infinity", "NaN", 10**120, -(10**120), 2**63,
    2**64, 2**70, -(2**63) - 1, 2**31, -1, 0, 1e-300, 5e-324, 1e308, 0.5, True, None, "", "x" * 5000,
    "x` [Log in again](https://evil.example/login) `", "<script>alert(1)</script>", "\x1b[31mred\x00", [], [1, 2],
    {"a": 1}, [[[[[]]]]], "9" * 5000, "0x10", "1_000", "  42  ", "２", "P\u0440", 1e19, -0.0, [float("nan")],
    {"dist": "empirical", "path": "http://127.0.0.1:9/x.csv", "column": "x"},
    {"dist": "empirical", "path": "/dev/zero", "column": "x"}, "/etc/passwd", "fifo.csv",
]
HEAVY = [  # valid keys, values that imply a lot of work
    ("classes.P1.arrival.rate", 5000), ("classes.P1.arrival.rate", 100_000), ("duration_s", 1e6),
    ("drain_limit_s", 1e7), ("cost.model", "fixed"), ("cost.step_time_s", 1e-9), ("kv.block_size", 1),
    ("kv.num_blocks", 1), ("kv.num_blocks", 10_000_000), ("scheduler.max_num_batched_tokens", 1),
    ("scheduler.max_num_seqs", 65536), ("classes.P1.caps.max_prompt_tokens", 1), ("classes.P1.caps.over_cap", "split"),
    ("classes.P1.prompt.median", 10_000_000), ("classes.P1.prompt.p90", 10_000_000),
    ("classes.P1.prompt.max", 10_000_000),
    ("replicas.count", 64), ("classes.P0.arrival.process", "gamma"), ("classes.P0.arrival.cv", 100),
    ("classes.P0.arrival.cv", 1e-6), ("scheduler.policy", "backfill"), ("scheduler.policy", "preempt"),
    ("mitigations.aging_s", 1e-9), ("mitigations.preempt_mode", "swap"), ("mitigations.host_bandwidth_gbs", 1e-9),
    ("mitigations.alert_after_s", 1e-9), ("warmup_s", 0), ("scheduler.long_prefill_token_threshold", 1),
    ("scheduler.engine", "sglang"), ("scheduler.sglang.new_token_ratio_decay_steps", 1),
]
KEYS = [
    "seed", "duration_s", "warmup_s", "drain_limit_s", "name", "title", "base", "hardware.gpu", "hardware.num_gpus",
    "hardware.gpu_memory_utilization", "hardware.memory_gib", "model.name", "model.layers", "model.params_b",
    "kv.block_size", "kv.num_blocks", "cost.model", "cost.step_time_s", "cost.mfu", "scheduler.policy",
    "scheduler.max_num_batched_tokens", "scheduler.max_num_seqs", "scheduler.watermark", "classes",
    "classes.P0", "classes.P0.priority", "classes.P0.arrival", "classes.P0.arrival.rate", "classes.P0.arrival.times",
    "classes.P0.prompt", "classes.P0.prompt.value", "classes.P0.prompt.median", "classes.P0.output.max",
    "classes.P1.slo.ttft_s", "classes.P1.caps.max_prompt_tokens", "classes.P2.caps.max_kv_blocks", "trace",
    "trace.path", "trace.limit", "trace.assign", "mitigations.p0_token_reserve", "mitigations.p0_kv_reserve",
    "mitigations.aging_s", "replicas.count", "replicas.routing", "replicas.pin", "replicas.pin.P0", "nonsense.key",
    "classes.NEW.priority", "classes.P0.prompt.path", "scheduler.engine", "scheduler.sglang",
    "scheduler.sglang.class_priority", "scheduler.sglang.chunked_prefill_size",
]


def _set(data: dict, dotted: str, value) -> dict:
    node = data
    parts = dotted.split(".")
    for part in parts[:-1]:
        child = node.get(part) if isinstance(node, dict) else None
        if not isinstance(child, dict):
            child = {}
            node[part] = child
        node = child
    node[parts[-1]] = value
    return data


def _dump(data) -> bytes:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True).encode("utf-8")


def _laughs(width: int, levels: int) -> bytes:
    lines = [f"l0: &l0 [{', '.join(['lol'] * width)}]"]
    lines += [f"l{k}: &l{k} [{', '.join([f'*l{k - 1}'] * width)}]" for k in range(1, levels)]
    return ("\n".join(lines) + "\nseed: *l%d\n" % (levels - 1)).encode()


ATTACKS = [
    ("billion laughs 9×9", "laughs.yaml", lambda r: _laughs(9, 9)),
    ("laughs 20×6", "laughs2.yaml", lambda r: _laughs(20, 6)),
    ("laughs in classes", "laughs3.yaml", lambda r: b"a: &a {rate: 1}\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a]\n"
                                                     b"c: &c [*b, *b, *b, *b, *b, *b, *b, *b]\n"
                                                     b"classes: {P0: {arrival: {times: [*c, *c, *c, *c]}}}\n"),
    ("recursive alias", "cycle.yaml", lambda r: b"classes: &c {P0: *c}\n"),
    ("deep flow nesting", "deep.yaml", lambda r: b"classes: " + b"[" * 20000 + b"]" * 20000 + b"\n"),
    ("deep block nesting", "deepb.yaml",
     lambda r: "".join(" " * i + f"k{i}:\n" for i in range(400)).encode() + b" " * 400 + b"x: 1\n"),
    ("merge keys", "merge.yaml", lambda r: b"x: &x {rate: 2}\nclasses: {P0: {arrival: {<<: *x, process: poisson}}}\n"),
    ("python tag", "tag.yaml", lambda r: b"seed: !!python/object/apply:os.system ['echo pwned']\n"),
    ("binary tag", "bintag.yaml", lambda r: b"name: !!binary aGVsbG8=\n"),
    ("set and timestamp", "set.yaml", lambda r: b"classes: !!set {P0, P1}\nseed: 2001-12-14\n"),
    ("two documents", "multi.yaml", lambda r: b"seed: 1\n---\nseed: 2\n"),
    ("non-string keys", "keys.yaml", lambda r: b"classes: {1: {}, [1, 2]: {}}\n"),
    ("duplicate keys", "dup.yaml", lambda r: b"seed: 1\nseed: 2\nclasses: {P0: {}, P0: {priority: 3}}\n"),
    ("empty", "empty.yaml", lambda r: b""),
    ("comments only", "comments.yaml", lambda r: b"# nothing\n# here\n"),
    ("scalar document", "scalar.yaml", lambda r: b"42\n"),
    ("list document", "list.yaml", lambda r: b"- seed: 1\n"),
    ("utf-16", "utf16.yaml", lambda r: "seed: 3\nname: x\n".encode("utf-16")),
    ("latin-1", "latin.yaml", lambda r: "name: café\n".encode("latin-1")),
    ("bom", "bom.yaml", lambda r: b"\xef\xbb\xbfseed: 3\n"),
    ("nul bytes", "nul.yaml", lambda r: b"seed: 3\x00\x00\n"),
    ("random binary", "binary.yaml", lambda r: bytes(r.getrandbits(8) for _ in range(4096))),
    ("gzip magic", "gz.yaml", lambda r: b"\x1f\x8b\x08\x00" + bytes(r.getrandbits(8) for _ in range(200))),
    ("huge file", "huge.yaml", lambda r: b"# " + b"x" * (1 << 20) + b"\nseed: 1\n"),
    ("huge times list", "times.yaml",
     lambda r: b"classes: {P0: {arrival: {process: times, times: [" + b", ".join(b"%d" % i for i in range(150_000))
     + b"]}}}\n"),
    ("thousands of classes", "classes.yaml", lambda r: _dump({"classes": {f"C{i}": {"arrival": {"rate": 0.001}}
                                                                          for i in range(5000)}})),
    ("long class name", "cname.yaml", lambda r: _dump({"classes": {"C" * 100_000: {}}})),
    ("markdown class name", "mdname.yaml", lambda r: _dump({"classes": {"x` [a](https://evil.example) `": {}}})),
    ("markdown scenario name", "mdsc.yaml", lambda r: _dump({"name": "x` [Log in](https://evil.example/login) `"})),
    ("empirical URL", "url.yaml", lambda r: _dump({"classes": {"P0": {"prompt": {
        "dist": "empirical", "path": "http://127.0.0.1:9/lengths.csv", "column": "x"}}}})),
    ("empirical file URL", "furl.yaml", lambda r: _dump({"classes": {"P0": {"prompt": {
        "dist": "empirical", "path": "file:///etc/passwd", "column": "root"}}}})),
    ("empirical /dev/zero", "zero.yaml", lambda r: _dump({"classes": {"P0": {"prompt": {
        "dist": "empirical", "path": "/dev/zero", "column": "x"}}}})),
    ("empirical fifo", "efifo.yaml", lambda r: _dump({"classes": {"P0": {"prompt": {
        "dist": "empirical", "path": "fifo.csv", "column": "x"}}}})),
    ("empirical outside", "eout.yaml", lambda r: _dump({"classes": {"P0": {"output": {
        "dist": "empirical", "path": "../../../../etc/passwd", "column": "root"}}}})),
    ("empirical link to device", "elink.yaml", lambda r: _dump({"classes": {"P0": {"output": {
        "dist": "empirical", "path": "link.csv", "column": "x"}}}})),
    ("empirical good", "egood.yaml", lambda r: _dump({"classes": {"P0": {"prompt": {
        "dist": "empirical", "path": "lengths.csv", "column": "prompt"}}}})),
    ("empirical missing column", "ecol.yaml", lambda r: _dump({"classes": {"P0": {"prompt": {
        "dist": "empirical", "path": "lengths.csv", "column": "nope"}}}})),
    ("trace /dev/zero", "tzero.yaml", lambda r: _dump({"trace": {"path": "/dev/zero"}})),
    ("trace /dev/urandom", "turand.yaml", lambda r: _dump({"trace": {"path": "/dev/urandom"}})),
    ("trace fifo", "tfifo.yaml", lambda r: _dump({"trace": {"path": "fifo.csv"}})),
    ("trace directory", "tdir.yaml", lambda r: _dump({"trace": {"path": "dir.csv"}})),
    ("trace missing", "tmiss.yaml", lambda r: _dump({"trace": {"path": "absent.csv"}})),
    ("trace sparse 65 MiB", "tbig.yaml", lambda r: _dump({"trace": {"path": "big.csv"}})),
    ("trace URL", "turl.yaml", lambda r: _dump({"trace": {"path": "https://evil.example/t.csv"}})),
    ("trace good, bad classes", "tcls.yaml", lambda r: _dump({
        "classes": {"A": {"arrival": {"rate": 0}}}, "trace": {"path": "ok.csv", "assign": {"by": "column"}}})),
    ("trace good", "tgood.yaml", lambda r: _dump({"duration_s": 60, "classes": {
        "P0": {"arrival": {"rate": 0}}, "P1": {"priority": 1, "arrival": {"rate": 0}}},
        "trace": {"path": "ok.csv", "assign": {"by": "column"}}})),
    ("trace proc file", "tproc.yaml", lambda r: _dump({"trace": {"path": "/proc/self/environ"}})),
    ("base self cycle", "bself.yaml", lambda r: b"base: bself.yaml\n"),
    ("base device", "bdev.yaml", lambda r: b"base: /dev/zero\n"),
    ("base URL", "burl.yaml", lambda r: b"base: http://evil.example/x.yaml\n"),
    ("base outside", "bout.yaml", lambda r: b"base: ../../../../etc/x.yaml\n"),
    ("base shipped", "bok.yaml", lambda r: b"base: classic-inversion\nseed: 3\nduration_s: 30\n"),
    ("base traversal name", "btrav.yaml", lambda r: b"base: ../scenarios/default\n"),
    ("base not a string", "blist.yaml", lambda r: b"base: [default]\n"),
    ("pin out of range", "pin.yaml", lambda r: _dump({"replicas": {"count": 2, "routing": "pinned",
                                                                   "pin": {"P0": [2**70]}}, "classes": {"P0": {}}})),
    ("fractions inf", "frac.yaml", lambda r: _dump({"classes": {"A": {}}, "trace": {
        "path": "ok.csv", "assign": {"by": "fraction", "fractions": {"A": 1e308, "B": 1e308}}}})),
    ("edges huge", "edges.yaml", lambda r: _dump({"classes": {"A": {}, "B": {}}, "trace": {
        "path": "ok.csv", "assign": {"by": "prompt_length", "edges": [2**64], "classes": ["A", "B"]}}})),
    ("reserve over budget", "res.yaml", lambda r: _dump({"mitigations": {"p0_token_reserve": 10_000}})),
    ("kv reserve over cache", "kvres.yaml", lambda r: _dump({"mitigations": {"p0_kv_reserve": 10_000_000},
                                                             "classes": {"A": {}, "B": {"priority": 1}}})),
    ("model too big", "model.yaml", lambda r: _dump({"model": {"name": "Llama-3-70B"}})),
    ("case collision", "case.yaml", lambda r: _dump({"classes": {"A": {}, "a": {"priority": 1}}})),
    ("crlf", "crlf.yaml", lambda r: b"seed: 3\r\nduration_s: 10\r\n"),
    ("tabs", "tabs.yaml", lambda r: b"seed:\t3\n\tduration_s: 10\n"),
]


def scenario_case(seed: int, i: int) -> tuple[str, str, bytes]:
    """Case i of a seed's stream of scenario files: (label, file name, bytes)."""
    r = random.Random(seed * 1_000_003 + i)
    family = i % 5
    if family == 0:  # a known attack (cycling through them all)
        label, name, make = ATTACKS[(i // 5) % len(ATTACKS)]
        return f"attack: {label}", name, make(r)
    base_path = r.choice(SHIPPED)
    text = base_path.read_bytes()
    if family == 1:  # byte-level damage of a shipped file
        data = bytearray(text)
        how = r.choice(["flip", "insert", "truncate", "dup", "shuffle", "control", "delete"])
        for _ in range(r.randint(1, 8)):
            if not data:
                break
            k = r.randrange(len(data))
            if how == "flip":
                data[k] ^= 1 << r.randrange(8)
            elif how == "insert":
                data[k:k] = bytes(r.choice(b":{}[]&*!|>-#'\"\\\n\t \x00\xff%@`") for _ in range(r.randint(1, 4)))
            elif how == "truncate":
                del data[k:]
            elif how == "dup":
                j = min(len(data), k + r.randint(1, 200))
                data[k:k] = data[k:j] * r.randint(2, 50)
            elif how == "shuffle":
                lines = bytes(data).split(b"\n")
                r.shuffle(lines)
                data = bytearray(b"\n".join(lines))
            elif how == "control":
                data[k:k] = bytes([r.randrange(32)])
            else:
                del data[k:k + r.randint(1, 30)]
        return f"bytes {how}: {base_path.stem}", f"b{i}.yaml", bytes(data)
    raw = yaml.safe_load(text)
    if family in (2, 3):  # keys set to hostile values
        for _ in range(r.randint(1, 3)):
            key = r.choice(KEYS)
            value = r.choice(HOSTILE_VALUES)
            _set(raw, key, value)
        return f"values: {base_path.stem}", f"v{i}.yaml", _dump(raw)
    for _ in range(r.randint(1, 3)):  # valid keys, heavy values: only the work cap stops these
        key, value = r.choice(HEAVY)
        if key.startswith("classes.P1") and "P1" not in (raw.get("classes") or {}):
            key = key.replace("P1", "P0")
        _set(raw, key, value)
    return f"heavy: {base_path.stem}", f"h{i}.yaml", _dump(raw)


# ---------------------------------------------------------------------------------------------
# Traces


SIM_HEAD = "arrived_at,num_prefill_tokens,num_decode_tokens"
AZ_HEAD = "TIMESTAMP,ContextTokens,GeneratedTokens"


def _sim(n: int, r: random.Random, extra: str = "") -> str:
    rows = [f"{k * 0.25:.3f},{r.randint(1, 4000)},{r.randint(1, 500)}" + (f",{r.randint(0, 2)}" if extra else "")
            for k in range(n)]
    return SIM_HEAD + extra + "\n" + "\n".join(rows) + "\n"


def _azure(n: int, r: random.Random) -> str:
    rows = [f"2023-11-16 18:{17 + k // 60:02d}:{k % 60:02d}.{r.randrange(10**7):07d},{r.randint(1, 4000)},"
            f"{r.randint(1, 500)}" for k in range(n)]
    return AZ_HEAD + "\n" + "\n".join(rows) + "\n"


def _mooncake(n: int, r: random.Random) -> str:
    return "\n".join(json.dumps({"timestamp": k * 1000, "input_length": r.randint(1, 4000),
                                 "output_length": r.randint(1, 500), "hash_ids": [k]}) for k in range(n)) + "\n"


BAD_CELLS = ["1e19", "9223372036854775808", "18446744073709551616", "-1", "0", "nan", "NaN", "inf", "-inf",
             "1e999", "1_000", "0x10", "", " ", "abc", "1.5", "\"1,2\"", "'3'", "\x00", "１２", "+5", "5e0",
             "x` [a](https://evil.example) `", "P" * 50, "1" + "0" * 400]
BAD_JSON = ['{"timestamp": NaN, "input_length": 5, "output_length": 5}',
            '{"timestamp": 1e999, "input_length": 5, "output_length": 5}',
            '{"timestamp": 0, "input_length": 1e19, "output_length": 5}',
            '{"timestamp": 0, "input_length": 18446744073709551616, "output_length": 5}',
            '{"timestamp": 0, "input_length": "5", "output_length": 5}',
            '{"timestamp": 0, "input_length": true, "output_length": 5}',
            '{"timestamp": 0, "input_length": null, "output_length": 5}',
            '{"timestamp": 0, "input_length": [5], "output_length": {"a": 1}}',
            '{"timestamp": 0, "input_length": 5}', "[1, 2, 3]", '"just a string"', "null", "{", "}{",
            '{"timestamp": ' + "9" * 5000 + ', "input_length": 5, "output_length": 5}',
            "[" * 100_000 + "]" * 100_000, '{"a": ' * 50_000 + "1" + "}" * 50_000,
            '{"timestamp": -5, "input_length": 5, "output_length": 5}']


def trace_case(seed: int, i: int) -> tuple[str, str, bytes]:
    """Case i of a seed's stream of corrupt traces: (label, file name, bytes)."""
    r = random.Random(seed * 7_000_003 + i)
    fmt = ["simulator", "azure", "mooncake", "simulator+prio", "simulator+class"][i % 5]
    n = r.choice([1, 2, 5, 50])
    if fmt == "simulator":
        text = _sim(n, r)
    elif fmt == "simulator+prio":
        text = _sim(n, r, ",priority")
    elif fmt == "simulator+class":
        text = _sim(n, r, ",class").replace(",0\n", ",P0\n").replace(",1\n", ",P1\n").replace(",2\n", ",P2\n")
    elif fmt == "azure":
        text = _azure(n, r)
    else:
        text = _mooncake(n, r)
    name = "t.jsonl" if fmt == "mooncake" else "t.csv"
    lines = text.split("\n")
    how = r.choice(["cell", "cell", "json" if fmt == "mooncake" else "cell", "ragged", "header", "bytes", "truncate",
                    "encoding", "empty", "huge", "order", "quote", "dupe", "junk"])
    if how == "cell":
        k = r.randrange(1, max(2, len(lines) - 1))
        if fmt == "mooncake":
            rec = json.loads(lines[k - 1])
            rec[r.choice(["timestamp", "input_length", "output_length"])] = r.choice(
                [1e19, 2**63, 2**64, -1, 0, float("nan"), None, "5", [1], {"a": 1}, True, 1.5, 10**30])
            lines[k - 1] = json.dumps(rec)
        else:
            cells = lines[k].split(",") if lines[k] else ["0", "1", "1"]
            cells[r.randrange(len(cells))] = r.choice(BAD_CELLS)
            lines[k] = ",".join(cells)
    elif how == "json":
        lines.insert(r.randrange(len(lines)), r.choice(BAD_JSON))
    elif how == "ragged":
        k = r.randrange(len(lines))
        lines[k] = lines[k] + "," * r.randint(1, 5) + ("9" if r.random() < 0.5 else "")
    elif how == "header":
        lines[0] = r.choice(["", "a,b,c", SIM_HEAD.replace("arrived_at", "arrived"), "TIMESTAMP,ContextTokens",
                             "\ufeff" + lines[0], lines[0] + ",class,class", "{", lines[0].upper(), ",,,",
                             "arrived_at," * 10000])
    elif how == "bytes":
        data = bytearray("\n".join(lines).encode())
        for _ in range(r.randint(1, 10)):
            if data:
                data[r.randrange(len(data))] = r.randrange(256)
        return f"{fmt} bytes", name, bytes(data)
    elif how == "truncate":
        data = "\n".join(lines).encode()
        return f"{fmt} truncate", name, data[: r.randrange(max(1, len(data)))]
    elif how == "encoding":
        enc = r.choice(["utf-16", "utf-32", "latin-1+\xff", "gzip"])
        if enc == "gzip":
            import gzip

            return f"{fmt} gzip", name, gzip.compress("\n".join(lines).encode())
        if enc.startswith("latin"):
            return f"{fmt} latin-1", name, ("\n".join(lines) + "caf\xe9\n").encode("latin-1", "replace")
        return f"{fmt} {enc}", name, "\n".join(lines).encode(enc)
    elif how == "empty":
        return f"{fmt} empty", name, r.choice([b"", b"\n\n\n", b"   ", b"\xef\xbb\xbf", (lines[0] + "\n").encode()])
    elif how == "huge":
        k = r.randrange(1, max(2, len(lines)))
        big = r.choice(["9" * 3_000_000, "x" * 3_000_000, "," * 300_000, "\n" * 300_000, '"' + "a" * 2_000_000])
        lines.insert(k, big)
    elif how == "order":
        body = lines[1:-1] if fmt != "mooncake" else lines[:-1]
        r.shuffle(body)
        lines = ([lines[0]] if fmt != "mooncake" else []) + body + [""]
    elif how == "quote":
        k = r.randrange(len(lines))
        lines[k] = '"' + lines[k]
    elif how == "dupe":
        lines = lines[:1] + lines[1:] * r.randint(2, 200)
    else:
        lines.insert(r.randrange(len(lines)), r.choice(["\x00\x01\x02", "<html><body>", "#comment", "%PDF-1.4",
                                                         "\x1b[2J", "\u202e\u2066evil", ";".join(["1"] * 3)]))
    return f"{fmt} {how}", name, "\n".join(lines).encode("utf-8", "surrogatepass")


def workdir_files(folder: Path) -> None:
    """The files that scenario cases name, laid out in `folder` (where the case files go)."""
    folder.mkdir(parents=True, exist_ok=True)
    r = random.Random(0)
    (folder / "ok.csv").write_text(_sim(40, r, ",class").replace(",0\n", ",P0\n").replace(",1\n", ",P1\n")
                                   .replace(",2\n", ",P1\n"), encoding="utf-8")
    (folder / "lengths.csv").write_text("prompt,output\n" + "\n".join(f"{100 + 7 * k},{20 + k}" for k in range(50))
                                        + "\n", encoding="utf-8")
    fifo = folder / "fifo.csv"
    if not fifo.exists() and hasattr(os, "mkfifo"):
        os.mkfifo(fifo)
    (folder / "dir.csv").mkdir(exist_ok=True)
    link = folder / "link.csv"
    if not link.is_symlink() and Path("/dev/zero").exists():
        link.symlink_to("/dev/zero")
    with open(folder / "big.csv", "wb") as f:
        f.truncate(65 << 20)  # sparse: 65 MiB that take no disk
