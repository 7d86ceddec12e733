"""Arrival feeds hand arrivals over a window at a time: the window's edges change nothing."""

import numpy as np

from engine import from_dict, simulate
from engine.sim.feeds import StaticFeed


def test_static_feed_hands_over_every_arrival_once_across_window_edges():
    times = np.array([0.0, 0.0, 0.5, 1.0, 1.0, 1.0, 1.0, 2.5, 4.0, 4.0])
    feed = StaticFeed(np.arange(10) + 100, times, window=3)
    assert feed.next_t == 0.0
    assert feed(0.0) == [100, 101] and feed.next_t == 0.5
    assert feed(1.0) == [102, 103, 104, 105, 106]  # crosses two window edges in one call
    assert feed.next_t == 2.5
    feed.add(7, 3.0)  # a follow-up piece between known arrivals
    assert feed(3.5) == [107, 7] and feed.next_t == 4.0
    assert feed(9.0) == [108, 109] and feed.next_t == float("inf")
    assert feed(10.0) == []


SC = {"name": "w", "seed": 2, "duration_s": 6, "cost": {"model": "fixed", "step_time_s": 0.01},
      "kv": {"num_blocks": 96}, "scheduler": {"policy": "priority", "max_num_batched_tokens": 512},
      "classes": {"hi": {"priority": 0, "arrival": {"rate": 8}, "prompt": {"value": 100}, "output": {"value": 12}},
                  "lo": {"priority": 1, "arrival": {"rate": 12}, "prompt": {"value": 300}, "output": {"value": 30}}}}


def test_runs_are_the_same_whatever_the_window():
    """One replica (the feed) and two behind the router (`_pairs`): a window of 5 arrivals
    gives the frames and summary of the default window."""
    for replicas in (1, 2):
        sc = from_dict({**SC, "replicas": {"count": replicas}})
        want = simulate(sc)
        got = simulate(sc, window=5)
        assert len(want.requests) > 20
        assert got.requests.equals(want.requests) and got.steps.equals(want.steps)
        assert got.summary | {"wall_time_s": 0} == want.summary | {"wall_time_s": 0}
