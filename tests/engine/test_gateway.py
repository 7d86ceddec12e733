"""The gateway layer (engine.sim.gateway): llm-d-router style bands, saturation, holdback, shedding.

Hand-worked rules on a hand-built gateway (fake endpoints whose queue and KV the test sets), the
off switch (no change at all), strict input validation, a Hypothesis property over random small
scenarios, and the `gateway-priority` scenario's claims with the numbers measured on its seed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_properties import PROPS, scenarios

from engine import from_dict, simulate
from engine.config.scenario import Gateway as GatewaySpec
from engine.config.scenario import ScenarioError, load
from engine.core.requests import Status
from engine.sim.gateway import Gateway, default_priorities, saturation
from engine.sim.metrics import clean

REPO = Path(__file__).resolve().parents[2]
EPS = 1e-9


# ---------------------------------------------------------------------------------------------
# The rules, by hand


def test_saturation_is_the_mean_of_max_queue_or_kv_over_endpoints():
    # endpoint 0: max(10/5, 0.4/0.8) = 2.0; endpoint 1: max(0/5, 0.88/0.8) = 1.1 -> mean 1.55
    assert saturation([10, 0], [0.4, 0.88]) == pytest.approx(1.55)
    # one endpoint with 2 waiting and KV 40 %: max(0.4, 0.5) = 0.5 (not saturated)
    assert saturation([2], [0.4]) == pytest.approx(0.5)
    # thresholds are configurable: queue 2 of 4, KV 0.5 of 1.0 -> 0.5
    assert saturation([2], [0.5], queue_threshold=4, kv_threshold=1.0) == pytest.approx(0.5)
    assert saturation([], []) == 0.0


def test_default_gateway_priorities_follow_the_class_order_top_highest():
    assert default_priorities([0, 1, 2]) == {0: 2, 1: 1, 2: 0}
    assert default_priorities([5, 0, 5]) == {0: 1, 5: 0}  # equal lab priorities share a band


class FakeRequests:
    """What the gateway reads and writes of engine.core.requests.Requests."""

    def __init__(self, cls: list[int], class_priority: list[int]):
        self.n = len(cls)
        self.cls = np.array(cls, dtype=np.int64)
        self.prio = np.array(class_priority, dtype=np.int64)[self.cls]
        self.arrival = np.full(self.n, np.nan)
        self.tie = list(range(self.n))
        self.status = np.full(self.n, Status.PENDING, np.int8)
        self.reason: dict[int, str] = {}

    def reject(self, i: int, why: str) -> None:
        self.status[i] = Status.REJECTED
        self.reason[i] = why


class FakeEndpoint:
    """A replica as the gateway sees it: its waiting count, its KV usage, its load, `submit`."""

    def __init__(self, index: int, kv: float = 0.0):
        self.index = index
        self.pool = SimpleNamespace(used=int(kv * 100), capacity=100)
        self.pending: list[int] = []

    @property
    def load(self) -> int:
        return len(self.pending)

    @property
    def waiting(self) -> int:
        return len(self.pending)

    def submit(self, i: int) -> None:
        self.pending.append(i)

    def set_kv(self, kv: float) -> None:
        self.pool.used = int(round(kv * 100))


def make(cls, class_priority, names, endpoints=1, kv=0.0, **spec):
    rs = FakeRequests(cls, class_priority)
    eps = [FakeEndpoint(k, kv) for k in range(endpoints)]
    gw = Gateway(GatewaySpec(**spec), rs, eps, names, class_priority)
    return gw, rs, eps


def test_bands_dispatch_highest_first_once_the_pool_is_no_longer_saturated():
    # classes P0 (lab 0 -> band 1), P1 (lab 1 -> band 0); KV at 90 % -> saturation 1.125: all wait
    gw, rs, (ep,) = make([1, 1, 0], [0, 1], ["P0", "P1"], kv=0.9)
    for i, t in enumerate([0.0, 0.1, 0.2]):
        gw.arrive(i, t)
    assert ep.pending == [] and gw.waiting == 3
    ep.set_kv(0.0)
    gw.pump(1.0)  # queue 0, 1, 2 -> saturation 0, 0.2, 0.4 < 1: all three go, P0 first, then FCFS
    assert ep.pending == [2, 0, 1]
    assert [rs.tie[i] for i in (2, 0, 1)] == [0, 1, 2]  # the engine keeps the dispatch order
    assert list(gw.dispatched) == [1.0, 1.0, 1.0] and list(rs.arrival) == [1.0, 1.0, 1.0]
    gw.finish()
    assert list(rs.arrival) == [0.0, 0.1, 0.2]  # TTFT counts from the gateway
    assert gw.inversions == 0 and not gw.overtaken.any()


def test_dispatch_stops_when_the_queue_reaches_the_threshold():
    # queue threshold 2: after two dispatches the endpoint scores 2/2 = 1.0 -> saturated
    gw, rs, (ep,) = make([0, 0, 0], [0], ["P0"], queue_depth_threshold=2)
    for i in range(3):
        gw.arrive(i, 0.0)
    assert ep.pending == [0, 1] and gw.waiting == 1
    ep.pending.pop(0)  # the engine admitted one: queue 1 -> 0.5
    gw.pump(0.5)
    assert ep.pending == [1, 2] and gw.dispatched[2] == 0.5


def test_least_loaded_endpoint_gets_the_request():
    gw, rs, eps = make([0, 0, 0], [0], ["P0"], endpoints=2)
    eps[0].pending.append(99)  # endpoint 0 already has one waiting
    for i in range(3):
        gw.arrive(i, 0.0)
    assert eps[1].pending == [0, 2] and eps[0].pending == [99, 1]  # ties go to the lower index


def test_round_robin_alternates_flows_within_a_band_and_global_strict_is_fcfs():
    # classes A and B, both lab priority 1 (one band); arrivals A, A, A, B while saturated
    order = []
    for fairness in ("round-robin", "global-strict"):
        gw, rs, (ep,) = make([0, 0, 0, 1], [1, 1], ["A", "B"], kv=0.9, fairness=fairness)
        for i in range(4):
            gw.arrive(i, 0.1 * i)
        ep.set_kv(0.0)
        gw.pump(1.0)
        order.append(ep.pending)
    assert order[0] == [0, 3, 1, 2]  # A1, B1, A2, A3
    assert order[1] == [0, 1, 2, 3]  # FCFS over the band


def test_holdback_ceiling_holds_a_lower_band_below_saturation():
    # P1's ceiling 0.5: it dispatches at saturation 0, 0.2, 0.4 and is held at 0.6; P0 (ceiling 1)
    # still goes at 0.6
    gw, rs, (ep,) = make([1, 1, 1, 1, 1, 0], [0, 1], ["P0", "P1"], classes={"P1": {"ceiling": 0.5}})
    for i in range(5):
        gw.arrive(i, 0.0)
    assert ep.pending == [0, 1, 2] and gw.waiting == 2
    gw.arrive(5, 0.1)
    assert ep.pending == [0, 1, 2, 5] and gw.waiting == 2
    assert gw.inversions == 0  # P0 passing P1 is no inversion


def test_a_higher_band_held_by_its_ceiling_is_overtaken_and_that_is_counted():
    # ceilings the wrong way round: P0 held at 0.5, P1 open to 1.0 -> a gateway inversion
    gw, rs, (ep,) = make([1, 1, 1, 0, 1], [0, 1], ["P0", "P1"], classes={"P0": {"ceiling": 0.5}})
    for i in range(3):
        gw.arrive(i, 0.0)  # saturation 0.6 after these
    gw.arrive(3, 0.1)  # P0 held (0.6 >= 0.5)
    gw.arrive(4, 0.2)  # P1 goes (0.6 < 1.0) while P0 waits
    assert ep.pending == [0, 1, 2, 4]
    assert gw.inversions == 1
    ep.pending.clear()  # the engine took them all: P0 goes now, overtaken once on its way
    gw.pump(0.3)
    assert ep.pending == [3] and gw.overtaken[3] == 1 and gw.overtaken.sum() == 1
    # a request still queued at the end counts what passed it until then
    gw2, rs2, (ep2,) = make([1, 1, 1, 0, 1, 1], [0, 1], ["P0", "P1"], classes={"P0": {"ceiling": 0.5}})
    for i, t in enumerate([0.0, 0.0, 0.0, 0.1, 0.2, 0.3]):
        gw2.arrive(i, t)
    gw2.finish()
    assert gw2.inversions == 2 and list(gw2.overtaken) == [0, 0, 0, 2, 0, 0]


def test_sheddable_arrivals_get_429_while_saturated_and_queue_otherwise():
    gw, rs, (ep,) = make([1, 1], [0, 1], ["P0", "BG"], kv=0.9, classes={"BG": {"priority": -1}})
    gw.arrive(0, 0.0)
    assert rs.status[0] == Status.REJECTED
    assert rs.reason[0].startswith("HTTP 429") and "sheddable" in rs.reason[0]
    ep.set_kv(0.0)
    gw.arrive(1, 0.5)
    assert rs.status[1] == Status.PENDING and ep.pending == [1]
    # with shedding off a sheddable request just waits in its band
    gw, rs, (ep,) = make([1], [0, 1], ["P0", "BG"], kv=0.9, classes={"BG": {"priority": -1}},
                         shed_when_saturated=False)
    gw.arrive(0, 0.0)
    assert rs.status[0] == Status.PENDING and gw.waiting == 1


def test_request_ttl_drops_with_429_and_a_reason():
    gw, rs, (ep,) = make([0, 0], [0], ["P0"], kv=0.9, request_ttl_s=1.0)
    gw.arrive(0, 0.0)
    gw.arrive(1, 0.8)
    gw.pump(0.5)
    assert gw.waiting == 2
    gw.pump(1.5)  # request 0 waited 1.5 s > 1.0; request 1 0.7 s
    assert rs.status[0] == Status.REJECTED and rs.status[1] == Status.PENDING
    assert rs.reason[0] == "HTTP 429 (gateway): waited 1.500 s in the gateway queue (gateway.request_ttl_s = 1)"
    assert gw.waiting == 1


def test_stale_metrics_let_a_burst_through_a_gate_that_looked_open():
    # queue threshold 2: live metrics stop after two; a scrape taken before the burst lets all five go
    gw, rs, (ep,) = make([0] * 5, [0], ["P0"], queue_depth_threshold=2)
    gw.scrape()
    for i in range(5):
        gw.arrive(i, 0.01)
    assert ep.pending == [0, 1, 2, 3, 4]
    gw.scrape()  # the next scrape sees them: saturated (5/2)
    gw.arrive(0, 0.06)  # (re-using id 0 as a new arrival for the test)
    assert gw.waiting == 1


# ---------------------------------------------------------------------------------------------
# The off switch and the input gate


def test_no_gateway_and_a_disabled_gateway_give_identical_results():
    base = simulate(load("classic-inversion", {"duration_s": 40}))
    off = simulate(load("classic-inversion", {"duration_s": 40, "gateway.enabled": False,
                                              "gateway.queue_depth_threshold": 1}))
    assert base.requests.equals(off.requests)
    a, b = clean(base.summary), clean(off.summary)
    a.pop("wall_time_s"), b.pop("wall_time_s")
    assert a == b
    assert "gateway_queue_s" not in base.requests and "gateway_inversions" not in a


@pytest.mark.parametrize("overrides, message", [
    ({"gateway.kv_cache_threshold": 1.5}, "gateway.kv_cache_threshold = 1.5: Input should be less than or equal to 1"),
    ({"gateway.queue_depth_threshold": 0}, "gateway.queue_depth_threshold = 0: Input should be greater than 0"),
    ({"gateway.fairness": "lottery"}, "gateway.fairness = 'lottery'"),
    ({"gateway.classes.P9.priority": 1}, "gateway.classes names unknown class 'P9'"),
    ({"gateway.classes.P1.ceiling": -1}, "gateway.classes.P1.ceiling = -1: Input should be greater than 0"),
    ({"gateway.classes.P1.priority": 2**31}, "gateway.classes.P1.priority"),
    ({"gateway.sheddable": True}, "gateway.sheddable: unknown key"),
    ({"replicas.count": 2, "replicas.routing": "pinned", "replicas.pin": {"P0": [0], "P1": [1], "P2": [1]}},
     "gateway needs replicas.routing 'shared'"),
])
def test_bad_gateway_values_get_one_clear_message(overrides, message):
    with pytest.raises(ScenarioError) as err:
        load("gateway-priority", overrides)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


# ---------------------------------------------------------------------------------------------
# Property: every request ends once, gateway times are ordered


@st.composite
def gateway_scenarios(draw) -> dict:
    data = draw(scenarios())
    names = list(data["classes"])
    classes = {}
    for name in names:
        if draw(st.booleans()):
            classes[name] = {"priority": draw(st.integers(-2, 3)), "ceiling": draw(st.sampled_from([0.3, 1.0, 2.0]))}
    data["gateway"] = {
        "queue_depth_threshold": draw(st.sampled_from([1, 2, 5])),
        "kv_cache_threshold": draw(st.sampled_from([0.3, 0.8, 1.0])),
        "fairness": draw(st.sampled_from(["global-strict", "round-robin"])),
        "scrape_interval_s": draw(st.sampled_from([0.0, 0.0, 0.05, 0.013])),
        "shed_when_saturated": draw(st.booleans()),
        "request_ttl_s": draw(st.sampled_from([None, None, 0.2, 2.0])),
        "classes": classes,
    }
    data["replicas"] = {"count": draw(st.integers(1, 2))}
    data.setdefault("mitigations", {})["alert_after_s"] = draw(st.sampled_from([None, 0.05, 0.5]))
    return data


@PROPS
@given(gateway_scenarios())
def test_every_request_ends_once_and_gateway_times_are_ordered(data):
    res = simulate(from_dict(data))
    req = res.requests
    status = req["status"].astype(str)
    arrived = req["arrival_s"].notna()
    # every arrived request ends exactly once: finished, rejected (shed) or unfinished
    assert set(status[arrived]) <= {"finished", "rejected", "unfinished"}, status.value_counts().to_dict()
    assert (req.loc[status == "rejected", "reason"].str.len() > 0).all()
    sent = req["dispatched_s"].notna()
    # nothing is dispatched before it arrives at the gateway, nor admitted before it is dispatched
    assert (req.loc[sent, "gateway_queue_s"] >= 0).all()
    assert (req.loc[sent, "dispatched_s"] >= req.loc[sent, "arrival_s"]).all()
    admitted = req["first_scheduled_s"].notna()
    assert (admitted <= sent).all()
    assert (req.loc[admitted, "first_scheduled_s"] >= req.loc[admitted, "dispatched_s"] - EPS).all()
    fin = req[status == "finished"]
    assert (fin["ttft_s"] >= fin["gateway_queue_s"] - EPS).all()
    # a request is overtaken at the gateway only by dispatches that each count as a gateway inversion
    assert (req["gateway_overtaken"] >= 0).all()
    assert req["gateway_overtaken"].max() <= res.summary["gateway_inversions"]
    # a request the gateway dropped never reached an engine
    dropped = req["reason"].astype(str).str.startswith("HTTP 429")
    assert not (dropped & sent).any()
    assert res.summary["shed"] >= int(dropped.sum())
    # each class's counts, recounted from the frame (no request split by a prompt cap here)
    if not (req["parent"] >= 0).any():
        for name, c in res.summary["classes"].items():
            mine = req[(req["class"] == name) & req["measured"]]
            st_ = mine["status"].astype(str)
            shed = mine["reason"].astype(str).str.startswith(("HTTP 503", "HTTP 429"))
            assert (c["n"], c["completed"], c["rejected"], c["unfinished"], c["shed"]) == (
                len(mine), int((st_ == "finished").sum()), int((st_ == "rejected").sum()),
                int((st_ == "unfinished").sum()), int(shed.sum())), name
    # the engine's wait segments start at dispatch, not before; the wait at the gateway is one
    # segment (on no replica) from the arrival until the dispatch, the drop or the end of the run
    if len(res.waits):
        w = res.waits.merge(req[["id", "arrival_s", "dispatched_s"]], left_on="request", right_on="id")
        at_gw = w["reason"] == "gateway"
        assert (w.loc[~at_gw, "start_s"] >= w.loc[~at_gw, "dispatched_s"] - EPS).all()
        g = w[at_gw]
        assert g["request"].is_unique and (g["replica"] == -1).all() and (g["duration_s"] > 0).all()
        assert (g["start_s"] == g["arrival_s"]).all()
        sent_g = g["dispatched_s"].notna()
        assert (g.loc[sent_g, "end_s"] == g.loc[sent_g, "dispatched_s"]).all()
        assert (w.loc[~at_gw, "replica"] >= 0).all()
    # an alert counts from the arrival at the gateway, once per request, and one raised there
    # falls inside the request's wait at the gateway
    after = data["mitigations"]["alert_after_s"]
    if after is None:
        assert not len(res.alerts)
    elif len(res.alerts):
        a = res.alerts.merge(req[["id", "arrival_s", "priority"]], left_on="request", right_on="id")
        assert a["request"].is_unique and (a["priority"] == req["priority"].min()).all()
        assert np.allclose(a["waited_s"], a["time_s"] - a["arrival_s"]) and (a["waited_s"] >= after - EPS).all()
        at_gw = a[a["replica"] == -1].merge(res.waits[res.waits["reason"] == "gateway"], left_on="wait", right_on="id")
        assert len(at_gw) == int((a["replica"] == -1).sum()) and (at_gw["reason_x"] == "gateway").all()
        # (an alert due at the dispatch instant is raised there: arrival + after may land an ulp past it)
        assert ((at_gw["start_s"] <= at_gw["time_s"]) & (at_gw["time_s"] <= at_gw["end_s"] + EPS)).all()


# Found by the property above (CI, 2026-12-02): split pieces wait at the gateway until a dispatch at
# 1.1 s, where 1.05 + 0.05 (the alert's due time) is 1.1000000000000001.
ALERT_AT_DISPATCH = {'name': 'prop',
     'seed': 0,
     'duration_s': 10.0,
     'drain_limit_s': 100000.0,
     'kv': {'num_blocks': 10, 'block_size': 4},
     'cost': {'model': 'fixed', 'step_time_s': 0.01},
     'scheduler': {'policy': 'fcfs',
                   'max_num_batched_tokens': 8,
                   'max_num_seqs': 1,
                   'async_scheduling': False},
     'classes': {'C0': {'priority': 0,
                        'arrival': {'process': 'times',
                                    'times': [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]},
                        'prompt': {'dist': 'constant', 'value': 67},
                        'output': {'dist': 'constant', 'value': 1},
                        'caps': {'max_kv_blocks': 9, 'max_prompt_tokens': 33, 'over_cap': 'split'},
                        'prefix_tokens': 0},
                 'C1': {'priority': 0,
                        'arrival': {'process': 'times', 'times': [0.0, 0.0, 0.0, 0.0, 0.0, 0.375]},
                        'prompt': {'dist': 'constant', 'value': 25},
                        'output': {'dist': 'constant', 'value': 2},
                        'caps': {},
                        'prefix_tokens': 0}},
     'mitigations': {'alert_after_s': 0.05},
     'gateway': {'queue_depth_threshold': 1,
                 'kv_cache_threshold': 0.3,
                 'fairness': 'global-strict',
                 'scrape_interval_s': 0.05,
                 'shed_when_saturated': False,
                 'request_ttl_s': None,
                 'classes': {}},
     'replicas': {'count': 1}}


def test_an_alert_due_at_the_dispatch_instant_lies_in_the_gateway_wait():
    test_every_request_ends_once_and_gateway_times_are_ordered.hypothesis.inner_test(ALERT_AT_DISPATCH)


def test_a_gateway_run_is_identical_across_processes(tmp_path):
    cmd = [sys.executable, "-m", "engine", "run", "gateway-priority", "--json", "--set", "duration_s=30"]
    runs = [subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300) for _ in range(2)]
    out = []
    for proc in runs:
        assert proc.returncode == 0, proc.stderr
        s = json.loads(proc.stdout)
        s.pop("wall_time_s")
        assert s.pop("loop_turns") > 0
        out.append(s)
    assert out[0] == out[1]
    ours = clean(simulate(load("gateway-priority", {"duration_s": 30})).summary)
    ours.pop("wall_time_s")
    assert json.loads(json.dumps(ours)) == out[0]


# ---------------------------------------------------------------------------------------------
# The gateway-priority scenario's claims (seed 7; numbers measured on the shipped scenario)


VARIANTS = {
    "none": {"gateway.enabled": False},  # the same traffic without a gateway, fcfs engine
    "gateway": {},  # (a) priority at the gateway, fcfs engine (as shipped)
    "engine": {"gateway.enabled": False, "scheduler.policy": "priority"},  # (b) priority in the engine
    "both": {"scheduler.policy": "priority"},  # (c)
    "gateway-ceiling": {"gateway.classes.P0.ceiling": 2.0},
    "both-ceiling": {"scheduler.policy": "priority", "gateway.classes.P0.ceiling": 2.0},
}


@pytest.fixture(scope="module")
def runs():
    return {k: simulate(load("gateway-priority", ov)).summary for k, ov in VARIANTS.items()}


def test_gateway_priority_keeps_its_own_order_strict(runs):
    for k in ("gateway", "both", "gateway-ceiling", "both-ceiling"):
        assert runs[k]["gateway_inversions"] == 0, k
        assert all(c["gateway_overtaken"] == 0 for c in runs[k]["classes"].values()), k


def test_with_gateway_priority_p1_still_overtakes_p0_inside_the_fcfs_engine(runs):
    none, gw = runs["none"]["classes"]["P0"], runs["gateway"]["classes"]["P0"]
    # no gateway: 23.1 s of P0 inversion over 19 requests; behind the gateway: 0.14 s, one request
    assert none["inversion_s"] > 20 and none["inverted_requests"] == 19
    assert 0 < gw["inversion_s"] < 0.01 * none["inversion_s"] and gw["inverted_requests"] == 1
    # with P0 let through the saturated gate, 5 P0 requests meet P1s dispatched before them (1.38 s)
    ceil = runs["gateway-ceiling"]["classes"]["P0"]
    assert ceil["inverted_requests"] == 5 and 1.0 < ceil["inversion_s"] < 2.0


def test_with_engine_priority_p1_cannot_overtake(runs):
    for k in ("engine", "both", "both-ceiling"):
        assert runs[k]["classes"]["P0"]["inversion_s"] == 0, k
        assert runs[k]["classes"]["P0"]["inverted_requests"] == 0, k


def test_the_saturation_gate_holds_p0_too_and_that_wait_is_ttft(runs):
    gw, engine, both = (runs[k]["classes"]["P0"] for k in ("gateway", "engine", "both"))
    # gateway-only priority does not rescue P0's tail: P99 17.0 s against 5.8 s in the engine
    assert gw["ttft_p99"] > 2.5 * engine["ttft_p99"]
    assert gw["gateway_queue_p99"] > 10  # 11.1 s waiting at the gateway, counted in TTFT
    # both: P0 never blocked inside the engine, all its waiting is at the gateway (P99 11.5 s):
    # its blocked time is its time in the gateway queue
    assert both["blocked_s"] == pytest.approx(both["gateway_queue_mean"] * both["n"], rel=1e-12)
    assert both["blocked_s"] > 0 and both["gateway_queue_p99"] > 10
    assert both["ttft_p99"] > 1.5 * engine["ttft_p99"]
    # a P0 ceiling above saturation 1 with engine priority brings the tail back near (6.4 s)
    assert runs["both-ceiling"]["classes"]["P0"]["ttft_p99"] < 1.2 * engine["ttft_p99"]
    # nobody is lost: every variant completes every request
    for k, s in runs.items():
        assert s["rejected"] == s["unfinished"] == 0, k


# ---------------------------------------------------------------------------------------------
# A hand-worked timeline through the whole simulation


def test_hand_worked_timeline_p0_dispatched_ahead_of_an_earlier_p1():
    """One engine, one seat (max_num_seqs 1), 0.1 s fixed steps, sync scheduling; prompts of one
    step (100 tokens = the budget) and 2 output tokens, so each request runs two steps. Gateway
    queue threshold 1: one request waiting at the engine saturates the pool.

    t=0    P1 a, b arrive: a dispatched (the engine's queue 1: saturated), b held; a runs 0-0.2
    t=0.1  P1 c arrives; the engine's queue is empty: b dispatched, c held; b waits for the seat
    t=0.15 P0 d arrives (taken at 0.2): held (b waits at the engine)
    t=0.2  a done, b admitted (first token 0.3)
    t=0.3  queue empty: d dispatched (band P0 first), c still held; d waits for the seat
    t=0.4  b done, d admitted: first token 0.5, done 0.6
    t=0.5  c dispatched; admitted 0.6, first token 0.7
    Without the gateway the FCFS engine serves a, b, c, d: d's first token at 0.7.
    """
    one_step = {"dist": "constant", "value": 100}
    two = {"dist": "constant", "value": 2}
    data = {
        "duration_s": 1.0, "cost": {"model": "fixed", "step_time_s": 0.1}, "kv": {"num_blocks": 1000},
        "scheduler": {"max_num_batched_tokens": 100, "max_num_seqs": 1, "async_scheduling": False},
        "classes": {
            "P0": {"priority": 0, "arrival": {"process": "times", "times": [0.15]}, "prompt": one_step, "output": two},
            "P1": {"priority": 1, "arrival": {"process": "times", "times": [0.0, 0.0, 0.1]}, "prompt": one_step,
                   "output": two},
        },
        "gateway": {"queue_depth_threshold": 1},
    }
    res = simulate(from_dict(data))
    req = res.requests.sort_values(["arrival_s", "priority", "id"])
    got = req[["class", "arrival_s", "dispatched_s", "first_scheduled_s", "first_token_s", "finish_s"]]
    want = [("P1", 0.0, 0.0, 0.0, 0.1, 0.2), ("P1", 0.0, 0.1, 0.2, 0.3, 0.4), ("P1", 0.1, 0.5, 0.6, 0.7, 0.8),
            ("P0", 0.15, 0.3, 0.4, 0.5, 0.6)]
    assert [(r[0], *np.round(r[1:], 9)) for r in got.itertuples(index=False)] == want
    d = req[req["class"] == "P0"].iloc[0]
    assert d["gateway_queue_s"] == pytest.approx(0.15) and d["ttft_s"] == pytest.approx(0.35)
    assert d["blocked_s"] == pytest.approx(0.25)  # held at the gateway 0.15-0.3, then 0.3-0.4 for the seat
    # the timeline's segments: a held at no point (dispatched at once), b and c and d held at the
    # gateway from their arrival, then waiting at the engine for its one seat
    waits = res.waits.sort_values(["request", "start_s"])
    got = [(int(r.request), r.reason, round(r.start_s, 9), round(r.end_s, 9), r.replica)
           for r in waits.itertuples()]
    b, c, d_id = (int(i) for i in req["id"].iloc[1:])
    assert got == sorted([(b, "gateway", 0.0, 0.1, -1), (b, "max_seqs", 0.1, 0.2, 0),
                          (c, "gateway", 0.1, 0.5, -1), (c, "max_seqs", 0.5, 0.6, 0),
                          (d_id, "gateway", 0.15, 0.3, -1), (d_id, "max_seqs", 0.3, 0.4, 0)])
    assert d["gateway_priority"] == 1 and req["gateway_overtaken"].sum() == 0
    # the alert counts from the arrival at the gateway: d alerts while held there (looked at 0.2,
    # waited 0.05 s), or, with a longer threshold, at the engine's step at 0.3 (waited 0.15 s)
    for after, want in ((0.04, (0.2, "gateway", -1, 0.05)), (0.1, (0.3, "max_seqs", 0, 0.15))):
        alerts = simulate(from_dict({**data, "mitigations": {"alert_after_s": after}})).alerts
        assert len(alerts) == 1 and alerts["request"].iloc[0] == d_id, alerts
        a = alerts.iloc[0]
        assert (round(a["time_s"], 9), a["reason"], a["replica"], round(a["waited_s"], 9)) == want
    data.pop("gateway")
    plain = simulate(from_dict(data)).requests
    assert plain.loc[plain["class"] == "P0", "first_token_s"].round(9).tolist() == [0.7]


def test_cli_table_shows_the_gateway_queue_only_behind_a_gateway():
    from engine.cli import format_summary

    data = {"duration_s": 2.0, "cost": {"model": "fixed", "step_time_s": 0.05}, "kv": {"num_blocks": 64},
            "classes": {"P0": {"priority": 0, "arrival": {"rate": 5}}, "P1": {"priority": 1, "arrival": {"rate": 5}}}}
    plain = format_summary(clean(simulate(from_dict(data)).summary))
    assert "gateway" not in plain
    data["gateway"] = {"classes": {"P1": {"priority": -1}}, "queue_depth_threshold": 1}
    s = clean(simulate(from_dict(data)).summary)
    table = format_summary(s)
    assert table.splitlines()[1].endswith("gateway p99")
    assert table.splitlines()[-1].startswith(f"gateway: {s['shed']} shed; 0 dispatches past")
    assert s["shed"] > 0  # P1 is sheddable and a single waiting request saturates the pool


def test_the_work_estimate_counts_the_gateways_step_by_step_runs():
    from engine.sim.limits import GATEWAY_SLOWDOWN, estimate_work

    on = estimate_work(load("gateway-priority"))
    off = estimate_work(load("gateway-priority", {"gateway.enabled": False}))
    assert on.seconds == pytest.approx(GATEWAY_SLOWDOWN * off.seconds)
    assert on.steps == off.steps and on.memory_mib == off.memory_mib
