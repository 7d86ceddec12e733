"""A shared pool that runs scenarios for every browser session, newest wishes first.

Each viewer (one browser session) states its whole wish list: the scenario keys it wants, in the
order it wants them. `want` replaces that list, so the points of a sweep made stale by a newer
change are simply never started. A *background* wish list (a capacity search's rounds) is served
only when no other viewer has a run missing, so a page's sweep never waits behind one. Only
`workers` runs are in flight; a dispatcher thread picks
the next one (the most recent viewer's first missing key) as soon as one finishes. Finished
results are remembered across viewers — a workshop's second participant gets the first one's
curve at once. Failures are remembered with their message. No streamlit import: `ui.runtime.runs` holds
the one process-wide instance, and the tests drive it with threads.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import CancelledError, Future
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Protocol


class Executor(Protocol):
    """What the pool needs from its workers (`ui.runtime.worker.WorkerExecutor`; threads in tests)."""

    def submit(self, key: str) -> Future: ...

    def shutdown(self, wait: bool = True, cancel_futures: bool = False) -> None: ...


@dataclass
class _Viewer:
    keys: list[str]
    stamp: float  # when the wish list last changed (newest first)
    seen: float  # when the viewer last asked (viewers gone quiet are dropped)
    background: bool = False  # served after every foreground viewer


class RunPool:
    """Runs scenario keys on an executor for many viewers; keeps results and failures by key."""

    def __init__(self, make_executor: Callable[[], Executor], workers: int = 2, keep: int = 4000,
                 quiet_s: float = 30.0, clock: Callable[[], float] = time.monotonic):
        self._make, self.workers = make_executor, workers
        self._keep, self._quiet_s, self._clock = keep, quiet_s, clock
        self._cond = threading.Condition()
        self._done: OrderedDict[str, dict] = OrderedDict()
        self._failed: dict[str, str] = {}
        self._running: dict[str, Future] = {}
        self._attempts: dict[str, int] = {}
        self._viewers: dict[str, _Viewer] = {}
        self._executor: Executor | None = None
        self._closed = False
        self._thread = threading.Thread(target=self._dispatch, name="run-pool", daemon=True)
        self._thread.start()

    # -- what viewers call ------------------------------------------------------------------

    def want(self, viewer: str, keys: Sequence[str], background: bool = False) -> None:
        """Replace `viewer`'s wish list (runs it no longer wants and nobody else wants never start)."""
        now = self._clock()
        with self._cond:
            old = self._viewers.get(viewer)
            if old is not None and old.keys == list(keys) and old.background == background:
                old.seen = now
                return
            self._viewers[viewer] = _Viewer(list(keys), now, now, background)
            self._cond.notify_all()

    def results(self, viewer: str, keys: Sequence[str]) -> tuple[dict[str, dict], dict[str, str]]:
        """What has finished among `keys`: (key → result, key → failure message)."""
        with self._cond:
            v = self._viewers.get(viewer)
            if v is not None:
                v.seen = self._clock()
            done = {k: self._done[k] for k in keys if k in self._done}
            for k in done:
                self._done.move_to_end(k)
            failed = {k: self._failed[k] for k in keys if k in self._failed}
        return done, failed

    def missing(self, keys: Sequence[str]) -> int:
        """How many of `keys` have neither finished nor failed."""
        with self._cond:
            return sum(1 for k in keys if k not in self._done and k not in self._failed)

    def wait(self, keys: Sequence[str], timeout_s: float) -> bool:
        """Block until every key has finished or failed, at most `timeout_s` (real time); whether
        they all did. A page's run waits a moment for its coarse curve rather than polling for it."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while any(k not in self._done and k not in self._failed for k in keys):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            ex, self._executor = self._executor, None
        if ex is not None:
            ex.shutdown(wait=False, cancel_futures=True)

    # -- the dispatcher -----------------------------------------------------------------------

    def _next(self) -> str | None:
        """The first missing key of the most recent viewer that has one (lock held)."""
        now = self._clock()
        for name in [n for n, v in self._viewers.items() if now - v.seen > self._quiet_s]:
            del self._viewers[name]
        for v in sorted(self._viewers.values(), key=lambda v: (v.background, -v.stamp)):
            for k in v.keys:
                if k not in self._done and k not in self._failed and k not in self._running:
                    return k
        return None

    def _dispatch(self) -> None:
        while True:
            with self._cond:
                key = None
                while not self._closed:
                    if len(self._running) < self.workers and (key := self._next()) is not None:
                        break
                    self._cond.wait(timeout=1.0)  # also re-checks quiet viewers now and then
                if self._closed:
                    return
                if self._executor is None:
                    self._executor = self._make()
                ex = self._executor
                placeholder: Future = Future()
                self._running[key] = placeholder
            try:
                fut = ex.submit(key)
            except (BrokenProcessPool, RuntimeError):
                self._broken(ex, key)
                continue
            with self._cond:
                self._running[key] = fut
            fut.add_done_callback(lambda f, k=key, e=ex: self._finished(k, f, e))

    def _finished(self, key: str, fut: Future, ex: Executor) -> None:
        """Done callback (any thread): record, and wake the dispatcher (it never submits from here)."""
        try:
            result = fut.result()
        except BrokenProcessPool:
            self._broken(ex, key)
            return
        except CancelledError:  # the executor was replaced: the key is simply wanted again
            with self._cond:
                self._running.pop(key, None)
                self._cond.notify_all()
            return
        except Exception as err:  # the run itself failed: remember why, do not retry
            with self._cond:
                self._running.pop(key, None)
                self._failed[key] = str(err)
                self._cond.notify_all()
            return
        with self._cond:
            self._running.pop(key, None)
            self._done[key] = result
            while len(self._done) > self._keep:
                self._done.popitem(last=False)
            self._cond.notify_all()

    def _broken(self, ex: Executor, key: str) -> None:
        """A worker died: start a fresh executor; a key that broke it twice is given up."""
        with self._cond:
            self._running.pop(key, None)
            self._attempts[key] = self._attempts.get(key, 0) + 1
            if self._attempts[key] >= 2:
                self._failed[key] = "the worker process running it stopped (out of memory?)"
            if self._executor is ex:
                self._executor = None
            self._cond.notify_all()
        ex.shutdown(wait=False, cancel_futures=True)
