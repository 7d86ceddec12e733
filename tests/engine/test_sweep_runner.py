"""The runner loop that sweep, plan, capacity and story share: how each ends when a run is refused
or Ctrl-C arrives (workers stopped, the output directory finished and resumable), which backends
it closes, and what a session records in the manifest."""

from __future__ import annotations

import copy

import pytest
import yaml

from engine import from_dict, load
from engine.config.scenario import ScenarioError
from engine.sweeps import capacity as cap
from engine.sweeps import story as stories
from engine.sweeps import sweep_exec
from engine.sweeps.plan import run_plan
from engine.sweeps.sweep import SweepError, load_spec, parse_spec, run_summaries, run_sweep
from engine.sweeps.sweep_store import read_manifest
from tests.sweep_fixtures import ONE_SEAT, TINY_PLAN_BASE, InlineBackend, spec_data

SWEEP_SESSION = ["started", "ended", "status", "backend", "workers", "wall_s", "ran"]
SEARCH_SESSION = ["started", "ended", "status", "backend", "workers", "ran"]  # plan and capacity


class Refusing(InlineBackend):
    """Every run comes back refused by the engine, as a task reports it: {"error": message}."""

    def imap(self, batches, task=None):
        for i, keys in enumerate(batches):
            self.keys.extend(keys)
            yield i, [{"error": "refused here"} for _ in keys]


class Made(InlineBackend):
    """Stands in for the local process pool a runner makes itself when given no backend."""

    made: list[Made] = []

    def __init__(self, workers=None, *args, **kwargs):
        super().__init__(workers or 1)
        Made.made.append(self)


@pytest.fixture
def made(monkeypatch):
    Made.made = []
    monkeypatch.setattr(sweep_exec, "LocalBackend", Made)
    return Made.made


def tiny_plan(tmp_path, replicas=(1, 8)):
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(TINY_PLAN_BASE))
    (tmp_path / "plan.yaml").write_text(yaml.safe_dump({"base": "tiny.yaml", "seeds": [0, 1],
                                                         "plan": {"replicas": list(replicas)},
                                                         "grid": {"scheduler.policy": ["fcfs", "priority"]}}))
    return load_spec(tmp_path / "plan.yaml")


def one_seat():
    """The one-seat engine with 5 s of arrivals: a capacity search of a few dozen short runs."""
    return [cap.config("a", from_dict({**copy.deepcopy(ONE_SEAT), "duration_s": 5}))]


def test_an_interrupted_plan_finishes_its_output_and_resumes_to_the_same_plan(tmp_path):
    spec = tiny_plan(tmp_path, (1, 4))
    cut = InlineBackend(interrupt_after=3)  # the first round: 2 policies × 2 counts × 2 seeds, a run a batch
    o = run_plan(spec, tmp_path / "o", cut, progress=False)
    assert o.status == "interrupted" and cut.aborted and not cut.closed  # the caller's backend stays open
    m = read_manifest(tmp_path / "o")
    assert (m["status"], m["done"], m["total"], m["finished"]) == ("interrupted", 3, 8, None)
    assert list(m["sessions"][-1]) == SEARCH_SESSION and m["sessions"][-1]["backend"] == "inline"
    assert m["sessions"][-1]["ran"] == 0  # a search counts the runs of the rounds it completed
    rest = InlineBackend()
    again = run_plan(spec, tmp_path / "o", rest, progress=False)
    assert again.status == "complete" and again.reused >= 3
    whole_backend = InlineBackend()
    whole = run_plan(spec, tmp_path / "whole", whole_backend, progress=False)
    assert len(rest.keys) == len(whole_backend.keys) - 3  # the three saved runs were not made again
    assert again.cheapest == whole.cheapest and again.runs == whole.runs
    assert [s.tested for s in again.searches] == [s.tested for s in whole.searches]
    m = read_manifest(tmp_path / "o")
    assert m["status"] == "complete" and len(m["sessions"]) == 2 and m["sessions"][-1]["ran"] == len(rest.keys)


