"""Worker processes for sweeps: fresh interpreters fed scenario keys over a pipe.

Why not `multiprocessing`: forking the threaded Streamlit server can copy a lock some other
thread holds (the child then hangs), and "spawn"/"forkserver" children re-import the running
page script, which Streamlit installs as `__main__`. A plain `python -m ui.worker` child imports
only the engine. Protocol: one scenario key (JSON, one line) in; one line out, the run's summary
as JSON or `{"error": "..."}`. The child exits when its input closes (the server stopped).

`WorkerExecutor` gives the pool a `submit(key) -> Future` over a few such children, restarting
one that dies.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from concurrent.futures import Future
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    """The child: read keys, write summaries, until stdin closes. It runs at a lower CPU priority
    (nice 10): sweep points are background work, and on a small machine they must not slow the
    server's page runs (what a person waits for) to a crawl."""
    if hasattr(os, "nice"):
        os.nice(10)
    from engine.sweep_exec import run_batch_summaries  # the same per-run task as `python -m engine sweep`

    out = sys.stdout
    sys.stdout = sys.stderr  # anything the engine might print must not corrupt the protocol
    for line in sys.stdin:
        key = line.strip()
        if not key:
            continue
        try:
            reply = json.dumps(run_batch_summaries([key])[0])
        except Exception as err:  # a run that fails is reported, the worker lives on
            reply = json.dumps({"error": f"{type(err).__name__}: {err}"})
        out.write(reply + "\n")
        out.flush()


class WorkerFailed(RuntimeError):
    """The run raised inside the worker (the message is the worker's)."""


class _Child:
    def __init__(self) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        self.proc = subprocess.Popen([sys.executable, "-m", "ui.worker"], cwd=ROOT, env=env, text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     bufsize=1)

    def call(self, key: str) -> dict:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            self.proc.stdin.write(key.replace("\n", " ") + "\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        except (BrokenPipeError, OSError, ValueError):
            line = ""
        if not line:
            raise BrokenProcessPool("a sweep worker process stopped")
        reply = json.loads(line)
        if isinstance(reply, dict) and set(reply) == {"error"}:
            raise WorkerFailed(reply["error"])
        return reply

    def stop(self) -> None:
        try:
            if self.proc.stdin:
                self.proc.stdin.close()
            self.proc.wait(timeout=2)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()


class WorkerExecutor:
    """`submit(key) -> Future[summary]` over `n` worker processes (started on first use)."""

    def __init__(self, n: int) -> None:
        self._jobs: queue.Queue = queue.Queue()
        self._children: list[_Child | None] = [None] * n
        self._closed = False
        self._threads = [threading.Thread(target=self._serve, args=(i,), name=f"sweep-worker-{i}", daemon=True)
                         for i in range(n)]
        for t in self._threads:
            t.start()

    def submit(self, key: str) -> Future:
        if self._closed:
            raise RuntimeError("executor is shut down")
        fut: Future = Future()
        self._jobs.put((fut, key))
        return fut

    def _serve(self, i: int) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                break
            fut, key = job
            if not fut.set_running_or_notify_cancel():
                continue
            try:
                if self._children[i] is None:
                    self._children[i] = _Child()
                fut.set_result(self._children[i].call(key))
            except BrokenProcessPool as err:
                child, self._children[i] = self._children[i], None
                if child is not None:
                    child.stop()
                fut.set_exception(err)
            except Exception as err:
                fut.set_exception(err)
        child = self._children[i]
        if child is not None:
            child.stop()

    def shutdown(self, wait: bool = True, cancel_futures: bool = False) -> None:
        self._closed = True
        if cancel_futures:
            while True:
                try:
                    job = self._jobs.get_nowait()
                except queue.Empty:
                    break
                if job is not None:
                    job[0].cancel()
        for _ in self._threads:
            self._jobs.put(None)
        if wait:
            for t in self._threads:
                t.join(timeout=5)


if __name__ == "__main__":
    main()
