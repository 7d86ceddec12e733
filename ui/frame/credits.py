"""Credit for the real traces shipped with the lab: the attribution their licences ask for.

CC-BY-4.0 (the Azure traces) asks that whoever shows the data names its creator, the licence (with a
link) and the source; Apache-2.0 (Mooncake) that its licence travels with it (it does, beside the
file). The facts are engine.config.shipped_traces'; the sentences are here, in the catalogue. The links and
names are the lab's own text, never a user's.
"""

from __future__ import annotations

from engine.config.shipped_traces import SHIPPED

from .i18n import _
from .untrusted import plain


def attribution(name: str) -> str:
    """The credit a shipped trace asks for (its licence's attribution), as Markdown of our own."""
    t = SHIPPED[name]
    return _("Traffic: {title}, {creator}, [{licence}]({licence_url}); cite {citation}. "
             "Source: [{repo}]({url}).").format(
        title=plain(t.title), creator=plain(t.creator), licence=t.licence, licence_url=t.licence_url,
        citation=plain(t.citation), repo=plain(t.source.split(" @ ")[0]), url=t.url)


def data_notes(box) -> None:
    """About the data: every shipped trace, its source, licence and the paper to cite."""
    box.markdown(_("Real traces shipped with the lab (byte copies of the public files, each beside its licence in "
                   "`scenarios/traces/`). Choose one under *Arrivals*."))
    for name, t in SHIPPED.items():
        box.markdown(_("**{name}**: {title}, {rows:,} requests. {creator}, [{licence}]({licence_url}). Source: "
                       "[{source}]({url}). Cite: {citation}.").format(
            name=name, title=plain(t.title), rows=t.rows, creator=plain(t.creator), licence=t.licence,
            licence_url=t.licence_url,
            source=plain(t.source), url=t.url, citation=plain(t.citation)))
    box.caption(_("mooncake-conv's arrivals are quantised to 3 s in the file; the lab spreads the requests of each "
                  "3 s step evenly over it, in file order."))
