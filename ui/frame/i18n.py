"""The app's languages: English (the source text) and Chinese, from gettext catalogues.

Why gettext: it is the standard for translating a Python program (the stdlib's `gettext`, Babel
for extraction and catalogue upkeep, Weblate/Crowdin/Poedit for translators). Source text stays
readable English in the code (`_("Run")`), one `.po` file per language holds every message, and
tools check placeholders and completeness. The `.po` files are the source of truth: they are
compiled in memory when first needed (Babel), so no binary `.mo` is committed or built.

    locale/messages.pot                 every message, extracted (python -m ui.frame.i18n_tool extract)
    locale/en/LC_MESSAGES/messages.po   English (msgstr = msgid)
    locale/zh/LC_MESSAGES/messages.po   Chinese

Messages come from the code (`_`, `N_`, `ngettext`), the lessons (`lessons/*.md`), the shipped
scenarios' titles and descriptions and the engine's wait-reason sentences (`ui.frame.i18n_extract`).
The language is per script run (a thread-local the frame sets from the URL's `lang`), so the pure
modules (`ui.panels.text`, `ui.teach.lessons`, the figure builders) translate without importing streamlit.
Placeholders use `str.format` names: `_("{n} requests").format(n=3)`.
"""

from __future__ import annotations

import gettext
import io
import threading
from functools import cache
from pathlib import Path

LOCALE_DIR = Path(__file__).resolve().parents[2] / "locale"
DOMAIN = "messages"
LANGUAGES = {"en": "English", "zh": "中文"}
DEFAULT = "en"

_state = threading.local()


def set_language(code: str | None) -> str:
    """Use `code` for this thread's messages (unknown → English); returns the code in effect."""
    code = code if code in LANGUAGES else DEFAULT
    _state.lang = code
    return code


def language() -> str:
    return getattr(_state, "lang", DEFAULT)


def po_path(code: str) -> Path:
    return LOCALE_DIR / code / "LC_MESSAGES" / f"{DOMAIN}.po"


@cache
def translations(code: str) -> gettext.NullTranslations:
    """The compiled catalogue of `code` (read once per process from its .po file)."""
    from babel.messages.mofile import write_mo
    from babel.messages.pofile import read_po

    path = po_path(code)
    if not path.exists():
        return gettext.NullTranslations()
    with path.open("rb") as f:
        catalog = read_po(f, locale=code)
    buf = io.BytesIO()
    write_mo(buf, catalog, use_fuzzy=False)
    buf.seek(0)
    return gettext.GNUTranslations(buf)


def _(message: str) -> str:
    """`message` in the current language (the English text when no translation exists)."""
    if not message:
        return message
    return translations(language()).gettext(message)


def ngettext(singular: str, plural: str, n: int) -> str:
    return translations(language()).ngettext(singular, plural, n)


def N_(message: str) -> str:
    """Marks a message for extraction where it is defined; translate it with `_` where shown."""
    return message


def paragraphs(text: str) -> list[str]:
    """Markdown split into paragraphs (blank-line separated), each one message. Extraction and
    look-up both use this, so a paragraph's msgid is exactly what the page asks for."""
    out, cur = [], []
    for line in text.strip().splitlines():
        if line.strip():
            cur.append(line.rstrip())
        elif cur:
            out.append("\n".join(cur))
            cur = []
    if cur:
        out.append("\n".join(cur))
    return out


def translate_markdown(text: str) -> str:
    return "\n\n".join(_(p) for p in paragraphs(text))


def folded(text: str) -> str:
    """Whitespace folded to single spaces (YAML `>`/`|` blocks, descriptions): one message."""
    return " ".join(str(text).split())
