"""Text helpers and the workshop lessons (whose claims are checked against the engine)."""

import re

import pytest

from engine import load, simulate
from engine.config.scenario import SCENARIO_DIR, load_raw
from tests.live_links import live_links
from ui.frame import codec, untrusted
from ui.panels import text
from ui.panels.variants import baseline, has_remedies, remedies
from ui.teach import lessons


def test_plain_escapes_markdown_and_html():
    s = untrusted.plain("[click](http://x) <b>hi</b> **bold** `code`")
    for ch in "[]()<>*`":
        assert f"\\{ch}" in s


HOSTILE_TEXT = ["https://evil.example/login=1", "see http://evil.example", "HTTPS://EVIL.EXAMPLE/x",
                "www.evil.example/a", "ceo@evil.example", "mailto:ceo@evil.example", "xmpp:ceo@evil.example", "[x](https://evil.example)",
                "<https://evil.example>", "<a href='https://evil.example'>x</a>", "![i](https://evil.example/i.png)",
                "policy=https://evil.example/x", "a https%3A//evil.example b"]


@pytest.mark.parametrize("hostile", HOSTILE_TEXT)
def test_plain_text_never_becomes_a_live_link(hostile):
    """Escaping alone leaves GFM's autolink literals live (the checker finds them in the escaped
    text, as remark-gfm does in the browser); the word joiners stop them."""
    escaped_only = untrusted._MD_SPECIAL.sub(r"\\\1", hostile)
    if "%3A" not in hostile:
        assert live_links(escaped_only), escaped_only
    assert live_links(untrusted.plain(hostile)) == []
    assert live_links(untrusted.quoted(hostile)) == []
    assert untrusted.plain(hostile).replace(untrusted.WORD_JOINER, "").replace("\\", "") == hostile.replace("\\", "")


@pytest.mark.parametrize("x, want", [(0.1534, "0.153 s"), (1.6801, "1.68 s"), (15.91, "15.9 s"), (124.2, "124 s"),
                                     (None, "–")])
def test_seconds_three_significant_digits(x, want):
    assert text.seconds(x) == want


def cls(**kw):
    base = {"n": 10, "rejected": 0, "unfinished": 0, "ttft_p50": 1.0, "ttft_p99": 2.0, "tpot_p99": 0.05,
            "slo_attainment": 0.9, "inversion_s": 0.0, "blocked_s": 3.0, "e2e_p99": 9.0}
    return {**base, **kw}


def test_kpi_deltas_use_ascii_sign_and_hide_no_change():
    k = {x.label: x for x in text.class_kpis("P0", cls(), cls(ttft_p99=3.0, slo_attainment=0.8))}
    assert list(k) == ["P0 · P99 TTFT", "P0 · P50 TTFT", "P0 · SLO met", "P0 · Inversion", "P0 · Not served"]
    assert k["P0 · P99 TTFT"].delta == "-1.00 s" and k["P0 · P99 TTFT"].delta_color == "inverse"
    assert k["P0 · SLO met"].delta == "+10 pts"
    assert k["P0 · Inversion"].delta is None
    assert k["P0 · Not served"].value == "0" and k["P0 · Not served"].delta is None


def test_a_class_that_lost_requests_never_shows_an_improvement():
    """A reject-mode cap: 3 of 3 documents rejected; P99 'drops' because nothing was served."""
    cur = cls(n=3, rejected=3, ttft_p50=None, ttft_p99=None, slo_attainment=None, blocked_s=0.0)
    base = cls(n=3, ttft_p99=40.0)
    k = text.class_kpis("P2", cur, base)
    for kpi in k[:-1]:
        assert kpi.delta == "3 of 3 rejected" and kpi.delta_color == "orange" and kpi.arrow == "off", kpi
    assert k[-1].label == "P2 · Not served" and k[-1].value == "3" and k[-1].delta == "+3"
    assert "3 rejected" in k[-1].help
    half = text.class_kpis("P2", cls(n=4, rejected=2, ttft_p99=1.0), cls(n=4, ttft_p99=40.0))
    assert half[0].value == "1.00 s" and half[0].delta == "2 of 4 rejected"
    late = text.class_kpis("P1", cls(unfinished=5), cls())
    assert late[0].delta == "5 of 10 unfinished"
    assert text.class_kpis("P2", cur, cur)[0].delta is None  # same losses as the baseline: no warning


def test_what_happened_says_rejections_are_not_an_improvement():
    res = simulate(load("default", {"classes.P0.caps.max_prompt_tokens": 1000}))
    base = simulate(load("default")).summary
    para = text.what_happened(res.summary, res.waits, res.holders, base)
    assert "rejected (not an improvement)" in para and "were rejected by a cap" in para


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


