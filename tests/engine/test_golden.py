"""Golden results: the engine reproduces frozen frames and summaries exactly.

The cases and their fingerprints live in `golden/` (see `golden/freeze.py`, which also explains
how to refreeze after a deliberate change of behaviour). A refactor of the engine must pass this
unchanged; a rule change must refreeze and say so in its commit.

Every case runs three ways — with the running set's plans and multi-step skipping (as shipped),
without skipping, and through vLLM's plain loop one step at a time — and all three must give
the frozen results: the shortcuts change speed, never an outcome.
"""

from __future__ import annotations

import json

import pytest
from golden.freeze import CASES, EXPECTED, canonical, fingerprint, run_case, summary_of

CASE_DATA = json.loads(CASES.read_text())
EXPECTED_DATA = json.loads(EXPECTED.read_text())


def test_every_case_has_a_fingerprint():
    assert set(CASE_DATA) == set(EXPECTED_DATA)
    kinds = {name.split("/")[0] for name in CASE_DATA}
    assert {"default", "classic-inversion", "random", "overloaded"} <= kinds


MODES = {"shipped": {}, "no-skip": {"skip_steps": False}, "plain-loop": {"skip_steps": False, "shortcuts": False}}


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("name", sorted(CASE_DATA))
def test_golden(name, mode):
    res = run_case(CASE_DATA[name], **MODES[mode])
    want = EXPECTED_DATA[name]
    got = {k: fingerprint(v) for k, v in canonical(res).items()}
    changed = [k for k in want["frames"] if got[k] != want["frames"][k]]
    assert summary_of(res) == want["summary"]
    assert not changed, f"{name}: frames {changed} differ from the golden run"
