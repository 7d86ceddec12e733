"""Shared fixtures: tiny hand-built workloads run through the public trace path; and which tests
the edit loop leaves out (`python3 tasks.py test --quick` skips what is marked `slow`)."""

from __future__ import annotations

import pytest

from engine import from_dict, simulate
from engine.config.scenario import apply_overrides

# Left out of the quick loop (marked `slow` here, in one list): what runs the app (AppTest), the
# CLI or many seeds in subprocesses, the recorded vLLM corpus, fuzzing, and the golden cases' two
# slower modes (the shipped mode stays: every rule still runs). Each took over ~15 s or the group
# adds up to minutes; the whole suite (`python3 tasks.py test`) runs them all.
SLOW = (
    "tests/app/", "tests/fuzz/", "tests/fidelity/test_corpus.py", "tests/engine/test_story.py",
    "tests/engine/test_fast_paths.py", "tests/engine/test_sweep_cli.py", "tests/engine/test_capacity.py",
    "tests/engine/test_readme.py", "tests/engine/test_cli.py", "tests/engine/test_limits.py",
    "tests/engine/test_queueing.py", "tests/ui/test_lesson_evidence.py", "tests/ui/test_pool.py",
    "tests/ui/test_capacity_jobs.py", "tests/ui/test_links.py::test_fuzz",
    "tests/engine/test_properties.py", "tests/engine/test_steplog.py::test_the_log_reads_back",
)


def pytest_collection_modifyitems(config, items):
    slow = pytest.mark.slow
    for item in items:
        mode = getattr(item, "callspec", None) and item.callspec.params.get("mode")
        if item.nodeid.startswith(SLOW) or item.nodeid.startswith("tests/engine/test_golden.py") and mode in (
                "no-skip", "plain-loop"):
            item.add_marker(slow)


@pytest.fixture
def simulate_case(tmp_path):
    """Run explicit requests: case = {class: (priority, [(arrival_s, prompt, output), ...])}; a
    request may add (prefix_group, prefix_tokens), the trace columns of prefix identity.

    The requests are written as a simulator-format trace with a `class` column, so the test goes
    through the same public path a user's trace does. `blocks` is the number of KV blocks requests
    can use: the scenario's `kv.num_blocks` (vLLM's num_gpu_blocks) is one more, vLLM's null block.
    The timelines are worked out for synchronous scheduling unless a test passes `asyn=True`
    (vLLM's default, async scheduling, sees each step's outputs one call later). Other keywords
    go to `simulate` (e.g. `skip_steps=False`, `around=`).
    """

    def run(case: dict, *, blocks: int = 10, block_size: int = 4, budget: int = 100,
            policy: str = "fcfs", max_seqs: int = 8, asyn: bool = False, overrides: dict | None = None,
            **engine):
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
        return simulate(from_dict(apply_overrides(data, overrides or {})), **engine)

    return run
