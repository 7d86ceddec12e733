"""One engine's iteration-level scheduler with SGLang 0.5.23's rules (`scheduler.engine: sglang`).

Each call to `schedule()` is one pass of SGLang's `get_next_batch_to_run`:
1. the prefill round (`_get_new_batch_prefill_raw` + `PrefillAdder`): the one chunked request
   continues first, then waiting requests in queue order, each admitted only if
   `extend + min(max_new − out, 4096) < available − Σ_running min(max_new − out, 4096) × ratio
   − what this batch already took`; the first request that does not fit ends the round
   (NO_TOKEN marks the batch full; no preemption for KV). When the running batch has no free
   slot (`max_running_requests`), priority scheduling may preempt running requests whose
   priority is more than `priority_scheduling_preemption_threshold` below (`preempt_to_schedule`).
2. if the round formed a batch, it runs alone: running requests decode nothing this iteration
   (unless `enable_mixed_chunk`, when each also gets its decode token);
3. otherwise the decode round (`update_running_batch`): if the next token of every running
   request does not fit the free KV, requests are retracted (KV freed, recomputed later, queue
   tail) and `new_token_ratio` is re-estimated; otherwise the ratio decays one notch. An idle
   engine resets the ratio to its initial value.

The rules decide over the same engine state as vLLM's (`engine.core.state.EngineState`: running set,
KV pool, admission and eviction bookkeeping, output intake), so results keep their shape; only the
decisions differ, and nothing is inherited. SGLang has no per-request token budget: admissions and
evictions draw on none. Multi-step skipping never applies (`multi_step = False`): every step is
decided here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .kv import KVPool
from .policies import Policy
from .queue import Key
from .reasons import Reason
from .requests import Requests
from .state import EngineState
from .step import Limits, Step

CLIP_MAX_NEW_TOKENS = 4096  # SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION
RETRACT_DECODE_STEPS = 20  # SGLANG_RETRACT_DECODE_STEPS
PRIORITY_STEP = 100  # default SGLang priority distance between neighbouring lab classes

CONTINUE, NO_TOKEN, OTHER = 0, 1, 2  # SGLang's AddReqResult

# how the first request left waiting stands after a round: its id (−1: none), its reason, the
# reason of those behind it, the blocks it needs and the blocks free (−1: not checked)
Head = tuple[int, Reason, Reason, int, int]


@dataclass(frozen=True)
class Settings:
    """SGLang's server arguments the lab models (`scheduler.sglang.*`, README "SGLang engine")."""

    chunked_prefill_size: int | None = 8192  # None: chunking off
    max_prefill_tokens: int = 16384
    enable_mixed_chunk: bool = False
    priority_scheduling: bool = False  # --enable-priority-scheduling (scheduler.policy: priority)
    low_values_first: bool = False  # --schedule-low-priority-values-first
    preemption_threshold: int = 10  # --priority-scheduling-preemption-threshold
    priority_preemption: bool = True  # not --disable-priority-preemption
    retraction_policy: str = "length"
    ignore_eos: bool = False
    schedule_conservativeness: float = 1.0
    init_new_token_ratio: float = 0.7  # SGLANG_INIT_NEW_TOKEN_RATIO
    min_new_token_ratio_factor: float = 0.14  # SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR
    new_token_ratio_decay_steps: int = 600  # SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS
    class_priority: tuple[int, ...] = ()  # SGLang's integer priority per lab class (index = class)


def default_class_priority(lab_priority: list[int], low_values_first: bool) -> list[int]:
    """SGLang priorities for the lab's classes (lab: lower number = more urgent). The top class
    gets the most urgent value in SGLang's convention and neighbouring lab priorities are
    `PRIORITY_STEP` (100) apart, so any two classes differ by more than the default threshold."""
    top, bottom = min(lab_priority), max(lab_priority)
    if low_values_first:
        return [PRIORITY_STEP * (p - top) for p in lab_priority]
    return [PRIORITY_STEP * (bottom - p) for p in lab_priority]


