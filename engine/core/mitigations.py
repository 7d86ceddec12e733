"""The project's mitigations inside vLLM's two passes (not vLLM's rules: README schema, "this
project's idea"): aging keys, the lendable token reserve, priority inheritance, and the `preempt`
policy's evictions for a waiting request. They are methods of `VLLMRules` (this class is its
base), called where they act; what they change, they change through the engine's state.
"""

from __future__ import annotations

from .policies import Policy
from .queue import Key
from .reasons import Reason
from .state import EngineState
from .step import Budget, Limits


class Mitigations:
    """The mitigations' part of `VLLMRules` (it sets `state`, `lim` and `policy`)."""

    state: EngineState
    lim: Limits
    policy: Policy

    def aged_key(self, i: int, now: float) -> Key:
        """One level better per `aging_s` waited, never past the top class. The levels are capped
        before dividing, so a subnormal `aging_s` (a hand-edited 5e-324) cannot overflow `int()`."""
        rs, lim = self.state.rs, self.lim
        prio, waited = int(rs.prio[i]), now - rs.arrival[i]
        room = max(prio - lim.top_priority, 0)
        levels = room if waited >= room * lim.aging_s else int(waited // lim.aging_s)
        return (max(lim.top_priority, prio - levels), float(rs.arrival[i]))

    def reserve_now(self) -> int:
        """Tokens held back for the top class this step (lendable: only while one needs them)."""
        lim, st = self.lim, self.state
        if not lim.token_reserve or not lim.reserve_lendable:
            return lim.token_reserve
        if any(st.rs.is_top[i] for i in st.queue.ids()):
            return lim.token_reserve
        return lim.token_reserve if st.running.top_prefilling() else 0

    def boosting(self) -> bool:
        """Inheritance is on and a waiting top-priority request cannot fit its sequence in KV."""
        if not self.lim.inheritance:
            return False
        rs, pool = self.state.rs, self.state.pool
        return any(rs.is_top[i] and pool.shortfall(int(rs.cls[i]), pool.blocks(rs.seq_len(i)))
                   for i in self.state.queue.ids())

    def boost_holders(self) -> None:
        """Priority inheritance: lower-priority KV holders move to the front of the running order."""
        top, run = self.state.rs.is_top, self.state.running
        held = run.held()
        holders = [p for p, i in enumerate(run.ids) if not top[i] and held[p] > 0]
        holders.sort(key=lambda p: -held[p])
        rest = [p for p, i in enumerate(run.ids) if top[i] or held[p] == 0]
        run.reorder(holders + rest)

    def lower(self, w: int) -> list[int]:
        prio = self.state.rs.prio
        return [i for i in self.state.running.ids if prio[i] > prio[w]]

    def evict_for_seat(self, w: int, now: float, budget: Budget) -> bool:
        """`preempt` policy: a full running set gives up its worst lower-priority request."""
        if not self.policy.preempts_for_waiting:
            return False
        cands = self.lower(w)
        if not cands:
            return False
        rs = self.state.rs
        self.state.evict(self.policy.victim(cands, rs.prio, rs.arrival), now, budget)
        return True

    def evict_for_blocks(self, w: int, c: int, need: int, now: float, budget: Budget) -> Reason:
        """`preempt` policy: evict lower-priority running requests until w's sequence fits — only
        if evicting all of them would make it fit."""
        st = self.state
        rs, pool, run = st.rs, st.pool, st.running
        cands = self.lower(w)
        if cands:
            at = {i: p for p, i in enumerate(run.ids)}
            held = run.held()
            freed = sum(held[at[i]] for i in cands)
            if pool.shortfall(c, need, watermark=True, freed=freed) in (Reason.KV_SHORT, Reason.RESERVE):
                cands = []  # even evicting every one of them would not make room
        why = pool.shortfall(c, need, watermark=bool(run))
        while why in (Reason.KV_SHORT, Reason.RESERVE) and cands:
            v = self.policy.victim(cands, rs.prio, rs.arrival)
            cands.remove(v)
            st.evict(v, now, budget)
            why = pool.shortfall(c, need, watermark=bool(run))
        return why
