"""Wait reasons: why a blocked request was not running during a step (one code per step).

The codes are the vocabulary of DESIGN §1; every timeline colour, hover text and "why is P0
waiting" sentence is derived from this table.
"""

from __future__ import annotations

from enum import IntEnum


class Reason(IntEnum):
    NONE = 0
    KV_SHORT = 1
    TOKEN_BUDGET = 2
    MAX_SEQS = 3
    HEAD_OF_LINE = 4
    RESERVE = 5
    CLASS_CAP = 6
    PREEMPTED = 7
    GATEWAY = 8  # held at a gateway, before any engine saw it (last: the engine's codes are 1 … 7)

    @property
    def label(self) -> str:
        return self.name.lower()


EXPLAIN: dict[Reason, str] = {
    Reason.KV_SHORT: "not enough free KV blocks for its whole prompt (or, at the head of the queue, the "
    "waiting pass was skipped because a running request had to be preempted for blocks)",
    Reason.TOKEN_BUDGET: "this step's token budget (max_num_batched_tokens) was used up by earlier requests",
    Reason.MAX_SEQS: "the running set is at max_num_seqs",
    Reason.HEAD_OF_LINE: "queued behind a request that does not fit; admission stops there",
    Reason.RESERVE: "what is left (tokens or KV blocks) is reserved for the top-priority class",
    Reason.CLASS_CAP: "its class is at a cap (max_running or max_kv_blocks)",
    Reason.PREEMPTED: "was running and was evicted; waiting to be re-admitted",
    Reason.GATEWAY: "held at the gateway, not yet sent to an engine: the pool counted as saturated, or its band "
    "was held back or behind a more important one",
}

LABELS = [r.label for r in Reason]
IN_ENGINE = [r for r in Reason if r not in (Reason.NONE, Reason.GATEWAY)]  # what an engine's queue records

SHED_GATEWAY = "HTTP 429"  # how a request the gateway drops is rejected (engine.sim.gateway)
SHED = "HTTP 503"  # how a request refused by vLLM's API server queue limits is rejected (its reason starts so)

# vLLM 0.33 exports `vllm:num_requests_waiting_by_reason{reason}` with two values: "deferred" —
# skipped for a transient constraint (a LoRA budget, a KV transfer, a blocked status) — and
# "capacity" for every other waiting request. The engine's class cap skips a request the way
# vLLM's LoRA budget does; every other reason waits for capacity (KV, budget, seats, the queue).
VLLM_REASON = {r: ("deferred" if r == Reason.CLASS_CAP else "capacity") for r in IN_ENGINE}