class SGLangPolicy(Policy):
    """Queue order: append order (`fcfs`), or (priority, wait_queue_entry_time) when priority
    scheduling is on. A retracted or preempted request goes to the tail with a new entry time
    (the entry number: SGLang's list append order)."""

    name = "sglang"
    upstream = "SGLang 0.5.23 SchedulePolicy.calc_priority (fcfs; priority first when enabled)"

    def __init__(self, urgency: np.ndarray, by_priority: bool):
        self.urgency, self.by_priority_on = urgency, by_priority

    def order_key(self, prio: int, arrival: float, i: int, entry: int) -> Key:
        return (int(self.urgency[i]) if self.by_priority_on else 0, entry)

    def requeue_key(self, prio: int, arrival: float, i: int, entry: int) -> Key:
        return self.order_key(prio, arrival, i, entry)


class _Adder:
    """PrefillAdder's running totals for one round (tokens; KV as `available` tokens)."""

    def __init__(self, avail: int, offset: float, mixed: int, max_prefill: int, chunk: int | None):
        self.avail = avail
        self.offset = mixed + offset  # rem_total_token_offset
        self.cur = mixed  # cur_rem_token_offset
        self.rem_input = max_prefill - mixed
        self.rem_chunk = None if chunk is None else chunk - mixed
        self.can_run = 0

    def rem_total(self) -> float:
        return self.avail - self.offset

    def take(self, inp: int, max_new: int) -> None:
        """`_update_prefill_budget`: the batch's input tokens and its reserved outputs."""
        self.offset += inp + max_new
        self.cur += inp
        self.rem_input -= inp
        if self.rem_chunk is not None:
            self.rem_chunk -= inp
        self.can_run += 1

    def state(self) -> int:
        """`budget_state`."""
        if self.rem_total() <= 0 or self.avail - self.cur <= 0:
            return NO_TOKEN
        if self.rem_input <= 0 or (self.rem_chunk is not None and self.rem_chunk <= 0):
            return OTHER
        return CONTINUE


def sglang_state(requests: Requests, pool: KVPool, limits: Limits, settings: Settings) -> EngineState:
    """The engine state SGLang's rules decide over: its queue ordered by `SGLangPolicy`."""
    s = settings
    prio = np.asarray(s.class_priority, dtype=np.int64)[requests.cls] if len(s.class_priority) else \
        np.zeros(requests.n, np.int64)
    urgency = prio if s.low_values_first else -prio  # smaller = more urgent
    return EngineState(requests, pool, SGLangPolicy(urgency, s.priority_scheduling), limits)


