"""Whether an arriving request may wait at all: rejected at arrival with a reason, never a hang.

A request whose prompt + max_tokens can never fit this engine (KV capacity, its class's cap,
outside the P0 reserve; with chunked prefill off, a prompt over the step budget) is rejected.
vLLM's API server also sheds arrivals (HTTP 503, before the engine) while
`max_num_queued_reqs` requests wait, or when the waiting requests' tokens and the new prompt
would pass `max_num_queued_tokens`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .reasons import SHED

if TYPE_CHECKING:
    from .kv import KVPool
    from .queue import WaitingQueue
    from .requests import Requests
    from .step import Limits


class ArrivalGate:
    def __init__(self, rs: Requests, pool: KVPool, lim: Limits):
        self.rs, self.pool, self.lim = rs, pool, lim
        n_cls = len(pool.used_cls)
        view = np.array([pool.view_capacity(c) for c in range(n_cls)], dtype=np.int64)
        budget = np.where(rs.is_top, lim.budget, lim.budget - lim.token_reserve)
        self.never: np.ndarray = (pool.blocks_many(rs.prompt + rs.output - 1) > view[rs.cls]) | (
            (rs.prompt > budget) if not lim.chunked else False)

    def refuse(self, i: int, queue: WaitingQueue) -> str | None:
        """Why request i is refused on arrival (None: it may wait)."""
        if self.never[i]:
            return self._never_fits(i, int(self.rs.cls[i]))
        return self._shed(i, queue)

    def _never_fits(self, i: int, c: int) -> str:
        rs, pool, lim = self.rs, self.pool, self.lim
        tokens = int(rs.prompt[i] + rs.output[i] - 1)
        cap = pool.view_capacity(c)
        if pool.blocks(tokens) > cap:
            return (f"prompt + max_tokens = {tokens} tokens needs {pool.blocks(tokens)} KV blocks; "
                    f"at most {cap} can ever be free for class {rs.class_names[c]}")
        budget = lim.budget - (0 if rs.is_top[i] else lim.token_reserve)
        return f"prompt {rs.prompt[i]} tokens exceeds the step budget {budget} with chunked prefill off"

    def _shed(self, i: int, queue: WaitingQueue) -> str | None:
        lim, rs = self.lim, self.rs
        if lim.max_queued_reqs is not None and len(queue) >= lim.max_queued_reqs:
            return f"{SHED}: {len(queue)} requests waiting (scheduler.max_num_queued_reqs = {lim.max_queued_reqs})"
        if lim.max_queued_tokens is not None:
            ids = np.array(queue.ids(), dtype=np.int64)
            queued = int((rs.prompt[ids] + rs.generated[ids]).sum())
            if queued + int(rs.prompt[i]) > lim.max_queued_tokens:
                return (f"{SHED}: {queued} tokens waiting + {int(rs.prompt[i])} "
                        f"(scheduler.max_num_queued_tokens = {lim.max_queued_tokens})")
        return None
