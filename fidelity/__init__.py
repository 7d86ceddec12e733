"""Differential fidelity against vLLM's own scheduler.

`workloads` draws seeded random workloads per mode, `record` (run inside `.venv-vllm`, which has
vLLM) drives vLLM's real `Scheduler` on them and writes the corpus, `replay` runs the same
workloads through this project's engine and compares step by step. `corpus` defines the stored
format. Only `record` imports vLLM; `corpus` and `workloads` are standard library only, so they
work in both virtual environments.
"""
