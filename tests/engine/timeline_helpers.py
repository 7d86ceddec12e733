"""Readers for hand-worked timeline tests: one request's row, one request's wait segments."""

from __future__ import annotations


def row(res, cls: str, k: int = 0):
    """The k-th request (by arrival, then id) of a class."""
    r = res.requests[res.requests["class"] == cls].sort_values(["arrival_s", "id"])
    return r.iloc[k]


def waits_of(res, rid) -> list[tuple]:
    """(start, end, reason) of each wait segment of request `rid`, in time order."""
    w = res.waits[res.waits["request"] == rid]
    return [(s, e, str(r)) for s, e, r in zip(w["start_s"], w["end_s"], w["reason"])]