class SGLangRules:
    """SGLang's scheduling loop over the engine's state (see the module text)."""

    multi_step = False

    def __init__(self, state: EngineState, settings: Settings):
        assert isinstance(state.policy, SGLangPolicy), "build the state with `sglang_state`"
        s = self.sg = settings
        self.state, self.lim = state, state.lim
        self.rs, self.pool, self.running, self.queue = state.rs, state.pool, state.running, state.queue
        self.urgency = state.policy.urgency
        self.try_preempt = s.priority_scheduling and s.priority_preemption
        init = min(s.init_new_token_ratio * s.schedule_conservativeness, 1.0)
        self.init_ratio = init
        self.min_ratio = min(init * s.min_new_token_ratio_factor, 1.0)
        self.decay = (init - self.min_ratio) / s.new_token_ratio_decay_steps
        self.ratio = init  # new_token_ratio
        self.full = False  # running_batch.batch_is_full
        self._full_why = Reason.NONE  # what set it (for wait reasons while it stays set)
        self._retired = 0  # requests retired when the last decode round looked (the batch shrank since?)
        self.chunked = -1  # the one chunked request (its prompt partly prefilled), or -1

    def horizon(self, last: Step | None) -> None:
        """No run of steps is promised: SGLang's loop decides every step (its ratio moves each round)."""
        return None

    # (the rest of what a replica may ask about runs of steps: never asked, as no run is promised)
    def decode_step(self) -> Step:
        raise NotImplementedError("SGLang's rules promise no run of steps (`horizon` is None)")

    def waits_stand(self, last: Step | None) -> bool:
        return False

    def still_waiting(self, step: Step) -> bool:
        return False

    # -- arrivals ---------------------------------------------------------------------------
    def enqueue(self, i: int) -> bool:
        """As the vLLM scheduler, plus SGLang's own never-fits: prompt + min(max_new, 4096) must
        stay below the whole pool's tokens, or NO_TOKEN would hold the request forever."""
        rs, pool = self.rs, self.pool
        total = rs.prompt_l[i] + min(rs.output_l[i], CLIP_MAX_NEW_TOKENS)
        if total >= pool.capacity * pool.block_size and self.state.gate.refuse(i, self.queue) is None:
            rs.reject(i, f"prompt + min(max_new_tokens, {CLIP_MAX_NEW_TOKENS}) = {total} tokens never fits "
                         f"SGLang's admission check ({pool.capacity * pool.block_size} KV tokens in all)")
            return False
        return self.state.enqueue(i)

    # -- one step ---------------------------------------------------------------------------
    def schedule(self, now: float, unchanged: Step | None = None) -> Step:
        """One iteration: a prefill batch if one forms (alone, or mixed with the decodes), else
        the decode round. (`unchanged` is the vLLM scheduler's shortcut: never used here.)"""
        step = self.state.begin()
        if self.state.emptied_at is not None and now > self.state.emptied_at:
            self.ratio = self.init_ratio  # the engine idled meanwhile (`self_check_during_idle`)
        self.state.emptied_at = None  # (seen: one idle period resets the ratio once)
        if not self.running.ids:
            self.full = False  # filter_batch of an empty batch
        formed, head = self._prefill(now)
        if not formed and self.running.ids:
            self._decode(now)
        self._label(*head)
        step.tokens, step.decode, step.batch, step.context, step.attn = self.running.totals(None)
        if not step.tokens:
            self.ratio = self.init_ratio  # no batch to run: an idle iteration
        return step

    def _reserve_at(self, p: int) -> float:
        """`_get_running_request_total_token_offset` of the running request at position p: its
        reserved future tokens, min(max_new − out, 4096) × new_token_ratio (1.0 with ignore_eos)."""
        i = self.running.ids[p]
        out = self.running.comp_seq(p)[1] - self.rs.prompt_l[i]
        ratio = 1.0 if self.sg.ignore_eos else self.ratio
        return min(self.rs.output_l[i] - out, CLIP_MAX_NEW_TOKENS) * ratio

    def _decoders(self) -> list[int]:
        """Positions of the running batch proper: every running request but the chunked one."""
        return [p for p, i in enumerate(self.running.ids) if i != self.chunked]

    def _requeue(self, v: int, now: float) -> None:
        """Retract or preempt v: KV freed (recomputed later), to the queue's tail."""
        self.state.evict(v, now, None)

    # -- the prefill round ------------------------------------------------------------------
    def _prefill(self, now: float) -> tuple[bool, Head]:
        """One `_get_new_batch_prefill_raw`: (whether a prefill batch formed, how the first
        request left waiting stands: its id or −1, its reason, the reason of those behind it,
        blocks it needs, blocks free)."""
        s, run, pool = self.sg, self.running, self.pool
        if self.try_preempt:
            self.full = False
        if (self.full or not self.queue.order) and self.chunked < 0:
            return False, self._stuck()
        running_bs = len(run) - (self.chunked >= 0)
        allocatable = self.lim.max_seqs - running_bs
        if allocatable <= 0 and self.chunked < 0 and not self.try_preempt:
            self.full, self._full_why = True, Reason.MAX_SEQS
            return False, self._stuck()
        decoders = self._decoders()
        mixed = hold = 0
        if s.enable_mixed_chunk and decoders and (g := self._growth(decoders)) <= pool.free:
            mixed, hold = len(decoders), g  # their decode tokens ride in this batch
        riding = {run.ids[p] for p in decoders}
        ad = _Adder(pool.free * pool.block_size, sum(self._reserve_at(p) for p in decoders), mixed,
                    s.max_prefill_tokens, s.chunked_prefill_size)
        if self.chunked >= 0:
            self._continue_chunk(ad, hold)
        head: Head = (-1, Reason.NONE, Reason.NONE, -1, -1)
        order = self.queue.ids()
        for k, w in enumerate(order):
            if ad.can_run >= allocatable:
                self.full, self._full_why = True, Reason.MAX_SEQS
            if self.full and not (self.try_preempt and self._preempt_for(w, ad, now)):
                head = self._stuck()  # (w is now the queue's first: all before it were admitted)
                break
            res, admitted = self._add_one(w, ad, hold, now)
            if res == CONTINUE:
                continue
            if res == NO_TOKEN:
                self.full, self._full_why = True, Reason.KV_SHORT
            at = order[k + 1] if admitted and k + 1 < len(order) else (-1 if admitted else w)
            if at >= 0:  # where the round stopped: w itself, or (w admitted, budget gone) the next
                head = self._misfit(at, ad) if res == NO_TOKEN else (at, Reason.TOKEN_BUDGET,
                                                                     Reason.TOKEN_BUDGET, -1, -1)
            break
        if ad.can_run and mixed:  # (positions moved if the round preempted: find them again)
            riding -= set(self.state.step.preempted)
            self._give_decode([p for p, i in enumerate(run.ids) if i in riding])
        return ad.can_run > 0, head

    def _stuck(self) -> Head:
        """No prefill round: the waiting requests stand where the flag that stopped it left them."""
        if not self.queue.order:
            return (-1, Reason.NONE, Reason.NONE, -1, -1)
        first = self.queue.order[0]
        if self._full_why == Reason.MAX_SEQS:
            return (first, Reason.MAX_SEQS, Reason.MAX_SEQS, -1, -1)
        return (first, Reason.KV_SHORT, Reason.HEAD_OF_LINE, -1, -1)

    def _misfit(self, w: int, ad: _Adder) -> Head:
        return (w, Reason.KV_SHORT, Reason.HEAD_OF_LINE, self.pool.blocks(self._total(w)),
                max(0, int(ad.rem_total()) // self.pool.block_size))

    def _total(self, w: int) -> int:
        """extend + min(max_new − out, 4096): what `add_one_req` needs below `rem_total_tokens`."""
        rs = self.rs
        gen = int(rs.generated[w])
        return rs.prompt_l[w] + gen + min(max(rs.output_l[w] - gen, 0), CLIP_MAX_NEW_TOKENS)

    def _continue_chunk(self, ad: _Adder, hold: int) -> None:
        """`add_chunked_req`: the chunked request's next chunk, before anyone else."""
        run, pool = self.running, self.pool
        p = run.ids.index(self.chunked)
        comp, want = run.todo(p)
        n = want if ad.rem_chunk is None else min(want, max(ad.rem_chunk, 0))
        room = (pool.free - hold) * pool.block_size + pool.blocks(comp) * pool.block_size - comp
        n = min(n, max(room, 0))  # (a lab guard: the pool never overfills)
        if n <= 0:
            return
        truncated = n < want
        pool.grow(run.cls[p], pool.blocks(comp + n) - pool.blocks(comp))
        run.set_tokens(p, n, 0)
        out = 0 if truncated else min(self.rs.output_l[self.chunked], CLIP_MAX_NEW_TOKENS)
        ad.take(pool.blocks(n) * pool.block_size, out)
        if not truncated:
            self.chunked = -1

    def _add_one(self, w: int, ad: _Adder, hold: int, now: float) -> tuple[int, bool]:
        """`PrefillAdder.add_one_req`: (result, admitted)."""
        rs, pool = self.rs, self.pool
        bs = pool.block_size
        seq = rs.prompt_l[w] + int(rs.generated[w])
        total = self._total(w)
        if total >= ad.rem_total():
            return NO_TOKEN, False
        inp = pool.blocks(seq) * bs
        if inp >= ad.rem_input and ad.can_run:
            return OTHER, False
        n, out = seq, min(rs.output_l[w], CLIP_MAX_NEW_TOKENS)
        if ad.rem_chunk is not None and inp > ad.rem_chunk:
            n = ad.rem_chunk // bs * bs
            if n <= 0:
                return OTHER, False
            inp, out = n, 0
        if pool.blocks(n) > pool.free - hold:  # (a lab guard: never true when the reservation holds)
            return NO_TOKEN, False
        self.state.admit(w, rs.cls_l[w], n, now, 0, seq, None)
        if n < seq:
            self.chunked = w
        ad.take(inp, out)
        return ad.state(), True

    def _preempt_for(self, w: int, ad: _Adder, now: float) -> bool:
        """`preempt_to_schedule`: free running requests more than the threshold less urgent than
        w (least urgent first, newest first) until their reserved tokens cover w's need."""
        run, pool, rs = self.running, self.pool, self.rs
        need = rs.prompt_l[w] + int(rs.generated[w]) + min(rs.output_l[w], CLIP_MAX_NEW_TOKENS) - ad.rem_total()
        admitted = set(self.state.step.admitted)
        cands = [p for p in self._decoders() if run.ids[p] not in admitted]
        entry = self.state.entry
        cands.sort(key=lambda p: (-int(self.urgency[run.ids[p]]), -int(entry[run.ids[p]])))
        victims, offsets = [], []
        for p in cands:
            if int(self.urgency[run.ids[p]]) - int(self.urgency[w]) > self.sg.preemption_threshold:
                victims.append(run.ids[p])
                offsets.append(self._reserve_at(p))
                need -= offsets[-1]
            if need <= 0:
                break
        if not victims or need > 0:
            return False
        for v, off in zip(victims, offsets):
            ad.offset -= off
            used = pool.used
            self._requeue(v, now)
            ad.avail += (used - pool.used) * pool.block_size
        return True

    # -- the decode round -------------------------------------------------------------------
    def _growth(self, positions: list[int]) -> int:
        run, pool = self.running, self.pool
        total = 0
        for p in positions:
            comp, _ = run.comp_seq(p)
            total += pool.blocks(comp + 1) - pool.blocks(comp)
        return total

    def _give_decode(self, positions: list[int]) -> None:
        run, pool = self.running, self.pool
        for p in positions:
            comp, want = run.todo(p)
            if want:
                pool.grow(run.cls[p], pool.blocks(comp + 1) - pool.blocks(comp))
                run.set_tokens(p, 1, 0)

    def _decode(self, now: float) -> None:
        """`update_running_batch`: retract on decode OOM (re-estimating the ratio), else decay it;
        then every request of the running batch decodes one token."""
        if self.state.retired != self._retired:
            self.full, self._retired = False, self.state.retired  # the batch shrank
        decoders = self._decoders()
        if not decoders:
            return
        if self._growth(decoders) > self.pool.free:
            self._retract(now)
            self.full = False
        else:
            self.ratio = max(self.ratio - self.decay, self.min_ratio)
        self._give_decode(self._decoders())

    def _retract(self, now: float) -> None:
        """`retract_decode`: retract the policy's victims until the next decode step fits; the
        survivors set `new_token_ratio = min(1, (Σ out + 20·n) / (Σ max_new + 1))`."""
        run, rs = self.running, self.rs
        while True:
            decoders = self._decoders()
            if self._growth(decoders) <= self.pool.free:
                break
            if len(decoders) <= 1:
                if self.chunked >= 0:  # (the lab's fallback; with the arrival check this is unreachable)
                    self._requeue(self.chunked, now)
                    self.chunked = -1
                    continue
                break
            self._requeue(self._retract_victim(decoders), now)
        survivors = self._decoders()
        out = sum(run.comp_seq(p)[1] - rs.prompt_l[run.ids[p]] for p in survivors)
        max_new = sum(rs.output_l[run.ids[p]] for p in survivors)
        self.ratio = min(1.0, (out + RETRACT_DECODE_STEPS * len(survivors)) / (max_new + 1))

    def _retract_victim(self, decoders: list[int]) -> int:
        """`length` (SGLang's default): fewest outputs, then longest prompt, then the later in the
        batch; `priority`: the least urgent first, then the same."""
        run, rs = self.running, self.rs

        def key(p: int) -> tuple[int, ...]:
            i = run.ids[p]
            length = (run.comp_seq(p)[1] - rs.prompt_l[i], -rs.prompt_l[i], -p)
            return (-int(self.urgency[i]), *length) if self.sg.retraction_policy == "priority" else length

        return run.ids[min(decoders, key=key)]

    # -- after the step ---------------------------------------------------------------------
    def _label(self, head: int, head_why: Reason, rest_why: Reason, need: int, room: int) -> None:
        """Every request left waiting gets one reason: where the round stopped and behind it."""
        step, st = self.state.step, self.state
        order = np.array(self.queue.ids(), dtype=np.int64)
        step.waiting = order
        step.reasons = np.full(len(order), int(rest_why or Reason.HEAD_OF_LINE), np.int8)
        step.need = np.full(len(order), -1, np.int64)
        step.room = np.full(len(order), -1, np.int64)
        if head >= 0 and len(order):
            at = order == head
            step.reasons[at] = head_why
            step.need[at], step.room[at] = need, room
            step.blocker = head
        if st.n_evicted and len(order):
            step.reasons[st.evicted[order]] = Reason.PREEMPTED
