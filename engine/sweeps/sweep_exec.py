"""Where sweep runs execute: the task function and two backends (local processes, Ray).

A task is a list of canonical scenario JSON texts → one result per run (its tidy rows, or
`{"error": message}` if the engine refused the scenario). Batching many runs into one task keeps
the per-task cost (pickling, scheduling, a round trip) small against the runs themselves.

Both backends yield `(batch_index, results)` in completion order with a bounded number of tasks
in flight, so memory stays flat for a million runs; the caller puts results back in order.
Ray is optional and imported only when the Ray backend is built.
"""

from __future__ import annotations

import json
import logging
import os
import signal
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

from ..config.scenario import ScenarioError, from_dict
from ..config.traces import TraceError
from ..sim.metrics import clean

RUN_RENAMES = {"rejected": "run_rejected", "unfinished": "run_unfinished", "alerts": "run_alerts"}
RAY_MISSING = ("the ray backend needs Ray, which the app does not install: "
               "pip install -r requirements-ray.txt (or pip install 'inversion-lab[ray]')")


class BackendError(ScenarioError):
    """A backend that cannot be used (Ray missing, no cluster at the address, a worker died)."""


def summary_rows(summary: dict, sc) -> list[dict]:
    """One row per class: the class's summary fields, its SLO, then the run's fields (run-level
    names that a class also has get a `run_` prefix: `run_rejected`, `run_unfinished`)."""
    s = clean(summary)
    run = {RUN_RENAMES.get(k, k): v for k, v in s.items() if k != "classes"}
    rows = []
    for name, c in s["classes"].items():
        slo = sc.request_class(name).slo
        rows.append({"class": name, **c, "slo_ttft_s": slo.ttft_s, "slo_tpot_s": slo.tpot_s, **run})
    return rows


def _simulate(key: str):
    """One run of a sweep; one that outlives the CLI's limit (30 s of CPU) is stopped and
    reported as that run's error, so one runaway setting cannot hold a worker for hours."""
    from ..sim.limits import BATCH, Stop
    from ..sim.simulation import simulate

    sc = from_dict(json.loads(key))
    return sc, simulate(sc, stop=Stop(seconds=BATCH.seconds))


def run_batch(keys: list[str]) -> list[list[dict] | dict]:
    """The sweep task: scenario JSON → its tidy rows (or {"error": ...}), for each run."""
    out: list[list[dict] | dict] = []
    for key in keys:
        try:
            sc, res = _simulate(key)
            out.append(summary_rows(res.summary, sc))
        except (ScenarioError, TraceError) as err:
            out.append({"error": str(err)})
    return out


def run_batch_summaries(keys: list[str]) -> list[dict]:
    """Scenario JSON → its summary dict (or {"error": ...}), for each run (the app's sweeps)."""
    out = []
    for key in keys:
        try:
            out.append(_simulate(key)[1].summary)
        except (ScenarioError, TraceError) as err:
            out.append({"error": str(err)})
    return out


