"""Kernel arguments that are not what their type says.

A pointer argument whose value no kernel could use as its type says (null, an integer, two
int32s packed into one slot, misaligned for its pointee, or pointing at no memory the dump
knows) is often the whole story of a fault: the kernel was handed the wrong thing. Each check
is a plain reading of the value against its type from the demangled signature; where the type
is not known (the signature did not match the cubin) nothing is claimed. The checks are
suspicions, shown beside the value, never a verdict on the fault.

Where the lines are drawn, and why:
- a small integer: a 64-bit pointer whose value fits in 32 bits (below 4 GiB). An ``int`` passed
  where a pointer goes reads so; device allocations of a 64-bit process live far above it (in
  the process's mmap area, or the driver's reserved ranges), and nothing at all lies below
  64 KiB (Linux's vm.mmap_min_addr). Memory a kernel reaches through HMM/ATS in a non-PIE
  program's low heap would be flagged wrongly: the reason says what was seen, not a verdict.
- two packed int32s: both halves nonzero, the low one below 65,536 and the high one below
  4,096 (shapes, counts and ids), as in vllm#52540. The high limit keeps the process's mmap
  area and the driver's ranges (16 TiB and up, 0x7f... on x86-64) out of it, where an allocation
  aligned to 4 GiB would otherwise read as packed; a value inside memory the dump holds is never
  called packed.
- outside every address window: only where the dump holds the process's global memory (written
  without skip_global_memory): otherwise the dump cannot tell where allocations are, and nothing
  is said. The global memory sections of a dump made with that flag are its constant banks'
  copies (CoreDump.process_memory), never taken for the process's memory.
  Pinned host memory a kernel reads through its mapped pointer is not in a dump: the reason
  says so, for such a pointer is flagged too.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from functools import cached_property

from ..coredump.constants import SectionType
from ..coredump.core import CoreDump
from ..notation import counted
from . import model
from .params import QUALIFIERS
from .text import readable_name

SMALL_INTEGER_LIMIT = 1 << 32
PACKED_HALF_LIMIT = 1 << 16
PACKED_HIGH_LIMIT = 1 << 12
#: The dump records where each context's shared and local windows begin, not how far they go:
#: a pointer up to this far past a base is taken as inside, so that 'outside' is never said of
#: a pointer that may be inside (a cluster's shared windows on sm_90+ span 2**24 bytes per rank).
WINDOW_SPAN = 1 << 32
#: The flag that keeps the parameter buffer (and the constant banks) out of a dump.
SKIP_CONSTBANK = "skip_constbank_memory"
#: Bytes of an element, by the pointee's type name as the demangler spells it; a name not here
#: (a struct, void) gets no alignment claim.
POINTEE_BYTES = {
    **dict.fromkeys(("short", "unsigned short", "__half", "half", "__nv_half", "__nv_bfloat16",
                     "nv_bfloat16", "c10::Half", "c10::BFloat16", "at::Half", "at::BFloat16"), 2),
    **dict.fromkeys(("int", "unsigned int", "float", "__half2", "__nv_bfloat162", "char32_t",
                     "wchar_t"), 4),
    **dict.fromkeys(("long", "unsigned long", "long long", "unsigned long long", "double",
                     "int2", "uint2", "float2"), 8),
    **dict.fromkeys(("int4", "uint4", "float4", "double2", "long2", "ulong2", "longlong2",
                     "ulonglong2"), 16),
}


@dataclass(frozen=True)
class KnownMemory:
    """The address ranges a dump holds or names: its global and managed memory sections, each
    context's shared and local windows; a fault adds its constant banks and parameter buffer."""

    ranges: tuple[tuple[int, int], ...]
    global_sections: int

    @cached_property
    def _starts_and_ends(self) -> tuple[list[int], list[int]]:
        """The ranges merged where they overlap, sorted: a lookup is one bisection, whatever
        the number of sections."""
        starts: list[int] = []
        ends: list[int] = []
        for start, end in sorted(self.ranges):
            if starts and start <= ends[-1]:
                ends[-1] = max(ends[-1], end)
            else:
                starts.append(start)
                ends.append(end)
        return starts, ends

    def holds(self, address: int) -> bool:
        starts, ends = self._starts_and_ends
        at = bisect_right(starts, address) - 1
        return at >= 0 and address < ends[at]

    def with_fault(self, fault: model.Fault) -> KnownMemory:
        extra = [(int(b.address, 16), int(b.address, 16) + b.size) for b in fault.const_banks]
        if fault.params is not None:
            start = int(fault.params.address, 16)
            extra.append((start, start + fault.params.size))
        return KnownMemory(self.ranges + tuple(extra), self.global_sections)


