"""One table of CUDA device exceptions, keyed by the driver's CUDBG code.

The CUDBG code (CUDBGException_t in cudadebugger.h) is what a dump stores. cuda-gdb shows the same
exception under its own signal name CUDA_EXCEPTION_n and a display text; its n differs from the
CUDBG code for 15-18, and codes it has no case for are shown as CUDA_EXCEPTION_0 "Device Unknown
Exception" (with the warning "Encountered unhandled device exception (N)"), so all three are kept
side by side. Every display text is taken from a written source, never made up:

``CUDA_GDB``
    NVIDIA/cuda-gdb @ afd75cab550471ffe314247303e4adeb3fb7950b (the CUDA 12.8 tree, the newest
    stored): the texts are ``include/gdb/signals.def`` (CUDA_EXCEPTION_0..19), and which CUDBG code
    maps to which signal is ``cuda_exception::cuda_exception`` / ``type_to_name`` in
    ``gdb/cuda/cuda-exceptions.c``. Real cuda-gdb 12.4 prints the same for every code it knows
    (1-15, 17, 18; tests/test_exceptions.py checks each one); 19 is new in that 12.8 tree.
``LLDB_NVGPU``
    clayborg/llvm-project @ 27983091f5aab25fb7301fd8d1c48aa8a91b2cad,
    ``lldb/source/Utility/NVGPU/CUDAException.cpp``, ``CUDAExceptionToString``: NVIDIA's LLDB
    fork, the only written table for codes 20-35. Newer cuda-gdb (13.x) prints the same texts
    under CUDA_EXCEPTION_<code> in public debugging notes ("CUDA_EXCEPTION_27 Warp Illegal
    Instruction Parameter", "CUDA Exception: Warp MMU Fault", "Warp Barrier Arrival Mismatch").

Names, numbers and scopes follow cudadebugger.h of CUDA 13.4 (API revision 193): since 13.1 codes
1, 2, 3, 11, 13, 15 and 16 are renamed CUDBG_EXCEPTION_RESERVED_0..6, in that order ("no longer
reported"); crashlab names them by their old names, which say what they were. The scope is the
name's prefix, which the header's "Exception Reporting" section defines as the precision of the
exception; TMA_SYSCALL has none and its comment says "Warp error".
"""

from __future__ import annotations

from dataclasses import dataclass

from ..vocabulary import ExceptionScope

UNKNOWN = 0xFFFFFFFF

CUDA_GDB = "cuda-gdb"
LLDB_NVGPU = "lldb-nvgpu"
#: A text crashlab writes itself: only for codes newer than every table (``describe``).
MADE_UP = "crashlab"

#: cuda-gdb's text, and its signal number, for every code it has no case for.
DEVICE_UNKNOWN = "Device Unknown Exception"
DEVICE_UNKNOWN_SIGNAL = 0


@dataclass(frozen=True, slots=True)
class ExceptionKind:
    code: int
    name: str
    display: str
    #: cuda-gdb's CUDA_EXCEPTION_n for this code; None where no source names one.
    cuda_gdb_signal: int | None
    scope: ExceptionScope
    #: where ``display`` comes from: CUDA_GDB, LLDB_NVGPU or MADE_UP (see the module docstring).
    display_source: str
    known: bool = True

    @property
    def display_from_cuda_gdb(self) -> bool:
        """False only where crashlab wrote the text itself."""
        return self.display_source != MADE_UP


def _kind(code, suffix, display, signal, source, *, scope=None):
    return ExceptionKind(
        code=code,
        name="CUDBG_EXCEPTION_" + suffix,
        display=display,
        cuda_gdb_signal=signal,
        scope=scope or suffix.split("_", 1)[0].lower(),
        display_source=source,
    )


def _newer(code, suffix, display, *, scope=None):
    """A code newer than cuda-gdb's public source: LLDB's text, numbered like the driver."""
    return _kind(code, suffix, display, code, LLDB_NVGPU, scope=scope)