def _ignore_sigint() -> None:
    """Workers leave Ctrl-C to the parent, which stops them and saves what finished."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


class LocalBackend:
    """A process pool on this machine (all cores by default).

    Workers are forked where the platform can (POSIX): they start in milliseconds with the engine
    already imported, and under Streamlit "spawn" would re-run the page script in each worker."""

    name = "local"

    def __init__(self, workers: int | None = None, mp_context: str | None = None):
        import multiprocessing

        if workers is not None and workers < 1:
            raise BackendError(f"--workers {workers}: need at least 1")
        self.workers = workers or cpu_count()
        method = mp_context or ("fork" if "fork" in multiprocessing.get_all_start_methods() else None)
        self._ctx = multiprocessing.get_context(method)
        self._pool: ProcessPoolExecutor | None = None

    def _ensure(self) -> ProcessPoolExecutor:
        if self._pool is None:
            self._pool = ProcessPoolExecutor(self.workers, mp_context=self._ctx, initializer=_ignore_sigint)
        return self._pool

    def imap(self, batches: Iterable[list[str]], task: Callable = run_batch) -> Iterator[tuple[int, list]]:
        pool = self._ensure()
        todo = enumerate(batches)
        inflight: dict = {}
        limit = 2 * self.workers
        while True:
            for i, keys in todo:
                inflight[pool.submit(task, keys)] = i
                if len(inflight) >= limit:
                    break
            if not inflight:
                return
            done, _ = wait(inflight, return_when=FIRST_COMPLETED)
            for fut in done:
                i = inflight.pop(fut)
                try:
                    res = fut.result()
                except BrokenProcessPool:
                    raise BackendError("a worker process died (out of memory?); finished runs are saved, "
                                       "rerun to resume, perhaps with fewer --workers") from None
                yield i, res

    def abort(self) -> None:
        """Stop now: cancel queued tasks and end the workers (their current runs are lost)."""
        pool, self._pool = self._pool, None
        if pool is None:
            return
        procs = list((getattr(pool, "_processes", None) or {}).values())
        pool.shutdown(wait=False, cancel_futures=True)
        for p in procs:  # the executor has no public terminate before Python 3.14
            if p.is_alive():
                p.terminate()
        for p in procs:
            p.join(5)

    def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def import_ray():
    try:
        import ray
    except ImportError:
        raise BackendError(RAY_MISSING) from None
    return ray


class RayBackend:
    """Tasks on a Ray cluster: `address` names a running one (`ray start --head` prints it);
    without it Ray starts a local instance. The engine and the shipped scenarios travel to the
    workers as `py_modules`, so nodes need Ray and the engine's dependencies, not this checkout.
    Scenario files that read traces need the trace at the same path on every node."""

    name = "ray"

    def __init__(self, address: str | None = None, workers: int | None = None):
        ray = import_ray()
        self._ray = ray
        self._started = False
        if workers is not None and workers < 1:
            raise BackendError(f"--workers {workers}: need at least 1")
        if not ray.is_initialized():
            os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # no phoning home from a lab machine
            import scenarios

            engine_dir = Path(__file__).resolve().parents[1]  # the whole engine package (this file is in sweeps/)
            modules = [str(engine_dir), str(Path(scenarios.__file__).resolve().parent)]
            kwargs = {"runtime_env": {"py_modules": modules}, "include_dashboard": False,
                      "logging_level": logging.WARNING, "configure_logging": True}
            if address:
                kwargs["address"] = address
            elif workers:
                kwargs["num_cpus"] = workers
            try:
                ray.init(**kwargs)
            except (ConnectionError, RuntimeError, ValueError) as err:
                raise BackendError(f"cannot connect to Ray{' at ' + address if address else ''}: {err}") from None
            self._started = True
        cpus = int(ray.cluster_resources().get("CPU", 1))
        self.workers = min(workers, cpus) if workers else cpus
        self._tasks: dict[Callable, object] = {}
        self._inflight: dict = {}

    def _remote(self, task: Callable):
        if task not in self._tasks:
            self._tasks[task] = self._ray.remote(num_cpus=1, max_retries=2)(task)
        return self._tasks[task]

    def imap(self, batches: Iterable[list[str]], task: Callable = run_batch) -> Iterator[tuple[int, list]]:
        ray, remote = self._ray, self._remote(task)
        todo = enumerate(batches)
        inflight = self._inflight = {}
        limit = 2 * self.workers
        while True:
            for i, keys in todo:
                inflight[remote.remote(keys)] = i
                if len(inflight) >= limit:
                    break
            if not inflight:
                return
            done, _ = ray.wait(list(inflight), num_returns=1)
            for ref in done:
                i = inflight.pop(ref)
                try:
                    res = ray.get(ref)
                except ray.exceptions.RayError as err:
                    raise BackendError(f"a Ray task failed: {str(err).splitlines()[0]}") from None
                yield i, res

    def abort(self) -> None:
        for ref in list(self._inflight):
            try:
                self._ray.cancel(ref, force=True)
            except Exception:  # already finished or gone: nothing to stop
                pass
        self._inflight = {}
        self.close()

    def close(self) -> None:
        if self._started and self._ray.is_initialized():
            self._ray.shutdown()
        self._started = False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def make_backend(name: str = "local", address: str | None = None, workers: int | None = None):
    """The backend the CLI names: `local` (process pool) or `ray`."""
    if name == "local":
        if address:
            raise BackendError("--address is for --backend ray")
        return LocalBackend(workers)
    if name == "ray":
        return RayBackend(address, workers)
    raise BackendError(f"--backend {name!r}: use local or ray")
