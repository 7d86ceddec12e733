"""The engine's event path: the modules the mypyc build compiles (`engine.native_build`) and
`mypy --strict` checks. Everything a step touches, nothing that runs once per run."""

from __future__ import annotations

COMPILED = (
    "engine/core/arrival.py", "engine/core/kv.py", "engine/core/mitigations.py", "engine/core/policies.py",
    "engine/core/prefix.py", "engine/core/queue.py", "engine/core/reasons.py", "engine/core/requests.py",
    "engine/core/running.py", "engine/core/sglang_rules.py", "engine/core/state.py", "engine/core/step.py",
    "engine/core/vllm_rules.py", "engine/core/walk.py",
    "engine/sim/clock.py", "engine/sim/observe.py", "engine/sim/replica.py", "engine/sim/steplog.py",
    "engine/config/cost.py",
)