_TABLE = (
    _kind(1, "LANE_ILLEGAL_ADDRESS", "Lane Illegal Address", 1, CUDA_GDB),
    _kind(2, "LANE_USER_STACK_OVERFLOW", "Lane User Stack Overflow", 2, CUDA_GDB),
    _kind(3, "DEVICE_HARDWARE_STACK_OVERFLOW", "Device Hardware Stack Overflow", 3, CUDA_GDB),
    _kind(4, "WARP_ILLEGAL_INSTRUCTION", "Warp Illegal Instruction", 4, CUDA_GDB),
    _kind(5, "WARP_OUT_OF_RANGE_ADDRESS", "Warp Out-of-range Address", 5, CUDA_GDB),
    _kind(6, "WARP_MISALIGNED_ADDRESS", "Warp Misaligned Address", 6, CUDA_GDB),
    _kind(7, "WARP_INVALID_ADDRESS_SPACE", "Warp Invalid Address Space", 7, CUDA_GDB),
    _kind(8, "WARP_INVALID_PC", "Warp Invalid PC", 8, CUDA_GDB),
    _kind(9, "WARP_HARDWARE_STACK_OVERFLOW", "Warp Hardware Stack Overflow", 9, CUDA_GDB),
    _kind(10, "DEVICE_ILLEGAL_ADDRESS", "Device Illegal Address", 10, CUDA_GDB),
    # signals.def has CUDA_EXCEPTION_11 "Lane Misaligned Address", but cuda-exceptions.c maps no
    # CUDBG code to it: cuda-gdb (12.4, 12.8) and LLDB show this code as unknown.
    _kind(11, "LANE_MISALIGNED_ADDRESS", DEVICE_UNKNOWN, DEVICE_UNKNOWN_SIGNAL, CUDA_GDB),
    _kind(12, "WARP_ASSERT", "Warp Assert", 12, CUDA_GDB),
    _kind(13, "LANE_SYSCALL_ERROR", "Lane Syscall Error", 13, CUDA_GDB),
    _kind(14, "WARP_ILLEGAL_ADDRESS", "Warp Illegal Address", 14, CUDA_GDB),
    # CUDA_EXCEPTION_15 "Invalid Managed Memory Access" has no CUDBG code, hence the shift.
    _kind(15, "LANE_NONMIGRATABLE_ATOMSYS", "Non-migratable System-scoped Atomic Access", 16,
          CUDA_GDB),
    _kind(16, "LANE_INVALID_ATOMSYS", DEVICE_UNKNOWN, DEVICE_UNKNOWN_SIGNAL, CUDA_GDB),
    # cuda-gdb's texts; LLDB writes these two "Cluster Out-of-range Address" and "Cluster Block
    # Not Present".
    _kind(17, "CLUSTER_OUT_OF_RANGE_ADDRESS", "Cluster out of range address", 18, CUDA_GDB),
    _kind(18, "CLUSTER_BLOCK_NOT_PRESENT", "Cluster target block not present", 17, CUDA_GDB),
    _kind(19, "WARP_STACK_CANARY", "Warp Stack Canary", 19, CUDA_GDB),
    _newer(20, "WARP_TMEM_ACCESS_CHECK", "Warp Tensor Memory Access Check"),
    _newer(21, "WARP_TMEM_LEAK", "Warp Tensor Memory Leak"),
    _newer(22, "WARP_CALL_REQUIRES_NEWER_DRIVER", "Warp Call Requires Newer Driver"),
    _newer(23, "WARP_MISALIGNED_PC", "Warp Misaligned PC"),
    _newer(24, "WARP_PC_OVERFLOW", "Warp PC Overflow"),
    _newer(25, "WARP_MISALIGNED_REG", "Warp Misaligned Register"),
    _newer(26, "WARP_ILLEGAL_INSTR_ENCODING", "Warp Illegal Instruction Encoding"),
    _newer(27, "WARP_ILLEGAL_INSTR_PARAM", "Warp Illegal Instruction Parameter"),
    _newer(28, "WARP_OUT_OF_RANGE_REGISTER", "Warp Out-of-range Register"),
    _newer(29, "WARP_INVALID_CONST_ADDR_LDC", "Warp Invalid Constant Address"),
    _newer(30, "WARP_MMU_FAULT", "Warp MMU Fault"),
    _newer(31, "WARP_ARRIVE", "Warp Barrier Arrival Mismatch"),
    _newer(32, "CLUSTER_POISON", "Cluster Shared Memory Issue"),
    _newer(33, "WARP_API_STACK_ERROR", "Warp API Stack Error"),
    _newer(34, "WARP_BLOCK_NOT_PRESENT", "Warp Block Not Present"),
    _newer(35, "WARP_USER_STACK_OVERFLOW", "Warp User Stack Overflow"),
    # New in CUDA 13.3 (debugger API release notes). No table has a case for it: LLDB's falls to
    # its default, as cuda-gdb's does, so both show it as unknown.
    _kind(36, "TMA_SYSCALL", DEVICE_UNKNOWN, DEVICE_UNKNOWN_SIGNAL, LLDB_NVGPU, scope="warp"),
    ExceptionKind(UNKNOWN, "CUDBG_EXCEPTION_UNKNOWN", DEVICE_UNKNOWN, DEVICE_UNKNOWN_SIGNAL,
                  "device", CUDA_GDB),
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
        display_source=MADE_UP,
        known=False,
    )