def test_baseline_is_the_same_traffic_without_any_remedy():
    sc = load("default", {"mitigations.p0_token_reserve": 512, "mitigations.alert_after_s": 2.0,
                          "classes.P2.caps.max_prompt_tokens": 4096, "scheduler.policy": "priority"})
    b = baseline(sc)
    assert b.mitigations.p0_token_reserve == 0 and b.classes["P2"].caps.max_prompt_tokens is None
    assert b.scheduler.policy == "fcfs" and b.mitigations.alert_after_s == 2.0
    assert b.classes["P1"].arrival == sc.classes["P1"].arrival and b.seed == sc.seed
    assert has_remedies(sc) and not has_remedies(b)
    assert remedies(sc) == ["policy priority", "token reserve 512", "caps on P2"]


@pytest.mark.parametrize("name", ["preempt", "separate-replicas", "rescue-buffer", "kv-cap", "inheritance", "aging",
                                  "gateway-priority", "sglang-engine"])
def test_every_remedy_preset_has_a_baseline_without_its_remedy(name):
    sc = load(name)
    b = baseline(sc)
    assert has_remedies(sc) and remedies(sc)
    def physics(x):  # the key without the scenario's name, title and description
        return x.model_copy(update={"name": "", "title": "", "description": ""}).key()

    assert physics(b) == physics(load("classic-inversion"))


def test_gateway_priority_is_a_remedy_and_a_switched_off_gateway_is_not():
    assert remedies(load("gateway-priority")) == ["gateway priority"]
    off = load("gateway-priority", {"gateway.enabled": False})
    assert not has_remedies(off) and baseline(off).gateway == off.gateway


def test_sglang_engine_baseline_is_vllm_fcfs():
    sc = load("sglang-engine")
    assert baseline(sc).scheduler.engine == "vllm" and remedies(sc) == ["sglang engine", "policy priority"]


def test_separate_replicas_baseline_is_one_shared_engine():
    b = baseline(load("separate-replicas"))
    assert b.replicas.count == 1 and b.replicas.routing == "shared" and b.replicas.pin is None


