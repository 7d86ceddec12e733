"""One table per concept: every wait reason has a colour, a short phrase and the engine's sentence;
every page reads them from there."""

import re

from engine.core.reasons import EXPLAIN, Reason
from ui.charts import figures
from ui.panels import text, vocab


def test_every_reason_has_every_entry():
    assert set(vocab.REASONS) == set(Reason)
    for r, look in vocab.REASONS.items():
        assert re.fullmatch(r"#[0-9a-f]{6}", look.color), r
        assert look.short and len(look.short) < 50, r
        assert look.explain == EXPLAIN.get(r, look.short)
        assert look.name == r.label  # in English a legend names the reason by its code
    colors = [vocab.REASONS[r].color for r in vocab.shown()]
    assert len(set(colors)) == len(colors)  # each reason tells itself apart on the timeline


def test_labels_as_in_the_frames_find_their_entry():
    assert vocab.look("kv_short") == vocab.REASONS[Reason.KV_SHORT]
    assert vocab.look("not_a_reason") == vocab.REASONS[Reason.NONE]


def test_the_phrases_come_in_the_current_language():
    from ui.frame import i18n

    try:
        i18n.set_language("zh")
        zh = vocab.look("kv_short")
        assert zh.color == vocab.REASONS[Reason.KV_SHORT].color
        assert zh.short == "空闲 KV 块不够" and "KV" in zh.explain and zh.explain != EXPLAIN[Reason.KV_SHORT]
    finally:
        i18n.set_language("en")


def test_legend_and_text_read_the_table():
    legend = figures.reason_legend()
    assert [row[0] for row in legend] == [r.label for r in vocab.shown()]
    assert all(row[1] == vocab.REASONS[Reason[row[0].upper()]].color for row in legend)
    assert not hasattr(text, "SHORT_REASON") and not hasattr(figures, "REASON_COLORS")
