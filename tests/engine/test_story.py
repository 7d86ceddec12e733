"""Scenario stories: the claim language, the story section, and every shipped story over seeds.

`test_shipped_story_holds` runs every shipped scenario's story on 3 seeds at the shipped load
(each claim must hold on all seeds but one); `STORY_SEEDS=20 python -m pytest
tests/engine/test_story.py` runs the full audit: 20 seeds × load ×0.9, ×1, ×1.1, each claim on
19 of 20 seeds at every scale (about 2,000 runs: tens of minutes on two cores).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from engine import load, simulate
from engine.cli import main
from engine.config.scenario import SCENARIO_DIR, ScenarioError, load_raw, scenario_names
from engine.sweeps import claims
from engine.sweeps import story as stories
from engine.sweeps.sweep_exec import LocalBackend
from tests.sweep_fixtures import InlineBackend

FULL = int(os.environ.get("STORY_SEEDS", "0") or 0)
SEEDS = FULL or 3
SCALES = stories.DEFAULT_SCALES if FULL else (1.0,)

TINY = """
name: tiny
seed: 4
duration_s: 6
cost: {model: fixed, step_time_s: 0.05}
kv: {num_blocks: 41, block_size: 4}
scheduler: {policy: fcfs, max_num_batched_tokens: 64, max_num_seqs: 8}
classes:
  P0:
    priority: 0
    arrival: {process: poisson, rate: 3}
    prompt: {dist: constant, value: 40}
    output: {dist: constant, value: 4}
    slo: {ttft_s: 0.5}
  P1:
    priority: 1
    arrival: {process: poisson, rate: 6}
    prompt: {dist: constant, value: 12}
    output: {dist: constant, value: 8}
  P2:
    priority: 2
    arrival: {process: times, times: [0.5, 3]}
    prompt: {dist: constant, value: 120}
    output: {dist: constant, value: 30}
story:
  runs:
    - {label: fcfs, set: {}}
    - {label: priority, set: {scheduler.policy: priority}}
  claims:
    - {run: 1, metric: P0.inversion_s, op: "==", value: 0}
    - {run: 0, metric: P0.ttft_p99, op: ">=", other: 1, factor: 1.0}
