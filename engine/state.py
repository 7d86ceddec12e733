"""Per-request state as parallel numpy arrays (one slot per request id).

Mirrors vLLM's `Request`: `computed` chases `prompt + generated`; a step that makes them equal
samples one output token. Arrays instead of objects so the scheduler can update a whole batch
with a handful of vectorised operations per step.
"""

from __future__ import annotations

import numpy as np

from .workload import Workload

PENDING, WAITING, RUNNING, FINISHED, REJECTED, UNFINISHED = range(6)
STATUS = ["pending", "waiting", "running", "finished", "rejected", "unfinished"]


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
        # The same static facts as Python lists: the scheduler reads them one request at a time,
        # where a list lookup is several times cheaper than a numpy scalar read.
        self.prompt_l, self.output_l = self.prompt.tolist(), self.output.tolist()
        self.cls_l, self.prio_l, self.top_l = self.cls.tolist(), self.prio.tolist(), self.is_top.tolist()
        self.parent = wl.parent
        self.next_piece = wl.next_piece
        self.computed = np.zeros(n, np.int64)
        self.generated = np.zeros(n, np.int64)
        self.status = np.full(n, PENDING, np.int8)
        self.first_sched = np.full(n, np.nan)
        self.first_token = np.full(n, np.nan)
        self.finish = np.full(n, np.nan)
        self.preemptions = np.zeros(n, np.int64)
        self.recomputed = np.zeros(n, np.int64)
        self.swapped = np.zeros(n, bool)
        self.replica = np.full(n, -1, np.int64)
        self.reason: dict[int, str] = {}

    def seq_len(self, i):
        """Tokens of the current sequence: prompt plus outputs so far (what must be in KV)."""
        return self.prompt[i] + self.generated[i]

    def remaining(self, i):
        """Tokens still to compute before the next output token can be sampled."""
        return self.prompt[i] + self.generated[i] - self.computed[i]

    def reject(self, i: int, why: str) -> None:
        """Reject request i; pieces of a split request that would follow it are rejected too."""
        self.status[i] = REJECTED
        self.reason[i] = why
        j = int(self.next_piece[i])
        while j >= 0:
            self.status[j] = REJECTED
            self.reason[j] = f"an earlier piece ({i}) of this request was rejected"
            j = int(self.next_piece[j])