def known_memory(core: CoreDump) -> KnownMemory | None:
    """What the dump knows of the address space; None where it holds none of the process's
    global memory (only its constant banks' copies, as under skip_global_memory), for then an
    address outside it says nothing. Shared and local sections lie in the contexts' windows,
    which stand for them: a dump of millions of lanes is not listed."""
    regions = core.process_memory()
    global_sections = sum(r.kind == SectionType.GLOBAL_MEM.name for r in regions)
    if not global_sections:
        return None
    ranges = [(r.address, r.address + r.size) for r in regions]
    for device in core.devices:
        for context in core.contexts(device):
            ranges += [(base, base + WINDOW_SPAN) for base in
                       (context.shared_window_base, context.local_window_base) if base]
    return KnownMemory(tuple(ranges), global_sections)


def pointee(type_name: str | None) -> str | None:
    """The type a pointer parameter points to (``int const*`` -> ``int``), None for a
    parameter that is not a pointer or whose type is not known."""
    if not type_name:
        return None
    words = type_name.replace("*", " * ").split()
    while words and words[-1] in QUALIFIERS:
        words.pop()
    if not words or words[-1] != "*":
        return None
    words.pop()
    kept = [w for w in words if w not in QUALIFIERS]
    return " ".join(kept).replace(" *", "*") or None


def element_bytes(pointee_type: str) -> int | None:
    """Bytes of one element of ``pointee_type``: a pointer's 8, a known scalar's; None for a
    struct or void (no alignment claim)."""
    if pointee_type.endswith("*"):
        return 8
    return POINTEE_BYTES.get(pointee_type)


def suspect(param: model.Param, known: KnownMemory | None) -> str | None:
    """Why ``param``'s value is not what its pointer type says, or None."""
    target = pointee(param.type)
    if target is None or param.size != 8 or param.value is None:
        return None
    value = param.value
    if value == 0:
        return "null pointer"
    if value < SMALL_INTEGER_LIMIT:
        return f"a small integer ({value}) where a pointer goes: below 4 GiB"
    inside = known is not None and known.holds(value)
    low, high = value & 0xFFFF_FFFF, value >> 32
    if not inside and 0 < low < PACKED_HALF_LIMIT and 0 < high < PACKED_HIGH_LIMIT:
        return (f"two packed int32s ({low} and {high}, as a struct of two ints lays them) "
                "where a pointer goes")
    size = element_bytes(target)
    if size and value % size:
        return f"misaligned for {target} ({size}-byte elements): {value % size} bytes past a boundary"
    if known is not None and not inside:
        return (f"outside every address range the dump holds ("
                f"{counted(known.global_sections, 'global memory section')}, the shared and local "
                "windows, the constant banks, the parameter buffer; host memory mapped for the "
                "GPU is not dumped)")
    return None


def flag_arguments(fault: model.Fault, known: KnownMemory | None) -> None:
    """Set ``suspect`` on each parameter of ``fault`` whose value its type rules out."""
    if fault.params is None:
        return
    known = known.with_fault(fault) if known is not None else None
    for param in fault.params.values:
        param.suspect = suspect(param, known)


def params_missing(generation_flags: list[str] | None) -> str:
    """Why a faulting kernel's parameter buffer is not in the dump, and what to change next
    time; ``generation_flags`` None where the dump records none."""
    if generation_flags is None:
        return ("the dump holds no parameter buffer for this kernel and records no generation "
                f"flags; if CUDA_COREDUMP_GENERATION_FLAGS held {SKIP_CONSTBANK} (SGLang's and "
                "vLLM's default), drop it next time")
    if SKIP_CONSTBANK in generation_flags:
        return (f"the dump holds no parameter buffer for this kernel: it was written with "
                f"{SKIP_CONSTBANK}; drop {SKIP_CONSTBANK} from CUDA_COREDUMP_GENERATION_FLAGS "
                "next time")
    return ("the dump holds no parameter buffer for this kernel although it was written without "
            f"{SKIP_CONSTBANK}: no generation flag is known to bring it back")


def suspect_items(params: model.Params | None) -> list[tuple[str, str]]:
    """(``#0 int const* = 0x3``, why) per suspect argument: the argument as the params row
    names it, and the reason."""
    if params is None:
        return []
    return [(f"#{p.ordinal} {readable_name(p.type, 60)} = {p.shown}", p.suspect)
            for p in params.values if p.suspect and p.type is not None]
