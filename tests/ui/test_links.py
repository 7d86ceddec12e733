"""Reading a link: every parameter is kept, left to its page, or refused with a note naming it.

The decoder is fuzzed with Hypothesis (thousands of links): it never raises, accounts for every
parameter, and quotes user text inertly.
"""

import re
from functools import cache

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.config.scenario import load, load_raw, scenario_names
from ui.frame import codec, links, views
from ui.frame.codec import Codec
from ui.frame.limits import APP_MAX_REQUESTS, why_not
from ui.frame.untrusted import quoted

PRESETS = scenario_names()
VIEW = views.VIEW_KEYS["p99"] | views.VIEW_KEYS["timeline"]


@cache
def codec_for(name: str) -> Codec:
    return Codec(load_raw(name))


def check(query, view=VIEW):
    return links.check_link(query, PRESETS, codec_for, view)


def named(key: str, notes: list[str]) -> bool:
    return any(quoted(key) in n for n in notes)


NUMERIC = [p.short for p in codec_for("default").params if p.kind in ("int", "float")]


@pytest.mark.parametrize("text", ["inf", "-inf", "nan", "NaN", "1e400", "-1e400", "1e99999", "9" * 500, "0x10"])
@pytest.mark.parametrize("short", NUMERIC)
def test_non_finite_and_huge_numbers_are_refused_by_name(short, text):
    out = check({short: [text]})
    assert short not in out.values and short in out.drop
    assert len(out.notes) == 1 and named(short, out.notes) and "not valid" in out.notes[0]


def test_a_repeated_key_is_named_and_its_last_value_counts():
    out = check({"reserve": ["512", "1024"]})
    assert out.values == {"reserve": 1024} and out.set == {"reserve": "1024"}
    assert len(out.notes) == 1 and named("reserve", out.notes) and "2 times" in out.notes[0]


def test_html_in_a_value_gives_one_inert_message_and_leaves_the_url():
    out = check({"p2_pin": ["<b>x</b>"]})
    assert out.drop == {"p2_pin"} and len(out.notes) == 1
    assert "<b>" not in out.notes[0] and "\\<b\\>" in out.notes[0]


def test_unknown_names_and_presets_are_refused():
    out = check({"colour": ["blue"], "preset": ["nope"]})
    assert out.preset == "default" and out.drop == {"colour", "preset"}
    assert named("colour", out.notes) and named("preset", out.notes)


def test_view_parameters_are_left_to_their_page():
    out = check({"sw_knob": ["cap"], "reserve": ["512"]})
    assert out.view == {"sw_knob": "cap"} and out.values == {"reserve": 512} and not out.notes
    assert check({"sw_knob": ["cap"]}, view=frozenset()).drop == {"sw_knob"}


def test_a_valid_link_passes_untouched():
    out = check({"preset": ["classic-inversion"], "policy": ["priority"], "p2_cap": ["8192"], "p2_over": ["split"]})
    assert out.preset == "classic-inversion" and not out.notes and not out.drop and not out.set
    assert out.values == {"policy": "priority", "p2_cap": 8192, "p2_over": "split"}


def test_values_that_cannot_run_together_drop_the_culprit():
    c = codec_for("default")
    kept, notes = links.runnable_subset(c, {"p1_rate": 9000.0, "reserve": 512}, why_not)
    assert kept == {"reserve": 512} and named("p1_rate", notes) and f"{APP_MAX_REQUESTS:,}" in notes[0]
    kept, notes = links.runnable_subset(c, {"budget": 1024, "reserve": 2048}, why_not)
    assert len(kept) == 1 and len(notes) == 1  # either one alone runs
    assert links.runnable_subset(c, {"reserve": 512}, why_not) == ({"reserve": 512}, [])


