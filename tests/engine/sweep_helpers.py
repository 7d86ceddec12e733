"""Shared pieces of the sweep tests: small specs and a backend that runs tasks in this process."""

from __future__ import annotations

from engine.sweep_exec import run_batch

SHORT = {"duration_s": 8, "warmup_s": 1}  # the default scenario, 8 s of arrivals: ~10 ms a run


def spec_data(grid=None, sample=None, seeds=2, **extra) -> dict:
    data = {"name": "t", "base": "default", "set": dict(SHORT), "seeds": seeds}
    if grid is not None:
        data["grid"] = grid
    if sample is not None:
        data["sample"] = sample
    data.update(extra)
    return data


class InlineBackend:
    """Runs each task here, in order, and records the keys it was given (what actually ran)."""

    name = "inline"

    def __init__(self, workers: int = 1, interrupt_after: int | None = None):
        self.workers = workers
        self.keys: list[str] = []
        self.interrupt_after = interrupt_after
        self.aborted = self.closed = False

    def imap(self, batches, task=run_batch):
        for i, keys in enumerate(batches):
            if self.interrupt_after is not None and i >= self.interrupt_after:
                raise KeyboardInterrupt  # as if Ctrl-C arrived while this batch ran
            self.keys.extend(keys)
            yield i, task(keys)

    def abort(self):
        self.aborted = True

    def close(self):
        self.closed = True


def comparable(table):
    """A table without its one non-deterministic column (wall time)."""
    return table.drop(columns=["wall_time_s"]).reset_index(drop=True)
