"""The share-link codec: round trips, defaults left out, policy names from the engine."""

import pytest

from engine import load, simulate
from engine.policies import POLICIES
from engine.scenario import Gateway, load_raw, to_dict
from ui import codec
from ui.codec import Codec, get_dotted


@pytest.fixture(scope="module")
def c():
    return Codec(load_raw("default"))


def test_untouched_controls_give_the_preset_and_an_empty_link(c):
    assert c.encode(c.defaults, "default") == {}
    assert c.overrides(c.defaults) == {}
    assert c.scenario(c.defaults).key() == load("default").key()


def test_changed_values_are_all_the_link_holds(c):
    values = {**c.defaults, "reserve": 512, "policy": "priority", "inherit": True, "p0_rate": 0.75}
    assert c.encode(values, "default") == {"reserve": "512", "policy": "priority", "inherit": "true",
                                           "p0_rate": "0.75"}
    assert c.encode(values, "classic-inversion")["preset"] == "classic-inversion"
    for short, text in c.encode(values, "default").items():
        assert codec.parse(c.by_short[short], text) == values[short]


def test_changes_are_described_for_the_header(c):
    assert c.describe_changes(c.defaults) == ""  # the preset's own title says it all
    values = {**c.defaults, "policy": "priority", "p0_rate": 0.75}
    assert c.describe_changes(values) == "Scheduling policy = priority, P0: Arrival rate (req/s) = 0.75"
    more = {**values, "reserve": 512, "inherit": True, "p2_cap": 4096}  # named in the sidebar's order
    assert c.describe_changes(more, limit=2) == \
        "Scheduling policy = priority, Token reserve for the top priority = 512, 3 more"


def test_scenario_matches_the_cli_overrides(c):
    values = {**c.defaults, "reserve": 512, "p2_cap": 4096, "p2_over": "split"}
    cli = load("default", {"mitigations.p0_token_reserve": 512, "classes.P2.caps.max_prompt_tokens": 4096,
                           "classes.P2.caps.over_cap": "split"})
    assert c.scenario(values).key() == cli.key()


def test_scenario_to_values_is_the_inverse(c):
    sc = load("default", {"mitigations.p0_kv_reserve": 64, "scheduler.policy": "backfill", "seed": 9})
    values = c.values_from_scenario(sc)
    assert c.changed(values) == {"kvres": 64, "policy": "backfill", "seed": 9}
    assert c.scenario(values).key() == sc.key()


def test_zero_means_none_for_optional_caps(c):
    assert c.overrides({**c.defaults, "p2_cap": 0, "blocks": 0}) == {}
    back = c.values_from_scenario(load("default", {"classes.P2.caps.max_prompt_tokens": 2048}))
    assert back["p2_cap"] == 2048


def test_lognormal_prompt_keeps_its_shape(c):
    o = c.overrides({**c.defaults, "p2_pro": 16000})
    assert o["classes.P2.prompt.median"] == 16000
    assert o["classes.P2.prompt.p90"] == pytest.approx(32000)
    assert o["classes.P2.prompt.max"] == 48000


@pytest.mark.parametrize("short, text", [
    ("reserve", "abc"), ("reserve", "99999"), ("reserve", "1.5"), ("reserve", "inf"), ("reserve", "nan"),
    ("seqs", "1e400"), ("kvres", "-inf"), ("kvres", "1e309"), ("policy", "lottery"), ("inherit", "maybe"),
    ("p0_rate", "nan"), ("p0_rate", "٣"), ("p2_pin", "<b>x</b>"), ("p2_pin", "1,99"), ("seed", "9" * 400),
])
def test_bad_values_are_refused(c, short, text):
    with pytest.raises(ValueError):
        codec.parse(c.by_short[short], text)


def test_policy_names_come_from_the_engine(c):
    assert codec.POLICIES == tuple(POLICIES)
    assert c.by_short["policy"].options == tuple(POLICIES)
    assert all(name in c.by_short["policy"].help for name in POLICIES)


def test_every_param_maps_to_a_real_scenario_key(c):
    full = to_dict(load("default"))
    for p in c.params:
        if p.kind == "ints":  # replicas.pin.<class>: a mapping that is empty by default
            continue
        if p.dotted.startswith("gateway."):  # a section absent by default: its schema has the key
            assert p.dotted.split(".", 1)[1] in Gateway.model_fields
            continue
        assert p.short == p.short.strip() and "=" not in p.short
        parent = p.dotted.rsplit(".", 1)[0]
        assert p.dotted.count(".") == 0 or get_dotted(full, parent) is not None, p.dotted


