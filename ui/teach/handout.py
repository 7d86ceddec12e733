"""The workshop as one self-contained HTML file: every lesson with its numbers and chart, the
recap, in the language of the page.

Lesson prose is the project's own Markdown (and its translations), rendered with markdown-it
with raw HTML disabled; every other text — labels, table cells, scenario names — is escaped.
plotly.js is embedded once, so the file opens offline. Pure: lessons, results and figures in,
a string out.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from datetime import date

import pandas as pd
import plotly.graph_objects as go
from markdown_it import MarkdownIt

from ..frame.i18n import _, language
from .lessons import Lesson

_MD = MarkdownIt("commonmark", {"html": False})
CSS = """
body{font-family:Inter,"Segoe UI","Noto Sans CJK SC","Microsoft YaHei",Helvetica,Arial,sans-serif;max-width:1100px;
margin:2rem auto;padding:0 1rem;color:#1f2328;line-height:1.5}
h1{font-size:1.8rem}h2{border-top:1px solid #d0d7de;padding-top:1.2rem;margin-top:2.2rem}
.meta{color:#57606a}.goal{background:#ddf4ff;padding:.5rem .8rem;border-radius:6px}
.answer{background:#dafbe1;padding:.5rem .8rem;border-radius:6px}
table{border-collapse:collapse;margin:.6rem 0;font-size:.9rem}td,th{border:1px solid #d0d7de;padding:.25rem .5rem;
text-align:left}th{background:#f6f8fa}code{background:#f6f8fa;padding:0 .2rem;border-radius:3px}
.claims li{font-family:ui-monospace,monospace;font-size:.85rem}
.estimate{border:1px dashed #8c959f;padding:.4rem .8rem;border-radius:6px}.blank{display:inline-block;min-width:6rem;
border-bottom:1px solid #57606a}td.blank{min-width:4rem;height:1.6rem}
"""


def esc(text) -> str:
    return html.escape(str(text), quote=True)


def md(text: str) -> str:
    return _MD.render(text)


def table_html(df: pd.DataFrame, index: bool = True) -> str:
    return df.to_html(index=index, escape=True, border=0)


def figure_html(fig: go.Figure) -> str:
    return fig.to_html(full_html=False, include_plotlyjs=False, config={"displaylogo": False, "responsive": True})


@dataclass(frozen=True)
class NumberAsked:
    """A lesson's number to predict in a handout: the question (the page's own Markdown words), for
    a drawn curve the knob values to draw it at, and — in the presenter's copy only — the answer:
    the band over the seeds and the run's value, one line per number (per point for a curve)."""

    question: str
    at: tuple[str, ...] = ()
    answer: tuple[str, ...] = ()


def number_html(asked: NumberAsked, answers: bool) -> str:
    """The number to predict: a blank to fill in (a row of blanks for a curve); with `answers`, the
    band it is scored against instead of the blank."""
    parts = [f"<div class='estimate'>{md(asked.question)}"]
    yours = esc(_("Your number:"))
    if asked.at:
        head = "".join(f"<th>{esc(v)}</th>" for v in asked.at)
        row = ("".join(f"<td>{esc(a)}</td>" for a in asked.answer) if answers and asked.answer
               else "".join("<td class='blank'></td>" for _v in asked.at))
        parts.append(f"<table><tr>{head}</tr><tr>{row}</tr></table>")
    elif not answers or not asked.answer:
        parts.append(f"<p>{yours} <span class='blank'>&nbsp;</span></p>")
    if answers and asked.answer and not asked.at:
        parts.append("".join(f"<p class='answer'>{esc(a)}</p>" for a in asked.answer))
    parts.append("</div>")
    return "".join(parts)


def lesson_html(n: int, lesson: Lesson, start_min: int, numbers: pd.DataFrame | None, fig: go.Figure | None,
                claims: list[tuple[bool, str]], article: str | None = None, answers: bool = True,
                asked: list[NumberAsked] | None = None) -> str:
    """One lesson's section (`lesson` already in the page's language). The labels are looked up
    outside the f-strings, where the message extractor can see them. Without `answers` (the
    participants' copy) it stops at the questions — the choice and the numbers to predict, with
    blanks — and the discussion prompts: no answer, band, reveal, numbers, chart or claims to read
    before predicting."""
    meta = _("{m} min · from minute {start}").format(m=lesson.minutes, start=start_min)
    t = {"scenario": _("Scenario"), "goal": _("Goal"), "predict": _("Predict"), "says": _("The simulation says"),
         "claims": _("Claims checked against the runs"), "discuss": _("Discussion")}
    t = {k: esc(v) for k, v in t.items()}
    parts = [f"<h2>{n}. {esc(lesson.title)}</h2>",
             f"<p class='meta'>{esc(meta)} · {t['scenario']}: <code>{esc(lesson.scenario)}</code></p>",
             f"<p class='goal'><b>{t['goal']}:</b> {esc(lesson.goal)}</p>",
             md(lesson.body),
             f"<p><b>{t['predict']}:</b> {esc(lesson.question)}</p><ol type='A'>"
             + "".join(f"<li>{esc(o)}</li>" for o in lesson.options) + "</ol>",
             *(number_html(a, answers) for a in asked or ()),
             ]
    if not answers:
        parts.append(f"<p><b>{t['discuss']}</b></p><ol>" + "".join(f"<li>{esc(p)}</li>" for p in lesson.prompts)
                     + "</ol>")
        return "\n".join(parts)
    parts += [f"<p class='answer'><b>{t['says']}:</b> {esc(lesson.options[lesson.answer])}</p>",
              f"<p>{esc(lesson.reveal)}</p>", table_html(numbers)]
    if article:
        parts.append(f"<p>{esc(article)}</p>")
    if fig is not None:
        parts.append(figure_html(fig))
    parts.append(f"<p><b>{t['claims']}</b></p><ul class='claims'>"
                 + "".join(f"<li>{'✔' if ok else '✘'} {esc(s)}</li>" for ok, s in claims) + "</ul>")
    parts.append(f"<p><b>{t['discuss']}</b></p><ol>" + "".join(f"<li>{esc(p)}</li>" for p in lesson.prompts)
                 + "</ol>")
    return "\n".join(parts)


def document(sections: list[str], agenda: pd.DataFrame, recap: pd.DataFrame | None, recap_fig: go.Figure | None,
             total_min: int, answers: bool = True) -> str:
    from plotly.offline import get_plotlyjs

    title = (_("Priority inversion in LLM serving — workshop handout (presenter's copy, with answers)") if answers
             else _("Priority inversion in LLM serving — workshop handout"))
    lab, total, agenda_title = _("Inversion Lab"), _("{m} minutes in all").format(m=total_min), _("Agenda")
    recap_title = _("Recap: every remedy on the same traffic")
    head = (f"<!DOCTYPE html><html lang='{esc('zh-CN' if language() == 'zh' else 'en')}'><head><meta charset='utf-8'>"
            f"<title>{esc(title)}</title><style>{CSS}</style><script>{get_plotlyjs()}</script></head><body>")
    intro = (f"<h1>{esc(title)}</h1><p class='meta'>{esc(lab)} · {date.today().isoformat()} · {esc(total)}</p>"
             f"<h2>{esc(agenda_title)}</h2>{table_html(agenda, index=False)}")
    tail = ""
    if recap is not None:
        tail = (f"<h2>{esc(recap_title)}</h2>{table_html(recap, index=False)}"
                + (figure_html(recap_fig) if recap_fig is not None else ""))
    return head + intro + "\n".join(sections) + tail + "</body></html>"
