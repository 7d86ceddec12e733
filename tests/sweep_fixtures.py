"""Shared pieces of the sweep tests (engine, ui, app): small specs, a backend that runs tasks in
this process, a small plan output, a one-seat engine whose capacity is worked out by hand."""

from __future__ import annotations

from engine.sweeps.sweep_exec import run_batch

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


TINY_PLAN_BASE = {
    "name": "tiny-plan", "duration_s": 20, "cost": {"model": "fixed", "step_time_s": 0.02},
    "kv": {"num_blocks": 400, "block_size": 16},
    "scheduler": {"max_num_batched_tokens": 1024, "max_num_seqs": 16},
    "classes": {
        "hi": {"priority": 0, "arrival": {"rate": 4}, "prompt": {"value": 256}, "output": {"value": 32},
               "slo": {"ttft_s": 1.0}},
        "lo": {"priority": 1, "arrival": {"rate": 8}, "prompt": {"dist": "uniform", "low": 500, "high": 3000},
               "output": {"value": 64}},
    },
}


def tiny_plan_output(out):
    """A small plan output directory (FCFS vs priority, replicas 1..8, two seeds) at `out`."""
    import yaml

    from engine.sweeps.plan import run_plan
    from engine.sweeps.sweep import load_spec

    out.parent.mkdir(parents=True, exist_ok=True)
    base = out.parent / "tiny-plan-base.yaml"
    base.write_text(yaml.safe_dump(TINY_PLAN_BASE))
    spec = out.parent / "tiny-plan.yaml"
    spec.write_text(yaml.safe_dump({"base": base.name, "seeds": [0, 1], "plan": {"replicas": [1, 8]},
                                    "grid": {"scheduler.policy": ["fcfs", "priority"]}}))
    run_plan(load_spec(spec), out, InlineBackend(), progress=False)
    return out


# One seat (max_num_seqs 1), fixed 10 ms steps, 1-token prompts and 5-token outputs: a request
# holds the seat for exactly D = 5 steps = 0.05 s (its prefill step samples the first token, four
# decode steps follow) and has TTFT = one step (0.01 s) when it finds the seat free. Arrivals are
# gamma with cv 0.001 — periodic to within 0.05 ms. At load scale s the gap between arrivals is
# 1 / (10 s): while it is longer than D (s < 2) every request finds the seat free, TTFT = 0.01 s.
# Above s = 2 (ρ = 10 s D > 1) each request waits (D − gap) longer than the one before: at
# s = 2.022 the 396th of 404 requests (the P99's rank) waits about 396 × 0.54 ms = 0.21 s, over
# the 0.05 s SLO. So the capacity is 2: the search must bracket it within 2 %.
ONE_SEAT = {
    "name": "one-seat", "seed": 0, "duration_s": 20, "warmup_s": 0,
    "kv": {"num_blocks": 1000, "block_size": 16}, "cost": {"model": "fixed", "step_time_s": 0.01},
    "scheduler": {"policy": "fcfs", "max_num_seqs": 1, "max_num_batched_tokens": 64},
    "classes": {"A": {"priority": 0, "arrival": {"process": "gamma", "rate": 10, "cv": 0.001},
                      "prompt": {"dist": "constant", "value": 1}, "output": {"dist": "constant", "value": 5},
                      "slo": {"ttft_s": 0.05}}},
}
