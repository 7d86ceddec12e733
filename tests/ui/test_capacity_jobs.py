"""The machinery behind the pages' figures over seeds and their capacity: page workers that send
back a run's RunSamples, background wish lists that wait for every foreground one, and capacity
searches driven round by round through a run pool (`ui.runtime.capacity_jobs`) that agree with the CLI's."""

import json
import threading
import time

import numpy as np
import pytest

from engine import from_dict, load, simulate
from engine.sweeps.evidence import RunSamples, over_seeds
from ui.runtime.pool import RunPool

TINY = "classic-inversion"


@pytest.fixture(scope="module")
def three():
    sc = load(TINY, {"duration_s": 60})
    return sc, over_seeds(sc, [sc.seed, sc.seed + 1, sc.seed + 2])


def test_page_workers_send_back_a_run_s_samples(three):
    from ui.runtime.worker import SAMPLES, WorkerExecutor

    sc, runs = three
    ex = WorkerExecutor(1, kind="result")
    try:
        got = ex.submit(SAMPLES + sc.key()).result(timeout=120)
    finally:
        ex.shutdown()
    assert isinstance(got, RunSamples) and got.seed == sc.seed
    assert np.array_equal(got.classes["P0"].values["ttft_s"], runs[0].classes["P0"].values["ttft_s"])


class Instant:
    """A fake executor that runs each key in-thread (summaries) and records the order."""

    def __init__(self, task):
        self.task, self.order = task, []

    def factory(self):
        return self

    def submit(self, key):
        from concurrent.futures import Future

        self.order.append(key)
        f = Future()
        try:
            f.set_result(self.task(key))
        except Exception as err:  # noqa: BLE001 - the pool records it
            f.set_exception(err)
        return f

    def shutdown(self, wait=True, cancel_futures=False):
        pass


def test_background_wishes_wait_for_every_foreground_one():
    gate = threading.Event()
    order = []

    class Slow(Instant):
        def submit(self, key):
            order.append(key)
            from concurrent.futures import ThreadPoolExecutor
            return ThreadPoolExecutor(1).submit(lambda: (gate.wait(5), {"key": key})[1])

    pool = RunPool(Slow(None).factory, workers=1)
    try:
        pool.want("bg", ["b1", "b2"], background=True)
        time.sleep(0.05)
        pool.want("fg", ["f1"])  # newer, and in the foreground
        gate.set()
        deadline = time.monotonic() + 5
        while pool.missing(["b1", "b2", "f1"]) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert order.index("f1") < order.index("b2")
        pool.want("bg2", ["x"], background=True)
        pool.want("fg2", ["y"])
        deadline = time.monotonic() + 5
        while pool.missing(["x", "y"]) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert order.index("y") < order.index("x")  # even an older foreground wish goes first
    finally:
        pool.close()


def test_a_capacity_job_finds_what_the_cli_finds_and_the_table_says_it():
    from engine.sweeps import capacity
    from engine.sweeps.sweep_exec import LocalBackend
    from ui.runtime.capacity_jobs import Jobs, Spec

    # budget-bound on priority, without and with a 2,048-token reserve (capacities ~0.9× and ~1×)
    sc = load("budget-bound")
    remedy = load("budget-bound", {"mitigations.p0_token_reserve": 2048})
    seeds = (sc.seed, sc.seed + 1)
    ex = Instant(lambda key: simulate(from_dict(json.loads(key))).summary)
    pool = RunPool(ex.factory, workers=1)
    try:
        reg = Jobs(pool, lambda s: None)
        job = reg.get(Spec((sc.key(), remedy.key()), seeds, 0), "viewer")
        deadline = time.monotonic() + 240
        while job.status == "running":
            assert time.monotonic() < deadline
            reg.get(Spec((sc.key(), remedy.key()), seeds, 0), "viewer")  # the page polls: still wanted
            time.sleep(0.2)
        assert job.status == "complete", job.error
        found = job.view()
    finally:
        pool.close()
    cli = [capacity.config("0", sc), capacity.config("1", remedy, against="0")]
    capacity.search(cli, list(seeds), backend=LocalBackend(1))
    by_label = {c.label: c for c in cli}
    for f, c in zip(found, cli):
        cli_found = capacity.findings(c, by_label)
        assert f["capacity"] == cli_found["capacity"] and f["change_pct"] == cli_found["change_pct"]
        assert f["settled"] and f["capacity"] is not None
        assert f["tested"] == cli_found["tested"]  # the same loads, in the same order of rounds
    from ui.panels import capacity_table

    table = capacity_table.table(["no reserve", "reserve"], found)
    assert list(table["configuration"]) == ["no reserve", "reserve"]
    pct = found[1]["change_pct"]
    assert table["capacity change per GPU"].iloc[1] == ("no change" if abs(pct) < 0.5 else
                                                         f"{pct:+.0f} %".replace("-", "−"))
    assert not any("…" in str(v) for v in table.to_numpy().ravel())  # settled: no search still open
    assert table["capacity change per GPU"].iloc[0] == "–"  # the reference itself
    assert table["capacity (× the offered load)"].iloc[1] == f"{found[1]['capacity']:.3g}×"
    assert table["batch fill at 1×"].str.endswith(")").all()  # the seeds' min–max beside the mean
