"""Keep the catalogues in step with the code (developer tool; the app only reads the .po files).

    python -m ui.frame.i18n_tool extract   # locale/messages.pot from babel.cfg
    python -m ui.frame.i18n_tool update    # extract, then merge into every locale/<lang>/.../messages.po
                                     # (English: msgstr = msgid; new Chinese entries empty, to translate)
    python -m ui.frame.i18n_tool check     # what is missing or stale (exit 1 if anything)

Babel does the work (`extract_from_dir`, `Catalog.update`, `read_po`/`write_po`); this only wires
the project's layout together.
"""

from __future__ import annotations

import sys
from pathlib import Path

from babel.messages.catalog import Catalog
from babel.messages.extract import extract_from_dir
from babel.messages.frontend import parse_mapping_cfg
from babel.messages.pofile import read_po, write_po

from .i18n import DOMAIN, LANGUAGES, LOCALE_DIR, po_path

ROOT = Path(__file__).resolve().parents[2]
KEYWORDS = {"_": None, "N_": None, "ngettext": (1, 2)}


def extracted() -> Catalog:
    """Every message of the project, as the app asks for them."""
    with (ROOT / "babel.cfg").open() as f:
        method_map, options_map = parse_mapping_cfg(f)
    cat = Catalog(project="Inversion Lab", version="", domain=DOMAIN, charset="utf-8",
                  copyright_holder="the Inversion Lab authors", msgid_bugs_address="")
    for filename, lineno, message, comments, context in extract_from_dir(
            str(ROOT), method_map, options_map, keywords=KEYWORDS, comment_tags=(), strip_comment_tags=True):
        cat.add(message, None, [(filename, lineno)], auto_comments=comments, context=context)
    return cat


def write(cat: Catalog, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as f:
        write_po(f, cat, width=100, sort_output=True, omit_header=False, include_previous=False,
                 no_location=True)


def read(path: Path, lang: str) -> Catalog:
    with path.open("rb") as f:
        return read_po(f, locale=lang)


def update() -> None:
    write(extracted(), LOCALE_DIR / f"{DOMAIN}.pot")
    for lang in LANGUAGES:
        template = extracted()  # a fresh one per language: update() hands the template's messages over
        path = po_path(lang)
        cat = read(path, lang) if path.exists() else Catalog(locale=lang, domain=DOMAIN, charset="utf-8")
        cat.update(template, no_fuzzy_matching=True)
        cat.project, cat.version, cat.copyright_holder = template.project, "", template.copyright_holder
        cat.language_team = cat.last_translator = "the Inversion Lab authors"
        cat.fuzzy = False
        for m in cat:
            if m.id and lang == "en":
                m.string = m.id
        cat.obsolete.clear()
        write(cat, path)


def translated(m) -> bool:
    """A message with every form translated (plural messages have one string per form)."""
    forms = m.string if isinstance(m.string, (tuple, list)) else (m.string,)
    return bool(forms) and all(forms) and not m.fuzzy


def problems() -> list[str]:
    template = extracted()
    out = []
    pot = LOCALE_DIR / f"{DOMAIN}.pot"
    if not pot.exists() or {m.id for m in read(pot, "en") if m.id} != {m.id for m in template if m.id}:
        out.append(f"{pot.relative_to(ROOT)} is stale: run python -m ui.frame.i18n_tool update")
    for lang in LANGUAGES:
        path = po_path(lang)
        have = {m.id: m for m in read(path, lang) if m.id} if path.exists() else {}
        for m in template:
            if m.id and (m.id not in have or not translated(have[m.id])):
                out.append(f"{lang}: missing {str(m.id)[:70]!r}")
    return out


def main(argv: list[str]) -> int:
    cmd = argv[0] if argv else "check"
    if cmd == "extract":
        write(extracted(), LOCALE_DIR / f"{DOMAIN}.pot")
    elif cmd == "update":
        update()
    elif cmd == "check":
        found = problems()
        print("\n".join(found) or "catalogues complete")
        return 1 if found else 0
    else:
        print(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
