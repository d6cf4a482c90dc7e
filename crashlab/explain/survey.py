"""A survey of the explainer on cubins without a dump: for every memory instruction, whether the
access table knows it, whether its address operand decodes (TMA and tensor-memory ops say their
address is in a descriptor), and whether the backward slice of the address reaches its roots
(parameters, launch coordinates, loads, constants) with no stop. docs/benchmarks.md's figures come from here
(benchmarks/explain_survey.py) and tests/test_explain_survey.py holds them as floors.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..cubin import Cubin, CubinError
from ..cubin.nvinfo import kernel_param_layout
from ..sass.flow import FunctionCode
from ..sass.instruction import Instruction
from ..sass.listing import cubin_listings
from ..sass.operands import parse_constant, parse_memory_operand
from .launch import Launch, ParamSource
from .slice import Slicer


@dataclass
class Survey:
    cubin: str
    memory_instructions: int = 0
    decoded: int = 0  # lane addresses ([R2.64+0x10], desc[UR4][R2.64]) read by the grammar
    constant: int = 0  # constant-bank loads (c[0x0][0x210]) and cache ops naming no lane address
    descriptor: int = 0  # TMA / tensor memory: the address is in a descriptor
    undecoded: list[str] = field(default_factory=list)
    slices: int = 0
    reached_roots: int = 0
    stops: dict[str, int] = field(default_factory=dict)


def survey(name: str, data: bytes) -> Survey | str:
    """The counts for one cubin (its bytes), or why it could not be disassembled."""
    listings = cubin_listings(data)
    if isinstance(listings, str):
        return listings
    cubin = _opened(data)
    found = Survey(name)
    for section, listing in listings.items():
        layout = kernel_param_layout(cubin, section.removeprefix(".text."))[0] if cubin else None
        params = ParamSource(layout.cbank_offset if layout else None, None,
                             tuple((p.ordinal, p.offset, p.size, None)
                                   for p in (layout.params if layout else [])))
        code = FunctionCode(listing)
        for at, ins in enumerate(listing):
            _count(found, code, at, ins, params)
    return found


def _opened(data: bytes) -> Cubin | None:
    """The cubin, None where the cubin layer cannot read what nvdisasm could (no layouts then)."""
    try:
        return Cubin(data)
    except CubinError:
        return None


def _count(found: Survey, code: FunctionCode, at: int, ins: Instruction, params: ParamSource) -> None:
    access = ins.access
    if access is None:
        return
    found.memory_instructions += 1
    if access.undecoded:
        found.descriptor += 1
        return
    operand = next((m for m in map(parse_memory_operand, ins.operands) if m is not None), None)
    if operand is None:
        named = any(parse_constant(o) for o in ins.operands)
        if named and access.space == "constant" or not ins.operands and access.kind == "prefetch":
            found.constant += 1
        else:
            found.undecoded.append(ins.text)
        return
    found.decoded += 1
    findings = Slicer(code, at, None, None, None, Launch({}, {}), params).slice(operand, at)
    found.slices += 1
    if not findings.stops:
        found.reached_roots += 1
    for stop in findings.stops:
        reason = stop.split(": ", 1)[-1]
        key = "unmodelled op" if "does not model" in reason else reason[:60]
        found.stops[key] = found.stops.get(key, 0) + 1
