"""Prefix caching: vLLM's block pool as far as it decides anything (`kv.prefix_caching`).

vLLM hashes every full block of a request's tokens (a chain hash: a block's hash covers all tokens
before it). A freed block keeps its hash and stays findable until the block is reused; a waiting
request's admission looks its blocks up and starts `num_computed_tokens` at the cached length. The
rules, as `fidelity/reference.py` states and the recorded corpus confirms:

- the free queue is one queue: allocation takes from the front; a freed block without a hash goes
  to the front, one with a hash to the back (least recently used evicted first); a request frees
  its blocks last block first;
- a hit is the longest run of cached full blocks of the request's tokens from its first, at most
  (tokens − 1) // block_size blocks; a hit on a block another request uses costs nothing, a hit on
  a cached free block takes it out of the free queue, so it counts against the admission room;
- preemption frees a request's blocks but they stay cached: re-admitted, it finds what is left.

Representation (exact, and cheap where nothing can be shared). Free blocks without a hash are a
count (`free − n_cached`): their identity never matters. Blocks whose content other requests can
share — the first `prefix` blocks of a request with prefix identity (a class's system prompt, a
trace's prefix group or conversation, Mooncake's `hash_ids`) — are objects (`Blk`), registered
by key as soon as they are hashed, with their reference count and users. A request's other full
blocks can only ever be found by the request itself after a preemption: they are hashed
implicitly while it runs and enter the free queue as one segment (evicted from its last block)
when it lets them go — anonymous if it finished.

KV per class with shared blocks: a block is charged to one class at a time — that of the request
that took it out of the free pool (allocated it, or hit it while it was free); when that request
lets go while others still use it, the charge passes to the oldest remaining user's class. So the
per-class columns still add up to the blocks in use, and class caps and the P0 KV reserve see
what a class holds; a hit on a block another request holds is free for the hitting class.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from .kv import KVPool
    from .requests import Requests
    from .running import RunningSet

ALL = 1 << 40  # `prefix` of a request whose whole sequence, outputs included, is shared content


class Blk:
    """A physical block whose content other requests can find: key, users (first = charged)."""

    __slots__ = ("key", "users", "cls", "eid")

    def __init__(self, key: tuple[int, int], user: int, cls: int):
        self.key, self.users, self.cls, self.eid = key, [user], cls, -1


class Seg:
    """Cached free blocks in the queue as one entry: the request they belong to (−1: nobody can
    find them) and their runs of block positions [lo, hi), evicted from the last block."""

    __slots__ = ("owner", "runs")

    def __init__(self, owner: int, runs: list[tuple[int, int]]):
        self.owner, self.runs = owner, runs


# what a lookup finds: (shared blocks, runs (queue id, first, end) of its own cached blocks,
# how many blocks in all, how many of them sit free in the cache)
Hit = tuple[Sequence[Blk], Sequence[tuple[int, int, int]], int, int]


def shared_blocks(rs: Requests, bs: int) -> np.ndarray:
    """Per request: its leading blocks with shareable content (0: none, ALL: every block)."""
    blocks = np.zeros(rs.n, np.int64)
    if rs.prefix_tokens is not None:
        tok = rs.prefix_tokens
        blocks = np.where(tok < 0, ALL, tok // bs)
    for i in rs.hash_ids:
        blocks[i] = rs.prompt[i] // bs
    return blocks


class PrefixCache:
    def __init__(self, pool: KVPool, rs: Requests):
        """`prefix[i]`: leading blocks of request i with shareable content; `src[i]`: their
        source (class system prompt, trace group); `hash_ids`: Mooncake's per-request 512-token
        block hashes (the source of each block)."""
        self.pool, self.rs, self.bs = pool, rs, pool.block_size
        self.prefix = shared_blocks(rs, self.bs)
        self.src = rs.prefix_src if rs.prefix_src is not None else np.full(rs.n, -1, np.int64)
        self.hash_ids = rs.hash_ids
        self.any_prefix = bool(self.prefix.any())
        self.hashing: set[int] = set()  # running requests with shareable blocks still to register
        self.q: OrderedDict[int, Blk | Seg] = OrderedDict()  # cached free blocks, eviction order
        self.n_cached = 0  # cached free blocks: those in `q`, or while `q` is empty nameless ones
        self.prefix_l: list[int] = self.prefix.tolist()
        self.eid = 0
        self.by_key: dict[tuple[int, int], list[Blk]] = {}
        self.held: dict[int, list[Blk]] = {}  # running request → its shareable blocks, in order
        self.segs: dict[int, list[int]] = {}  # preempted request → its free segments (queue ids)

    # -- keys ---------------------------------------------------------------------------------
    def key(self, i: int, j: int) -> tuple[int, int]:
        h = self.hash_ids.get(i)
        if h is not None:  # Mooncake: 512-token blocks, chain hashes
            return (int(h[((j + 1) * self.bs - 1) // 512]) + ALL, j)
        return (int(self.src[i]), j)

    def findable(self, i: int) -> bool:
        """Whether a lookup for request i can find anything."""
        return i in self.segs or self.any_prefix and self.prefix_l[i] > 0

    # -- the free queue -----------------------------------------------------------------------
    def _push(self, entry: Blk | Seg) -> int:
        if not self.q and self.n_cached:  # nameless cached blocks are ahead of it: name them
            self.eid += 1
            self.q[self.eid] = Seg(-1, [(0, self.n_cached)])
        self.eid += 1
        self.q[self.eid] = entry
        return self.eid

    def take(self, n: int, free: int) -> None:
        """n blocks leave the free queue (of `free` blocks) from its front: those without a hash
        first, then cached ones, least recently used first (their hashes are forgotten)."""
        evict = n - (free - self.n_cached)
        if evict > 0 and not self.q:  # only nameless blocks: nothing to forget
            self.n_cached -= evict
            return
        while evict > 0:
            eid, e = next(iter(self.q.items()))
            if isinstance(e, Blk):
                del self.q[eid]
                self.by_key[e.key].remove(e)
                if not self.by_key[e.key]:
                    del self.by_key[e.key]
                e.eid, k = -1, 1
            else:  # a segment: its last block first
                lo, hi = e.runs[-1]
                k = min(evict, hi - lo)
                e.runs[-1] = (lo, hi - k)
                if hi - k == lo:
                    e.runs.pop()
                if not e.runs:
                    del self.q[eid]
                    if e.owner >= 0:
                        self.segs[e.owner].remove(eid)
                        if not self.segs[e.owner]:
                            del self.segs[e.owner]
            self.n_cached -= k
            evict -= k

    # -- admission ------------------------------------------------------------------------------
    def lookup(self, i: int, tokens: int) -> Hit:
        """What a request with `tokens` tokens finds: (shared blocks, runs (queue id, first, end)
        of its own cached blocks, how many blocks in all, how many of them sit free in the cache)."""
        last = (tokens - 1) // self.bs
        found: list[Blk] = []
        free = 0
        shared = min(last, self.prefix_l[i])
        for j in range(shared):
            copies = self.by_key.get(self.key(i, j))
            if not copies:
                return found, [], j, free
            found.append(copies[0])
            free += not copies[0].users
        runs: list[tuple[int, int, int]] = []
        j = shared
        while j < last:  # its own blocks, cached after a preemption: the oldest copy first
            eid, end = self._own(i, j)
            if eid is None:
                break
            end = min(end, last)
            runs.append((eid, j, end))
            free += end - j
            j = end
        return found, runs, j, free

    def _own(self, i: int, j: int) -> tuple[int | None, int]:
        """The oldest free segment of request i holding its block j, and where that run ends."""
        for eid in self.segs.get(i, ()):
            for lo, hi in self._seg(eid).runs:
                if lo <= j < hi:
                    return eid, hi
        return None, j

    def _seg(self, eid: int) -> Seg:
        """The free queue's entry `eid`, a segment (the ids in `segs` name segments only)."""
        e = self.q[eid]
        assert isinstance(e, Seg)
        return e

    def admit(self, i: int, c: int, hit: Hit) -> None:
        """Request i (class c) is admitted with this `lookup` result (before its new blocks are
        taken; `register` then hashes what its first chunk fills)."""
        found, runs, n, fresh = hit
        held: list[Blk] = []
        self.held[i] = held
        for h in found:
            if not h.users:  # cached and free: out of the queue, charged to c
                del self.q[h.eid]
                h.eid, h.cls = -1, c
                self.n_cached -= 1
                self.pool.count(c, 1)
            h.users.append(i)
            held.append(h)
        for eid, a, b in runs:
            self._take_from_segment(eid, a, b)
            self.pool.count(c, b - a)
        if len(held) < self.prefix[i]:
            self.hashing.add(i)

    def _take_from_segment(self, eid: int, a: int, b: int) -> None:
        e = self._seg(eid)
        for k, (lo, hi) in enumerate(e.runs):
            if lo <= a < hi:
                e.runs[k:k + 1] = [r for r in ((lo, a), (b, hi)) if r[0] < r[1]]
                break
        self.n_cached -= b - a
        if not e.runs:
            del self.q[eid]
            self.segs[e.owner].remove(eid)
            if not self.segs[e.owner]:
                del self.segs[e.owner]

    # -- hashing and release ----------------------------------------------------------------------
    def register(self, i: int, c: int, hashed: int) -> None:
        """Request i's first `hashed` tokens are hashed: its shareable full blocks become findable."""
        held = self.held.get(i)
        if held is None:
            return
        for j in range(len(held), min(hashed // self.bs, int(self.prefix[i]))):
            b = Blk(self.key(i, j), i, c)
            self.by_key.setdefault(b.key, []).append(b)
            held.append(b)
        if len(held) >= self.prefix[i]:
            self.hashing.discard(i)

    def steps_to_hash(self, running: RunningSet) -> int:
        """Decode steps before a running request's next shareable block would be hashed (the
        replica's multi-step runs stop before it)."""
        return min(self.pending(i) - running.comp_seq(running.ids.index(i))[0] - 1 for i in self.hashing)

    def pending(self, i: int) -> int:
        """Tokens request i must have hashed before its next shareable block registers (0: none)."""
        held = self.held.get(i)
        if held is None or len(held) >= self.prefix[i]:
            return 0
        return (len(held) + 1) * self.bs

    def release(self, i: int, c: int, blocks: int, hashed: int, keep: bool) -> None:
        """Request i (class c) lets go of its `blocks` blocks, the first `hashed` tokens hashed,
        last block first; `keep`: it was preempted and may find its own blocks again."""
        pool = self.pool
        if not keep and i not in self.held:  # nothing shareable, nobody will look for it: a count
            pool.count(c, -blocks)
            if self.q:
                self._nameless(hashed // self.bs)
            else:
                self.n_cached += hashed // self.bs
            return
        self.register(i, c, hashed)
        self.hashing.discard(i)
        held = self.held.pop(i, [])
        h = max(hashed // self.bs, len(held))
        pool.count(c, -(blocks - h))  # no hash: to the front of the free queue
        if h > len(held):  # its own hashed blocks: one segment at the back
            pool.count(c, -(h - len(held)))
            if keep:
                self.segs.setdefault(i, []).append(self._push(Seg(i, [(len(held), h)])))
                self.n_cached += h - len(held)
            else:
                self._nameless(h - len(held))
        for b in reversed(held):
            first = b.users[0] == i
            b.users.remove(i)
            if not b.users:
                b.eid = self._push(b)
                self.n_cached += 1
                pool.count(b.cls, -1)
            elif first:  # the charge passes to the oldest remaining user
                new = int(self.rs.cls[b.users[0]])
                if new != b.cls:
                    pool.count(b.cls, -1)
                    pool.count(new, 1)
                    b.cls = new

    def _nameless(self, k: int) -> None:
        """k cached blocks nobody can find join the back of the queue (merged with such blocks
        before them)."""
        if not self.q or not k:
            self.n_cached += k
            return
        self.n_cached += k
        last = self.q[next(reversed(self.q))]
        if isinstance(last, Seg) and last.owner < 0 and len(last.runs) == 1:
            last.runs[0] = (last.runs[0][0], last.runs[0][1] + k)
        else:
            self._push(Seg(-1, [(0, k)]))

    def forget(self, i: int) -> None:
        """Request i finished: its own cached blocks can never be found again."""
        for eid in self.segs.pop(i, ()):
            self._seg(eid).owner = -1
