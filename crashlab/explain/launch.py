"""The launch ABI as the slice reads it: where constant bank 0 holds the launch dimensions, the
stack's top and the kernel's parameters on each architecture, which special registers name a
lane's coordinates, and the values a dump gives them for one lane (LaunchValues: each one a root
of the slice, or a stop with its reason).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..report import model
from ..sass.instruction import Instruction
from ..sass.operands import ConstantRef, parse_operand
from .value import Record, Value

_LAUNCH_SLOTS = {0x0: "blockDim.x", 0x4: "blockDim.y", 0x8: "blockDim.z",
                 0xC: "gridDim.x", 0x10: "gridDim.y", 0x14: "gridDim.z"}
#: c[0x0][0x28]: the stack's top, where R1 starts (LDC R1, c[0x0][0x28] opens every kernel)
STACK_SLOT = 0x28
#: Where the parameters start in bank 0 on sm_100 and later (0x380): there the launch slots
#: sit just below them, blockDim at 0x360..0x368, gridDim at 0x370..0x378 and the stack top at
#: 0x37c, as nvcc 13.0's sm_100 SASS reads them (LDC R1, c[0x0][0x37c] opens each kernel)
_BLACKWELL_PARAMS = 0x380
_BLACKWELL_SLOTS = {0x360: "blockDim.x", 0x364: "blockDim.y", 0x368: "blockDim.z",
                    0x370: "gridDim.x", 0x374: "gridDim.y", 0x378: "gridDim.z"}
_BLACKWELL_STACK = 0x37C


def launch_slots(cbank_offset: int | None) -> tuple[dict[int, str], int]:
    """(launch slots by their bank-0 offset, offset of the stack top), by where the parameters
    start: the launch slots moved from the bank's start to below the parameters on sm_100."""
    if cbank_offset is not None and cbank_offset >= _BLACKWELL_PARAMS:
        moved = cbank_offset - _BLACKWELL_PARAMS
        return {offset + moved: name for offset, name in _BLACKWELL_SLOTS.items()}, \
            _BLACKWELL_STACK + moved
    return _LAUNCH_SLOTS, STACK_SLOT


SPECIALS = {"SR_TID.X": "threadIdx.x", "SR_TID.Y": "threadIdx.y", "SR_TID.Z": "threadIdx.z",
             "SR_CTAID.X": "blockIdx.x", "SR_CTAID.Y": "blockIdx.y", "SR_CTAID.Z": "blockIdx.z",
             "SR_CgaCtaId": "ctaRank", "SR_LANEID": "laneId"}


@dataclass(frozen=True)
class Launch:
    """The coordinates the dump records for the faulting lane, by special-register name."""

    specials: dict[str, int]
    #: blockDim and gridDim by name ("blockDim.x"), read from the grid row: what bank 0's launch
    #: slots hold, wherever the architecture puts them (launch_slots)
    dimensions: dict[str, int]


def cluster_rank(block_idx: tuple[int, int, int], shape: tuple[int, int, int]) -> int | None:
    """A block's rank in its cluster (SR_CgaCtaId: what bits 24+ of a shared address carry),
    from its index and the cluster's shape ((1,1,1) without clusters); None for a shape with a
    zero in it."""
    if not all(shape):
        return None
    x, y, z = (index % size for index, size in zip(block_idx, shape, strict=True))
    return x + y * shape[0] + z * shape[0] * shape[1]


def launch_dimensions(block_dim: tuple[int, int, int] | None,
                      grid_dim: tuple[int, int, int] | None) -> dict[str, int]:
    """Launch.dimensions from a grid's block and grid shapes (either may be unknown)."""
    named = {}
    for kind, shape in (("blockDim", block_dim), ("gridDim", grid_dim)):
        if shape is not None:
            named.update({f"{kind}.{axis}": value
                          for axis, value in zip("xyz", shape, strict=True)})
    return named


@dataclass(frozen=True)
class ParamSource:
    """The parameter area: its offset in constant bank 0, the dump's bytes of it, and each
    parameter's (ordinal, offset, size, type)."""

    cbank_offset: int | None
    data: bytes | None
    params: tuple[tuple[int, int, int, str | None], ...]


