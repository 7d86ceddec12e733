"""The share-link codec: round trips, defaults left out, bad parameters reported and dropped."""

import pytest

from engine import load, simulate
from engine.scenario import load_raw, to_dict
from ui import codec


@pytest.fixture(scope="module")
def raw():
    return load_raw("default")


def test_untouched_controls_give_the_preset_and_an_empty_link(raw):
    values = codec.preset_values(raw)
    assert codec.encode(values, raw, "default") == {}
    assert codec.overrides(values, raw) == {}
    assert codec.scenario(raw, values).key() == load("default").key()


def test_changed_values_round_trip_through_the_url(raw):
    values = {**codec.preset_values(raw), "reserve": 512, "policy": "priority", "inherit": True, "p0_rate": 0.75}
    params = codec.encode(values, raw, "default")
    assert params == {"reserve": "512", "policy": "priority", "inherit": "true", "p0_rate": "0.75"}
    decoded, problems = codec.decode(params, raw)
    assert problems == []
    assert {**codec.preset_values(raw), **decoded} == values


def test_scenario_matches_the_cli_overrides(raw):
    values = {**codec.preset_values(raw), "reserve": 512, "p2_cap": 4096, "p2_over": "split"}
    sc = codec.scenario(raw, values)
    cli = load("default", {"mitigations.p0_token_reserve": 512, "classes.P2.caps.max_prompt_tokens": 4096,
                           "classes.P2.caps.over_cap": "split"})
    assert sc.key() == cli.key()


def test_scenario_to_values_is_the_inverse(raw):
    sc = load("default", {"mitigations.p0_kv_reserve": 64, "scheduler.policy": "backfill", "seed": 9})
    values = codec.values_from_scenario(sc, raw)
    assert codec.changed(values, raw) == {"kvres": 64, "policy": "backfill", "seed": 9}
    assert codec.scenario(raw, values).key() == sc.key()


def test_zero_means_none_for_optional_caps(raw):
    values = {**codec.preset_values(raw), "p2_cap": 0, "blocks": 0}
    assert codec.overrides(values, raw) == {}
    sc = load("default", {"classes.P2.caps.max_prompt_tokens": 2048})
    back = codec.values_from_scenario(sc, raw)
    assert back["p2_cap"] == 2048


def test_lognormal_prompt_keeps_its_shape(raw):
    values = {**codec.preset_values(raw), "p2_pro": 16000}
    o = codec.overrides(values, raw)
    assert o["classes.P2.prompt.median"] == 16000
    assert o["classes.P2.prompt.p90"] == pytest.approx(32000)
    assert o["classes.P2.prompt.max"] == 48000


@pytest.mark.parametrize("query, needle", [
    ({"bogus": "1"}, "`bogus` is not a setting"),
    ({"reserve": "abc"}, "`reserve=abc` is not valid"),
    ({"reserve": "99999"}, "`reserve=99999` is not valid"),
    ({"reserve": "1.5"}, "`reserve=1.5` is not valid"),
    ({"policy": "lottery"}, "`policy=lottery` is not valid"),
    ({"inherit": "maybe"}, "`inherit=maybe` is not valid"),
    ({"p0_rate": "nan"}, "`p0_rate=nan` is not valid"),
])
def test_bad_parameters_are_reported_and_fall_back(raw, query, needle):
    values, problems = codec.decode(query, raw, ["default"])
    assert values == {}
    assert len(problems) == 1 and needle in problems[0]


def test_unknown_preset_is_reported(raw):
    _, problems = codec.decode({"preset": "nope"}, raw, ["default", "classic-inversion"])
    assert "`preset=nope`" in problems[0]


def test_every_param_maps_to_a_real_scenario_key(raw):
    full = to_dict(load("default"))
    for p in codec.params_for(raw):
        if p.kind == "ints":  # replicas.pin.<class>: a mapping that is empty by default
            continue
        assert p.short == p.short.strip() and "=" not in p.short
        parent = p.dotted.rsplit(".", 1)[0]
        assert p.dotted.count(".") == 0 or codec.get_dotted(full, parent) is not None, p.dotted


def test_tiny_run_through_the_codec():
    raw = load_raw("default")
    values = {**codec.preset_values(raw), "dur": 8.0, "reserve": 256}
    res = simulate(codec.scenario(raw, values))
    assert res.scenario.mitigations.p0_token_reserve == 256


def test_replica_pins_round_trip(raw):
    values = {**codec.preset_values(raw), "reps": 2, "routing": "pinned", "p0_pin": "0", "p1_pin": "0,1",
              "p2_pin": "1"}
    sc = codec.scenario(raw, values)
    assert sc.replicas.pin == {"P0": [0], "P1": [0, 1], "P2": [1]}
    assert codec.changed(codec.values_from_scenario(sc, raw), raw) == codec.changed(values, raw)
    decoded, problems = codec.decode(codec.encode(values, raw, "default"), raw)
    assert problems == [] and decoded["p1_pin"] == "0,1"
    _, problems = codec.decode({"p0_pin": "x"}, raw)
    assert "`p0_pin=x`" in problems[0]
