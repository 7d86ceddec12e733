"""The pages' figures over seeds, without Streamlit: how a value is written with its range and its
"n < 100", the seeds a page asks for, what it has of them, a comparison as "better on k of N", and
the link's seed count."""

import json

import pytest

from engine import load
from engine.sweeps.evidence import Estimate, class_figures, over_seeds
from ui.frame.links import check_seeds
from ui.frame.seeds import gather, seed_keys
from ui.panels import kpis, spread
from ui.panels.text import seconds


def est(value, per, n=300, n_min=60, method="pooled"):
    return Estimate(value, min(per), max(per), tuple(per), n, n_min, method)


def test_a_value_is_written_with_the_seeds_range_and_a_thin_percentile_says_n_under_100():
    e = est(16.5, [10.1, 17.7, 12.0], n=320, n_min=28)
    assert spread.value(e, seconds) == "16.5 s"  # the card: the number alone
    assert spread.cell(e, seconds) == "16.5 s (10.1–17.7 s) · n < 100"
    assert spread.basis(e, seconds, (7, 8, 9)) == ("3 seeds: 10.1–17.7 s · 320 requests · n < 100 requests "
                                                   "(fewest in a seed: 28)")
    thick = est(2.0, [1.5, 2.5], n=800, n_min=390)
    assert "n < 100" not in spread.cell(thick, seconds) + spread.basis(thick, seconds, (1, 2))
    assert spread.basis(e, seconds, (7, 8, 9), running=2) == ("seed 7 only · 2 more seeds running · 320 requests · "
                                                               "n < 100 requests (fewest in a seed: 28)")
    assert spread.span(0.5, 0.5, seconds) == "0.500 s" and spread.seed_list([7, 8, 9]) == "7–9"


def test_a_comparison_pairs_seed_with_seed_and_is_coloured_only_when_every_seed_agrees():
    cur, base = est(1.0, [1.0, 2.0, 3.0]), est(2.0, [2.0, 1.0, 4.0])
    assert spread.compare(cur, base, "lower") == (2, 1, 3)
    assert spread.better_on(2, 3) == "better on 2 of 3 seeds"
    assert spread.colour((2, 1, 3), "inverse") == "off" and spread.colour((3, 0, 3), "inverse") == "inverse"
    assert spread.compare(cur, est(1.0, [1.0, 2.0]), "lower") is None  # different seeds: no pairing


def test_the_link_s_seed_count_is_a_whole_number_in_range_or_named():
    assert check_seeds(None, 1, 20, 5) == (None, None)
    assert check_seeds(" 7 ", 1, 20, 5) == (7, None)
    for bad in ("abc", "10000", "0", "-2", "3.5", "٣", "1e1", "<b>7</b>"):
        value, note = check_seeds(bad, 1, 20, 5)
        assert value is None and "not a number of seeds" in note and "using 5" in note, bad


TINY = "classic-inversion"


@pytest.fixture(scope="module")
def three():
    sc = load(TINY, {"duration_s": 60})
    return sc, over_seeds(sc, [sc.seed, sc.seed + 1, sc.seed + 2])


def test_a_page_asks_for_its_own_seed_and_the_next_ones_and_switches_only_when_all_are_in(three):
    sc, runs = three
    keys = seed_keys(sc, 3)
    assert keys[0] == sc.key() and len(set(keys)) == 3
    assert [json.loads(k)["seed"] for k in keys] == [sc.seed, sc.seed + 1, sc.seed + 2]
    seeds = (sc.seed, sc.seed + 1, sc.seed + 2)
    partial = gather(seeds, keys, runs[0], {keys[1]: runs[1]}, {})
    over = kpis.Over.of(partial)
    assert over.n == 1 and over.running == 1 and over.partial  # the shown run alone until the last is in
    failed = gather(seeds, keys, runs[0], {keys[1]: runs[1]}, {keys[2]: "boom"})
    over = kpis.Over.of(failed)
    assert over.n == 2 and not over.partial and over.failed == {sc.seed + 2: "boom"}
    full = kpis.Over.of(gather(seeds, keys, runs[0], {keys[1]: runs[1], keys[2]: runs[2]}, {}))
    assert full.n == 3 and full.cls("P0")["ttft_p99"] == class_figures(runs, "P0")["ttft_p99"]


def test_the_cards_say_on_how_many_seeds_a_remedy_holds(three):
    sc, runs = three
    remedy = load(TINY, {"duration_s": 60, "scheduler.policy": "priority"})
    better = over_seeds(remedy, [sc.seed, sc.seed + 1, sc.seed + 2])
    seeds = tuple(r.seed for r in runs)
    cur, base = kpis.Over(better, seeds), kpis.Over(runs, seeds)
    cards = {k.label: k for k in kpis.class_cards("P0", cur, base)}
    p99 = cards["P0 · P99 TTFT"]
    per_cur, per_base = cur.cls("P0")["ttft_p99"].per_seed, base.cls("P0")["ttft_p99"].per_seed
    k = sum(a < b for a, b in zip(per_cur, per_base))
    assert p99.description == f"better on {k} of 3 seeds" and p99.delta
    assert p99.note.startswith("3 seeds: ") and "n < 100 requests" in p99.note  # P0 sends < 100 a run
    table = kpis.compare_table({"Sidebar": base, "Priority": cur}, "Sidebar")
    assert f"better on {k} of 3 seeds" in table.at["P0 P99 TTFT", "Priority"]
    assert "better on" not in table.at["P0 P99 TTFT", "Sidebar"]
    strip = kpis.strip(cur)
    assert strip.startswith(f"The timeline draws seed {sc.seed}, the first of 3.") and "P0: P99 TTFT" in strip
