"""Why cuda-gdb can find no source line where crashlab finds one: a line table left unrelocated.

Settled on the bundled MoE dump (fixtures/synthetic/moe_align_out_of_range.nvcudmp), where
cuda-gdb 12.4 said "No line number information available for address 0x7fff3a000210" and
crashlab said ``device_atomic_functions.hpp:107 <- moe_align.cu:24``:

- crashlab is right. ``nvdisasm -gi`` on the original cubin (fixtures/cubins/moe_align.sm_90.cubin)
  puts offset 0x210 of ``.text._Z20moe_align_block_sizePKiPii`` (the ``ATOMS.POPC.INC.32``) at
  device_atomic_functions.hpp line 107, inlined at moe_align.cu line 24.
- cuda-gdb reads line numbers from the relocated image's ``.debug_line`` as it stands: the image
  is an ET_EXEC ELF, so no relocation is applied by the debugger. In the synthetic dumps the
  builder gave the code its GPU addresses (section ``sh_addr``, symbol values) but left the
  ``.rela.debug_line`` (and ``.rela.nv_debug_line_sass``, ``.rela.debug_frame``) relocations
  unapplied, so each line sequence still starts at ``DW_LNE_set_address 0x0``: the table covers
  0x0-0x400, not 0x7fff3a000000-. A driver is expected to apply them when it relocates an image
  (public cuda-gdb transcripts of real dumps show source lines); no dump from a GPU has been
  checked here yet.
- With those relocations applied (R_CUDA_64: symbol value + addend written at the offset) to a
  copy of the dump, the same cuda-gdb 12.4 prints ``Line 107 of ".../device_atomic_functions.hpp"
  starts at address 0x7fff3a000210 ... inlined from ..atomicAddEPii at line 24 of moe_align.cu``,
  the exception line gains ``(device_atomic_functions.hpp:107 in ..atomicAddEPii inlined from
  moe_align.cu:24)`` and ``bt`` gains ``at moe_align.cu:23`` for the current PC, all as crashlab
  says. Its warning "CUDA ELF Image contains unknown ABI version: 8" (CUDA 13 cubins) does not
  stop it from reading the table.

This module detects that case in a dump, so that the agreement says why the two sides differ.
"""

from __future__ import annotations

import os
import struct
from functools import lru_cache

from ..coredump.core import CoreDump
from ..cubin import Cubin, CubinError
from ..errors import CoreFormatError

#: The relocation sections of a cubin's line tables.
LINE_RELOCATIONS = (".rela.debug_line", ".rela.nv_debug_line_sass")


def unrelocated_line_table(core_path: str, pc: int) -> str | None:
    """A sentence saying that the relocated cubin holding ``pc`` has line-table relocations
    that were never applied (so cuda-gdb finds no line for any of its code), or None."""
    try:
        stat = os.stat(core_path)
        verdicts = _image_verdicts(core_path, stat.st_size, stat.st_mtime_ns)
    except (OSError, CoreFormatError, CubinError):
        return None
    return next((sentence for low, high, sentence in verdicts if low <= pc < high and sentence), None)


@lru_cache(maxsize=2)
def _image_verdicts(core_path: str, size: int, mtime_ns: int) -> tuple[tuple[int, int, str | None], ...]:
    """(start, end, sentence or None) of each code section of the dump's relocated cubins, worked
    out once per file version for every fault the flow checks (opening a dump of millions of
    sections again per fault would cost a second each)."""
    verdicts = []
    with CoreDump(core_path) as core:
        for section, _module in core.relocated_images():
            cubin = core.cubin(section)
            sentence = _unapplied(cubin)
            verdicts += [(s.address, s.address + s.size, sentence)
                         for s in cubin.sections if s.executable]
    return tuple(verdicts)


def _unapplied(cubin: Cubin) -> str | None:
    for name in LINE_RELOCATIONS:
        relocations = cubin.section(name)
        if relocations is None or not 0 < relocations.info < len(cubin.sections):
            continue
        table = cubin.sections[relocations.info]
        data = cubin.section_data(table)
        for relocation in cubin.relocations(name):
            offset = relocation.offset
            if offset + 8 > len(data):
                continue
            wanted = relocation.symbol.value + relocation.addend
            (stored,) = struct.unpack_from("<Q", data, offset)
            if stored != wanted:
                return (f"the dump's relocated cubin left its line table at the cubin's own "
                        f"addresses ({name} not applied: {table.name} says {stored:#x} where its "
                        f"code is at {wanted:#x}), so cuda-gdb, which reads the image as is, "
                        f"finds no line; crashlab reads it relative to the function, as nvdisasm "
                        f"-gi does on the original cubin")
    return None
