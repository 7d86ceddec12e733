"""Babel extraction methods for the texts that are not `_()` calls in code (see babel.cfg).

Each is `(fileobj, keywords, comment_tags, options) -> iterable of (lineno, funcname, message,
comments)`, Babel's extractor interface. The messages are cut exactly as the app looks them up:
lesson fields whitespace-folded, lesson bodies by paragraph (`ui.frame.i18n.paragraphs`), scenario
descriptions folded, a scenario story's run labels and its edge (folded, as `engine.sweeps.story` keeps
it), the engine's reason sentences as they are.
"""

from __future__ import annotations

import yaml

from .i18n import folded, paragraphs


def extract_lessons(fileobj, keywords, comment_tags, options):
    text = fileobj.read().decode("utf-8")
    _lead, head, body = text.split("---", 2)
    h = yaml.safe_load(head)
    for key in ("title", "goal", "question", "reveal", "edge"):
        if h.get(key):
            yield 1, None, folded(h[key]), [f"lesson {key}"]
    for opt in h.get("options") or ():
        yield 1, None, str(opt), ["lesson option"]
    for run in h.get("runs") or ():
        yield 1, None, str(run["label"]), ["lesson run label"]
    for p in h.get("prompts") or ():
        yield 1, None, folded(p), ["lesson discussion prompt"]
    if (h.get("article") or {}).get("says"):
        yield 1, None, str(h["article"]["says"]), ["the article's illustrative number"]
    for p in paragraphs(body):
        yield 1, None, p, ["lesson paragraph (Markdown)"]


def extract_scenarios(fileobj, keywords, comment_tags, options):
    data = yaml.safe_load(fileobj.read().decode("utf-8")) or {}
    if data.get("title"):
        yield 1, None, str(data["title"]), ["scenario title"]
    if data.get("description"):
        yield 1, None, folded(data["description"]), ["scenario description"]
    story = data.get("story") if isinstance(data.get("story"), dict) else {}
    for run in story.get("runs") or ():  # the *Does this hold?* page (ui.panels.story_view)
        if isinstance(run, dict) and run.get("label"):
            yield 1, None, str(run["label"]), ["scenario story run label"]
    if story.get("edge"):  # the page shows it as engine.sweeps.story.parse keeps it: whitespace folded
        yield 1, None, folded(story["edge"]), ["scenario story: why a claim is on an edge"]


def extract_reasons(fileobj, keywords, comment_tags, options):
    from engine.core.reasons import EXPLAIN

    for reason, sentence in EXPLAIN.items():
        yield 1, None, sentence, [f"wait reason {reason.label}"]
