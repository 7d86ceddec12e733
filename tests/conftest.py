"""Shared fixtures: tiny hand-built workloads run through the public trace path."""

from __future__ import annotations

import pytest

from engine import from_dict, simulate
from engine.config.scenario import apply_overrides


@pytest.fixture
def simulate_case(tmp_path):
    """Run explicit requests: case = {class: (priority, [(arrival_s, prompt, output), ...])}; a
    request may add (prefix_group, prefix_tokens), the trace columns of prefix identity.

    The requests are written as a simulator-format trace with a `class` column, so the test goes
    through the same public path a user's trace does. `blocks` is the number of KV blocks requests
    can use: the scenario's `kv.num_blocks` (vLLM's num_gpu_blocks) is one more, vLLM's null block.
    The timelines are worked out for synchronous scheduling unless a test passes `asyn=True`
    (vLLM's default, async scheduling, sees each step's outputs one call later).
    """

    def run(case: dict, *, blocks: int = 10, block_size: int = 4, budget: int = 100,
            policy: str = "fcfs", max_seqs: int = 8, asyn: bool = False, overrides: dict | None = None):
        prefixed = any(len(r) > 3 for _, reqs in case.values() for r in reqs)
        head = "arrived_at,num_prefill_tokens,num_decode_tokens,class"
        rows = [head + (",prefix_group,prefix_tokens" if prefixed else "")]
        rows += [",".join(map(str, (*r[:3], name, *((*r[3:], -1, 0)[:2] if prefixed else ()))))
                 for name, (_, reqs) in case.items() for r in reqs]
        path = tmp_path / "case.csv"
        path.write_text("\n".join(rows) + "\n")
        data = {
            "duration_s": 50,
            "kv": {"num_blocks": blocks + 1, "block_size": block_size},
            "cost": {"model": "fixed", "step_time_s": 1.0},
            "scheduler": {"policy": policy, "max_num_batched_tokens": budget, "max_num_seqs": max_seqs,
                          "async_scheduling": asyn},
            "classes": {name: {"priority": prio, "arrival": {"rate": 0}} for name, (prio, _) in case.items()},
            "trace": {"path": str(path), "assign": {"by": "column"}},
        }
        return simulate(from_dict(apply_overrides(data, overrides or {})))

    return run
