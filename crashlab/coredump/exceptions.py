"""One table of CUDA device exceptions, keyed by the driver's CUDBG code.

The CUDBG code (CUDBGException_t in cudadebugger.h) is what a dump stores. cuda-gdb shows the same
exception under its own signal name CUDA_EXCEPTION_n and a display text, and its n differs from
the CUDBG code for 15-18, so all three are kept side by side. Display texts for codes 0-19 are
cuda-gdb's (include/gdb/signals.def); for the newer codes cuda-gdb's public source has no text,
so the ones given by the cuda-gdb documentation are used where known and a title-cased form of
the CUDBG name otherwise (marked ``display_from_cuda_gdb=False``).
"""

from __future__ import annotations

from dataclasses import dataclass

UNKNOWN = 0xFFFFFFFF


@dataclass(frozen=True, slots=True)
class ExceptionKind:
    code: int
    name: str
    display: str
    #: cuda-gdb's CUDA_EXCEPTION_n for this code; None where cuda-gdb has no signal for it.
    cuda_gdb_signal: int | None
    #: "lane", "warp", "device", "cluster" or "tma": how much of the GPU the exception blames.
    scope: str
    known: bool = True
    display_from_cuda_gdb: bool = True
    aliases: tuple[str, ...] = ()


def _kind(code, suffix, display, signal, *, cuda_gdb=True, aliases=()):
    scope = suffix.split("_", 1)[0].lower()
    return ExceptionKind(
        code=code,
        name="CUDBG_EXCEPTION_" + suffix,
        display=display,
        cuda_gdb_signal=signal,
        scope=scope,
        display_from_cuda_gdb=cuda_gdb,
        aliases=tuple("CUDBG_EXCEPTION_" + alias for alias in aliases),
    )


def _derived(code, suffix, display=None):
    """A code newer than cuda-gdb's public signal table: cuda-gdb numbers it like the driver."""
    text = display or " ".join(word.capitalize() for word in suffix.split("_"))
    return _kind(code, suffix, text, code, cuda_gdb=False)


_TABLE = (
    _kind(1, "LANE_ILLEGAL_ADDRESS", "Lane Illegal Address", 1, aliases=("RESERVED_0",)),
    _kind(2, "LANE_USER_STACK_OVERFLOW", "Lane User Stack Overflow", 2, aliases=("RESERVED_1",)),
    _kind(3, "DEVICE_HARDWARE_STACK_OVERFLOW", "Device Hardware Stack Overflow", 3,
          aliases=("RESERVED_2",)),
    _kind(4, "WARP_ILLEGAL_INSTRUCTION", "Warp Illegal Instruction", 4),
    _kind(5, "WARP_OUT_OF_RANGE_ADDRESS", "Warp Out-of-range Address", 5),
    _kind(6, "WARP_MISALIGNED_ADDRESS", "Warp Misaligned Address", 6),
    _kind(7, "WARP_INVALID_ADDRESS_SPACE", "Warp Invalid Address Space", 7),
    _kind(8, "WARP_INVALID_PC", "Warp Invalid PC", 8),
    _kind(9, "WARP_HARDWARE_STACK_OVERFLOW", "Warp Hardware Stack Overflow", 9),
    _kind(10, "DEVICE_ILLEGAL_ADDRESS", "Device Illegal Address", 10),
    _kind(11, "LANE_MISALIGNED_ADDRESS", "Lane Misaligned Address", 11, aliases=("RESERVED_3",)),
    _kind(12, "WARP_ASSERT", "Warp Assert", 12),
    _kind(13, "LANE_SYSCALL_ERROR", "Lane Syscall Error", 13, aliases=("RESERVED_4",)),
    _kind(14, "WARP_ILLEGAL_ADDRESS", "Warp Illegal Address", 14),
    _kind(15, "LANE_NONMIGRATABLE_ATOMSYS", "Non-migratable System-scoped Atomic Access", 16,
          aliases=("RESERVED_5",)),
    # cuda-gdb has no signal for this one: it reports it as CUDA_EXCEPTION_0.
    _kind(16, "LANE_INVALID_ATOMSYS", "Device Unknown Exception", None, aliases=("RESERVED_6",)),
    _kind(17, "CLUSTER_OUT_OF_RANGE_ADDRESS", "Cluster out of range address", 18),
    _kind(18, "CLUSTER_BLOCK_NOT_PRESENT", "Cluster target block not present", 17),
    _kind(19, "WARP_STACK_CANARY", "Warp Stack Canary", 19),
    _derived(20, "WARP_TMEM_ACCESS_CHECK"),
    _derived(21, "WARP_TMEM_LEAK"),
    _derived(22, "WARP_CALL_REQUIRES_NEWER_DRIVER"),
    _derived(23, "WARP_MISALIGNED_PC"),
    _derived(24, "WARP_PC_OVERFLOW"),
    _derived(25, "WARP_MISALIGNED_REG"),
    _derived(26, "WARP_ILLEGAL_INSTR_ENCODING"),
    _derived(27, "WARP_ILLEGAL_INSTR_PARAM"),
    _derived(28, "WARP_OUT_OF_RANGE_REGISTER"),
    _derived(29, "WARP_INVALID_CONST_ADDR_LDC"),
    _derived(30, "WARP_MMU_FAULT", "Warp MMU Fault"),
    _derived(31, "WARP_ARRIVE", "Warp Barrier Arrival Mismatch"),
    _derived(32, "CLUSTER_POISON", "Warp Shared Memory Issue"),
    _derived(33, "WARP_API_STACK_ERROR"),
    _derived(34, "WARP_BLOCK_NOT_PRESENT"),
    _derived(35, "WARP_USER_STACK_OVERFLOW"),
    _derived(36, "TMA_SYSCALL"),
    ExceptionKind(UNKNOWN, "CUDBG_EXCEPTION_UNKNOWN", "Device Unknown Exception", 0, "device"),
)

EXCEPTIONS: dict[int, ExceptionKind] = {kind.code: kind for kind in _TABLE}


def describe(code: int) -> ExceptionKind:
    """The table entry for ``code``; a code this build does not know is shown raw."""
    kind = EXCEPTIONS.get(code)
    if kind is not None:
        return kind
    return ExceptionKind(
        code=code,
        name=f"CUDBG exception {code}",
        display=f"CUDBG exception {code} (newer than this crashlab's table)",
        cuda_gdb_signal=None,
        scope="device",
        known=False,
        display_from_cuda_gdb=False,
    )
