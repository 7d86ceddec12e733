"""The share-link codec: round trips, defaults left out, policy names from the engine."""

import pytest

from engine import load, simulate
from engine.config.scenario import Gateway, load_raw, to_dict
from engine.core.policies import POLICIES
from ui.frame import codec
from ui.frame.codec import Codec, get_dotted


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
    from ui.frame import i18n

    try:
        i18n.set_language("zh")
        zh = c.describe_changes(values)
    finally:
        i18n.set_language("en")
    assert zh.startswith("调度策略为 priority、P0：") and ", " not in zh and " = " not in zh, zh


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
    """The slider sets the median; p90 and max keep their ratio to it (default: 12k / 20k / 24k)."""
    p = load("default").classes["P2"].prompt
    o = c.overrides({**c.defaults, "p2_pro": 2 * p.median})
    assert o["classes.P2.prompt.median"] == 2 * p.median
    assert o["classes.P2.prompt.p90"] == pytest.approx(2 * p.p90)
    assert o["classes.P2.prompt.max"] == pytest.approx(2 * p.max)


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
        if p.dotted.startswith("trace."):  # absent until a shipped trace is chosen: the template has the key
            on = to_dict(c.scenario({**c.defaults, "trace": "azure-code"}))
            assert get_dotted(on, p.dotted.rsplit(".", 1)[0]) is not None, p.dotted
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


# ---------------------------------------------------------------------------------------------
# Arrivals from a shipped trace


def test_choosing_a_shipped_trace_replaces_the_synthetic_arrivals_with_the_mapping(c):
    assert (c.defaults["trace"], c.defaults["tr_long"], c.defaults["tr_share"]) == ("synthetic", 0, 0.1)
    assert c.by_short["trace"].options == ("synthetic", "azure-code", "azure-conv", "mooncake-conv")
    sc = c.scenario({**c.defaults, "trace": "azure-code"})
    assert sc.trace.path == "azure-code" and sc.trace.start_s == 0 and sc.trace.time_scale == 1
    a = sc.trace.assign
    assert (a.by, a.edges, a.classes, a.sample) == ("prompt_length", [4096], ["P1", "P2"], {"P0": 0.1})
    assert all(cls.arrival.rate == 0 and cls.arrival.process == "poisson" for cls in sc.classes.values())
    # 0 = the trace's own threshold; the other controls write their keys
    mc = c.scenario({**c.defaults, "trace": "mooncake-conv", "tr_share": 0.25, "tr_from": 600.0, "tr_scale": 2.0})
    assert mc.trace.assign.edges == [16384] and mc.trace.assign.sample == {"P0": 0.25}
    assert (mc.trace.start_s, mc.trace.time_scale) == (600.0, 2.0)
    assert c.scenario({**c.defaults, "trace": "azure-conv", "tr_long": 3000, "tr_share": 0}).trace.assign.sample is None
    # synthetic: the trace controls change nothing (idle), and the class controls count again
    assert c.overrides({**c.defaults, "tr_share": 0.5, "tr_from": 10.0}) == {}
    assert c.scenario({**c.defaults, "p0_rate": 2.0}).classes["P0"].arrival.rate == 2.0
    # a class rate moved before the trace was chosen does not come back through it
    assert c.scenario({**c.defaults, "p0_rate": 2.0, "trace": "azure-code"}).classes["P0"].arrival.rate == 0


def test_a_trace_choice_travels_in_a_link_and_reads_back(c):
    values = {**c.defaults, "trace": "azure-conv", "tr_long": 2500, "tr_share": 0.2, "tr_from": 300.0}
    link = c.encode(values, "default")
    assert link == {"trace": "azure-conv", "tr_long": "2500", "tr_share": "0.2", "tr_from": "300"}
    back = {**c.defaults, **{k: codec.parse(c.by_short[k], v) for k, v in link.items()}}
    assert c.scenario(back).key() == c.scenario(values).key()
    sc = c.scenario(values)
    assert c.changed(c.values_from_scenario(sc)) == c.changed(values)
    assert c.describe_changes(values, limit=1) == "Arrivals from = azure-conv, 3 more"
    for short, text in (("trace", "azure"), ("trace", "../x.csv"), ("tr_share", "1.5"), ("tr_share", "nan"),
                        ("tr_long", "-1"), ("tr_scale", "0"), ("tr_from", "inf")):
        with pytest.raises(ValueError):
            codec.parse(c.by_short[short], text)


def test_a_preset_that_replays_a_shipped_trace_offers_the_others_and_edits_its_own_mapping():
    r = Codec(load_raw("real-traffic"))
    assert r.by_short["trace"].options == ("azure-code", "azure-conv", "mooncake-conv")  # no synthetic classes
    assert (r.defaults["trace"], r.defaults["tr_long"], r.defaults["tr_share"], r.defaults["tr_from"]) == \
        ("azure-code", 4096, 0.15, 840.0)
    assert not any(p.synthetic for p in r.params)  # its classes have no arrival controls: the trace is the traffic
    assert r.scenario(r.defaults).key() == load("real-traffic").key()
    sc = r.scenario({**r.defaults, "trace": "azure-conv", "tr_long": 2048})
    base = load("real-traffic")
    assert sc.trace.path == "azure-conv" and sc.trace.assign.edges == [2048] and sc.trace.start_s == 840
    assert sc.trace.assign.sample == base.trace.assign.sample and sc.classes == base.classes
    assert r.encode({**r.defaults, "trace": "azure-conv"}, "real-traffic") == {"preset": "real-traffic",
                                                                               "trace": "azure-conv"}


def test_an_uploaded_trace_file_is_its_own_source(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("arrived_at,num_prefill_tokens,num_decode_tokens\n0,10,5\n")
    up = Codec({"classes": {"A": {"arrival": {"rate": 0}}}, "trace": {"path": str(p)}})
    assert "trace" not in up.by_short and not any(s.startswith("tr_") for s in up.by_short)
