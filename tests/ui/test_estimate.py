"""Each lesson's numeric prediction: asked before the reveal, scored against the seed band that
`python -m ui.teach.lesson_evidence` stores beside the claims (min–max over 20 seeds at the shipped load)."""

from __future__ import annotations

import pytest

from engine.sweeps import story as stories
from ui.teach import estimate as est
from ui.teach import lesson_evidence, lessons

DATA = lesson_evidence.read()
LESSONS = lessons.all_lessons()
PATHS = {lessons.slug_of(p): p for p in sorted(lessons.LESSON_DIR.glob("*.md"))}


@pytest.mark.parametrize("guess, side, factor", [
    (5.0, "inside", 1.0), (2.0, "inside", 1.0), (8.0, "inside", 1.0),
    (1.0, "low", 2.0), (0.5, "low", 4.0), (16.0, "high", 2.0), (80.0, "high", 10.0),
    (0.0, "low", None), (-3.0, "low", None),
])
def test_a_guess_is_scored_against_the_band(guess, side, factor):
    s = est.score(guess, 2.0, 8.0)
    assert s.side == side and s.inside == (side == "inside")
    assert s.factor == (pytest.approx(factor) if factor is not None else None)


def test_the_score_in_words():
    ratio = {"run": 1, "metric": "P0.ttft_p99", "over": 0}
    band = {"min": 2.0, "max": 8.0, "median": 4.0, "seeds": 20}
    assert "Inside the band" in est.words(ratio, 3.0, band)
    assert "×3 too high" in est.words(ratio, 24.0, band) and "×2 and ×8" in est.words(ratio, 24.0, band)
    assert "×4 too low" in est.words(ratio, 0.5, band)
    secs = {"run": 0, "metric": "P0.ttft_p99"}
    assert est.kind(secs) == "seconds" and est.kind(ratio) == "ratio"
    assert est.kind({"run": 0, "metric": "P0.slo_attainment"}) == "share"
    assert est.from_input({"run": 0, "metric": "P0.slo_attainment"}, 90) == pytest.approx(0.9)
    assert "s" in est.words(secs, 1.0, band) and "Below the band" in est.words(secs, 0.0, band)


def test_every_lesson_asks_for_a_number():
    for lesson in LESSONS:
        assert lesson.estimate, lesson.slug
        labels = [label for label, _o in lesson.runs]
        assert lessons.metric_label(lesson.estimate["metric"]) in est.question(lesson.estimate, labels)


@pytest.mark.parametrize("bad", [
    {"run": 9, "metric": "P0.ttft_p99"}, {"metric": "P0.ttft_p99"}, {"run": 0, "metric": "P0.ttft_p99", "over": 0},
    {"run": 0, "metric": "P0.ttft_p99", "unit": "s"}, [1, 2], {"run": 0, "metric": ""},
])
def test_a_malformed_estimate_is_refused(bad):
    with pytest.raises(ValueError, match="estimate"):
        lessons._estimate(bad, 2)


def test_every_lessons_band_is_in_the_audit_as_the_lesson_is_now():
    for slug, path in PATHS.items():
        lesson = lessons.parse(path)
        band = lesson_evidence.estimate_band(slug, lesson.estimate, DATA)
        assert band is not None, f"{slug}: run python -m ui.teach.lesson_evidence"
        assert band["fingerprint"] == lesson_evidence.estimate_fingerprint(stories.of_lesson(path), lesson.estimate)
        assert band["seeds"] >= 20 and band["band"] == "min-max"
        got = [v for v in band["values"] if v is not None]
        assert len(got) == band["seeds"] and band["min"] == min(got) and band["max"] == max(got)
    changed = {**LESSONS[0].estimate, "metric": "P0.ttft_p50"}
    assert lesson_evidence.estimate_band(LESSONS[0].slug, changed, DATA) is None


