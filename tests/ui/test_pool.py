"""The shared run pool: newest wishes first, stale points never started, results shared, failures kept;
and the worker processes behind it."""

import json
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool

import pytest

from engine import from_dict
from ui.runtime.pool import RunPool
from ui.runtime.worker import WorkerExecutor, WorkerFailed


class Gate:
    """A fake executor: records the order of submissions; each run waits until released."""

    def __init__(self, fail=(), breaks=()):
        self.order, self.fail, self.breaks = [], set(fail), set(breaks)
        self.release = threading.Semaphore(0)
        self.pool = ThreadPoolExecutor(4)
        self.made = 0

    def factory(self):
        self.made += 1
        return self

    def submit(self, key):
        self.order.append(key)

        def run():
            self.release.acquire()
            if key in self.breaks:
                raise BrokenProcessPool("worker died")
            if key in self.fail:
                raise ValueError(f"cannot run {key}")
            return {"key": key}
        return self.pool.submit(run)

    def shutdown(self, wait=True, cancel_futures=False):
        pass


def wait_until(cond, timeout=5.0):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def test_at_most_workers_in_flight_and_stale_wishes_never_start():
    gate = Gate()
    pool = RunPool(gate.factory, workers=2)
    try:
        pool.want("a", ["a1", "a2", "a3", "a4"])
        wait_until(lambda: len(gate.order) == 2)
        time.sleep(0.05)
        assert gate.order == ["a1", "a2"]  # two in flight, the rest wait
        pool.want("a", ["b1", "b2"])  # a newer change: a3, a4 are abandoned
        gate.release.release()
        gate.release.release()
        wait_until(lambda: len(gate.order) == 4)
        assert gate.order == ["a1", "a2", "b1", "b2"]
        for _ in range(2):
            gate.release.release()
        wait_until(lambda: pool.missing(["b1", "b2"]) == 0)
        done, failed = pool.results("a", ["a1", "a2", "b1", "b2", "a3"])
        assert set(done) == {"a1", "a2", "b1", "b2"} and not failed  # in-flight work is kept, not lost
    finally:
        pool.close()


def test_wait_returns_when_the_keys_are_done_or_the_time_is_up():
    gate = Gate(fail={"k2"})
    pool = RunPool(gate.factory, workers=2)
    try:
        pool.want("a", ["k1", "k2", "k3"])
        t0 = time.monotonic()
        assert not pool.wait(["k1", "k2"], 0.1)  # nothing released: gives up after its time
        assert 0.1 <= time.monotonic() - t0 < 2.0
        # three permits: k3 starts once k1 ends and may take one before k2's waiting thread wakes
        threading.Timer(0.05, lambda: gate.release.release(3)).start()
        assert pool.wait(["k1", "k2"], 5.0)  # one finished, one failed: both count as done
        done, failed = pool.results("a", ["k1", "k2"])
        assert set(done) == {"k1"} and set(failed) == {"k2"}
        assert pool.wait([], 0.0)
    finally:
        gate.release.release()
        pool.close()


def test_the_newest_viewer_goes_first_and_results_are_shared():
    gate = Gate()
    pool = RunPool(gate.factory, workers=1)
    try:
        pool.want("old", ["o1", "o2"])
        wait_until(lambda: gate.order == ["o1"])
        time.sleep(0.01)
        pool.want("new", ["n1", "o1"])
        gate.release.release()
        wait_until(lambda: len(gate.order) == 2)
        assert gate.order == ["o1", "n1"]  # the newer viewer's first missing key, then the older's
        for _ in range(2):
            gate.release.release()
        wait_until(lambda: pool.missing(["o1", "o2", "n1"]) == 0)
        pool.want("third", ["o1", "n1"])  # all known: nothing new runs
        time.sleep(0.05)
        assert len(gate.order) == 3
        done, _ = pool.results("third", ["o1", "n1"])
        assert done == {"o1": {"key": "o1"}, "n1": {"key": "n1"}}
    finally:
        pool.close()


