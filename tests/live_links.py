"""What a Markdown text would show as a live link (or image, or HTML) in the app's browser.

`st.markdown` and the callouts render with react-markdown + remark-gfm. A link can come from
Markdown syntax (`[x](url)`, `<url>`, `![x](url)`), from raw HTML, or from GFM's *autolink
literals*: remark-gfm (mdast-util-gfm-autolink-literal) searches every text node, after escapes
are resolved, for `https?://…`, `www.…` and `name@host.tld`, so `https\\://evil\\.example` is a
link there though no Markdown parser here would make one. `live_links(text)` therefore renders the
text with markdown-it (CommonMark, raw HTML on) and then applies the same literal patterns to the
text nodes outside links and code. It returns every target found, from any source.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

from markdown_it import MarkdownIt

_MD = MarkdownIt("commonmark", {"html": True})
# remark-gfm's two find-and-replace patterns (mdast-util-gfm-autolink-literal, lib/index.js), taken
# without their extra conditions (the character before, a dotted domain), so they err on the side
# of finding a link; `xmpp:`/`mailto:` as micromark-extension-gfm-autolink-literal accepts them.
_URL = re.compile(r"(https?://|www(?=\.))([-.\w]+)([^ \t\r\n]*)", re.IGNORECASE)
_EMAIL = re.compile(r"([-.\w+]+)@([-\w]+(?:\.[-\w]+)+)")
_SCHEME = re.compile(r"(mailto|xmpp):[-.\w+]+@", re.IGNORECASE)


class _Finder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[str] = []
        self._inert = 0  # inside <a>, <code> or <pre>: no literal autolinks there

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "a":
            self.found.append(a.get("href") or "<a>")
        elif tag in ("img", "iframe", "script", "object", "embed", "form"):
            self.found.append(a.get("src") or a.get("action") or f"<{tag}>")
        if tag in ("a", "code", "pre"):
            self._inert += 1

    def handle_endtag(self, tag):
        if tag in ("a", "code", "pre") and self._inert:
            self._inert -= 1

    def handle_data(self, data):
        if not self._inert:
            for rx in (_URL, _EMAIL, _SCHEME):
                self.found += [m.group(0) for m in rx.finditer(data)]


def live_links(markdown_text: str) -> list[str]:
    """Every link, image or embedded element the browser would make of this Markdown."""
    finder = _Finder()
    finder.feed(_MD.render(markdown_text))
    finder.close()
    return finder.found