def test_every_number_to_predict_varies_over_the_seeds():
    """A band of zero width (the same value on every seed: two runs that never differ) scores a
    guess against one point, not a spread; a lesson asks for a number the seeds move."""
    for slug, path in PATHS.items():
        band = lesson_evidence.estimate_band(slug, lessons.parse(path).estimate, DATA)
        assert band["max"] > band["min"], f"{slug}: the band is {band['min']} on every seed"


@pytest.mark.parametrize("slug", ["primer", "no-alarm"])
def test_the_band_holds_the_run_shown(slug):
    """The lesson's own seed is the band's first: its value on the run shown is that seed's value."""
    from ui.runtime import runs

    lesson = next(x for x in LESSONS if x.slug == slug)
    results = [runs.result(sc) for sc in lesson.scenarios()]
    band = lesson_evidence.estimate_band(slug, lesson.estimate, DATA)
    value = est.actual(lesson.estimate, results)
    assert value == pytest.approx(band["values"][0])
    assert band["min"] <= value <= band["max"]


SWEEP = {"kind": "sweep", "knob": "reserve", "run": 0, "values": [0, 512, 1024, 2048]}


@pytest.mark.parametrize("raw, chart", [
    ({"metric": "P0.ttft_p99", "at": [0, 1024]}, {"kind": "bars"}),
    ({"metric": "P0.ttft_p99", "at": [0, 999]}, SWEEP),
    ({"metric": "P0.ttft_p99", "at": [0]}, SWEEP),
    ({"metric": "served_tok_s", "at": [0, 1024]}, SWEEP),
    ({"metric": "P0.ttft_p99", "at": [0, 1024], "extra": 1}, SWEEP),
])
def test_a_malformed_curve_is_refused(raw, chart):
    with pytest.raises(ValueError, match="curve"):
        lessons._curve(raw, chart)


def test_the_curve_is_scored_point_by_point():
    curve = {"metric": "P0.ttft_p99", "at": [0, 1024, 2048]}
    bands = {"points": [{"min": 0.8, "max": 1.0, "median": 0.9}, {"min": 0.6, "max": 0.8, "median": 0.7},
                        {"min": 0.4, "max": 0.5, "median": 0.45}]}
    pts = est.curve_points(curve, bands, [0.9, 2.4, None])
    assert [p["score"].side if p["score"] else None for p in pts] == ["inside", "high", None]
    assert pts[1]["score"].factor == pytest.approx(3.0)
    assert est.curve_words(pts, 20) == "Your curve: 1 of 2 points inside the band of 20 seeds."


def test_every_curve_is_the_sweeps_own_points_and_in_the_audit():
    """A drawn point is scored against the runs the chart's sweep makes at that value (the same
    scenario, seed for seed), and the audit holds the lesson's curve as it is now."""
    from ui.charts.lesson_charts import sweep_plan

    curved = [x for x in LESSONS if x.curve]
    assert curved, "at least one sweep lesson draws a curve"
    for lesson in curved:
        story = lesson_evidence.curve_story(stories.of_lesson(PATHS[lesson.slug]), lesson.chart, lesson.curve)
        seed = stories.seeds_of(story, 1)[0]
        keys = {v: k for v, _s, k in sweep_plan(lesson).points}
        assert [stories.scenario_key(story, i, seed, 1.0) for i in range(len(story.runs))] == \
            [keys[float(v)] for v in lesson.curve["at"]]
        bands = lesson_evidence.curve_bands(lesson.slug, lesson.curve, DATA)
        assert bands is not None, f"{lesson.slug}: run python -m ui.teach.lesson_evidence"
        assert bands["fingerprint"] == lesson_evidence.fingerprint(story) and bands["seeds"] >= 20
        assert [p["at"] for p in bands["points"]] == lesson.curve["at"]
        for p in bands["points"]:
            got = [v for v in p["values"] if v is not None]
            assert len(got) == bands["seeds"] and p["min"] == min(got) <= p["median"] <= p["max"] == max(got)