def test_failures_are_remembered_not_retried_and_a_broken_worker_is_replaced():
    gate = Gate(fail={"bad"}, breaks={"crash"})
    pool = RunPool(gate.factory, workers=1)
    try:
        pool.want("v", ["bad", "crash", "ok"])
        for _ in range(4):
            gate.release.release()
        wait_until(lambda: pool.missing(["bad", "crash", "ok"]) == 0)
        done, failed = pool.results("v", ["bad", "crash", "ok"])
        assert set(done) == {"ok"} and failed["bad"] == "cannot run bad"
        assert "stopped" in failed["crash"] and gate.order.count("crash") == 2 and gate.order.count("bad") == 1
        assert gate.made >= 2  # a fresh executor after the crash
    finally:
        pool.close()


def test_quiet_viewers_are_dropped():
    now = [0.0]
    gate = Gate()
    pool = RunPool(gate.factory, workers=1, quiet_s=10.0, clock=lambda: now[0])
    try:
        pool.want("gone", ["g1", "g2"])
        wait_until(lambda: gate.order == ["g1"])
        now[0] = 60.0
        gate.release.release()
        wait_until(lambda: pool.missing(["g1"]) == 0)
        time.sleep(0.05)
        assert gate.order == ["g1"]  # g2 was for a viewer who left
    finally:
        pool.close()


TINY = {"name": "tiny", "seed": 1, "duration_s": 3, "cost": {"model": "fixed", "step_time_s": 0.01},
        "kv": {"num_blocks": 64}, "classes": {"a": {"arrival": {"rate": 2}}}}


def test_worker_processes_run_keys_report_errors_and_restart():
    ex = WorkerExecutor(1)
    try:
        good = ex.submit(from_dict(TINY).key()).result(timeout=60)
        assert good["scenario"] == "tiny" and good["classes"]["a"]["n"] > 0
        with pytest.raises(WorkerFailed, match="ScenarioError|mapping|Expecting"):
            ex.submit('"not a scenario"').result(timeout=60)
        child = ex._children[0]
        child.proc.kill()
        child.proc.wait()
        with pytest.raises(BrokenProcessPool):
            ex.submit(from_dict(TINY).key()).result(timeout=60)
        again: Future = ex.submit(from_dict(TINY).key())
        assert again.result(timeout=60) == good | {"wall_time_s": again.result()["wall_time_s"]}
    finally:
        ex.shutdown()


def test_page_workers_return_the_whole_result_and_the_engine_s_own_errors():
    """Page runs leave the server: the Result that comes back equals an in-process run (frames
    derived), and a scenario the engine refuses raises its own ScenarioError on the server."""
    from engine import ScenarioError, simulate

    ex = WorkerExecutor(1, kind="result")
    try:
        here = simulate(from_dict(TINY))
        there = ex.submit(from_dict(TINY).key()).result(timeout=60)
        assert there.summary | {"wall_time_s": 0} == here.summary | {"wall_time_s": 0}
        assert there.requests.equals(here.requests) and there.steps.equals(here.steps)
        raw = json.loads(from_dict(TINY).key())
        raw["classes"]["a"]["arrival"]["rate"] = -2
        bad = json.dumps(raw)
        with pytest.raises(ScenarioError, match="rate"):
            ex.submit(bad).result(timeout=60)
    finally:
        ex.shutdown()


def test_a_run_past_its_time_limit_is_stopped_and_its_worker_replaced():
    """A worker busy past the limit is killed: the caller gets WorkerTimeout at once, and the next
    run gets a fresh worker."""
    from ui.runtime.worker import WorkerTimeout

    big = json.loads(from_dict(TINY).key())
    big["duration_s"] = 3600.0
    big["classes"]["a"]["arrival"]["rate"] = 200.0  # far more than 0.5 s of simulation
    ex = WorkerExecutor(1, kind="result")
    try:
        t0 = time.monotonic()
        with pytest.raises(WorkerTimeout, match="longer than 0.5 s"):
            ex.submit(json.dumps(big), timeout_s=0.5).result(timeout=60)
        assert time.monotonic() - t0 < 30
        assert ex.submit(from_dict(TINY).key(), timeout_s=60).result(timeout=60).summary["classes"]["a"]["n"] > 0
    finally:
        ex.shutdown()


def test_a_page_run_that_fails_in_its_worker_is_named_never_a_traceback():
    """Anything but the engine's own refusal (here: a key that is not JSON) comes back as a
    ScenarioError naming the failure, which the sidebar shows while it goes back to what last ran."""
    from engine import ScenarioError
    from ui.runtime import runs

    with pytest.raises(ScenarioError, match=r"the simulation failed \(JSONDecodeError"):
        runs._cached_run("{not json")
