"""A rulebook seen through a wrapper (`simulate(around=...)`): tests spy on `schedule()` or inject a
fault into it without patching the engine's classes."""

from __future__ import annotations


class Around:
    """Everything the replica asks of the rules goes to the real rulebook, except `schedule`,
    which goes through `schedule(rules, now, unchanged)` when one is given."""

    def __init__(self, rules, schedule=None):
        self.rules, self._schedule = rules, schedule

    def __getattr__(self, name):
        return getattr(self.rules, name)

    def schedule(self, now, unchanged=None):
        if self._schedule is None:
            return self.rules.schedule(now, unchanged)
        return self._schedule(self.rules, now, unchanged)


def keeping(seen: list):
    """An `around` that keeps each replica's real rulebook in `seen` (to read its counts after)."""
    def around(rules):
        seen.append(rules)
        return rules
    return around
