"""What a replica's step loop is plugged into: the rulebook it asks (`Rules`: vLLM's, SGLang's, or a
wrapper around one), the feed its arrivals come from, whom it tells of a finish, and its one wait
that is not in seconds. Written down once, so the compiled replica and its callers agree on them."""

from __future__ import annotations

from enum import Enum
from typing import Final, Protocol

from ..core.state import EngineState
from ..core.step import Step


class Wake(Enum):
    """The step loop's one wait that is not in seconds: until the router hands over an arrival."""

    WAKE = "wake"


WAKE: Final = Wake.WAKE

Quiet = tuple[list[float], list[float], list[int], list[int]]  # a run: starts, step times, KV per class, row


class Rules(Protocol):
    """What the replica asks of its rulebook (`VLLMRules`, `SGLangRules`, or a wrapper around one)."""

    state: EngineState
    multi_step: bool  # whether pure decode steps may run as one (`horizon` may promise some)

    def enqueue(self, i: int) -> bool: ...

    def schedule(self, now: float, unchanged: Step | None = None) -> Step: ...

    def horizon(self, last: Step | None) -> int | None: ...

    def decode_step(self) -> Step: ...

    def waits_stand(self, last: Step | None) -> bool: ...

    def still_waiting(self, step: Step) -> bool: ...


class Feed(Protocol):
    """Where a replica's arrivals come from (`engine.sim.simulation`): called with `now`, the ids
    due by then; `next_t`: when the next one is due; `strict`: arrivals come as SimPy events."""

    strict: bool
    next_t: float

    def __call__(self, now: float) -> list[int]: ...


class OnFinish(Protocol):
    """Told that request i finished at t (`after_the_call`: the call that took it in built a step)."""

    def __call__(self, i: int, t: float, after_the_call: bool = False) -> None: ...
