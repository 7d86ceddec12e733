"""Text a user typed or a link or file carried, made inert for `st.markdown`: no formatting, no HTML,
no live link, however it is written (`plain`), and shortened in quotes for a message (`quoted`).

Every folder of the app shows such text (link notes, file names, class names, configuration names),
so this sits at the frame's base. Pure: no streamlit import.
"""

from __future__ import annotations

import re

_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:&=\"'])")
# GFM's autolink literals (remark-gfm, what st.markdown runs in the browser) are found in the text
# *after* escapes are resolved, so no escape stops `https://…`, `www.…` or `name@host.tld` from
# becoming a link. An invisible word joiner where the pattern needs two characters to touch does:
# after a scheme's colon (`https:⁠//`), after `www` (`www⁠.`), after an `@`, after `mailto`/`xmpp`.
WORD_JOINER = "\u2060"
_AUTOLINK = re.compile(r"(?<=:)(?=/)|(?i:(?<=www)(?=\.))|(?<=@)|(?i:(?<=mailto)|(?<=xmpp))(?=:)")


def plain(text: str) -> str:
    """User text made inert for st.markdown: every Markdown/HTML character escaped, and every
    place GFM would start an autolink literal broken by a word joiner (`WORD_JOINER`)."""
    return _MD_SPECIAL.sub(r"\\\1", _AUTOLINK.sub(WORD_JOINER, str(text)))


def quoted(text: str, limit: int = 80) -> str:
    """User text (a link value, a file name) for a message: shortened, escaped, in quotes."""
    s = str(text)
    s = "".join(ch if ch.isprintable() else "?" for ch in s)
    if len(s) > limit:
        s = s[:limit] + "…"
    return f"“{plain(s)}”"
