"""Lesson claims over seeds: the Workshop quotes each claim's record from `lessons/evidence.json`
(the lessons' runs on 20 seeds × load ×0.9, ×1, ×1.1), so that file must be the audit of the
lessons as they are now, and every claim in it must hold on all seeds but one in twenty."""

import json

import pytest

from engine.sweeps import story as stories
from engine.sweeps.sweep_exec import LocalBackend
from ui.teach import lesson_evidence, lessons

DATA = lesson_evidence.read()
LESSONS = lessons.all_lessons()
PATHS = {lessons.slug_of(p): p for p in sorted(lessons.LESSON_DIR.glob("*.md"))}


def test_the_audit_is_of_every_lesson_as_it_is_now():
    assert DATA["seeds"] >= 20 and DATA["scales"] == [0.9, 1.0, 1.1]
    assert set(DATA["lessons"]) == set(PATHS)
    for slug, path in PATHS.items():
        assert DATA["lessons"][slug]["fingerprint"] == lesson_evidence.fingerprint(stories.of_lesson(path)), \
            f"{slug} or its scenario changed since the audit: run python -m ui.teach.lesson_evidence"


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lesson: lesson.slug)
def test_every_claim_a_lesson_makes_holds_across_seeds_and_load(lesson):
    for claim, ev in zip(lesson.claims, lesson_evidence.of_lesson(lesson.slug, lesson.claims, DATA)):
        assert ev is not None and ev.seeds >= 20 and set(ev.holds) == {"0.9", "1", "1.1"}
        if claim.get("edge"):  # stated as an edge (the lesson says why): must still hold on most seeds at ×1
            assert lesson.edge and 2 * ev.holds["1"] > ev.seeds, (lesson.slug, claim, ev)
        else:
            assert ev.worst >= stories.required(ev.seeds), (lesson.slug, claim, ev)


def test_a_changed_claim_has_no_evidence_until_the_audit_reruns():
    lesson = LESSONS[0]
    changed = ({**lesson.claims[0], "value": 99.0},) + lesson.claims[1:]
    ev = lesson_evidence.of_lesson(lesson.slug, changed, DATA)
    assert ev[0] is None and all(e is not None for e in ev[1:])
    assert lesson_evidence.of_lesson("no-such-lesson", lesson.claims, DATA) == [None] * len(lesson.claims)


def test_a_broken_audit_file_reads_as_none(tmp_path):
    bad = tmp_path / "evidence.json"
    bad.write_text("{not json")
    assert lesson_evidence.read(bad) == {}
    bad.write_text(json.dumps([1, 2]))
    assert lesson_evidence.read(bad) == {}


def test_the_lessons_claims_hold_on_the_next_seeds_too():
    """The live check behind the file, smaller: every lesson on its seed and the next two at the
    shipped load (the full audit is `python -m ui.teach.lesson_evidence`, about five minutes)."""
    with LocalBackend() as backend:
        audits = stories.audit([stories.of_lesson(p) for p in PATHS.values()], 3, (1.0,), backend=backend)
    weak = [f"{a.story.name}: {stories.claims.describe(a.story.claims[i], a.story.labels)}: {t}"
            for a in audits for i, _x, t in a.weak()]
    assert not weak, weak


def test_the_readme_quotes_the_audit_as_it_is():
    readme = (lessons.LESSON_DIR.parent / "README.md").read_text(encoding="utf-8")
    assert lesson_evidence.markdown(DATA) in readme, \
        "paste python -m ui.teach.lesson_evidence --markdown into the README"
