"""The verdict on a faulting address: which memory space it falls in and how it stands against the
bounds the dump holds (the static shared size in the cubin, the warp's recorded shared memory size,
the stack frame, the global segments the dump carries). Each verdict says its basis; where the dump
lacks the bound, it is "undetermined" and says why, never a guessed bound.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..cubin.nvinfo import SharedLayout
from ..notation import counted
from ..report import model
from ..sass.access import Space

#: bits 24+ of a shared address carry the CTA's rank in its cluster on sm_90+
RANK_SHIFT = 24
WINDOW_SIZE = 1 << 32
NULL_PAGE = 0x1000
SMALL_INTEGER = 0x10000


@dataclass(frozen=True)
class Windows:
    """A context's generic-address windows (Context rows: sharedWindowBase, localWindowBase)."""

    shared_base: int | None
    local_base: int | None


@dataclass
class Bounds:
    """The bounds the dump holds for one faulting lane."""

    shared: SharedLayout | None = None
    sm90: bool = False
    cluster_blocks: int = 1
    #: the warp's sharedMemSize (r570+ rows); None where the row lacks it or it is 0
    shared_mem_size: int | None = None
    frame_size: int | None = None
    stack_pointer: int | None = None
    #: the faulting function is the kernel itself with no caller (no backtrace rows): nothing of
    #: the thread's stack lies above its frame
    outermost: bool = False
    #: constant bank id -> size, from the dump's constant bank table (r550+)
    constant_banks: dict[int, int] = field(default_factory=dict)
    global_segments: list[tuple[int, int]] = field(default_factory=list)


def classify(space: Space, address: int, wide: bool, windows: Windows) -> tuple[Space, int]:
    """(space, address or window offset): a generic address in the shared or local window
    becomes an offset in it; a 32-bit address of a generic op is a window offset already."""
    if space != "generic":
        return space, address
    bases: tuple[tuple[Space, int | None], ...] = (("shared", windows.shared_base),
                                                    ("local", windows.local_base))
    for name, base in bases:
        if base and base <= address < base + WINDOW_SIZE:
            return name, address - base
    if windows.shared_base is None and windows.local_base is None:
        return "generic", address
    return "global", address


def verdict(space: str, address: int | None, size: int | None, bounds: Bounds,
            bank: int | None = None) -> model.Verdict:
    if address is None:
        return model.Verdict.model_construct(kind="undetermined", basis="the address could not be computed: a "
                             "register it reads is not in the dump")
    if space in ("global", "generic"):
        pointer = _pointer(address)
        if pointer is not None:
            return pointer
    if size and address % size:
        return model.Verdict.model_construct(kind="misaligned", basis=f"{address:#x} is not a multiple of the "
                             f"access size, {size} bytes")
    if space == "shared":
        return _shared(address, size or 1, bounds)
    if space == "local":
        return _local(address, size or 1, bounds)
    if space == "global":
        return _global(address, size or 1, bounds)
    if space == "constant" and bank is not None:
        return _constant(bank, address, size or 1, bounds)
    return model.Verdict.model_construct(kind="undetermined", basis=f"no bound of {space} memory is checked")


def _pointer(address: int) -> model.Verdict | None:
    if address < NULL_PAGE:
        return model.Verdict.model_construct(kind="null", basis=f"{address:#x} lies in the first page: a null "
                             "pointer plus an offset")
    if address < SMALL_INTEGER:
        return model.Verdict.model_construct(kind="not-a-pointer", basis=f"{address:#x} is a small integer "
                             "used as an address")
    return None


