"""Unit tests for the KV pool (the three-limit rule in both its shapes) and the waiting queue."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.core.kv import UNLIMITED, KVPool
from engine.core.queue import WaitingQueue
from engine.core.reasons import Reason


def pool(capacity=20, top=(True, False, False), caps=(UNLIMITED,) * 3, reserve=0, watermark=0) -> KVPool:
    return KVPool(capacity, 4, np.array(top), np.array(caps), top_reserve=reserve, watermark_blocks=watermark)


def test_limits_apply_in_order_class_cap_pool_reserve():
    """20 blocks, 5 reserved for the top class (0); class 2 capped at 6. Class 1 holds 8, class 2
    holds 4: 8 free in all, 3 of them outside the reserve."""
    kv = pool(caps=(UNLIMITED, UNLIMITED, 6), reserve=5)
    kv.grow(1, 8)
    kv.grow(2, 4)
    assert (kv.used, kv.used_other, kv.free) == (12, 12, 8)
    assert kv.shortfall(2, 3) == Reason.CLASS_CAP  # 4 + 3 > 6, though the pool has room
    assert kv.shortfall(1, 9) == Reason.KV_SHORT  # more than all 8 free blocks
    assert kv.shortfall(1, 4) == Reason.RESERVE  # 4 ≤ 8 free, but only 3 outside the reserve
    assert kv.shortfall(0, 8) == Reason.NONE  # the top class may use the reserve
    assert kv.shortfall(1, 3) == Reason.NONE
    assert [kv.room(c) for c in range(3)] == [8, 3, 2]
    # the watermark counts against the whole pool, only when asked (admissions while running)
    wm = pool(watermark=2)
    wm.grow(1, 15)
    assert wm.shortfall(1, 4) == Reason.NONE and wm.shortfall(1, 4, watermark=True) == Reason.KV_SHORT
    assert wm.room(1, watermark=True) == 3
    # as if 4 blocks held by lower-priority requests were freed first
    assert kv.shortfall(1, 4, freed=4) == Reason.NONE and kv.shortfall(1, 13, freed=4) == Reason.KV_SHORT


def test_fits_checks_every_growth_at_once():
    kv = pool(caps=(UNLIMITED, 5, UNLIMITED), reserve=4)
    kv.grow(1, 3)
    assert kv.fits([0, 2, 0]) and not kv.fits([0, 3, 0])  # class 1 cap
    assert kv.fits([4, 0, 13]) and not kv.fits([0, 0, 14])  # 20 − 4 reserved − 3 held = 13 for others
    assert not kv.fits([10, 0, 8])  # 18 > 17 free


def test_blocks_rounds_up():
    kv = pool()
    assert [kv.blocks(t) for t in (0, 1, 4, 5, 8, 9)] == [0, 1, 1, 2, 2, 3]
    assert kv.blocks_many(np.array([3, 4, 5])).tolist() == [1, 1, 2]


@settings(max_examples=300, deadline=None, derandomize=True)
@given(capacity=st.integers(1, 60), reserve=st.integers(0, 20), watermark=st.integers(0, 5),
       caps=st.lists(st.one_of(st.just(UNLIMITED), st.integers(0, 40)), min_size=3, max_size=3),
       held=st.lists(st.integers(0, 20), min_size=3, max_size=3),
       asks=st.lists(st.tuples(st.integers(0, 2), st.integers(0, 70), st.booleans()), min_size=1, max_size=20))
def test_one_request_and_many_at_once_agree(capacity, reserve, watermark, caps, held, asks):
    """`shortfall`/`room` (one request) and `shortfall_many` (a queue) are the same rule."""
    kv = pool(capacity, caps=tuple(caps), reserve=min(reserve, capacity), watermark=watermark)
    for c, h in enumerate(held):
        kv.grow(c, h)
    for wm in (False, True):
        cls = np.array([c for c, _, _ in asks])
        need = np.array([n for _, n, _ in asks])
        codes, room = kv.shortfall_many(cls, need, watermark=wm)
        assert codes.tolist() == [int(kv.shortfall(c, n, watermark=wm)) for c, n, _ in asks]
        assert room.tolist() == [kv.room(c, watermark=wm) for c, _, _ in asks]


def test_reasons_at_turn_replays_earlier_admissions():
    """A walk from an empty 10-block pool admits 4 blocks (class 1) at position 0 and 3 blocks
    (class 0) at position 2; position 1 saw the pool after the first, position 3 after both."""
    kv = pool(capacity=10, caps=(UNLIMITED, UNLIMITED, 3), reserve=2, watermark=1)
    start = (0, 0, [0, 0, 0], False)
    admitted = (np.array([0, 2]), np.array([4, 3]), np.array([1, 0]))
    codes, room = kv.reasons_at_turn(np.array([2, 1]), np.array([3, 4]), np.array([1, 3]), start, admitted)
    # position 1 (class 2, needs 3): cap 3 ok; 10 − 4 − wm 1 = 5 free; others' room 10 − 2 − 4 = 4 → fits
    # position 3 (class 1, needs 4): 10 − 7 − 1 = 2 free → kv_short, room 2
    assert codes.tolist() == [Reason.NONE, Reason.KV_SHORT]
    assert room.tolist() == [3, 2]


def test_queue_orders_by_key_and_removes_from_the_middle():
    q = WaitingQueue()
    for i, key in [(1, (1, 0.5)), (2, (0, 0.9)), (3, (1, 0.1)), (4, (0, 0.9))]:
        q.push(i, key)
    assert q.ids() == [2, 4, 3, 1]  # by key, then id
    q.remove(4)
    assert q.ids() == [2, 3, 1] and len(q) == 3
    q.push(5, (-1, 0.0))  # a preempted request goes back to the front (FCFS requeue key)
    assert q.ids()[0] == 5
    ids = q.ids()
    ids.append(99)  # a copy: the caller may change it
    assert 99 not in q.ids()
    q.rekey(lambda i: (-i,))
    assert q.ids() == [5, 3, 2, 1]
