"""Fuzz budgets: small and deterministic in the default run; FUZZ_BUDGET=N (cases per stream) for more."""

from __future__ import annotations

import os


def budget(default: int) -> int:
    return int(os.environ.get("FUZZ_BUDGET", default))
