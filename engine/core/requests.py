"""Per-request state as parallel numpy arrays (one slot per request id).

Mirrors vLLM's `Request`: `computed` chases `prompt + generated`; a step that makes them equal
samples one output token. Arrays instead of objects so a run of 100k requests stays compact;
while a request runs, its progress lives in the running set (`running.py`) and is written back
here when it leaves.

Every status change goes through one method (`wait`, `run`, `complete`, `reject`, `unfinish`), so
each transition has exactly one writer.
"""

from __future__ import annotations

from array import array
from enum import IntEnum
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # (annotations only: the engine's core imports nothing else of the engine)
    from ..config.workload import Workload


class Status(IntEnum):
    PENDING = 0  # not arrived yet (or a follow-up piece not yet released)
    WAITING = 1
    RUNNING = 2
    FINISHED = 3
    REJECTED = 4
    UNFINISHED = 5  # still in the system when the drain limit ended the run


STATUS = [s.name.lower() for s in Status]


class Requests:
    """Static facts (arrival, lengths, class, priority) and dynamic progress of every request."""

    def __init__(self, wl: Workload, top_priority: int):
        n = len(wl)
        self.n = n
        self.class_names = wl.class_names
        self.class_priority = wl.class_priority
        self.arrival = wl.arrival_s.copy()
        self.prompt = wl.prompt
        self.output = wl.output
        self.cls = wl.cls.astype(np.int64)
        self.prio = wl.class_priority[self.cls]
        self.is_top = self.prio == top_priority
        # The same static facts for the scheduler, which reads them one request at a time, where
        # a list or array.array lookup is several times cheaper than a numpy scalar read. Lengths
        # as array('q') (8 bytes a request, not a pointer plus an int object); class and top flag
        # as lists (their values are shared small ints and bools) for the waiting walk's loop.
        self.prompt_l, self.output_l = _int_array(self.prompt), _int_array(self.output)
        self.cls_l: list[int] = self.cls.tolist()
        self.top_l: list[bool] = self.is_top.tolist()
        self.parent = wl.parent
        self.next_piece = wl.next_piece
        self.prefix_src, self.prefix_tokens, self.hash_ids = wl.prefix_src, wl.prefix_tokens, wl.hash_ids
        self.computed = np.zeros(n, np.int64)
        self.generated = np.zeros(n, np.int64)
        self.status = np.full(n, Status.PENDING, np.int8)
        self.first_sched = np.full(n, np.nan)
        self.first_token = np.full(n, np.nan)
        self.finish = np.full(n, np.nan)
        self.preemptions = np.zeros(n, np.int64)
        self.recomputed = np.zeros(n, np.int64)
        self.swapped = np.zeros(n, bool)
        self.cached = np.zeros(n, np.int64)  # prefix-cache hit tokens at the first admission
        self.cached_all = np.zeros(n, np.int64)  # and over every admission
        self.replica = np.full(n, -1, np.int64)
        self.tie = _int_array(np.arange(n))  # the queue's tie-break at equal arrival (a gateway's dispatch order)
        self.reason: dict[int, str] = {}

    def seq_len(self, i: int) -> int:
        """Tokens of the current sequence: prompt plus outputs so far (what must be in KV)."""
        return int(self.prompt[i] + self.generated[i])

    # -- transitions (one writer each) ------------------------------------------------------
    def wait(self, i: int) -> None:
        """Entered a waiting queue (at arrival, or after a preemption)."""
        self.status[i] = Status.WAITING

    def run(self, i: int, now: float) -> None:
        """Admitted to the running set (the first admission sets `first_sched`)."""
        self.status[i] = Status.RUNNING
        if self.first_sched[i] != self.first_sched[i]:  # NaN: first admission
            self.first_sched[i] = now

    def hit(self, i: int, tokens: int, first: bool) -> None:
        """Admitted (`first`: for the first time) with `tokens` tokens found in the prefix cache."""
        if first:
            self.cached[i] = tokens
        self.cached_all[i] += tokens

    def complete(self, i: int, t: float, computed: int, generated: int) -> None:
        """Sampled its last output token at t."""
        self.status[i] = Status.FINISHED
        self.finish[i] = t
        self.computed[i], self.generated[i] = computed, generated

    def reject(self, i: int, why: str) -> None:
        """Reject request i; pieces of a split request that would follow it are rejected too."""
        self.status[i] = Status.REJECTED
        self.reason[i] = why
        j = int(self.next_piece[i])
        while j >= 0:
            self.status[j] = Status.REJECTED
            self.reason[j] = f"an earlier piece ({i}) of this request was rejected"
            j = int(self.next_piece[j])

    def unfinish(self, ids: list[int], why: str) -> None:
        """The run ended (drain limit) with these requests still in the system."""
        for i in ids:
            self.status[i] = Status.UNFINISHED
            self.reason[i] = why

    def in_flight(self) -> np.ndarray:
        """Ids not in a final state: waiting, running, arrived but not yet queued, and the
        unreleased later pieces of a split request whose first piece arrived."""
        st = self.status
        open_ = (st == Status.WAITING) | (st == Status.RUNNING) | ((st == Status.PENDING) & np.isfinite(self.arrival))
        pieces = (st == Status.PENDING) & (self.parent >= 0)
        if pieces.any():  # a later piece belongs to the run once its first piece has arrived
            first = self.parent[pieces]
            started = np.isfinite(self.arrival[first]) & (self.status[first] != Status.REJECTED)
            idx = np.flatnonzero(pieces)
            open_[idx[started]] = True
        return np.flatnonzero(open_)


def _int_array(values: np.ndarray) -> array[int]:
    """Integers as an array('q'): indexing gives Python ints, storage is 8 bytes each."""
    out = array("q")
    out.frombytes(np.ascontiguousarray(values, dtype=np.int64).tobytes())
    return out
