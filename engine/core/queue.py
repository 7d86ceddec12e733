"""The waiting queue: request ids kept sorted by the policy's key.

One sorted list serves every policy (FCFS deque order and the priority heap order are both just
keys), so iteration in queue order, removal from the middle (a backfilled admission) and the
vLLM "prepend" of a preempted request are all plain list operations.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable

Key = tuple[float, ...]  # a policy's queue key: ints and floats, compared as a tuple (ties: the id last)


class WaitingQueue:
    def __init__(self) -> None:
        self._entries: list[Key] = []
        self.order: list[int] = []  # the entries' ids, same order (read only; `ids()` copies it)
        self._entry: dict[int, Key] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def __bool__(self) -> bool:
        return bool(self._entries)

    def push(self, i: int, key: Key) -> None:
        entry = (*key, i)
        self._entry[i] = entry
        at = bisect.bisect_right(self._entries, entry)
        self._entries.insert(at, entry)
        self.order.insert(at, i)

    def remove(self, i: int) -> None:
        at = bisect.bisect_left(self._entries, self._entry.pop(i))
        del self._entries[at]
        del self.order[at]

    def ids(self) -> list[int]:
        """Request ids in queue order (a copy: the queue may change while the caller walks it)."""
        return self.order.copy()

    def rekey(self, key_fn: Callable[[int], Key]) -> None:
        """Re-sort every entry under a new key function (used by aging, whose keys drift)."""
        self._entries = sorted((*key_fn(i), i) for i in self._entry)
        self.order[:] = [int(e[-1]) for e in self._entries]
        self._entry = {int(e[-1]): e for e in self._entries}