def test_a_link_naming_a_shipped_trace_is_judged_like_any_control():
    out = check({"trace": ["azure-conv"], "tr_share": ["0.3"], "tr_from": ["120"]})
    assert out.values == {"trace": "azure-conv", "tr_share": 0.3, "tr_from": 120.0} and not out.notes
    out = check({"trace": ["../../etc/passwd"], "tr_share": ["2"]})
    assert out.drop == {"trace", "tr_share"} and named("trace", out.notes) and named("tr_share", out.notes)
    assert "azure-code" in out.notes[0]  # the note says what is allowed
    # Mooncake's long prompts with hashed prefixes under backfill: over the app's work cap, left out
    c = codec_for("fill-what-fits")
    kept, notes = links.runnable_subset(c, {"trace": "mooncake-conv", "reserve": 512}, why_not)
    assert kept == {"reserve": 512} and named("trace", notes) and "estimated" in notes[0]
    assert links.runnable_subset(c, {"trace": "azure-conv"}, why_not) == ({"trace": "azure-conv"}, [])


def test_why_not_agrees_with_the_engine():
    assert why_not(load("default")) is None
    assert "Llama-3-70B" in why_not(load("default", {"model.name": "Llama-3-70B"}))
    assert "nothing" in why_not(load("default", {"mitigations.p0_kv_reserve": 10**6}))
    assert "must be below" in why_not(load("default", {"mitigations.p0_token_reserve": 8192}))
    assert "50,000 allowed" in why_not(load("default", {"classes.P1.arrival.rate": 9000}))  # the app's work cap


# ------------------------------------------------------------------------------------------
# Fuzz

SPECIAL = ["inf", "-inf", "nan", "1e400", "-1e400", "1e-400", "1e99999", "0", "-0", "1.5", "512", "true", "false",
           "fcfs", "priority", "", " ", "<b>x</b>", "<script>alert(1)</script>", "[a](http://x)", "`x`", "**b**",
           "0,1", "1,,2", "P0,P1", "😀", "٣", "1_000", "0x10", "9" * 60, "a" * 300, "%00", "\u202e", "\n"]
values = st.one_of(st.sampled_from(SPECIAL), st.text(max_size=40),
                   st.floats(allow_nan=True, allow_infinity=True).map(repr),
                   st.integers(min_value=-10**30, max_value=10**30).map(str))
KNOWN = sorted({p.short for n in ("default", "classic-inversion") for p in codec_for(n).params} | VIEW | {"preset"})
keys = st.one_of(st.sampled_from(KNOWN), st.text(min_size=1, max_size=30))
queries = st.dictionaries(keys, st.lists(values, min_size=1, max_size=3), max_size=8)
UNESCAPED = re.compile(r"(?<!\\)[<>\[\]`*_]")


@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(queries)
def test_fuzz_the_link_decoder(query):
    out = check(query)
    assert out.preset in PRESETS
    c = codec_for(out.preset)
    for key, vals in query.items():
        if key == "preset":
            assert out.preset == vals[-1] or ("preset" in out.drop and named("preset", out.notes))
            continue
        if key in out.values:
            p = c.by_short[key]
            assert codec.parse(p, codec.fmt_value(p, out.values[key])) == out.values[key]  # valid and in range
            if p.kind in ("int", "float"):
                assert p.lo <= out.values[key] <= p.hi
        elif key in out.view:
            assert key in VIEW
        else:
            assert key in out.drop and named(key, out.notes), (key, out.notes)
        if len(vals) > 1 and key not in out.drop:
            assert named(key, out.notes) and out.set[key] == vals[-1]
    assert set(out.drop) <= set(query)
    for note in out.notes:
        assert not UNESCAPED.search(note), note


@settings(max_examples=1500, deadline=None)
@given(st.dictionaries(st.sampled_from(sorted(views.VIEW_KEYS["timeline"]) + ["zz"]), values, max_size=6))
def test_fuzz_the_view_decoder(texts):
    params = views.timeline_params(["P0", "P1", "P2"], 120.0, 300)
    defaults = {"tl_show": "story", "tl_cls": ["P0", "P1", "P2"], "tl_from": 0.0, "tl_to": 120.0, "tl_req": -1}
    got, notes = links.check_view(params, defaults, texts)
    for key in texts:
        assert key in got or named(key, notes)
    for note in notes:
        assert not UNESCAPED.search(note), note
