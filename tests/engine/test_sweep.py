"""Sweep specs: expansion, sampling, validation, the output directory, resume and interruption."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import from_dict, load, simulate
from engine.sweeps.sweep import (
    Range,
    Sample,
    SweepError,
    expand,
    parse_spec,
    run_id,
    run_summaries,
    run_sweep,
)
from engine.sweeps.sweep_exec import LocalBackend, summary_rows
from engine.sweeps.sweep_runner import batch_size
from engine.sweeps.sweep_store import read_manifest, read_table
from tests.sweep_fixtures import InlineBackend, comparable, spec_data

# ---------------------------------------------------------------------------------------------
# Expansion


def test_grid_expands_to_the_product_times_seeds_in_order():
    spec = parse_spec(spec_data(grid={"scheduler.policy": ["fcfs", "priority"],
                                      "mitigations.p0_token_reserve": [0, 512, 1024]}, seeds=2))
    runs = expand(spec)
    assert len(runs) == 2 * 3 * 2
    base_seed = load("default").seed  # seeds: 2 → the base's seed and the next one
    assert [(r.knobs["scheduler.policy"], r.knobs["mitigations.p0_token_reserve"], r.seed) for r in runs[:4]] == [
        ("fcfs", 0, base_seed), ("fcfs", 0, base_seed + 1), ("fcfs", 512, base_seed), ("fcfs", 512, base_seed + 1)]
    assert runs[-1].knobs == {"scheduler.policy": "priority", "mitigations.p0_token_reserve": 1024}
    assert len({r.run_id for r in runs}) == 12
    for r in runs:  # each run's scenario is the base with exactly its knobs and seed set
        sc = from_dict(json.loads(r.key))
        assert sc.scheduler.policy == r.knobs["scheduler.policy"]
        assert sc.mitigations.p0_token_reserve == r.knobs["mitigations.p0_token_reserve"]
        assert sc.seed == r.seed and sc.duration_s == 8
        assert sc.key() == load("default", {**r.knobs, "seed": r.seed, "duration_s": 8, "warmup_s": 1}).key()


def test_run_id_is_a_stable_hash_of_the_canonical_scenario():
    spec = parse_spec(spec_data(grid={"scheduler.policy": ["fcfs"]}, seeds=[7]))
    (run,) = expand(spec)
    canon = json.dumps(json.loads(run.key), sort_keys=True, separators=(",", ":"))
    assert run.run_id == hashlib.sha256(canon.encode()).hexdigest()[:16]
    assert expand(parse_spec(spec_data(grid={"scheduler.policy": ["fcfs"]}, seeds=[7])))[0].run_id == run.run_id
    # the same scenario reached another way has the same id; key order does not matter
    shuffled = json.dumps(dict(reversed(list(json.loads(run.key).items()))))
    assert run_id(shuffled) == run.run_id


def test_points_that_give_the_same_scenario_run_once():
    spec = parse_spec(spec_data(grid={"mitigations.p0_token_reserve": [0, 0, 256]}, seeds=1))
    assert len(expand(spec)) == 2


def test_seed_list_and_grid_times_sample():
    reserve = {"mitigations.p0_token_reserve": {"low": 0, "high": 1000, "int": True}}
    spec = parse_spec(spec_data(grid={"scheduler.policy": ["fcfs", "priority"]}, seeds=[3, 9],
                                sample={"method": "random", "n": 3, "seed": 1, "keys": reserve}))
    runs = expand(spec)
    assert len(runs) == 2 * 3 * 2
    assert {r.seed for r in runs} == {3, 9}
    assert spec.knobs == ["scheduler.policy", "mitigations.p0_token_reserve"]
    # the same three sampled reserves under each policy
    by_policy = {p: [r.knobs["mitigations.p0_token_reserve"] for r in runs if r.knobs["scheduler.policy"] == p]
                 for p in ("fcfs", "priority")}
    assert by_policy["fcfs"] == by_policy["priority"]


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 60), seed=st.integers(0, 2**31), d=st.integers(1, 4))
def test_latin_hypercube_hits_every_stratum_once(n, seed, d):
    keys = {f"k{j}": Range(0.0, 1.0) for j in range(d)}
    pts = Sample("lhs", n, seed, keys).points()
    assert len(pts) == n
    for k in keys:
        strata = sorted(int(p[k] * n) for p in pts)
        assert strata == list(range(n))


@settings(max_examples=40, deadline=None)
@given(lo=st.integers(0, 50), width=st.integers(0, 50), u=st.floats(0, 1, exclude_max=True))
def test_integer_and_log_ranges_stay_inside(lo, width, u):
    r = Range(lo, lo + width, integer=True)
    assert lo <= r.value(u) <= lo + width and isinstance(r.value(u), int)
    g = Range(lo + 1, lo + 1 + width, log=True)
    assert lo + 1 <= g.value(u) <= lo + 1 + width + 1e-9


def test_integer_range_is_uniform_over_its_values():
    r = Range(0, 3, integer=True)
    assert [r.value(u) for u in (0.0, 0.24, 0.25, 0.5, 0.74, 0.75, 0.999)] == [0, 0, 1, 2, 2, 3, 3]
    assert [Range(choices=("a", "b")).value(u) for u in (0.0, 0.49, 0.5, 0.99)] == ["a", "a", "b", "b"]


def test_sampling_is_reproducible_and_seeded():
    keys = {"x": Range(0, 10), "y": Range(choices=(1, 2, 3))}
    a, b = Sample("lhs", 8, 4, keys).points(), Sample("lhs", 8, 4, keys).points()
    assert a == b
    assert a != Sample("lhs", 8, 5, keys).points()
    assert Sample("random", 8, 4, keys).points() != a


# ---------------------------------------------------------------------------------------------
# Validation: one clear error naming the key


@pytest.mark.parametrize("change, needle", [
    ({"grid": {"scheduler.polcy": ["fcfs"]}}, "grid.scheduler.polcy"),
    ({"grid": {"scheduler.policy": ["fcfs", "fifo"]}}, "grid.scheduler.policy = 'fifo'"),
    ({"grid": {"scheduler.policy": "fcfs"}}, "grid.scheduler.policy: expected a non-empty list"),
    ({"grid": {"seed": [1, 2]}}, "seed: sweep seeds with `seeds:`"),
    ({"grid": {"mitigations.p0_token_reserve": [0, 8192]}}, "grid.mitigations.p0_token_reserve = 8192"),
    ({"grids": {}}, "grids: unknown key"),
    ({"base": "no-such-scenario"}, "no scenario 'no-such-scenario'"),
    ({"base": None}, "base:"),
    ({"set": {"duration_s": -1}}, "set: duration_s = -1"),
    ({"seeds": 0}, "seeds = 0"),
    ({"seeds": [1, 1]}, "seeds: each seed once"),
    ({"sample": {"n": 4, "keys": {"kv.block_size": {"low": 8, "high": 4}}}}, "sample.keys.kv.block_size: low"),
    ({"sample": {"n": 4, "keys": {"kv.blocksize": {"low": 4, "high": 8}}}}, "sample.keys.kv.blocksize"),
    ({"sample": {"n": 0, "keys": {"kv.block_size": [8]}}}, "sample.n = 0"),
    ({"sample": {"method": "sobol", "n": 2, "keys": {"kv.block_size": [8]}}}, "sample.method = 'sobol'"),
    ({"sample": {"n": 2, "keys": {"kv.block_size": {"low": 1, "high": 2, "step": 1}}}},
     "sample.keys.kv.block_size.step"),
    ({"set": {"scheduler.policy": "fcfs"}, "grid": {"scheduler.policy": ["fcfs"]}}, "scheduler.policy: set in `set`"),
])
def test_bad_spec_names_the_key(change, needle):
    with pytest.raises(SweepError) as err:
        parse_spec({**spec_data(grid={"scheduler.policy": ["fcfs"]}), **change})
    assert needle in str(err.value)
    assert "\n" not in str(err.value)


def test_a_combination_that_cannot_run_names_its_knobs():
    # each value is fine alone (budget 8192, reserve 4096) but not with the smaller budget
    data = spec_data(grid={"scheduler.max_num_batched_tokens": [8192, 2048], "mitigations.p0_token_reserve": [0, 4096]})
    with pytest.raises(SweepError, match=r"run scheduler.max_num_batched_tokens=2048, "
                                         r"mitigations.p0_token_reserve=4096 \(seed \d+\)"):
        expand(parse_spec(data))


def test_spec_base_path_is_relative_to_the_spec_file(tmp_path):
    from engine.sweeps.sweep import load_spec

    (tmp_path / "mine.yaml").write_text("base: default\nduration_s: 7\n")
    (tmp_path / "spec.yaml").write_text("base: mine.yaml\ngrid: {scheduler.policy: [fcfs]}\n")
    spec = load_spec(tmp_path / "spec.yaml")
    assert spec.name == "spec"
    assert from_dict(spec.base_data).duration_s == 7


# ---------------------------------------------------------------------------------------------
# Rows, output directory, resume


def test_rows_are_the_summary_per_class_with_knobs_and_seed(tmp_path):
    spec = parse_spec(spec_data(grid={"scheduler.policy": ["fcfs", "priority"]}, seeds=1))
    out = run_sweep(spec, tmp_path / "o", InlineBackend(), progress=False)
    assert (out.total, out.skipped, out.ran, out.status) == (2, 0, 2, "complete")
    table = pd.read_parquet(tmp_path / "o" / "runs.parquet")
    assert list(table.columns[:4]) == ["run", "seed", "scheduler.policy", "class"]
    assert len(table) == 2 * 3 and list(table["class"][:3]) == ["P0", "P1", "P2"]
    # the same numbers as simulating the run directly
    run = expand(spec)[1]
    sc = from_dict(json.loads(run.key))
    direct = pd.DataFrame(summary_rows(simulate(sc).summary, sc)).drop(columns=["wall_time_s", "seed"])
    got = table[table["run"] == run.run_id].drop(columns=["run", "seed", "scheduler.policy", "wall_time_s"])
    pd.testing.assert_frame_equal(got.reset_index(drop=True), direct, check_dtype=False)
    assert set(table["scheduler.policy"]) == {"fcfs", "priority"}
    assert table.loc[table["class"] == "P0", "slo_ttft_s"].tolist() == [1.0, 1.0]
    assert "run_rejected" in table and "rejected" in table  # run-level and class-level kept apart
    # CSV: the same table
    csv = pd.read_csv(tmp_path / "o" / "runs.csv")
    assert csv.shape == table.shape and list(csv.columns) == list(table.columns)
    assert np.allclose(csv["ttft_p99"].fillna(-1), table["ttft_p99"].fillna(-1))
    m = read_manifest(tmp_path / "o")
    assert m["status"] == "complete" and m["finished"] and m["kind"] == "sweep"
    assert m["knobs"] == ["scheduler.policy"] and m["seeds"] == [spec.seeds[0]] and m["total"] == m["done"] == 2
    assert [r["run"] for r in m["runs"]] == [r.run_id for r in expand(spec)]
    assert m["engine"]["version"] and len(m["engine"]["digest"]) == 16
    assert m["spec"]["grid"] == {"scheduler.policy": ["fcfs", "priority"]}
    assert m["sessions"][-1]["ran"] == 2


def test_resume_skips_exactly_the_runs_already_done(tmp_path):
    small = parse_spec(spec_data(grid={"mitigations.p0_token_reserve": [0, 512]}, seeds=2))
    first = InlineBackend()
    run_sweep(small, tmp_path / "o", first, progress=False)
    assert len(first.keys) == 4
    before = read_table(tmp_path / "o")
    # the spec grows by one value and one seed: only the 9 - 4 new runs execute
    bigger = parse_spec(spec_data(grid={"mitigations.p0_token_reserve": [0, 512, 1024]}, seeds=3))
    second = InlineBackend()
    out = run_sweep(bigger, tmp_path / "o", second, progress=False)
    assert (out.total, out.skipped, out.ran) == (9, 4, 5)
    done_ids = {r.run_id for r in expand(small)}
    ran_ids = {run_id(k) for k in second.keys}
    assert ran_ids == {r.run_id for r in expand(bigger)} - done_ids
    after = read_table(tmp_path / "o")
    assert after["run"].nunique() == 9
    old = after[after["run"].isin(done_ids)]
    pd.testing.assert_frame_equal(comparable(old), comparable(before))
    # a third run does nothing
    third = InlineBackend()
    assert run_sweep(bigger, tmp_path / "o", third, progress=False).ran == 0 and third.keys == []


def test_interrupted_sweep_leaves_a_valid_partial_output_and_resumes(tmp_path):
    spec = parse_spec(spec_data(grid={"mitigations.p0_token_reserve": [0, 256, 512, 768]}, seeds=2))  # 8 runs
    cut = InlineBackend(interrupt_after=2)  # Ctrl-C while the third batch runs
    out = run_sweep(spec, tmp_path / "o", cut, progress=False, batch=2)
    assert out.status == "interrupted" and out.ran == 4 and cut.aborted
    m = read_manifest(tmp_path / "o")
    assert m["status"] == "interrupted" and m["done"] == 4 and m["total"] == 8 and m["finished"] is None
    partial = pd.read_parquet(tmp_path / "o" / "runs.parquet")
    assert partial["run"].nunique() == 4 and len(partial) == 12
    pd.testing.assert_frame_equal(comparable(read_table(tmp_path / "o")), comparable(partial))
    rest = InlineBackend()
    out = run_sweep(spec, tmp_path / "o", rest, progress=False, batch=2)
    assert (out.skipped, out.ran, out.status) == (4, 4, "complete")
    assert {run_id(k) for k in rest.keys} == {r.run_id for r in expand(spec)} - set(partial["run"])
    whole = run_sweep(spec, tmp_path / "fresh", InlineBackend(), progress=False)
    assert whole.ran == 8
    pd.testing.assert_frame_equal(comparable(read_table(tmp_path / "o")), comparable(read_table(tmp_path / "fresh")))


def test_output_directory_guards(tmp_path):
    spec = parse_spec(spec_data(grid={"scheduler.policy": ["fcfs"]}, seeds=1))
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    with pytest.raises(SweepError, match="not empty and holds no sweep"):
        run_sweep(spec, tmp_path / "busy", InlineBackend(), progress=False)
    run_sweep(spec, tmp_path / "o", InlineBackend(), progress=False)
    m = read_manifest(tmp_path / "o")
    m["engine"]["digest"] = "0" * 16  # as if another engine build wrote it
    (tmp_path / "o" / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(SweepError, match="another engine build.*--fresh"):
        run_sweep(spec, tmp_path / "o", InlineBackend(), progress=False)
    again = InlineBackend()
    assert run_sweep(spec, tmp_path / "o", again, progress=False, fresh=True).ran == 1 and len(again.keys) == 1


def test_a_run_the_engine_refuses_stops_the_sweep_naming_it(tmp_path):
    # a lengths file that is not there is only found when the run builds its workload
    lengths = tmp_path / "lens.csv"
    lengths.write_text("n\n100\n200\n300\n")
    base = tmp_path / "base.yaml"  # P1's prompts from the file (a sweep cannot set and sweep one key)
    base.write_text(f"base: default\nclasses:\n  P1:\n    prompt: {{dist: empirical, path: {lengths}, column: n}}\n")
    spec = parse_spec(spec_data(grid={"classes.P1.prompt.path": [str(lengths), str(tmp_path / "gone.csv")]},
                                seeds=1, base=str(base)))
    with pytest.raises(SweepError, match=r"run classes.P1.prompt.path='\S*gone.csv' \(seed \d+\): .*cannot read"):
        run_sweep(spec, tmp_path / "o", InlineBackend(), progress=False, batch=1)
    assert read_table(tmp_path / "o")["run"].nunique() == 1  # the run before it is kept


def test_a_value_no_run_could_take_is_named_before_any_run():
    # a KV reserve larger than the pool: `validate` finds it when the spec is read
    with pytest.raises(SweepError, match=r"grid.mitigations.p0_kv_reserve = 9000000: .*leaves nothing"):
        parse_spec(spec_data(grid={"mitigations.p0_kv_reserve": [0, 9_000_000]}, seeds=1))


# ---------------------------------------------------------------------------------------------
# Local backend


def test_local_backend_gives_the_inline_results(tmp_path):
    spec = parse_spec(spec_data(grid={"scheduler.policy": ["fcfs", "backfill"]}, seeds=3))
    run_sweep(spec, tmp_path / "inline", InlineBackend(), progress=False)
    with LocalBackend(2) as pool:
        run_sweep(spec, tmp_path / "local", pool, progress=False, batch=1)
    local, inline = read_table(tmp_path / "local"), read_table(tmp_path / "inline")
    pd.testing.assert_frame_equal(comparable(local), comparable(inline))


def test_run_summaries_keeps_order_and_runs_duplicates_once():
    keys = [load("default", {"duration_s": 7, "seed": s}).key() for s in (1, 2, 1)]
    seen = []
    with LocalBackend(2) as pool:
        out = run_summaries(keys, backend=pool, progress=seen.append)
    assert [s["seed"] for s in out] == [1, 2, 1]
    assert out[0] == out[2]
    assert seen[-1] == 1.0
    direct = simulate(load("default", {"duration_s": 7, "seed": 2})).summary
    assert {k: v for k, v in out[1].items() if k != "wall_time_s"} == {
        k: v for k, v in direct.items() if k != "wall_time_s"}


@pytest.mark.parametrize("n, workers, size", [(1, 2, 1), (16, 2, 1), (17, 2, 2), (160, 2, 10), (10_000, 2, 32),
                                               (100, 64, 1)])
def test_batch_size(n, workers, size):
    assert batch_size(n, workers) == size


def test_the_engine_digest_covers_every_folder_of_the_engine(tmp_path):
    """A change to a rule in engine/core (not only to the sweeps' own folder) is another build."""
    import shutil

    from engine.sweeps.sweep_store import engine_version

    copy = tmp_path / "engine"
    shutil.copytree(Path(__file__).resolve().parents[2] / "engine", copy, ignore=shutil.ignore_patterns("__pycache__"))
    before = engine_version(copy)["digest"]
    assert before == engine_version()["digest"]
    kv = copy / "core" / "kv.py"
    kv.write_text(kv.read_text() + "\n# another rule\n")
    assert engine_version(copy)["digest"] != before