def _shared(offset: int, size: int, bounds: Bounds) -> model.Verdict:
    rank, within = (offset >> RANK_SHIFT, offset & ((1 << RANK_SHIFT) - 1)) if bounds.sm90 else (0, offset)
    if rank >= bounds.cluster_blocks:
        return model.Verdict.model_construct(kind="out-of-bounds", basis=(
            f"bits 24+ of shared offset {offset:#x} name CTA rank {rank}, but the block's "
            f"cluster has {counted(bounds.cluster_blocks, 'block')}"))
    layout = bounds.shared
    start = layout.start if layout else (0x400 if bounds.sm90 else 0)
    if within < start:
        return model.Verdict.model_construct(kind="out-of-bounds", basis=(
            f"shared offset {within:#x} lies in the first {start:#x} bytes of the block's "
            "window, which the system reserves on sm_90+"))
    end = within + size
    declared = layout.declared if layout else 0
    named = (f"the {declared:#x} bytes of static shared memory the kernel declares "
             f"({layout.section}, from offset {start:#x})") if layout and declared else (
        "the kernel's static shared memory (it declares none)")
    if end <= start + declared:
        return model.Verdict.model_construct(kind="inside", basis=f"offset {within:#x} is inside {named}")
    recorded = bounds.shared_mem_size
    if recorded is None:
        return model.Verdict.model_construct(kind="undetermined", basis=(
            f"offset {within:#x} (+{size} bytes) is past {named}; the dump records no shared "
            "memory size for the warp (sharedMemSize, driver r570+), so dynamic shared memory "
            "beyond them is not ruled out"))
    # Where the block's shared memory ends in its window. On sm_90+ a sharedMemSize of at least
    # the reserve counts it: every warp of the 18 whole dumps an H200 wrote (driver 580.159,
    # fixtures/gpu/h200) records 0x400 plus what the kernel and its launch gave (dynamic_shared's
    # 256 bytes as 0x500, a kernel without shared memory as 0x400); a smaller one cannot.
    counts_reserve = bool(start) and recorded >= start
    limit = recorded if counts_reserve else start + recorded
    reading = (f"which counts the {start:#x} reserve" if counts_reserve else
               f"read as bytes after the {start:#x} reserve" if start else "")
    size_named = f"the warp's sharedMemSize {recorded:#x}" + (f", {reading}" if reading else "")
    if end > limit:
        return model.Verdict.model_construct(kind="out-of-bounds", past_bound=end - limit, basis=(
            f"offset {within:#x} (+{size} bytes) is past {named} and past {size_named}"))
    return model.Verdict.model_construct(kind="inside", basis=(
        f"offset {within:#x} is past {named} but inside {size_named} (dynamic shared memory)"))


def _local(offset: int, size: int, bounds: Bounds) -> model.Verdict:
    sp, frame = bounds.stack_pointer, bounds.frame_size
    if sp is None or frame is None:
        return model.Verdict.model_construct(kind="undetermined", basis=(
            "the stack pointer R1 or the function's frame size (EIATTR_FRAME_SIZE) is not in "
            "the dump"))
    if sp <= offset and offset + size <= sp + frame:
        return model.Verdict.model_construct(kind="inside", basis=(
            f"local offset {offset:#x} is inside this function's frame [{sp:#x}, "
            f"{sp + frame:#x}) (R1 and EIATTR_FRAME_SIZE {frame:#x})"))
    if offset + size > sp + frame and offset >= sp and bounds.outermost:
        return model.Verdict.model_construct(kind="out-of-bounds", past_bound=offset + size - (sp + frame), basis=(
            f"local offset {offset:#x} (+{size} bytes) is past the kernel's frame [{sp:#x}, "
            f"{sp + frame:#x}) (R1 and EIATTR_FRAME_SIZE {frame:#x}); the lane has no caller, so "
            "no stack lies above it"))
    return model.Verdict.model_construct(kind="undetermined", basis=(
        f"local offset {offset:#x} is outside this function's frame [{sp:#x}, {sp + frame:#x}) "
        "(R1 and EIATTR_FRAME_SIZE): a caller's frame or past the thread's local memory, whose "
        "size the dump does not record"))


def _global(address: int, size: int, bounds: Bounds) -> model.Verdict:
    segments = bounds.global_segments
    for start, length in segments:
        if start <= address and address + size <= start + length:
            return model.Verdict.model_construct(kind="inside", basis=(
                f"{address:#x} is inside the global memory segment [{start:#x}, "
                f"{start + length:#x}) the dump holds"))
    if not segments:
        return model.Verdict.model_construct(kind="undetermined", basis=(
            "the dump holds none of the process's global memory (skip_global_memory), so no "
            "allocation bound is known"))
    return model.Verdict.model_construct(kind="undetermined", basis=(
        f"{address:#x} is outside the {counted(len(segments), 'global memory segment')} the dump holds; "
        "the dump does not list every allocation, so no bound is asserted"))


def _constant(bank: int, offset: int, size: int, bounds: Bounds) -> model.Verdict:
    recorded = bounds.constant_banks.get(bank)
    if recorded is None:
        return model.Verdict.model_construct(kind="undetermined", basis=(
            f"the dump's constant bank table has no bank {bank} for this grid"))
    if offset + size <= recorded:
        return model.Verdict.model_construct(kind="inside", basis=(
            f"offset {offset:#x} is inside the {recorded:#x} bytes of constant bank {bank} the "
            "dump's constant bank table records"))
    return model.Verdict.model_construct(kind="out-of-bounds", past_bound=offset + size - recorded, basis=(
        f"offset {offset:#x} (+{size} bytes) is past the {recorded:#x} bytes of constant bank "
        f"{bank} the dump's constant bank table records"))
