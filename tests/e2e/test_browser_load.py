"""Several browser sessions at once (tests/e2e/load.py, small budget): every interaction ends
idle, no exception element, no session ever shows another session's values. Timings are not
asserted here (they depend on the machine); `python tests/e2e/load.py` prints them."""

from __future__ import annotations

import asyncio

import pytest
from load import main_async

pytestmark = pytest.mark.browser


def test_sessions_at_once_stay_apart_and_responsive(chromium_path):
    out = asyncio.run(main_async(sessions=3, seconds=20, seed=1))
    assert len(out["idle"]) >= 9  # the sessions really interacted
    assert out["timeouts"] == [] and out["failed"] == []
    assert out["exceptions"] == 0
    assert out["crosstalk"] == []
    kinds = {k.split("@")[0] for k in out["by"]}
    assert {"reserve", "policy", "page", "rate"} & kinds == kinds and len(kinds) >= 3
