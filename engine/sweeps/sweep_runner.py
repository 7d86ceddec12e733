"""The runner loop that `sweep`, `plan`, `capacity` and `story` share: runs in batches on a backend,
their results recorded, the output directory finished however the session ends.

Each command decides *which* runs it wants (a spec's grid, a bisection's next round, a story's
claims) and what their rows mean; none of them should decide again how runs execute. That part
is the same for all four, and was written four times:

- `run_batches`: cut the items into batches (`batch_size`), hand them to a backend
  (`engine.sweeps.sweep_exec`), take the results in completion order — and if anything goes wrong
  (a refused run, Ctrl-C, a dead worker) stop the workers before the error travels on.
- `execute`: the same for a sweep's `Run`s: rows to the caller as each run finishes, a refused
  run named in a SweepError (the runs before it kept), progress, checkpoints of the store.
- `Session`: a session of runs into an output directory (`engine.sweeps.sweep_store`): the
  backend made here or the caller's, the progress bar, `run(runs)` that reuses every run the
  directory already holds (stored rows are keyed by run id, under the same engine digest, which
  `Store.open` checks) and runs the rest, and on leaving — complete, Ctrl-C or an error — the
  store finished with its status and the session's record, and a backend made here closed.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from .sweep_runs import Run, SweepError


def batch_size(n: int, workers: int) -> int:
    """Runs per task: about eight tasks per worker (load balance, progress), at most 32 runs
    (~1.5 s of the default scenario), so a task's fixed cost (~1 ms) is far below its work."""
    return max(1, min(32, math.ceil(n / (max(1, workers) * 8))))


def run_batches(items: Sequence, backend, on_batch: Callable[[list, list], None], *, task: Callable | None = None,
                size: int | None = None, send: Callable[[list], list] | None = None) -> None:
    """Run `items` on `backend` in batches of `size` (default `batch_size`), one `task` each (the
    backend's default task if None); `on_batch(batch, results)` as each finishes (completion order).
    `send(batch)` is what the task is given (default: the batch itself).

    Whatever escapes — an error `on_batch` raises about a result, Ctrl-C, a dead worker — stops
    the backend's workers (`abort`) and goes on to the caller."""
    if not items:
        return
    size = size or batch_size(len(items), backend.workers)
    batches = [list(items[i:i + size]) for i in range(0, len(items), size)]
    payloads = (send(b) for b in batches) if send else batches
    try:
        for index, results in (backend.imap(payloads, task=task) if task else backend.imap(payloads)):
            on_batch(batches[index], results)
    except BaseException:
        backend.abort()
        raise


def execute(runs: Sequence[Run], backend, on_run: Callable[[Run, list[dict]], None], *,
            progress: Callable[[int], None] | None = None, checkpoint: Callable[[], None] | None = None,
            checkpoint_s: float = 5.0, batch: int | None = None, task: Callable | None = None) -> None:
    """Run `runs` on `backend` in batches; `on_run(run, rows)` as each finishes (completion order).
    `task` (default: the sweep's, `sweep_exec.run_batch`) turns a batch of scenario keys into one
    result per run: its rows, or {"error": message}.

    A run whose scenario fails inside the engine stops the sweep with SweepError naming it (the
    runs finished before it are kept)."""
    last = time.monotonic()

    def on_batch(batch: list[Run], results: list) -> None:
        nonlocal last
        failed = None
        for run, res in zip(batch, results):
            if isinstance(res, dict):  # {"error": message}
                failed = failed or (run, res["error"])
            else:
                on_run(run, res)
        if progress:
            progress(len(results))
        if failed:
            shown = ", ".join(f"{k}={v!r}" for k, v in failed[0].knobs.items()) or "the base scenario"
            raise SweepError(f"run {shown} (seed {failed[0].seed}): {failed[1]}")
        if checkpoint and time.monotonic() - last >= checkpoint_s:
            checkpoint()
            last = time.monotonic()

    run_batches(runs, backend, on_batch, task=task, size=batch, send=lambda b: [r.key for r in b])


class Bar:
    """tqdm on stderr (stdout stays clean for --json); silent when stderr is not a terminal.

    tqdm rather than rich: one small pure-Python package with no dependencies, and its ETA and
    rate are what a long sweep needs; rich would bring pygments and markdown-it for a bar."""

    def __init__(self, total: int, done: int, desc: str):
        from tqdm import tqdm

        self.bar = tqdm(total=total + done, initial=done, desc=desc, unit="run", file=sys.stderr, dynamic_ncols=True,
                        smoothing=0.1, disable=None, mininterval=0.5)

    def grow(self, n: int) -> None:
        """More runs to do (a plan's next round)."""
        self.bar.total += n
        self.bar.refresh()

    def __call__(self, n: int) -> None:
        self.bar.update(n)

    def close(self) -> None:
        self.bar.close()


