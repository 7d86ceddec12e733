"""Deterministic token ids for the corpus workloads: prefix identity made into real token ids.

Group streams use ids below 50000 after a per-group first id (50000 + group); every unique part
of a prompt starts with a per-request marker (60000 + request), so hash chains of different
requests never coincide by accident and requests of one group share exactly their prefix.
Standard library only.
"""

from __future__ import annotations


def stream_token(group: int, pos: int) -> int:
    if pos == 0:
        return 50000 + group
    return 1 + (group * 7919 + pos * 104729 + (pos * pos) % 9973) % 49000


def unique_token(req: int, pos: int, start: int) -> int:
    if pos == start:
        return 60000 + req
    return 1 + (req * 131 + pos * 31) % 49000


def prompt_tokens(r: dict, idx: int) -> list[int]:
    """Prompt ids of request `idx`: its group's stream for `prefix_tokens`, then unique ids."""
    n, g = r["prefix_tokens"], r["prefix_group"]
    shared = [stream_token(g, i) for i in range(n)] if g >= 0 else []
    return shared + [unique_token(idx, i, len(shared)) for i in range(len(shared), r["prompt_len"])]


def output_token(r: dict, idx: int, j: int) -> int:
    """The j-th sampled token: continues the group's stream for a whole-prompt group member
    (a conversation turn, re-sent by the next turn), unique otherwise."""
    if r["prefix_group"] >= 0 and r["prefix_tokens"] == r["prompt_len"]:
        return stream_token(r["prefix_group"], r["prompt_len"] + j)
    return 1 + (idx * 977 + j * 13) % 49000
