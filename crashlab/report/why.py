"""The 'why' of a fault (Fault.explanation) as labelled lines, the same in the terminal and the
Markdown view: each view styles and escapes them its own way, neither decides what is said.

A slice through a large kernel can stop at dozens of registers and reach a formula of thousands
of characters: the views show the first MAX_REPEATED roots and stops, the first MAX_STORY
sentences and MAX_FORMULA characters of the formula, and say how much more the JSON report
holds (as the registers do); the JSON keeps every one.

A ``mismatch`` explanation (a value recomputed from the slice contradicts the dumped registers)
is not a cause: its verdict, roots, formula, candidates and story are left out of the views
(the JSON keeps them), and the block says so in plain words.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..notation import dim, number_ranges
from .model import Explanation, LaneVerdict, OtherOperand, Root

#: Roots, and stops, shown in the views; the JSON report has every one.
MAX_REPEATED = 6
#: Sentences of the story shown in the views.
MAX_STORY = 6
#: Characters of the formula shown in the views (cut where a line may break).
MAX_FORMULA = 400

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


#: How each kind of access meets its memory: a load from, a store to, an atomic on.
_PREPOSITIONS = {"load": "from", "store": "to", "atomic": "on", "prefetch": "from"}


def access_phrase(access: str, space: str, size: int | None = None) -> str:
    """``load of 16 bytes from global memory``, ``store to shared memory``."""
    bytes_ = f" of {size} bytes" if size else ""
    return f"{access}{bytes_} {_PREPOSITIONS.get(access, 'of')} {space} memory"


def access_line(explanation: Explanation) -> str:
    """``atomic of 4 bytes on shared memory``."""
    return access_phrase(explanation.access, explanation.space, explanation.access_bytes)


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


def culprit_line(explanation: Explanation) -> str | None:
    """``lane 1: thread (1,0,0) block (0,0,0), warp 0 on SM 124 (cuda-gdb focuses lane 0)``."""
    lane = explanation.culprit_lane
    if lane is None or explanation.lanes_judged <= 1:
        return None
    focus = explanation.focus_lane
    focused = "" if focus is None or focus == lane.lane else f" (cuda-gdb focuses lane {focus})"
    chosen = "" if explanation.breaks_bound else " (no marked lane breaks a bound" + (
        "; the lane cuda-gdb focuses)" if focus == lane.lane else ")")
    return (f"lane {lane.lane}: thread {dim(lane.thread_idx)} block {dim(lane.block_idx)}, warp "
            f"{lane.warp} on SM {lane.sm}{focused}{chosen}")


def culprit_label(explanation: Explanation) -> str:
    """``culprit`` where the lane breaks a bound; ``explained`` where none does, and the lane
    shown is only the one the explanation follows."""
    return "culprit" if explanation.breaks_bound else "explained"


def lanes_line(explanation: Explanation) -> str | None:
    """Every marked lane judged, by verdict: ``lanes 1-31 out-of-bounds (...); lane 0 inside``."""
    if explanation.lanes_judged <= 1:
        return None
    left = (f"; {explanation.lanes_not_judged} more marked lanes not judged"
            if explanation.lanes_not_judged else "")
    return "; ".join(group_phrase(group) for group in explanation.lanes) + left


def other_line(other: OtherOperand) -> str:
    """``desc[UR16][R20.64]: load of global memory at 0x8016cfe24000 (undetermined), not the
    side that faulted``."""
    at = f" at {other.address}" if other.address else ""
    return (f"{other.operand}: {access_phrase(other.access, other.space)}{at} "
            f"({other.verdict.kind}), not the side that faulted")


def lines(explanation: Explanation) -> list[WhyLine]:
    """What the views print under the SASS window, in order."""
    out = [WhyLine("at", explanation.instruction, code=True),
           WhyLine("access", access_line(explanation)),
           WhyLine("address", address_line(explanation))]
    out += [WhyLine(label, text) for label, text in ((culprit_label(explanation), culprit_line(explanation)),
                                                     ("lanes", lanes_line(explanation)))
            if text is not None]
    out += [WhyLine("other", other_line(other)) for other in explanation.other_operands]
    if explanation.trust == "mismatch":
        out.append(WhyLine("trust", MISMATCH))
        return out + _capped("stop", explanation.stops)
    verdict = explanation.verdict
    if explanation.lanes_judged > 1 and not explanation.breaks_bound:
        out.append(WhyLine("verdict", "no marked lane's access breaks a bound the dump holds; "
                           f"the focused lane's: {verdict.kind}: {verdict.basis}"))
    else:
        out.append(WhyLine("verdict", f"{verdict.kind}: {verdict.basis}"))
    if explanation.formula:
        out.append(WhyLine("formula", formula_shown(explanation.formula), code=True))
    out += _capped("root", [root_line(root) for root in explanation.roots])
    out += _capped("stop", explanation.stops)
    out += [WhyLine("compare", f"{candidate} (a candidate, not asserted as the bound)")
            for candidate in explanation.compare_with]
    if explanation.story:
        story = explanation.story[:MAX_STORY]
        left = len(explanation.story) - len(story)
        more = f" ... {left} more sentences in the JSON report" if left > 0 else ""
        out.append(WhyLine("story", " ".join(story) + more))
    return out


def _capped(label: str, texts: list[str]) -> list[WhyLine]:
    """The first MAX_REPEATED of ``texts`` as lines, then how many more the JSON report has."""
    shown = [WhyLine(label, text) for text in texts[:MAX_REPEATED]]
    left = len(texts) - MAX_REPEATED
    return shown + ([WhyLine(label, f"... {left} more in the JSON report")] if left > 0 else [])


def formula_shown(formula: str) -> str:
    """The formula whole up to MAX_FORMULA characters; a longer one cut where a line may break,
    with its length said."""
    if len(formula) <= MAX_FORMULA:
        return formula
    from ..wrap import break_points  # the views' wrapper (and Rich's cell widths): not for --json

    cut = max((p for p in break_points(formula) if p <= MAX_FORMULA), default=MAX_FORMULA)
    return (f"{formula[:cut].rstrip()} ... ({len(formula):,} characters in all, whole in the "
            "JSON report)")


def group_phrase(group: LaneVerdict) -> str:
    """``lanes 1-31 out-of-bounds (0x3b04 bytes past the bound)``, ``lane 0 inside``; with the
    number of warps where the lanes span more than one."""
    noun = "lane" if len(group.lanes) == 1 else "lanes"
    warps = f" of {group.warps} warps, {group.count} lanes," if group.warps > 1 else ""
    past = ""
    if group.past_bound:
        low, high = group.past_bound
        past = f" ({low:#x} bytes past the bound)" if low == high else (
            f" ({low:#x} to {high:#x} bytes past the bound)")
    return f"{noun} {number_ranges(group.lanes)}{warps} {group.kind}{past}"