class OwnBackend:
    """`with OwnBackend(backend, workers) as b:` — `backend`, or a local process pool made here and
    closed when the block ends (a caller's backend is the caller's to close)."""

    def __init__(self, backend=None, workers: int | None = None):
        from .sweep_exec import LocalBackend

        self.own = backend is None
        self.backend = LocalBackend(workers) if self.own else backend

    def __enter__(self):
        return self.backend

    def __exit__(self, *exc) -> None:
        if self.own:
            self.backend.close()


def stored_rows(store) -> dict[str, list[dict]]:
    """Every run an output directory holds, as run id → its rows (the runs a search reuses)."""
    from .sweep_store import read_parts

    if store is None or not store.done:
        return {}
    return {rid: g.drop(columns="run").to_dict("records") for rid, g in read_parts(store.out).groupby("run")}


class Session:
    """`with Session(store, backend, ...) as s:` one session of runs into `store` (None: kept in
    memory only) on `backend` (None: a local pool, made and closed here).

    Leaving the block finishes it: `status` is "complete", or "interrupted" after Ctrl-C (which
    ends here: the caller reads `status`) or an error (which goes on); the bar is closed, then a
    backend made here, then the store is finished (last part, the table in `table`, the manifest
    with the session's backend, workers and `info()`: by default the runs made, `ran`)."""

    def __init__(self, store, backend=None, *, label: str = "", progress: bool = False, checkpoint_s: float = 5.0,
                 task: Callable | None = None, knobs: Sequence[str] = (), rows: dict[str, list[dict]] | None = None,
                 info: Callable[[], dict[str, Any]] | None = None):
        self.store = store
        self._backend = OwnBackend(backend)
        self.backend = self._backend.backend
        self.label, self.progress, self.checkpoint_s, self.task = label, progress, checkpoint_s, task
        self.knobs = list(knobs)
        self.rows: dict[str, list[dict]] = rows if rows is not None else {}  # run id → rows, stored or made now
        self.every: dict[str, Run] = {}  # every run asked for, in first-asked order
        self.reused = self.ran = 0
        self.status = "interrupted"
        self.bar: Bar | None = None
        self.table = None
        self.info = info or (lambda: {"ran": self.ran})

    def execute(self, runs: Sequence[Run], on_run: Callable[[Run, list[dict]], None], *,
                batch: int | None = None) -> None:
        """`execute` on this session's backend, bar, checkpoints and task."""
        checkpoint = self.store.checkpoint if self.store is not None else None
        execute(runs, self.backend, on_run, progress=self.bar, checkpoint=checkpoint, checkpoint_s=self.checkpoint_s,
                batch=batch, task=self.task)

    def run(self, runs: Iterable[Run]) -> None:
        """One round: give every run of `runs` its rows in `self.rows` — those already there are
        reused (counted in `reused` each time asked), the others run now, once each. The store's
        run list grows by them first, so an output cut short mid-round names every run it was about.
        `ran` counts a round's runs once the round is done."""
        fresh: dict[str, Run] = {}
        for run in runs:
            self.every.setdefault(run.run_id, run)
            if run.run_id in self.rows:
                self.reused += 1
            else:
                fresh.setdefault(run.run_id, run)
        if self.store is not None:
            self.store.set_runs(list(self.every.values()), self.knobs)
        if self.progress and fresh:
            self.bar = self.bar or Bar(0, 0, self.label)
            self.bar.grow(len(fresh))
        self.execute(list(fresh.values()), self._keep)
        self.ran += len(fresh)

    def _keep(self, run: Run, rows: list[dict]) -> None:
        if self.store is not None:
            self.store.add(run, rows)
        self.rows[run.run_id] = rows

    def __enter__(self) -> Session:
        return self

    def __exit__(self, kind, err, tb) -> bool:
        if kind is None:
            self.status = "complete"
        if self.bar is not None:
            self.bar.close()
        self._backend.__exit__()
        if self.store is not None:
            self.table = self.store.finish(self.status, backend=getattr(self.backend, "name", "?"),
                                           workers=getattr(self.backend, "workers", 0), **self.info())
        return kind is not None and issubclass(kind, KeyboardInterrupt)
