"""The engine's event path: the modules the mypyc build compiles (`engine.native_build`) and that
`mypy --strict` checks (`tests/engine/test_typing.py`). Compiled code enforces annotations at run
time, so these modules' annotations must hold for every value that reaches them; one list keeps
the build and the check on the same files. The folders' `__init__` files stay interpreted: they
boot `engine.native`, which decides where the rest loads from."""

from __future__ import annotations

COMPILED = (
    "engine/core/arrival.py", "engine/core/kv.py", "engine/core/mitigations.py", "engine/core/policies.py",
    "engine/core/prefix.py", "engine/core/queue.py", "engine/core/reasons.py", "engine/core/requests.py",
    "engine/core/running.py", "engine/core/sglang_rules.py", "engine/core/state.py", "engine/core/step.py",
    "engine/core/vllm_rules.py", "engine/core/walk.py",
    "engine/sim/clock.py", "engine/sim/feeds.py", "engine/sim/observe.py", "engine/sim/ports.py",
    "engine/sim/replica.py", "engine/sim/steplog.py",
    "engine/config/cost.py",
)
