"""Scheduling policies: each a small class with one job (DESIGN §2).

A policy decides three things and nothing else:
- the waiting-queue order (`order_key`) and where a preempted request goes back (`requeue_key`);
  both are told the request's entry number (`EngineState.entries`: arrivals and requeues so far);
- what a waiting request that does not fit does to those behind it (`stops_at_misfit`:
  vLLM's head-of-line `break`, or backfill's skip);
- which running request is evicted when KV runs out (`victim`), and whether a blocked waiting
  request may evict lower-priority running ones (`preempts_for_waiting`).

To add a policy: subclass `Policy`, override what differs, register it in `POLICIES`.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from .queue import Key


class Policy:
    """vLLM v1 `--scheduling-policy fcfs`: arrival order, head-of-line stop, LIFO victim."""

    name: ClassVar[str] = "fcfs"
    upstream: ClassVar[str] = "vLLM v1 default (--scheduling-policy fcfs)"
    stops_at_misfit: ClassVar[bool] = True
    preempts_for_waiting: ClassVar[bool] = False
    by_priority: ClassVar[bool] = False

    def order_key(self, prio: int, arrival: float, i: int, entry: int) -> Key:
        return (1, arrival, i)

    def requeue_key(self, prio: int, arrival: float, i: int, entry: int) -> Key:
        """FCFS puts a preempted request at the very front (`appendleft`): the latest first."""
        return (0, -entry, i)

    def victim(self, candidates: list[int], prio: np.ndarray, arrival: np.ndarray) -> int:
        """FCFS evicts the most recently admitted (`running.pop()`)."""
        return candidates[-1]


class PriorityPolicy(Policy):
    """vLLM v1 `--scheduling-policy priority`: (priority, arrival) order, head-of-line stop."""

    name = "priority"
    upstream = "vLLM v1 --scheduling-policy priority"
    by_priority = True

    def order_key(self, prio: int, arrival: float, i: int, entry: int) -> Key:
        return (prio, arrival, i)

    def requeue_key(self, prio: int, arrival: float, i: int, entry: int) -> Key:
        """A priority heap re-inserts a preempted request by its original key."""
        return (prio, arrival, i)

    def victim(self, candidates: list[int], prio: np.ndarray, arrival: np.ndarray) -> int:
        """Lowest priority (largest number), then latest arrival."""
        return max(candidates, key=lambda i: (prio[i], arrival[i], i))


class BackfillPolicy(PriorityPolicy):
    """Priority order, but a request that does not fit is skipped and later ones are tried."""

    name = "backfill"
    upstream = "not in vLLM core: proposed in PRs #33499/#35852/#36390; gateway priority over FCFS"
    stops_at_misfit = False


class PreemptPolicy(PriorityPolicy):
    """Priority order; a blocked waiting request may evict lower-priority running requests."""

    name = "preempt"
    upstream = "vLLM v0 _schedule_priority_preemption; SGLang preempt_to_schedule (slot-full only)"
    preempts_for_waiting = True


POLICIES: dict[str, type[Policy]] = {p.name: p for p in (Policy, PriorityPolicy, BackfillPolicy, PreemptPolicy)}


def make_policy(name: str) -> Policy:
    return POLICIES[name]()
