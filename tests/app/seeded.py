"""Waiting, in AppTest, for a page's other seeds (the browser's fragment timer reruns it live)."""

import time

from streamlit.testing.v1 import AppTest


def captions(at: AppTest) -> list[str]:
    return [c.value.replace("\\", "") for c in at.caption]


def going(at: AppTest) -> bool:
    """Does the page say some of its seeds are still running?"""
    return any("switch to all" in c or "are running" in c for c in captions(at))


def run_until_seeded(at: AppTest, timeout_s: float = 120.0) -> AppTest:
    """Rerun until every seed of the page's figures is in."""
    deadline = time.monotonic() + timeout_s
    while going(at):
        assert time.monotonic() < deadline, "the seeds did not come in"
        time.sleep(0.3)
        at.run()
        assert not at.exception
    return at
