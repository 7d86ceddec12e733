"""Corrupt-trace fuzz through the readers and the upload path (in-process): only TraceError comes
out of the readers, the upload path returns a one-line refusal that is not an internal error, and
an accepted upload runs.

Small deterministic budget here; `FUZZ_BUDGET=N` for more; `python tests/fuzz/run_fuzz.py traces`
runs each case in a forked process under 60 s / 4 GiB limits (README: Fuzzing).
"""

from __future__ import annotations

import pytest
from fuzzgen import trace_case

from engine import TraceError, from_dict, simulate
from engine.config.scenario import load_raw
from engine.config.traces import parse_trace, read_trace
from tests.support.fuzz import budget
from ui.frame import uploads

SEED = 11


@pytest.mark.parametrize("i", range(budget(60)))
def test_corrupt_traces(i, tmp_path, watchdog):
    label, name, data = trace_case(SEED, i)
    path = tmp_path / name
    path.write_bytes(data)
    frames = []
    for read in (lambda: read_trace(path), lambda: parse_trace(data.decode("utf-8", "replace"), None, name)):
        try:
            frames.append(read())
        except TraceError as err:
            assert "\n" not in str(err) and len(str(err)) < 500, str(err)[:500]
    state: dict = {}
    up = uploads.try_trace(load_raw("default"), name, data, state)
    if up.error is not None:
        assert "could not be used (" not in up.error, up.error  # a bug reported as a refusal
        assert "\n" not in up.error
        store = state.get(uploads.SESSION_KEY)
        assert store is None or store.files() == []
    else:
        assert frames, "the upload accepted what the reader refused"
        sc = from_dict(up.raw)
        res = simulate(sc)
        assert len(res.requests) == int((frames[0]["arrival_s"] < sc.duration_s).sum())
