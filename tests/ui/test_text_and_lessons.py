"""Text helpers and the workshop lessons (whose claims are checked against the engine)."""

import pytest

from engine import load, simulate
from engine.scenario import load_raw
from ui import codec, lessons, text
from ui.variants import baseline, has_mitigations, knee, sweep_frame, sweep_points


def test_plain_escapes_markdown_and_html():
    s = text.plain("[click](http://x) <b>hi</b> **bold** `code`")
    for ch in "[]()<>*`":
        assert f"\\{ch}" in s


@pytest.mark.parametrize("x, want", [(0.1534, "0.153 s"), (1.6801, "1.68 s"), (15.91, "15.9 s"), (124.2, "124 s"),
                                     (None, "–")])
def test_seconds_three_significant_digits(x, want):
    assert text.seconds(x) == want


def test_kpi_deltas_use_ascii_sign_and_hide_no_change():
    cur = {"ttft_p50": 1.0, "ttft_p99": 2.0, "tpot_p99": 0.05, "slo_attainment": 0.9, "inversion_s": 0.0,
           "blocked_s": 3.0}
    base = {**cur, "ttft_p99": 3.0, "slo_attainment": 0.8}
    k = {x.label: x for x in text.class_kpis("P0", cur, base)}
    assert k["P0 · P99 TTFT"].delta == "-1.00 s"
    assert k["P0 · SLO met"].delta == "+10 pts"
    assert k["P0 · Inversion time"].delta is None


def test_what_happened_names_reasons_and_holders():
    res = simulate(load("classic-inversion"))
    para = text.what_happened(res.summary, res.waits, res.holders)
    assert "P0" in para and "blocked" in para and "P2" in para and "inversion" in para


def test_request_story_follows_the_waits():
    res = simulate(load("classic-inversion"))
    rid = int(res.waits[res.waits["priority"] == 0]["request"].iloc[0])
    story = text.request_story(res.requests.loc[rid], res.waits, res.holders)
    assert story[0].startswith("t = ") and f"#{rid}" in story[0]
    assert sum("waits" in s for s in story) == (res.waits["request"] == rid).sum()


def test_baseline_drops_mitigations_and_caps_only():
    sc = load("default", {"mitigations.p0_token_reserve": 512, "mitigations.alert_after_s": 2.0,
                          "classes.P2.caps.max_prompt_tokens": 4096, "scheduler.policy": "priority"})
    b = baseline(sc)
    assert b.mitigations.p0_token_reserve == 0 and b.classes["P2"].caps.max_prompt_tokens is None
    assert b.scheduler.policy == "priority" and b.mitigations.alert_after_s == 2.0
    assert has_mitigations(sc) and not has_mitigations(b)


def test_sweep_points_and_knee():
    sc = load("default")
    pts = sweep_points(sc, "reserve", [0, 512], [1, 2])
    assert len(pts) == 4 and len({p[2] for p in pts}) == 4
    fake = [{"throughput_tok_s": 1.0, "classes": {"P0": {"ttft_p99": v, "slo_attainment": 1.0}}}
            for v in (3.0, 2.0, 0.5, 0.9)]
    frame = sweep_frame(pts, fake)
    assert knee(frame, "P0", 1.0, harder_when_larger=False) == 512
    assert knee(frame, "P0", 0.1, harder_when_larger=False) is None


def test_lessons_parse_in_order():
    items, broken = lessons.safe_lessons()
    assert broken == []
    assert [l.title for l in items][0] == "Inversion appears" and len(items) == 6
    for l in items:
        assert 0 <= l.answer < len(l.options) and l.claims and l.reveal


@pytest.mark.parametrize("lesson", lessons.all_lessons(), ids=lambda l: l.slug)
def test_lesson_claims_hold_and_load_reproduces_its_scenario(lesson):
    results = [simulate(sc) for sc in lesson.scenarios()]
    for claim in lesson.claims:
        ok, sentence = lessons.check(claim, results)
        assert ok, f"{lesson.slug}: {sentence}"
    raw = load_raw(lesson.scenario)
    values = {**codec.preset_values(raw), **lesson.load_values()}
    assert codec.scenario(raw, values).key() == lesson.scenarios()[-1].key()
