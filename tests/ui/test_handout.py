"""The handouts ask each lesson's number too: the participants' copy with a blank to fill in (a row of
blanks for a drawn curve) and no band; the presenter's copy with the band it is scored against."""

from __future__ import annotations

from html import unescape

import pytest

from engine import simulate
from ui.teach import handout, lesson_evidence, lessons
from ui.teach.workshop import numbers_asked

LESSONS = lessons.all_lessons()


def labels(lesson) -> list[str]:
    return [label for label, _o in lesson.runs]


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda x: x.slug)
def test_the_participants_copy_asks_every_lessons_number_without_its_answer(lesson):
    asked = numbers_asked(lesson, labels(lesson))
    assert len(asked) == (lesson.estimate is not None) + (lesson.curve is not None) >= 1
    html = unescape(handout.lesson_html(1, lesson, 0, None, None, [], None, answers=False, asked=asked))
    assert "Estimate:" in html and "Your number:" in html
    assert "Over 20 seeds" not in html and "On the run shown" not in html and "median" not in html
    run = labels(lesson)[lesson.estimate["run"]]
    assert f"“{run}”" in html and lessons.metric_label(lesson.estimate["metric"]) in html
    assert html.index("Estimate:") > html.index(lesson.options[-1])  # after the question it belongs to


def test_a_drawn_curve_is_a_row_of_blanks_for_participants_and_its_bands_for_the_presenter():
    lesson = next(x for x in LESSONS if x.curve is not None)
    asked = numbers_asked(lesson, labels(lesson))[-1]
    assert asked.at == tuple(f"{v:,g}" for v in lesson.curve["at"]) and not asked.answer
    mine = handout.number_html(asked, answers=False)
    assert "Draw your curve:" in mine and mine.count("class='blank'") == len(asked.at)
    bands = lesson_evidence.curve_bands(lesson.slug, lesson.curve)
    full = numbers_asked(lesson, labels(lesson), results=[simulate(sc) for sc in lesson.scenarios()], done={})
    theirs = unescape(handout.number_html(full[-1], answers=True))
    assert "class='blank'" not in theirs and len(full[-1].answer) == len(asked.at)
    first = bands["points"][0]
    assert f"{lessons.fmt_metric('P0.ttft_p99', first['min'])}–{lessons.fmt_metric('P0.ttft_p99', first['max'])}" \
        in theirs


def test_the_presenters_copy_gives_the_band_and_the_run_shown():
    lesson = next(x for x in LESSONS if x.slug == "primer")
    results = [simulate(sc) for sc in lesson.scenarios()]
    asked = numbers_asked(lesson, labels(lesson), results)
    html = unescape(handout.lesson_html(1, lesson, 0, lessons.reveal_table(lesson, results), None, [], None,
                                        answers=True, asked=asked))
    band = lesson_evidence.estimate_band(lesson.slug, lesson.estimate)
    assert "Estimate:" in html and "Your number:" not in html
    assert "Over 20 seeds it lay between" in html and lessons.fmt_metric("P0.ttft_p99", band["min"]) in html
    assert "On the run shown:" in html
