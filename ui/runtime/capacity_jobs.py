"""Capacity searches for the pages, run through the shared sweep pool in the background.

`engine.sweeps.capacity` defines what is searched (the largest load scale at which every class with an
SLO meets it on every seed, and the GPUs that carry the offered load) and how (bisection, one
tested load a round, every seed of it). Its CLI drives the rounds with a process pool; here a
`Job` drives the same searches (`engine.sweeps.capacity.Config`, `record`, `open_gpu_search`,
`findings`) through the app's `ui.runtime.pool.RunPool`: a thread states the round's runs as the job's
wish list, waits for them, records them, and states the next round. The pool's workers run the
points at a low CPU priority, and remember them across sessions, so a second session asking for
the same search gets it at once and a search interrupted half-way resumes from the runs made.

A job is wanted by sessions (`touch`); when none has asked for a while, or every one has moved
on (`release`), it stops and withdraws its wishes. A load the app would not run (over its
interactive work limits) fails with that reason, and the answer then reads "at least". Pure
Python (threads, no streamlit import), so the tests drive it with a fake executor.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from engine.config.scenario import Scenario, apply_overrides, from_dict
from engine.sweeps import capacity
from engine.sweeps.evidence import mean_of
from engine.sweeps.sweep_exec import summary_rows

from .pool import RunPool

LIMIT = "over the app's limits: "  # the reason a load the app does not run fails with
WAIT_S = 0.5  # the thread re-checks that somebody still wants the job this often


@dataclass(frozen=True)
class Spec:
    """What to search: scenarios (their canonical JSON keys) on the same seeds; `against`: the
    index of the configuration the others' change is measured against (the baseline); `gpus`:
    also search the GPUs that carry the offered load when it does not fit."""

    keys: tuple[str, ...]
    seeds: tuple[int, ...]
    against: int | None = None
    gpus: bool = True

    @property
    def id(self) -> str:
        text = json.dumps([self.keys, self.seeds, self.against, self.gpus])
        return hashlib.md5(text.encode()).hexdigest()[:12]


class Job:
    """One spec's searches, driven round by round on a thread of its own (module docstring)."""

    def __init__(self, spec: Spec, pool: RunPool, why_not: Callable[[Scenario], str | None],
                 quiet_s: float = 20.0, clock: Callable[[], float] = time.monotonic):
        self.spec, self.pool, self.why_not = spec, pool, why_not
        self.quiet_s, self.clock = quiet_s, clock
        self.name = f"capacity-{spec.id}"
        label = (lambda i: None if spec.against is None or i == spec.against else str(spec.against))
        self.configs = [capacity.Config(str(i), json.loads(k), label(i)) for i, k in enumerate(spec.keys)]
        self._scenarios = [c.scenario for c in self.configs]
        self.lock = threading.Lock()
        self.viewers: dict[str, float] = {}
        self.status = "running"  # running | complete | stopped
        self.runs: set[str] = set()
        self.error: str | None = None
        self._thread = threading.Thread(target=self._drive, name=self.name, daemon=True)

    def start(self) -> Job:
        self._thread.start()
        return self

    # -- sessions ---------------------------------------------------------------------------

    def touch(self, viewer: str) -> None:
        with self.lock:
            self.viewers[viewer] = self.clock()

    def release(self, viewer: str) -> None:
        with self.lock:
            self.viewers.pop(viewer, None)

    def wanted(self) -> bool:
        now = self.clock()
        with self.lock:
            return any(now - t <= self.quiet_s for t in self.viewers.values())

    # -- the rounds -------------------------------------------------------------------------

    def _point(self, i: int, kind: str, value) -> tuple[list[str], str | None]:
        """The keys of a tested point (one per seed), or why the app will not run it."""
        data = capacity.point_data(self.configs[i], kind, value)
        keys = []
        for j, seed in enumerate(self.spec.seeds):
            try:
                sc = from_dict(apply_overrides(data, {"seed": int(seed)}))
                why = self.why_not(sc) if j == 0 else None  # the seeds of a load imply the same work
            except Exception as err:  # a load the schema refuses (a rate over its limit) is a load that fails
                why = str(err)
            if why:
                return [], why
            keys.append(sc.key())
        return keys, None

    def _round(self) -> list[tuple[int, str, object, list[str]]]:
        """This round's points: (config, kind, value, keys); points the app refuses are recorded failed."""
        out = []
        with self.lock:
            for i, c in enumerate(self.configs):
                if self.spec.gpus:
                    capacity.open_gpu_search(c)
                todo = [("cap", s) for s in c.cap.next()] + [("gpus", r) for r in (c.gpus.next() if c.gpus else [])]
                for kind, value in todo:
                    keys, why = self._point(i, kind, value)
                    if why:
                        capacity.record(c, kind, value, [{"class": "", "run_error": LIMIT + why,
                                                          "seed": self.spec.seeds[0]}])
                    else:
                        out.append((i, kind, value, keys))
        return out

    def _rows(self, i: int, keys: Sequence[str], done: dict, failed: dict) -> list[dict]:
        rows = []
        for seed, key in zip(self.spec.seeds, keys):
            if key in done:
                rows += [dict(r, seed=int(seed)) for r in summary_rows(done[key], self._scenarios[i])]
            else:
                rows.append({"class": "", "run_error": failed.get(key, "no result"), "seed": int(seed)})
        return rows

    def _drive(self) -> None:
        try:
            while True:
                points = self._round()
                if not points:
                    if self._open():
                        continue  # a point recorded without runs opened another
                    self.status = "complete"
                    return
                keys = [k for *_x, ks in points for k in ks]
                self.runs.update(keys)
                while True:
                    self.pool.want(self.name, keys, background=True)
                    if self.pool.wait(keys, WAIT_S):
                        break
                    if not self.wanted():
                        self.status = "stopped"
                        return
                done, failed = self.pool.results(self.name, keys)
                with self.lock:
                    for i, kind, value, ks in points:
                        capacity.record(self.configs[i], kind, value, self._rows(i, ks, done, failed))
        except Exception as err:  # a bug must not leave a page waiting for ever
            self.error = f"{type(err).__name__}: {err}"
            self.status = "stopped"
        finally:
            self.pool.want(self.name, [])

    def _open(self) -> bool:
        with self.lock:
            return any(c.cap.next() or (c.gpus is not None and c.gpus.next()) for c in self.configs)

    # -- what it found ------------------------------------------------------------------------

    def view(self) -> list[dict]:
        """Per configuration (spec order): `engine.sweeps.capacity.findings` and `settled`, `limited` (the
        bracket's top is a load the app does not run), `at_load` (batch fill and KV use at the
        offered load, over the seeds: {value, lo, hi, per_seed})."""
        with self.lock:
            by_label = {c.label: c for c in self.configs}
            out = []
            for c in self.configs:
                f = capacity.findings(c, by_label)
                gpus_open = self.spec.gpus and c.gpus is not None and bool(c.gpus.next())
                f["settled"] = not c.cap.next() and not gpus_open and (
                    not self.spec.gpus or c.gpus is not None or self._no_gpu_search(c))
                f["limited"] = (f["fails_at_bracket_top"] or "").startswith(f"seed {self.spec.seeds[0]}: {LIMIT}")
                at = [r for r in c.rows.get(("cap", 1.0), []) if r.get("class") == c.scenario.class_names[0]]
                f["at_load"] = {k: mean_of([r.get(k) for r in at if r.get("run_error") is None]).to_dict()
                                for k in ("batch_fill", "kv_util_mean", "reserve_idle_token_frac")}
                out.append(f)
            return out

    @staticmethod
    def _no_gpu_search(c: capacity.Config) -> bool:
        """Settled without a GPU search: the capacity is ≥ 1 or unknown, or the replicas cannot grow."""
        cap = c.cap.capacity
        sc = c.scenario
        return cap is None or cap >= 1 or sc.replicas.routing != "shared" or sc.replicas.count >= capacity.MAX_REPLICAS