def test_lessons_parse_in_order():
    items, broken = lessons.safe_lessons()
    assert broken == []
    assert [lesson.slug for lesson in items] == [
        "primer", "inversion-appears", "fill-what-fits", "no-alarm", "why-is-p0-waiting", "inheritance-disappoints",
        "reserve-when-budget-binds", "kv-reserve", "kv-caps", "cap-long-requests", "separate-replicas",
        "when-not-to-prioritise"]
    for lesson in items:
        assert 0 <= lesson.answer < len(lesson.options) and lesson.claims and lesson.reveal
        assert lesson.goal and 3 <= lesson.minutes <= 8
        assert 1 <= len(lesson.prompts) <= max(1, lesson.minutes // 3)  # at most one prompt per three minutes
        assert lesson.chart["kind"] in lessons.CHARTS
        for claim in lesson.claims:
            assert 0 <= claim["run"] < len(lesson.runs) and claim["op"] in lessons.OPS
            assert ("other" in claim) != ("value" in claim)
        for name in lesson.show:
            assert name in lessons.METRIC_LABELS
    assert 45 <= lessons.total_minutes(items, recap=5) + 3 <= 60  # a 45-60 minute workshop, introduction included


@pytest.mark.parametrize("lesson", lessons.all_lessons(), ids=lambda lesson: lesson.slug)
def test_lesson_claims_hold_and_load_reproduces_its_scenario(lesson):
    results = [simulate(sc) for sc in lesson.scenarios()]
    for claim in lesson.claims:
        ok, sentence = lessons.check(claim, results)
        assert ok, f"{lesson.slug}: {sentence}"
    filled = lessons.fill(lesson.reveal, results)  # every number in the reveal comes from a run
    assert lessons.SLOT.findall(lesson.reveal) and "{" not in filled and "–" not in filled, filled
    c = codec.Codec(load_raw(lesson.scenario))
    assert c.scenario({**c.defaults, **lesson.load_values()}).key() == lesson.scenarios()[-1].key()


def test_a_claim_that_does_not_hold_says_so():
    lesson = lessons.all_lessons()[0]
    results = [simulate(sc) for sc in lesson.scenarios()]
    ok, sentence = lessons.check({"run": 0, "metric": "P0.ttft_p99", "op": "<", "value": 0.001}, results)
    assert not ok and sentence.startswith("P0 P99 TTFT in run 1: ") and sentence.endswith("— below 0.001 s")
    ok, sentence = lessons.check({"run": 0, "metric": "P0.ttft_p99", "op": ">=", "other": 0, "factor": 2}, results,
                                 ["FCFS"])
    assert not ok and "at least 2 × FCFS’s" in sentence


def test_fill_takes_the_reveals_numbers_from_the_runs():
    lesson = lessons.all_lessons()[0]
    results = [simulate(sc) for sc in lesson.scenarios()]
    p99 = results[0].summary["classes"]["P0"]["ttft_p99"]
    assert lessons.fill("P99 {P0.ttft_p99@1}, ratio {P0.ttft_p99@1/1}.", results) == \
        f"P99 {text.seconds(p99)}, ratio ×1."
    assert lessons.fill("{P0.slo_attainment@1}", results) == text.percent(results[0].summary["classes"]["P0"]
                                                                          ["slo_attainment"])


def test_a_reveal_slot_naming_a_missing_run_is_refused(tmp_path):
    src = lessons.LESSON_DIR / "01-inversion-appears.md"
    bad = tmp_path / "01-bad.md"
    bad.write_text(src.read_text().replace("{P0.ttft_p99@1}", "{P0.ttft_p99@9}"))
    with pytest.raises(ValueError, match="names a run"):
        lessons.parse(bad)


@pytest.mark.parametrize("chart", ["{kind: bars, run: 7}", "{kind: bars, pick: -1}", "{kind: bars, runs: [0, 9]}",
                                   "{kind: bars, runs: []}"])
def test_a_chart_naming_a_missing_run_is_refused(tmp_path, chart):
    src = (lessons.LESSON_DIR / "05-inheritance-disappoints.md").read_text()
    bad = tmp_path / "05-bad.md"
    bad.write_text(re.sub(r"^chart: .*$", f"chart: {chart}", src, count=1, flags=re.M))
    with pytest.raises(ValueError, match="chart: "):
        lessons.parse(bad)


def test_a_share_of_the_wait_reads_as_a_percentage():
    """`wait_share.<reason>` is a share (L4's and L1's reveals): 53%, not "0.5"."""
    assert lessons.fmt_metric("wait_share.kv_short", 0.53) == text.percent(0.53) == "53%"
    assert lessons.metric_label("wait_share.kv_short") == "Share of P0's wait short of KV blocks"


NUMBER = re.compile(r"\d[\d,.]*")


@pytest.mark.parametrize("lesson", lessons.all_lessons(), ids=lambda lesson: lesson.slug)
def test_no_number_in_a_reveal_is_typed_by_hand(lesson):
    """A number in a reveal is either filled from the runs ({metric@run}) or an input the lesson
    states (its question, body, runs or scenario file: 2048 tokens, a 1 s SLO) — never an outcome."""
    inputs = " ".join([lesson.question, lesson.body, repr(lesson.runs),
                       (SCENARIO_DIR / f"{lesson.scenario}.yaml").read_text()])
    given = {n.rstrip(".,").replace(",", "") for n in NUMBER.findall(inputs)} | {"1", "0"}
    bare = re.sub(r"\bP\d\b", "", lessons.SLOT.sub("", lesson.reveal))
    typed = {n.rstrip(".,").replace(",", "") for n in NUMBER.findall(bare)} - given
    assert not typed, f"{lesson.slug}: numbers typed by hand in the reveal: {sorted(typed)}"


@pytest.mark.parametrize("lesson", lessons.all_lessons(), ids=lambda lesson: lesson.slug)
def test_a_translated_reveal_fills_the_same_numbers(lesson):
    from ui.frame import i18n

    try:
        i18n.set_language("zh")
        zh = lessons.localized(lesson)
    finally:
        i18n.set_language("en")
    assert zh.reveal != lesson.reveal
    assert sorted(lessons.SLOT.findall(zh.reveal)) == sorted(lessons.SLOT.findall(lesson.reveal))


def test_the_article_is_quoted_exactly():
    """Lesson 6 quotes the seed article's sentence on the reserve's cost word for word."""
    quote = "batch大小降低到 87% 和降低到 92% 的时候,吞吐差别近乎可见"
    lesson = {x.slug: x for x in lessons.all_lessons()}["reserve-when-budget-binds"]
    assert f"“{quote}”" in lesson.body
    article = (lessons.LESSON_DIR.parent.parent / "shared" / "seed")
    for path in article.glob("*.txt") if article.exists() else ():
        if "87%" in path.read_text(encoding="utf-8"):
            assert quote in path.read_text(encoding="utf-8")