@dataclass
class LaunchValues:
    """Constant bank 0 and the special registers as one lane's launch gives them: a launch
    dimension, the stack's top, a parameter (its bytes from the dump's buffer), a coordinate."""

    launch: Launch
    params: ParamSource
    record: Record

    def special(self, register: str, where: str) -> Value:
        name = SPECIALS.get(register)
        if name is None:
            return self.record.stopped(f"{where}: special register {register} not modelled")
        value = self.launch.specials.get(register)
        self.record.root(model.Root.model_construct(kind="special", name=name,
                              value=None if value is None else f"{value:#x}",
                              provenance="launch" if value is not None else None))
        return Value(value, name)

    def constant(self, ins: Instruction, where: str) -> Value:
        operands = ins.operands[1:]
        offset = bank0_slot(operands)
        if offset is not None:
            return self.slot(offset, 2 if ins.op.has("64") else 1)
        return self.record.stopped(f"{where}: {operands[0] if operands else '?'} is not a fixed slot "
                             "of constant bank 0")

    def pair_load(self, ins: Instruction) -> int | None:
        """The bank-0 offset a 64-bit constant load reads (``LDC.64 R4, c[0x0][0x220]``,
        ``ULDC.64``, ``LDCU.64``) where its words are two slots, else None."""
        access = ins.access
        if access is None or access.space != "constant" or not ins.op.has("64"):
            return None
        offset = bank0_slot(ins.operands[1:])
        return offset if offset is not None and self.two_slots(offset) else None

    def two_slots(self, offset: int) -> bool:
        """Whether the 8 bytes at bank-0 ``offset`` are two values: two adjacent 4-byte
        parameters (nvcc reads them with one LDC.64) or launch slots, not one 64-bit parameter."""
        slots, stack = launch_slots(self.params.cbank_offset)
        if {offset, offset + 4} & {*slots, stack}:
            return True
        holder = self.holder(offset)
        if holder is None or self.params.cbank_offset is None:
            return False
        _ordinal, start, size, _type = holder
        return self.params.cbank_offset + start + size < offset + 8

    def holder(self, offset: int) -> tuple[int, int, int, str | None] | None:
        """The parameter (ordinal, offset, size, type) whose bytes hold bank-0 ``offset``."""
        base = self.params.cbank_offset
        if base is None or offset < base:
            return None
        return next((p for p in self.params.params if p[1] <= offset - base < p[1] + p[2]), None)

    def slot(self, offset: int, words: int) -> Value:
        """A word (or pair) of constant bank 0: a launch dimension or a parameter; a pair of
        two 4-byte values is each of them, high word first (``arg3:arg2``)."""
        if words == 2 and self.two_slots(offset):
            low, high = self.slot(offset, 1), self.slot(offset + 4, 1)
            value = None if low.value is None or high.value is None else \
                low.value | high.value << 32
            return Value(value, f"{high.text}:{low.text}")
        slots, stack = launch_slots(self.params.cbank_offset)
        if offset in slots and words == 1:
            name = slots[offset]
            value = self.launch.dimensions.get(name)
            self.record.root(model.Root.model_construct(kind="special", name=name, provenance="launch",
                                        value=None if value is None else f"{value:#x}"))
            return Value(value, name)
        if offset == stack and words == 1:
            self.record.root(model.Root.model_construct(kind="special", name=f"stack top (c[0x0][{stack:#x}])"))
            return Value(None, "stackTop")
        return self._parameter(offset, words)

    def _parameter(self, offset: int, words: int) -> Value:
        """A word (or pair) of the parameter area, named by the parameter holding it, its value
        from the dump's parameter buffer where it has one."""
        base = self.params.cbank_offset
        if base is None or offset < base:
            return self.record.stopped(f"c[0x0][{offset:#x}]: a bank-0 slot outside the "
                                       "parameters, which the dump does not hold")
        relative = offset - base
        holder = self.holder(offset)
        size = 4 * words
        data = self.params.data
        raw = data[relative:relative + size] if data is not None and relative + size <= len(data) else None
        value = int.from_bytes(raw, "little") if raw is not None else None
        if holder is None:
            self.record.stop(f"c[0x0][{offset:#x}]: no parameter of the kernel's layout covers it")
            return Value(value, f"c[0x0][{offset:#x}]")
        ordinal, param_offset, _size, type_name = holder
        field = relative - param_offset  # a field of a parameter passed by value (a struct)
        text = f"arg{ordinal}" if not field else f"arg{ordinal}+{field:#x}"
        self.record.root(model.Root.model_construct(kind="param", param_ordinal=ordinal,
                                    name=f"param {ordinal}" + (f" ({type_name})" if type_name else "")
                                    + (f" +{field:#x}" if field else ""),
                                    value=None if value is None else f"{value:#x}",
                                    provenance="parameter buffer" if value is not None else None))
        return Value(value, text, param=ordinal if relative == param_offset else None)


def bank0_slot(operands: tuple[str, ...]) -> int | None:
    """The offset of a fixed slot of constant bank 0 the first operand names (``c[0x0][0x220]``,
    ``c[0x0][RZ]``), else None."""
    operand = parse_operand(operands[0]) if operands else None
    if isinstance(operand, ConstantRef) and operand.bank == 0 and (
            operand.register is None or operand.register.is_zero):
        return operand.offset
    return None
