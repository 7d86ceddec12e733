"""What one scheduler step hands around: the knobs it obeys, the token budget, the running set's
plan, the step.

These are the interfaces between the scheduler (the rules), the running set (the fast paths
below the rules) and the replica (time and observation), in the way vLLM's `SchedulerConfig`,
`SchedulerOutput` and `KVCacheBlocks` separate its scheduler from the model runner and the KV
manager. (`Limits` are the engine's scheduling limits; `engine.sim.limits` caps a run's *work*.)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_NO_IDS = np.empty(0, np.int64)
_NO_CODES = np.empty(0, np.int8)
_NO_IDS.flags.writeable = False
_NO_CODES.flags.writeable = False


@dataclass(frozen=True)
class Limits:
    """The knobs the scheduler obeys (engine settings plus mitigations)."""

    budget: int
    max_seqs: int
    threshold: int = 0
    threshold_adaptive: bool = False
    async_scheduling: bool = False
    chunked: bool = True
    token_reserve: int = 0
    reserve_lendable: bool = False
    class_max_running: tuple[int | None, ...] = ()  # per class (None: no cap)
    inheritance: bool = False
    aging_s: float = 0.0
    top_priority: int = 0
    swap_bytes_per_s: float = 0.0  # > 0: preemption swaps KV to host instead of recomputing
    block_bytes: float = 0.0
    prefix_caching: bool = False
    max_queued_reqs: int | None = None  # vLLM's API server answers HTTP 503 beyond these
    max_queued_tokens: int | None = None

    def chunk_cap(self, n: int) -> int:
        """vLLM 0.33: `long_prefill_token_threshold` caps a request's tokens per step only while
        more than one request (`n`) runs or waits at the start of the call; the adaptive variant
        floors the cap at budget // n (0 = no cap)."""
        if not self.threshold or n <= 1:
            return 0
        return max(self.threshold, self.budget // n) if self.threshold_adaptive else self.threshold


@dataclass(slots=True)
class Budget:
    """Tokens left in this step: `reserve` only the top class may use, `shared` anyone may."""

    reserve: int
    shared: int

    def left(self) -> int:
        return self.reserve + self.shared

    def available(self, top: bool) -> int:
        return self.shared + (self.reserve if top else 0)

    def take(self, n: int, top: bool) -> int:
        """Take n tokens (the top class draws its reserve first); returns how many came from it."""
        r = min(n, self.reserve) if top else 0
        self.reserve -= r
        self.shared -= n - r
        return r


@dataclass(slots=True)
class Plan:
    """The running pass's outcome if no request's KV growth fails: tokens per running request.

    `uniform`: every running request decodes one token (the common step of a busy engine),
    described in O(1); otherwise `tokens` (and `from_reserve`) per running position. `growth`
    is the new KV blocks per class; the scheduler accepts the plan only when the pool fits it.
    """

    uniform: bool
    n: int  # running requests the plan covers: positions 0..n-1
    growth: list[int]
    reserve_used: int
    shared_used: int
    tokens: list[int] | None = None
    from_reserve: list[int] | None = None
    done: int = 0  # of the n, requests whose last token is in flight (async): no token, they leave


class Step:
    """What one step scheduled (as totals), and how the requests left waiting stand."""

    __slots__ = ("plan", "tokens", "decode", "batch", "context", "attn", "admitted", "preempted", "waiting",
                 "reasons", "need", "room", "blocker", "swap_s", "reserve_idle", "flushed", "finished")

    def __init__(self, plan: Plan | None = None):
        self.plan = plan  # the accepted plan (None: the sequential loop ran, or an eviction broke it)
        self.tokens = 0  # scheduled tokens, of them `decode` for requests whose prompt was in KV
        self.decode = 0
        self.batch = 0  # requests given tokens
        self.context = 0  # KV read: computed tokens of those requests
        self.attn = 0.0  # attention work: Σ chunk·(context + chunk/2)
        self.admitted: list[int] = []
        self.preempted: list[int] = []
        self.waiting: np.ndarray = _NO_IDS  # the requests left waiting, and per request: its reason,
        self.reasons: np.ndarray = _NO_CODES
        self.need: np.ndarray = _NO_IDS  # the blocks its whole sequence needs (−1: not checked),
        self.room: np.ndarray = _NO_IDS  # and the blocks it could take when checked (−1: not checked)
        self.blocker = -1  # the request at which admission stopped (head of line)
        self.swap_s = 0.0
        self.reserve_idle = 0
        self.flushed = False  # async: the call took in the outputs of the step before,
        self.finished: list[int] = []  # and these requests finished then (at that step's end)

    def wait_as(self, other: Step) -> None:
        """The requests left waiting stand as in `other` (its reasons copied: this step may mark more)."""
        self.waiting, self.reasons, self.need, self.room = other.waiting, other.reasons.copy(), other.need, other.room
        self.blocker = other.blocker

    def also_waiting(self, ids: list[int], reason: int) -> None:
        """Requests left waiting besides those already listed, for `reason` (KV not checked)."""
        self.waiting = np.concatenate([self.waiting, np.array(ids, dtype=np.int64)])
        self.reasons = np.concatenate([self.reasons, np.full(len(ids), reason, np.int8)])
        self.need = np.concatenate([self.need, np.full(len(ids), -1, np.int64)])
        self.room = np.concatenate([self.room, np.full(len(ids), -1, np.int64)])

    def drop_waiting(self, ids: list[int]) -> None:
        """These requests are no longer waiting (they finished from the queue)."""
        keep = ~np.isin(self.waiting, ids)
        self.waiting, self.reasons = self.waiting[keep], self.reasons[keep]
        self.need, self.room = self.need[keep], self.room[keep]

    @property
    def changed(self) -> bool:
        """The call changed the engine's state even if it scheduled nothing."""
        return bool(self.preempted) or self.flushed

    @property
    def uniform(self) -> bool:
        """A pure decode step: the uniform plan ran, nobody was admitted or preempted."""
        return self.plan is not None and self.plan.uniform and not self.admitted and not self.preempted
