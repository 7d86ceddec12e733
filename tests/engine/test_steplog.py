"""The step log's compact storage: whatever was appended, however often it was compacted on the
way, reading it back gives one row per step exactly as logged (grouped by replica), and the
summary's step figures equal the sums over those rows."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.sim.steplog import _INT, StepLog, _compact

NAMES = ["hi", "lo"]
CAPACITY = 1000
KV_USED, KV_FREE = _INT.index("kv_used"), _INT.index("kv_free")


def _ints(draw, replica: int, kv: list[int]) -> list[int]:
    """A row's integer columns: `_INT` (KV used/free consistent with `kv`), then running,
    waiting and KV blocks per class."""
    row = [replica] + [draw(st.integers(0, 70_000 if k < 3 else 40)) for k in range(1, len(_INT))]
    row[KV_USED], row[KV_FREE] = sum(kv), CAPACITY - sum(kv)
    return row + [draw(st.integers(0, 300)) for _ in NAMES] + [draw(st.integers(0, 3)) for _ in NAMES] + kv


@st.composite
def logs(draw):
    """A log built by random adds, runs and compactions, and the rows it must read back as."""
    log, expected, t = StepLog(NAMES, CAPACITY), [], {0: 0.0, 1: 0.0}
    for _ in range(draw(st.integers(0, 25))):
        rep = draw(st.integers(0, 1))
        m = draw(st.integers(1, 4))
        dts = [draw(st.floats(1e-4, 1.0)) for _ in range(m)]
        kv = [[draw(st.integers(0, 400)) for _ in NAMES] for _ in range(m)]
        ts = []
        for dt in dts:
            ts.append(t[rep])
            t[rep] += dt
        ints = _ints(draw, rep, kv[0])
        if m == 1 and draw(st.booleans()):
            log.add_row(ts[0], dts[0], [*ints[:len(_INT)], 1, *ints[len(_INT):]])
        else:
            log.add_run(ts, dts, [*ints[:len(_INT)], 1, *ints[len(_INT):]], [b for step in kv for b in step])
        for k in range(m):
            row = dict(zip(_INT, ints))
            row["kv_used"], row["kv_free"] = sum(kv[k]), CAPACITY - sum(kv[k])
            row.update(t_s=ts[k], dt_s=dts[k])
            for c, name in enumerate(NAMES):
                row[f"running_{name}"], row[f"waiting_{name}"] = ints[len(_INT) + c], ints[len(_INT) + 2 + c]
                row[f"kv_{name}"] = kv[k][c]
            expected.append(row)
        if draw(st.integers(0, 3)) == 0:
            log.compact(at_least=draw(st.integers(1, 3)))
    if draw(st.booleans()):
        log.seal()
    frame = pd.DataFrame(expected, columns=list(log.expand().columns) if expected else None)
    if expected:
        frame = frame.sort_values("replica", kind="stable").reset_index(drop=True)
    return log, frame


@settings(max_examples=300, deadline=None, derandomize=True)
@given(logs())
def test_the_log_reads_back_every_step_as_logged(case):
    log, want = case
    got = log.expand()
    assert len(got) == len(want) == log.steps
    if not len(want):
        return
    assert list(got.columns) == list(want.columns)
    for col in want.columns:
        assert np.array_equal(got[col].to_numpy(), want[col].to_numpy()), col
        assert np.array_equal(log.column(col), want[col].to_numpy()), col
    assert log.end() == max(want["t_s"] + want["dt_s"])
    assert log.runs()["steps"].sum() == len(want)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(logs())
def test_the_summary_figures_are_the_sums_over_the_steps(case):
    log, want = case
    tot = log.totals()
    tokens = want["prefill_tokens"] + want["decode_tokens"] if len(want) else pd.Series(dtype=np.int64)
    waiting = sum(want[f"waiting_{n}"] for n in NAMES) if len(want) else pd.Series(dtype=np.int64)
    assert tot.steps == len(want)
    assert tot.tokens == tokens.sum()
    assert tot.loaded_tokens == tokens[waiting > 0].sum() and tot.loaded_steps == (waiting > 0).sum()
    assert tot.reserve_idle == (want["reserve_idle"].sum() if len(want) else 0)
    # the float sums over one value per step in log order: bit for bit what the frame gives
    assert tot.busy_s == (float(want["dt_s"].sum()) if len(want) else 0.0)
    assert tot.kv_block_s == (float((want["kv_used"] * want["dt_s"]).sum()) if len(want) else 0.0)


def test_compacting_moves_the_buffers_into_a_chunk():
    log = StepLog(NAMES, CAPACITY)
    row = [0] * len(_INT) + [1, 1, 2, 0, 0, 3, 4]  # steps 1, then per class
    row[KV_USED], row[KV_FREE] = 7, CAPACITY - 7
    for k in range(3):
        log.add_row(float(k), 1.0, row)
    log.compact(at_least=4)  # not yet: fewer rows than asked for
    assert len(log.times) == 6 and not log._chunks
    log.compact(at_least=3)
    assert len(log.times) == 0 and len(log.ints) == 0 and len(log._chunks) == 1
    log.add_row(3.0, 1.0, row)
    assert log.column("t_s").tolist() == [0.0, 1.0, 2.0, 3.0]
    assert log.column("kv_lo").tolist() == [4] * 4


@pytest.mark.parametrize(("values", "dtype"), [([0, 127], np.int8), ([-1, 128], np.int16), ([0, 40_000], np.int32),
                                               ([-(2 ** 31), 5], np.int32), ([], np.int8)])
def test_counts_take_the_smallest_type_that_holds_them(values, dtype):
    out = _compact(np.array(values, dtype=np.int32))
    assert out.dtype == dtype and out.tolist() == values
