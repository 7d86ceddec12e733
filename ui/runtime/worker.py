"""Worker processes: fresh interpreters that run scenarios off the server's interpreter.

Two kinds, one protocol. *Sweep* workers return a run's summary (the P99 curves, the workshop's
sweeps, capacity searches) — or, for a key sent as `measure:{job}`, the claim metrics of a scenario
story's run (`engine.sweeps.story.job`, the *Does this hold?* page); *page* workers return the whole
`Result` a page draws, or — for a key sent as `samples:{json}` — the run's
`engine.sweeps.evidence.RunSamples` (the other seeds of a page's figures: tens of kB where a Result is
hundreds, and nothing the server would draw). Page runs leave the server because every session's
script shares one interpreter lock there: under an eight-session load the simulations took a third
of it, so one session's run stalled every other session's page.

Why not `multiprocessing`: forking the threaded Streamlit server can copy a lock some other
thread holds (the child then hangs), and "spawn"/"forkserver" children re-import the running
page script, which Streamlit installs as `__main__`. A plain `python -m ui.runtime.worker` child imports
only the engine. Protocol: one scenario key (JSON, one line) in; one frame out — 8 bytes of
length, then a pickle of `("ok", value)` or `("error", exception)`. The child exits when its
input closes (the server stopped). Pickles only ever travel from a child this module started.

`WorkerExecutor` gives a caller `submit(key) -> Future` over a few such children, restarting
one that dies.
"""

from __future__ import annotations

import os
import pickle
import queue
import struct
import subprocess
import sys
import threading
from concurrent.futures import Future
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
KINDS = ("summary", "result")
MEASURE = "measure:"  # a sweep worker's key with this prefix is a story's job: its claims' metrics
SAMPLES = "samples:"  # a page worker's key with this prefix returns the run's RunSamples, not its Result
_LEN = struct.Struct("<Q")
_MAX_REPLY = 4 << 30  # bytes: a longer "frame" is garbage, never something to wait for


def _task(kind: str):
    """The child's job for one key. Exceptions are raised as the `ui.runtime.worker` module's (the child
    runs as `__main__`, whose classes would not unpickle on the server)."""
    from ui.runtime.worker import WorkerFailed

    if kind == "summary":
        from engine.sweeps.sweep_exec import run_batch_summaries  # the same per-run task as `python -m engine sweep`

        def summary(key: str) -> dict:
            if key.startswith(MEASURE):  # a story's run: the metrics its claims read (engine.sweeps.story)
                from engine.sweeps.story import measure_batch

                reply = measure_batch([key[len(MEASURE):]])[0]
            else:
                reply = run_batch_summaries([key])[0]
            if set(reply) == {"error"}:  # the engine refused the scenario
                raise WorkerFailed(reply["error"])
            return reply

        return summary

    from engine.sweeps.evidence import RunSamples
    from ui.runtime.work import run_json

    def result(key: str):
        if key.startswith(SAMPLES):  # one more seed of a page's figures: only what the estimates need
            return RunSamples.of(run_json(key[len(SAMPLES):]))
        res = run_json(key)
        _ = res.steps, res.episodes  # derived on first use: derive them here, not on the server
        return res

    return result


def main(kind: str) -> None:
    """The child: read keys, write replies, until stdin closes. Sweep workers run at a lower CPU
    priority (nice 10): sweep points are background work, and on a small machine they must not
    slow page runs (what a person waits for) to a crawl."""
    if kind == "summary" and hasattr(os, "nice"):
        os.nice(10)
    task = _task(kind)
    sys.stdout.flush()
    out = os.fdopen(os.dup(1), "wb")  # the protocol's own descriptor; whatever else writes to
    os.dup2(2, 1)  # descriptor 1 (a print, a C library) goes to stderr and cannot corrupt a frame
    for line in sys.stdin:
        key = line.strip()
        if not key:
            continue
        try:
            reply = pickle.dumps(("ok", task(key)), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as err:  # a run that fails is reported, the worker lives on
            try:
                reply = pickle.dumps(("error", err), protocol=pickle.HIGHEST_PROTOCOL)
            except Exception:  # an exception that does not pickle: its message does
                from ui.runtime.worker import WorkerFailed as Failed

                reply = pickle.dumps(("error", Failed(f"{type(err).__name__}: {err}")))
        out.write(_LEN.pack(len(reply)) + reply)
        out.flush()


class WorkerFailed(RuntimeError):
    """The run raised inside the worker (the message is the worker's)."""


class WorkerTimeout(BrokenProcessPool):
    """The run outlived its time limit; its worker was killed (and is started afresh)."""


class _Child:
    def __init__(self, kind: str) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        self.proc = subprocess.Popen([sys.executable, "-m", "ui.runtime.worker", kind], cwd=ROOT, env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)

    def call(self, key: str, timeout_s: float | None = None):
        """The child's reply to `key`: its value, or the exception the run raised (re-raised here).
        A run past `timeout_s` is stopped by killing the child (the executor starts a new one)."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        timer = threading.Timer(timeout_s, self.proc.kill) if timeout_s else None
        try:
            self.proc.stdin.write(key.replace("\n", " ").encode() + b"\n")
            self.proc.stdin.flush()
            if timer is not None:
                timer.start()
            head = self.proc.stdout.read(_LEN.size)
            size = _LEN.unpack(head)[0] if len(head) == _LEN.size else 0
            if not 0 < size <= _MAX_REPLY:
                raise ValueError("not a reply frame")
            body = self.proc.stdout.read(size)
            if len(body) != size:
                raise EOFError
        except (BrokenPipeError, OSError, ValueError, EOFError, struct.error):
            if timer is not None and timer.finished.is_set():
                raise WorkerTimeout(f"the run took longer than {timeout_s:g} s and was stopped") from None
            raise BrokenProcessPool("a worker process stopped") from None
        finally:
            if timer is not None:
                timer.cancel()
        try:
            status, value = pickle.loads(body)
        except Exception as err:  # a whole frame that does not load (an exception class of its own)
            raise WorkerFailed(f"the worker's reply could not be read ({type(err).__name__})") from None
        if status == "error":
            raise value if isinstance(value, Exception) else WorkerFailed(str(value))
        return value

    def stop(self) -> None:
        try:
            if self.proc.stdin:
                self.proc.stdin.close()
            self.proc.wait(timeout=2)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()


class WorkerExecutor:
    """`submit(key) -> Future` over `n` worker processes of one kind (started on first use)."""

    def __init__(self, n: int, kind: str = "summary") -> None:
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}")
        self.kind = kind
        self._jobs: queue.Queue = queue.Queue()
        self._children: list[_Child | None] = [None] * n
        self._closed = False
        self._threads = [threading.Thread(target=self._serve, args=(i,), name=f"{kind}-worker-{i}", daemon=True)
                         for i in range(n)]
        for t in self._threads:
            t.start()

    def submit(self, key: str, timeout_s: float | None = None) -> Future:
        """Queue a run; `timeout_s` bounds its time once a worker has taken it up."""
        if self._closed:
            raise RuntimeError("executor is shut down")
        fut: Future = Future()
        self._jobs.put((fut, key, timeout_s))
        return fut

    def _serve(self, i: int) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                break
            fut, key, timeout_s = job
            if not fut.set_running_or_notify_cancel():
                continue
            try:
                if self._children[i] is None:
                    self._children[i] = _Child(self.kind)
                fut.set_result(self._children[i].call(key, timeout_s))
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
    main(sys.argv[1] if len(sys.argv) > 1 else "summary")