def test_preset_values_inside_their_widget_ranges():
    for name in ("default", "classic-inversion", "separate-replicas", "kv-cap"):
        c = Codec(load_raw(name))
        for p in c.params:
            if p.kind in ("int", "float"):
                assert p.lo <= c.defaults[p.short] <= p.hi, (name, p.short)


def test_tiny_run_through_the_codec(c):
    res = simulate(c.scenario({**c.defaults, "dur": 8.0, "reserve": 256}))
    assert res.scenario.mitigations.p0_token_reserve == 256


def test_replica_pins_round_trip(c):
    values = {**c.defaults, "reps": 2, "routing": "pinned", "p0_pin": "0", "p1_pin": "0,1", "p2_pin": "1"}
    sc = c.scenario(values)
    assert sc.replicas.pin == {"P0": [0], "P1": [0, 1], "P2": [1]}
    assert c.changed(c.values_from_scenario(sc)) == c.changed(values)
    assert c.encode(values, "default")["p1_pin"] == "0,1"


def test_gateway_toggle_switches_the_gateway_section_and_round_trips(c):
    assert c.defaults["gw"] is False  # the default scenario has no `gateway:` section
    on = c.scenario({**c.defaults, "gw": True})
    assert on.gateway is not None and on.gateway.enabled and on.gateway.queue_depth_threshold == 5
    assert c.encode({**c.defaults, "gw": True}, "default") == {"gw": "true"}
    assert c.changed(c.values_from_scenario(on)) == {"gw": True}
    g = Codec(load_raw("gateway-priority"))
    assert g.defaults["gw"] is True
    off = g.scenario({**g.defaults, "gw": codec.parse(g.by_short["gw"], "false")})
    assert off.gateway is not None and not off.gateway.enabled
    assert off.gateway.scrape_interval_s == 0.05  # its settings stay, switched off


def test_budget_and_seats_at_zero_mean_vllms_default_for_the_gpu(c):
    values = {**c.defaults, "budget": 0, "seqs": 0, "gpu": "B200"}
    o = c.overrides(values)
    assert o["scheduler.max_num_batched_tokens"] is None and o["scheduler.max_num_seqs"] is None
    sc = c.scenario(values)
    assert (sc.scheduler.max_num_batched_tokens, sc.scheduler.max_num_seqs) == (16384, 1024)
    assert c.values_from_scenario(sc)["budget"] == 0  # the control shows "default", whatever the GPU
    assert codec.parse(c.by_short["budget"], "0") == 0


def test_weight_and_kv_precision_controls_map_labels_to_bytes(c):
    assert (c.defaults["wdtype"], c.defaults["kvdtype"]) == ("checkpoint", "auto")
    values = {**c.defaults, "wdtype": "FP8", "kvdtype": "FP8"}
    assert c.encode(values, "default") == {"wdtype": "FP8", "kvdtype": "FP8"}
    o = c.overrides(values)
    assert (o["model.dtype_bytes"], o["model.kv_dtype_bytes"]) == (1, 1)
    sc = c.scenario(values)
    assert c.values_from_scenario(sc)["wdtype"] == "FP8"
    with pytest.raises(ValueError):
        codec.parse(c.by_short["wdtype"], "INT4")
    # a scenario's own byte count that the table lacks stays selectable (never reject a preset)
    raw = {**load_raw("default"), "model": {"name": "Llama-3.1-8B", "dtype_bytes": 4}}
    own = Codec(raw)
    assert own.defaults["wdtype"] == "4 bytes" and own.by_short["wdtype"].options[-1] == "4 bytes"


def test_every_new_gpu_and_model_is_a_choice(c):
    for name in ("B200", "MI300X", "H20", "H800", "L20"):
        assert name in c.by_short["gpu"].options
    for name in ("Qwen3-30B-A3B", "Qwen3-235B-A22B", "DeepSeek-V3", "DeepSeek-R1", "gpt-oss-120b",
                 "Llama-3.1-8B", "Llama-3.1-70B", "Llama-3.1-405B"):
        assert name in c.by_short["model"].options


def test_picking_another_model_drops_a_custom_models_fields():
    raw = {**load_raw("default"), "model": {"name": "Mine", "params_b": 15.7, "layers": 27, "hidden": 2048,
                                            "q_heads": 16, "kv_heads": 16, "head_dim": 128, "kv_lora_rank": 512}}
    own = Codec(raw)
    assert own.defaults["model"] == "Mine"
    sc = own.scenario({**own.defaults, "model": "Llama-3.1-8B"})
    assert sc.model.name == "Llama-3.1-8B" and sc.model.kv_lora_rank is None and sc.model.params_b is None
    back = own.scenario({**own.defaults, "model": "Llama-3.1-8B", "kvdtype": "FP8"})
    assert back.model.kv_dtype_bytes == 1
