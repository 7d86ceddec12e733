"""Fuzz budgets: small and deterministic in the default run; FUZZ_BUDGET=N (cases per stream) for more.

The large budget with per-process time and memory limits is `python tests/fuzz/run_fuzz.py`.
"""

from __future__ import annotations

import signal

import pytest


@pytest.fixture
def watchdog():
    """Turns a hang into a test failure (a safety net, not a speed assertion)."""

    def expired(signum, frame):
        raise TimeoutError("no answer within 120 s: a hang")

    old = signal.signal(signal.SIGALRM, expired)
    signal.alarm(120)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)
