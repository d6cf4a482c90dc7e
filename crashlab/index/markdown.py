"""``crashlab show SIGNATURE --markdown``: a signature (or coarse key) and its facets as GitHub
Markdown for an issue, and the facets' section that ``crashlab report`` puts in its body. Every
value came from a dump, a log or a launch line: each goes through markdown_escape (a code span
in a table cell, running text elsewhere), never as markup.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..notation import counted
from ..report.markdown_escape import cell, code, inline, join
from .facets import shown_value

if TYPE_CHECKING:
    from .records import Facet, Facets, Shown


def _value(name: str, value: str | None) -> str:
    return cell(code(shown_value(name, value))) if value is not None else "unknown"


def _name(facet: Facet) -> str:
    return cell(inline(facet.name))


def _values(facet: Facet) -> str:
    listed = [f"{_value(facet.name, v.value)} ({v.count})" for v in facet.values]
    if facet.others:
        listed.append(f"{facet.others} more past these")
    return ", ".join(listed)


def facets_lines(facets: Facets, heading: str = "### What stays and what varies across its "
                                                "{crashes}") -> list[str]:
    """The facets as Markdown lines under HEADING (its {crashes}, how many crashes): a table of
    what stays, one of what varies, the fields no crash knows, then the readings with their
    evidence."""
    out = [heading.format(crashes=counted(facets.crashes, 'crash', 'crashes')), ""]
    stays = [f for f in facets.fields if f.constant]
    varies = [f for f in facets.fields if not f.constant and f.known]
    if stays:
        out += ["| stays | value | crashes |", "|---|---|---|"]
        out += [f"| {_name(f)} | {_value(f.name, next(v.value for v in f.values if v.value is not None))} "
                f"| {f.known} of {facets.crashes} known |" for f in stays] + [""]
    if varies:
        out += ["| varies | values (crashes) |", "|---|---|"]
        out += [f"| {_name(f)} | {_values(f)} |" for f in varies] + [""]
    unknown = [f.name for f in facets.fields if not f.known]
    if unknown:
        out += [f"Unknown in every crash: {inline(', '.join(unknown))}.", ""]
    if facets.readings:
        out += ["**Readings**", ""]
        for reading in facets.readings:
            out.append(f"- {inline(reading.text)}")
            out += [f"  - {inline(fact)}" for fact in reading.evidence]
        out.append("")
    return out


def shown(view: Shown) -> str:
    """A signature's or coarse key's view (crashlab.index.commands.show) as an issue's Markdown."""
    out: list[str] = []
    if view.signature is not None:
        sig = view.signature
        out += [f"## {inline(sig.title)}", "",
                f"- signature {code(sig.hash)} (version {sig.version}, {inline(sig.kind)})",
                f"- {counted(sig.count, 'crash', 'crashes')}, first {inline(sig.first_seen)}, last "
                f"{inline(sig.last_seen)}",
                f"- search: {code(sig.search)}", ""]
    if view.coarse is not None:
        out += [f"## Coarse key {code(view.coarse)}", ""]
        out += [f"- {code(s.hash)} {counted(s.count, 'crash', 'crashes')}: {inline(s.title)}"
                for s in view.signatures] + [""]
    if view.facets is not None:
        out += facets_lines(view.facets)
    return join(out)
