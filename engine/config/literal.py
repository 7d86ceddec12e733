"""Untrusted text in messages: bounded, on one line, and literal when shown as Markdown.

Values and names in an error message come from a file, a link or a command line. They are shown
through `brief` (a short description of any value, never its full repr: a 400-byte YAML can
expand to a 200 MB repr) and `clip` (a string cut to a length, control characters escaped), so a
message is one line of bounded length. A page that writes such text into Markdown uses `md_code`
(a code span that cannot be closed from inside) or `md_escape` (every ASCII punctuation character
backslash-escaped, so no link, emphasis, HTML, directive or shortcode can form).
"""

from __future__ import annotations

import math
import re

_PUNCT = re.compile(r"([!-/:-@\[-`{-~])")  # every ASCII punctuation character
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def clip(text: object, limit: int = 60) -> str:
    """`text` as one line of at most about `limit` characters (control characters escaped)."""
    s = text if isinstance(text, str) else str(text)
    if len(s) > limit:
        s = s[: limit - 1] + "…"
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), s)


def brief(value: object, limit: int = 40) -> str:
    """A bounded one-line description of an input value, for messages ('a list of 3 items', '8192')."""
    if value is None or isinstance(value, bool):
        return repr(value)
    if isinstance(value, int):
        digits = int(value.bit_length() * math.log10(2)) + 1
        return repr(value) if digits <= 24 else f"a {digits}-digit integer"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        return repr(value[:limit]) + ("…" if len(value) > limit else "")
    if isinstance(value, (bytes, bytearray)):
        return f"{len(value)} bytes"
    if isinstance(value, dict):
        return f"a mapping of {len(value)} key{'s' * (len(value) != 1)}"
    if isinstance(value, (list, tuple, set, frozenset)):
        return f"a list of {len(value)} item{'s' * (len(value) != 1)}"
    return f"a value of type {type(value).__name__}"


def md_escape(text: object, limit: int = 200) -> str:
    """Text that Markdown renders literally (bounded, one line)."""
    return _PUNCT.sub(r"\\\1", clip(text, limit))


def md_code(text: object, limit: int = 200) -> str:
    """An inline code span showing `text` literally; the fence is longer than any backtick run inside."""
    s = clip(text, limit)
    fence = "`" * (max((len(r) for r in re.findall(r"`+", s)), default=0) + 1)
    return f"{fence} {s} {fence}"