def test_an_interrupted_capacity_search_finishes_its_output_and_resumes(tmp_path):
    cut = InlineBackend(interrupt_after=1)  # the first round: load ×1 and saturation ×2, two seeds each
    o = cap.search(one_seat(), [0, 1], cut, out=tmp_path / "o")
    assert o.status == "interrupted" and cut.aborted and not cut.closed
    m = read_manifest(tmp_path / "o")
    assert (m["kind"], m["status"], m["done"], m["total"]) == ("capacity", "interrupted", 1, 4)
    assert list(m["sessions"][-1]) == SEARCH_SESSION and m["sessions"][-1]["ran"] == 0
    rest = InlineBackend()
    again = cap.search(one_seat(), [0, 1], rest, out=tmp_path / "o")
    whole_backend = InlineBackend()
    whole = cap.search(one_seat(), [0, 1], whole_backend)  # no output directory: nothing kept
    assert again.status == whole.status == "complete" and whole.out is None
    assert len(rest.keys) == len(whole_backend.keys) - 1 and again.reused == 1 and whole.reused == 0
    assert cap.report(again)["configurations"] == cap.report(whole)["configurations"]
    assert read_manifest(tmp_path / "o")["sessions"][-1]["ran"] == len(rest.keys)


def test_a_capacity_search_without_an_output_can_be_interrupted():
    cut = InlineBackend(interrupt_after=2)
    o = cap.search(one_seat(), [0, 1], cut)
    assert (o.status, o.out, o.reused) == ("interrupted", None, 0) and cut.aborted


def test_a_refused_run_stops_a_plan_naming_it_and_finishes_the_output(tmp_path):
    refusing = Refusing()
    with pytest.raises(SweepError, match=r"run hardware.num_gpus=1, replicas.count=1, scheduler.policy='fcfs' "
                                         r"\(seed 0\): refused here"):
        run_plan(tiny_plan(tmp_path), tmp_path / "o", refusing, progress=False)
    assert refusing.aborted and not refusing.closed
    m = read_manifest(tmp_path / "o")
    assert (m["status"], m["done"], m["total"]) == ("interrupted", 0, 8)


def test_a_refused_run_stops_a_capacity_search_naming_it(tmp_path):
    refusing = Refusing()
    with pytest.raises(SweepError, match=r"run config='a', kind='cap', load_scale=1.0, replicas.count=1 "
                                         r"\(seed 0\): refused here"):
        cap.search(one_seat(), [0, 1], refusing, out=tmp_path / "o")
    assert refusing.aborted and read_manifest(tmp_path / "o")["status"] == "interrupted"


def test_a_sweep_session_records_its_wall_time_and_runs(tmp_path):
    spec = parse_spec(spec_data(grid={"scheduler.policy": ["fcfs", "priority"]}, seeds=2))
    run_sweep(spec, tmp_path / "o", InlineBackend(interrupt_after=1), progress=False, batch=1)
    run_sweep(spec, tmp_path / "o", InlineBackend(), progress=False)
    sessions = read_manifest(tmp_path / "o")["sessions"]
    assert [list(s) for s in sessions] == [SWEEP_SESSION, SWEEP_SESSION]
    assert [(s["status"], s["ran"]) for s in sessions] == [("interrupted", 1), ("complete", 3)]
    assert all(s["wall_s"] >= 0 for s in sessions)


def test_a_refused_run_stops_an_audit_and_the_summaries():
    s = stories.load_story("classic-inversion")
    refusing = Refusing()
    with pytest.raises(ScenarioError, match="^refused here$"):
        stories.audit([s], 1, (1.0,), backend=refusing)
    assert refusing.aborted and not refusing.closed and len(refusing.keys) >= 1
    keys = [load("default", {"duration_s": 7, "seed": k}).key() for k in (1, 2)]
    refusing = Refusing()
    with pytest.raises(ScenarioError, match="^refused here$"):
        run_summaries(keys, backend=refusing)
    assert refusing.aborted and not refusing.closed


def test_a_backend_made_by_a_runner_is_closed_by_it(tmp_path, made):
    spec = parse_spec(spec_data(grid={"scheduler.policy": ["fcfs"]}, seeds=1))
    assert run_sweep(spec, tmp_path / "sweep", progress=False).status == "complete"
    assert run_plan(tiny_plan(tmp_path, (1, 1)), tmp_path / "plan", progress=False).status == "complete"
    assert cap.search(one_seat(), [0], out=tmp_path / "cap").status == "complete"
    stories.audit([stories.load_story("classic-inversion")], 1, (1.0,), workers=3)
    run_summaries([load("default", {"duration_s": 7}).key()], workers=2)
    assert len(made) == 5 and all(b.closed and not b.aborted for b in made)
    assert [b.workers for b in made[3:]] == [3, 2] and all(b.keys for b in made)
