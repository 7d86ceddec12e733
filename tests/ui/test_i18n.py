"""The catalogues: complete in both languages, in step with the code, placeholders intact, and the
Chinese really Chinese; the language is per thread and falls back to English."""

from __future__ import annotations

import re
import string
import threading

import pytest
from babel.messages.pofile import read_po

from engine import load, simulate
from ui.frame import i18n, i18n_tool
from ui.frame.i18n import _
from ui.panels import text, vocab
from ui.teach import lessons

CJK = re.compile(r"[\u4e00-\u9fff]")
# Terms an engineer writes the same in Chinese: a message made only of these needs no translation
SAME = re.compile(r"\{[^{}]*\}|%\{\{[^{}]*\}\}|[\W\d_]|"
                  r"\b(?:P\d+|TTFT|TPOT|GPU|SLO|KV|vLLM|FCFS|tok|s|decode|prefill|[Cc]ache|tokens?)\b")


def catalog(lang):
    with i18n.po_path(lang).open("rb") as f:
        return {m.id: m for m in read_po(f, locale=lang) if m.id}


def fields(s: str) -> set[str]:
    return {name for _lit, name, _spec, _conv in string.Formatter().parse(s) if name is not None}


def test_the_catalogues_are_complete_and_in_step_with_the_code():
    """Every message the code, lessons, scenarios and wait reasons use exists in English and Chinese
    (python -m ui.frame.i18n_tool update after adding one)."""
    assert i18n_tool.problems() == []


@pytest.mark.parametrize("lang", list(i18n.LANGUAGES))
def test_every_translation_keeps_its_placeholders_and_markup(lang):
    for key, m in catalog(lang).items():
        assert i18n_tool.translated(m), key
        mids = key if isinstance(key, tuple) else (key,)
        strs = m.string if isinstance(m.string, tuple) else (m.string,)
        for mid in mids:
            for s in strs:
                assert fields(s) == fields(mid), (mid, s)
                for mark in ("**", "`", "%{{"):
                    assert s.count(mark) == mid.count(mark), (mark, mid, s)
                assert s.count("\n- ") == mid.count("\n- "), mid  # list items stay list items


def test_the_chinese_is_chinese():
    for key, m in catalog("zh").items():
        mid = key[0] if isinstance(key, tuple) else key
        if isinstance(m.string, tuple):
            assert CJK.search(m.string[0]), key
            continue
        if m.string == mid:
            assert not re.search(r"[A-Za-z]{3,}", SAME.sub("", mid)), f"untranslated: {mid!r}"
        else:
            assert CJK.search(m.string) or not re.search(r"[A-Za-z]{3,}", SAME.sub("", mid)), mid


def test_the_language_is_per_thread_and_unknown_codes_fall_back_to_english():
    seen = {}

    def worker(code):
        i18n.set_language(code)
        seen[code] = _("Run")

    threads = [threading.Thread(target=worker, args=(c,)) for c in ("zh", "en", "fr")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == {"zh": "运行", "en": "Run", "fr": "Run"}
    assert i18n.set_language(None) == "en" and _("Run") == "Run"


def test_lessons_and_what_happened_come_out_in_chinese():
    try:
        i18n.set_language("zh")
        for lesson in lessons.all_lessons():
            zh = lessons.localized(lesson)
            for t in (zh.title, zh.goal, zh.question, zh.reveal, zh.body, *zh.options, *zh.prompts):
                assert CJK.search(t), (lesson.slug, t)
            assert zh.claims == lesson.claims and [o for _l, o in zh.runs] == [o for _l, o in lesson.runs]
        res = simulate(load("classic-inversion"))
        para = text.what_happened(res.summary, res.waits, res.holders)
        assert "最重要的类" in para and "反转" in para and "requests" not in para
        story = text.request_story(res.requests.loc[int(res.waits["request"].iloc[0])], res.waits, res.holders)
        assert all(CJK.search(line) for line in story)
    finally:
        i18n.set_language("en")
    assert lessons.localized(lessons.all_lessons()[0]).title == "What happens in one engine step?"


def test_markdown_paragraphs_are_the_units_of_translation():
    assert i18n.paragraphs("a\nb\n\n\n- x\n- y\n") == ["a\nb", "- x\n- y"]
    assert i18n.translate_markdown("Not a message\n\nAlso not") == "Not a message\n\nAlso not"


CJK_CHAR = r"[\u3400-\u9fff\u3000-\u303f\uff00-\uffef]"
ASCII_BESIDE_CJK = re.compile(rf"(?<={CJK_CHAR})[,:;?!(]|[,:;?!)](?={CJK_CHAR})|(?<={CJK_CHAR}) [,:;]")
RAW_CODE = re.compile(r"(?<![`{\w])(kv_short|token_budget|max_seqs|head_of_line|class_cap)(?![`}\w])")


def test_the_chinese_catalogue_uses_full_width_punctuation_and_no_raw_codes():
    """Chinese text takes full-width commas, colons and brackets beside Chinese characters, and
    names wait reasons in words (a code may appear in backticks, as code). Placeholders, code
    spans, Markdown links, formulas such as max(a, b) and quotations (the article's own words,
    quoted exactly) are left out of the check."""
    from babel.messages.pofile import read_po

    with i18n.po_path("zh").open("rb") as f:
        cat = read_po(f)
    bad = []
    for m in cat:
        for t in ([m.string] if isinstance(m.string, str) else list(m.string)):
            if not t:
                continue
            bare = re.sub(r"\{[^}]*\}|`[^`]*`|\]\([^)]*\)|[A-Za-z_]+\([^)]*\)|“[^”]*”", "", t)  # … and quotes
            if ASCII_BESIDE_CJK.search(bare) or RAW_CODE.search(bare):
                bad.append(t[:80])
    assert not bad, bad


def test_a_chinese_timeline_legend_names_reasons_in_words():
    try:
        i18n.set_language("zh")
        assert vocab.look("head_of_line").name == "队首阻塞"
    finally:
        i18n.set_language("en")
    assert vocab.look("head_of_line").name == "head_of_line"