class Jobs:
    """The process-wide registry: one job per spec, shared by the sessions that ask for it; finished
    jobs are kept (most recent `keep`) so another session sees the answer at once."""

    def __init__(self, pool: RunPool, why_not: Callable[[Scenario], str | None], keep: int = 64,
                 quiet_s: float = 20.0):
        self.pool, self.why_not, self.keep, self.quiet_s = pool, why_not, keep, quiet_s
        self._jobs: OrderedDict[str, Job] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, spec: Spec, viewer: str) -> Job:
        """The job for `spec` (started if there is none, or the last one stopped), wanted by `viewer`."""
        with self._lock:
            job = self._jobs.get(spec.id)
            if job is None or job.status == "stopped":
                job = Job(spec, self.pool, self.why_not, self.quiet_s)
                self._jobs[spec.id] = job
                job.touch(viewer)
                job.start()
            else:
                job.touch(viewer)
            self._jobs.move_to_end(spec.id)
            while len(self._jobs) > self.keep:
                old_id, old = next(iter(self._jobs.items()))
                if old.status == "running" and old.wanted():
                    break
                del self._jobs[old_id]
            return job

    def release(self, viewer: str, keep: frozenset[str] | set[str] = frozenset()) -> None:
        """`viewer` no longer wants any job but those in `keep` (ids)."""
        with self._lock:
            jobs = list(self._jobs.items())
        for jid, job in jobs:
            if jid not in keep:
                job.release(viewer)