"""


def write(tmp_path: Path, text: str, name: str = "tiny.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


# ---------------------------------------------------------------------------------------------
# The claim language


def test_validate_names_what_is_wrong():
    ok = {"run": 0, "metric": "P0.ttft_p99", "op": "<", "value": 1}
    assert claims.validate(ok, 1) == ok
    for bad, says in [({**ok, "op": "≤"}, "op"), ({**ok, "run": 2}, "run = 2"), ({**ok, "other": 0}, "exactly one"),
                      ({k: v for k, v in ok.items() if k != "value"}, "exactly one"), ({**ok, "facter": 2}, "facter"),
                      ({**ok, "factor": 2}, "factor"), ({"run": 0, "op": "<", "value": 1}, "metric"), ("x", "mapping")]:
        with pytest.raises(claims.ClaimError, match=says):
            claims.validate(bad, 2)


def test_compare_against_a_constant_and_another_run():
    vals = [{"P0.ttft_p99": 4.0}, {"P0.ttft_p99": 1.5}]
    v = claims.compare({"run": 0, "metric": "P0.ttft_p99", "op": ">=", "other": 1, "factor": 2.0}, vals)
    assert v.ok and v.value == 4.0 and v.ref == 3.0
    assert not claims.compare({"run": 0, "metric": "P0.ttft_p99", "op": ">=", "other": 1, "factor": 3.0}, vals).ok
    assert claims.compare({"run": 1, "metric": "P0.ttft_p99", "op": "<", "value": 2}, vals).ok
    # nothing measured (a class without requests) never holds, and a name never compares with a number
    assert not claims.compare({"run": 0, "metric": "P1.ttft_p99", "op": "<", "value": 2}, vals).ok
    assert not claims.compare({"run": 0, "metric": "x", "op": "<", "value": 2}, [{"x": "P2"}]).ok
    assert claims.compare({"run": 0, "metric": "top_holder", "op": "==", "value": "P2"}, [{"top_holder": "P2"}]).ok


def test_support_counts_the_requests_behind_a_percentile():
    res = simulate(load("classic-inversion"))
    req = res.requests
    p0 = req[(req["class"] == "P0") & req["measured"]]
    assert claims.support(res, "P0.ttft_p99") == int(p0["ttft_s"].notna().sum()) > 0
    assert claims.support(res, "P2.e2e_p99") == 3
    assert claims.support(res, "P0.inversion_s") is None and claims.support(res, "served_tok_s") is None
    m = claims.measure(res, ["P0.ttft_p99", "top_holder", "overtaken_later"])
    assert m["values"]["P0.ttft_p99"] == res.summary["classes"]["P0"]["ttft_p99"]
    assert set(m["support"]) == {"P0.ttft_p99"}
    json.dumps(m)  # crosses processes as plain data


def test_needs_lists_each_runs_metrics():
    cs = [{"run": 1, "metric": "a", "op": "<", "other": 0}, {"run": 1, "metric": "b", "op": "<", "value": 1}]
    assert claims.needs(cs, 3) == [["a"], ["a", "b"], []]


# ---------------------------------------------------------------------------------------------
# The story section


def test_story_is_not_part_of_the_scenario_and_not_inherited(tmp_path):
    p = write(tmp_path, TINY)
    assert "story" not in load_raw(str(p))
    load(str(p))  # validates: the section does not reach the schema
    child = write(tmp_path, "base: tiny.yaml\nname: child\n", "child.yaml")
    assert stories.of_scenario(str(child)) is None
    with pytest.raises(ScenarioError, match="no `story:` section"):
        stories.load_story(str(child))
    s = stories.load_story(str(p))
    assert s.name == "tiny" and s.labels == ["fcfs", "priority"] and len(s.claims) == 2


@pytest.mark.parametrize("section, says", [
    ("story: {runs: [], claims: []}", "at least one run"),
    ("story: {runs: [{label: a}], claims: [], note: x}", "unknown key"),
    ("story: {runs: [{label: a}, {label: a}], claims: [{run: 0, metric: x, op: <, value: 1}]}", "used twice"),
    ("story: {runs: [{label: a, b, set: {}}], claims: [{run: 0, metric: x, op: <, value: 1}]}", "runs\\[0\\]"),
    ("story: {runs: [{label: a}], claims: [{run: 1, metric: x, op: <, value: 1}]}", "not a run"),
    ("story: {runs: [{label: a}], claims: [{run: 0, metric: x, op: <, value: 1}], edge: [1]}", "edge"),
    ("story: {runs: [{label: a}], claims: [{run: 0, metric: x, op: <, value: 1, edge: true}]}", "say why"),
])
def test_a_malformed_story_is_refused_with_a_reason(tmp_path, section, says):
    p = write(tmp_path, TINY.split("story:")[0] + section + "\n")
    with pytest.raises(ScenarioError, match=says):
        stories.of_scenario(str(p))


def test_an_edge_claim_need_not_be_robust_but_must_mostly_hold(tmp_path):
    text = TINY.replace('op: ">=", other: 1, factor: 1.0}', 'op: ">=", other: 1, factor: 1.0, edge: true}\n  edge: why')
    s = stories.of_scenario(str(write(tmp_path, text)))
    assert s.edge == "why" and s.claims[1]["edge"]

    def audit_with(oks: list[bool]) -> stories.Audit:
        t = stories.Tally([claims.Verdict(ok, 1.0, 1.0) for ok in oks], [(None, None)] * len(oks))
        full = stories.Tally([claims.Verdict(True, 0, 0)] * len(oks), [(None, None)] * len(oks))
        return stories.Audit(s, list(range(len(oks))), [1.0], {1.0: [full, t]})

    assert audit_with([True] * 12 + [False] * 8).robust  # 12 of 20: on an edge, said so, still the story
    broken = audit_with([True] * 9 + [False] * 11)  # fewer than half: no longer the story
    assert not broken.weak() and broken.edge_broken() and not broken.robust


def test_required_is_all_but_one_in_twenty():
    assert [stories.required(n) for n in (1, 2, 3, 5, 20, 40)] == [1, 1, 2, 4, 19, 38]


def test_a_lesson_is_a_story():
    s = stories.of_lesson(Path(__file__).parents[2] / "lessons" / "05-inheritance-disappoints.md")
    assert s.scenario == "classic-inversion" and len(s.runs) == 4 and s.claims  # prio, inherit, boost, evict


def test_audit_runs_seeds_in_order_and_scales_the_load(tmp_path):
    s = stories.load_story(str(write(tmp_path, TINY)))
    assert stories.seeds_of(s, 3) == [4, 5, 6]
    k1, k2 = (json.loads(stories.scenario_key(s, 1, 5, x)) for x in (1.0, 1.1))
    assert k1["seed"] == 5 and k1["scheduler"]["policy"] == "priority"
    assert k2["classes"]["P1"]["arrival"]["rate"] == pytest.approx(6.6)
    assert k2["classes"]["P2"]["arrival"]["times"] == [0.5, 3]  # a list of times is not a rate (engine.config.scale)
    backend = InlineBackend()
    [a] = stories.audit([s], 3, (1.0, 1.1), backend=backend)
    assert a.seeds == [4, 5, 6] and len(backend.keys) == 2 * 3 * 2
    for x in (1.0, 1.1):
        assert [t.n for t in a.tallies[x]] == [3, 3]
    # seed by seed, the same numbers as running the scenario here
    res = simulate(load(str(tmp_path / "tiny.yaml"), {"seed": 5}))
    assert a.tallies[1.0][1].verdicts[1].value == res.summary["classes"]["P0"]["ttft_p99"]
    assert a.tallies[1.0][1].support[1][0] == claims.support(res, "P0.ttft_p99")


def test_the_cli_says_how_often_each_claim_holds(tmp_path, capsys):
    p = write(tmp_path, TINY)
    code = main(["story", str(p), "--seeds", "2", "--rates", "1", "--workers", "1"])
    out = capsys.readouterr().out
    assert code == 0 and "2 seeds (4–5)" in out and "P0.inversion_s [priority] == 0" in out and "2/2" in out
    weak = write(tmp_path, TINY.replace('op: "==", value: 0', 'op: ">", value: 0'), "weak.yaml")
    assert main(["story", str(weak), "--seeds", "2", "--rates", "1", "--workers", "1"]) == 1
    assert "← not robust" in capsys.readouterr().out
    assert main(["story", str(p), "--seeds", "2", "--rates", "1", "--workers", "1", "--json"]) == 0
    row = json.loads(capsys.readouterr().out)
    assert row["robust"] and row["claims"][0]["scales"]["1"]["holds"] == 2
    typo = write(tmp_path, TINY.replace("metric: P0.ttft_p99", "metric: P0.ttft_p999"), "typo.yaml")
    notes = write(tmp_path, "just notes, no header\n", "notes.md")
    for bad in (["story"], ["story", str(p), "--rates", "x"], ["story", str(p), "--seeds", "0"],
                ["story", "nosuch"], ["story", "default", "--all"], ["story", str(notes)],
                ["story", str(typo), "--seeds", "1", "--rates", "1", "--workers", "1"]):
        assert main(bad) == 2, bad
        err = capsys.readouterr().err
        assert err.startswith("error: ") and err.count("\n") == 1, err
    assert "unknown metric 'P0.ttft_p999'" in err


# ---------------------------------------------------------------------------------------------
# Every shipped story, over seeds


def test_every_shipped_scenario_tells_a_story():
    told = {s.name for s in stories.shipped()}
    assert told == set(scenario_names())
    for s in stories.shipped():
        for _label, overrides in s.runs:
            load(s.scenario, overrides)


@pytest.fixture(scope="module")
def shipped_audits():
    with LocalBackend() as backend:
        return {a.story.name: a for a in stories.audit(stories.shipped(), SEEDS, SCALES, backend=backend)}


@pytest.mark.parametrize("name", scenario_names())
def test_shipped_story_holds(shipped_audits, name):
    a = shipped_audits[name]
    weak = [f"{claims.describe(a.story.claims[i], a.story.labels)} at ×{x:g}: {t}" for i, x, t in a.weak()]
    weak += [f"edge claim {claims.describe(a.story.claims[i], a.story.labels)} at ×1: {t}"
             for i, _x, t in a.edge_broken()]
    assert not weak, f"{name}: " + "; ".join(weak)


def test_a_weakened_scenario_fails_its_story(tmp_path):
    """The check can fail: classic-inversion with 4k-token documents (nothing holds the cache) no
    longer tells its story — P0 no longer waits behind the document — and the audit says so."""
    text = (SCENARIO_DIR / "classic-inversion.yaml").read_text()
    weakened = text.replace("value: 26000", "value: 4000")
    assert weakened != text
    p = write(tmp_path, weakened, "weakened.yaml")
    with LocalBackend() as backend:
        [a] = stories.audit([stories.of_scenario(str(p))], 3, (1.0,), backend=backend)
    assert not a.robust and a.weak()
