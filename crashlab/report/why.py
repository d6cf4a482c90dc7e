"""The 'why' of a fault (Fault.explanation) as labelled lines, the same in the terminal and the
Markdown view: each view styles and escapes them its own way, neither decides what is said.

A ``mismatch`` explanation (a value recomputed from the slice contradicts the dumped registers)
is not a cause: its verdict, roots, formula, candidates and story are left out of the views
(the JSON keeps them), and the block says so in plain words.
"""

from __future__ import annotations

from dataclasses import dataclass

from .model import Explanation, Root

MISMATCH = ("mismatch: a value recomputed from the SASS contradicts the dumped registers, so "
            "nothing here is a cause (the slice's reading is in the JSON report)")


@dataclass(frozen=True)
class WhyLine:
    """One labelled line: ``code`` marks SASS or a formula, which Markdown sets as code."""

    label: str
    text: str
    code: bool = False


def heading(explanation: Explanation) -> str:
    return "why: " + ("MISMATCH" if explanation.trust == "mismatch" else "explained from the dump")


def access_line(explanation: Explanation) -> str:
    """``atomic of 4 bytes to shared memory``."""
    size = f" of {explanation.access_bytes} bytes" if explanation.access_bytes else ""
    return f"{explanation.access}{size} to {explanation.space} memory"


def address_line(explanation: Explanation) -> str:
    """``0x2c40 (recomputed), operand [R5+0x400]``, or why there is no address."""
    if explanation.address is None:
        where = "undetermined"
    else:
        source = f" ({explanation.address_provenance})" if explanation.address_provenance else ""
        where = explanation.address + source
    return where + (f", operand {explanation.operand}" if explanation.operand else "")


def root_line(root: Root) -> str:
    """``param 0 (int const*) = 0x7fff00001000 (parameter buffer): element 288 of param 0``."""
    value = f" = {root.value}" if root.value is not None else ""
    source = f" ({root.provenance})" if root.provenance else ""
    detail = f": {root.detail}" if root.detail else ""
    return f"{root.name}{value}{source}{detail}"


def lines(explanation: Explanation) -> list[WhyLine]:
    """What the views print under the SASS window, in order."""
    out = [WhyLine("at", explanation.instruction, code=True),
           WhyLine("access", access_line(explanation)),
           WhyLine("address", address_line(explanation))]
    if explanation.trust == "mismatch":
        out.append(WhyLine("trust", MISMATCH))
        return out + [WhyLine("stop", stop) for stop in explanation.stops]
    verdict = explanation.verdict
    out.append(WhyLine("verdict", f"{verdict.kind}: {verdict.basis}"))
    if explanation.formula:
        out.append(WhyLine("formula", explanation.formula, code=True))
    out += [WhyLine("root", root_line(root)) for root in explanation.roots]
    out += [WhyLine("stop", stop) for stop in explanation.stops]
    out += [WhyLine("compare", f"{candidate} (a candidate, not asserted as the bound)")
            for candidate in explanation.compare_with]
    if explanation.story:
        out.append(WhyLine("story", " ".join(explanation.story)))
    return out
