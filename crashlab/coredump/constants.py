"""Numbers the CUDA coredump format is built from.

Values come from NVIDIA's public cudacoredump.h and cudadebugger.h headers (shipped with the CUDA
toolkit under extras/Debugger/include), and the ELF ones from the ELF gABI (<elf.h>). Kept apart
from the reader so that the reader's logic never hides a magic number.
"""

from __future__ import annotations

import enum

ELF_MAGIC = b"\x7fELF"
GZIP_MAGIC = b"\x1f\x8b"
#: e_ident's bytes after the magic (the indices of the ELF gABI)
EI_CLASS, EI_DATA, EI_OSABI, EI_ABIVERSION = 4, 5, 7, 8
ELFCLASS64 = 2
ELFDATA2LSB = 1
ET_CORE = 4
EM_CUDA = 190
ELFOSABI_CUDA = 0x33
#: The newest ABI version this reader was written against; a newer one only warns.
KNOWN_ABI_VERSION = 7
SHN_XINDEX = 0xFFFF
SHT_STRTAB = 3
SHT_NOBITS = 8
SHF_EXECINSTR = 0x4
SHT_LOUSER = 0x80000000

#: e_machine values a user is likely to hand us by mistake, for a helpful refusal.
HOST_MACHINES = {3: "x86", 62: "x86-64", 40: "ARM", 183: "AArch64", 20: "PowerPC", 21: "PowerPC64"}
ELF_TYPES = {0: "ET_NONE", 1: "ET_REL", 2: "ET_EXEC", 3: "ET_DYN", 4: "ET_CORE"}


class SectionType(enum.IntEnum):
    """CUDBG_SHT_*: the section types of a CUDA coredump (sh_type = SHT_LOUSER + n)."""

    MANAGED_MEM = SHT_LOUSER + 1
    GLOBAL_MEM = SHT_LOUSER + 2
    LOCAL_MEM = SHT_LOUSER + 3
    SHARED_MEM = SHT_LOUSER + 4
    DEV_REGS = SHT_LOUSER + 5
    ELF_IMG = SHT_LOUSER + 6
    RELF_IMG = SHT_LOUSER + 7
    BT = SHT_LOUSER + 8
    DEV_TABLE = SHT_LOUSER + 9
    CTX_TABLE = SHT_LOUSER + 10
    SM_TABLE = SHT_LOUSER + 11
    GRID_TABLE = SHT_LOUSER + 12
    CTA_TABLE = SHT_LOUSER + 13
    WP_TABLE = SHT_LOUSER + 14
    LN_TABLE = SHT_LOUSER + 15
    MOD_TABLE = SHT_LOUSER + 16
    DEV_PRED = SHT_LOUSER + 17
    PARAM_MEM = SHT_LOUSER + 18
    DEV_UREGS = SHT_LOUSER + 19
    DEV_UPRED = SHT_LOUSER + 20
    CB_TABLE = SHT_LOUSER + 21
    META_DATA = SHT_LOUSER + 22
    CBU_BAR = SHT_LOUSER + 23


#: The parent table each section type hangs off (sh_link names the parent section, sh_info the
#: row in it). Types absent here are roots: they have no parent.
PARENT_TYPE: dict[SectionType, SectionType] = {
    SectionType.CTX_TABLE: SectionType.DEV_TABLE,
    SectionType.SM_TABLE: SectionType.DEV_TABLE,
    SectionType.GRID_TABLE: SectionType.DEV_TABLE,
    SectionType.MOD_TABLE: SectionType.CTX_TABLE,
    SectionType.ELF_IMG: SectionType.MOD_TABLE,
    SectionType.RELF_IMG: SectionType.MOD_TABLE,
    SectionType.PARAM_MEM: SectionType.GRID_TABLE,
    SectionType.CB_TABLE: SectionType.GRID_TABLE,
    SectionType.CTA_TABLE: SectionType.SM_TABLE,
    SectionType.SHARED_MEM: SectionType.CTA_TABLE,
    SectionType.WP_TABLE: SectionType.CTA_TABLE,
    SectionType.LN_TABLE: SectionType.WP_TABLE,
    SectionType.DEV_UREGS: SectionType.WP_TABLE,
    SectionType.DEV_UPRED: SectionType.WP_TABLE,
    SectionType.CBU_BAR: SectionType.WP_TABLE,
    SectionType.DEV_REGS: SectionType.LN_TABLE,
    SectionType.DEV_PRED: SectionType.LN_TABLE,
    SectionType.LOCAL_MEM: SectionType.LN_TABLE,
    SectionType.BT: SectionType.LN_TABLE,
}

#: Types no other section links to (memory, registers, backtraces, cubins, constant banks): one
#: of them can be damaged or missing and the rest of the dump still be read.
LEAF_SECTION_TYPES = frozenset(PARENT_TYPE) - frozenset(PARENT_TYPE.values()) | {
    SectionType.MANAGED_MEM, SectionType.GLOBAL_MEM}

#: Sections holding user memory: listed, never read unless a caller asks for the bytes.
MEMORY_TYPES = frozenset(
    {
        SectionType.MANAGED_MEM,
        SectionType.GLOBAL_MEM,
        SectionType.LOCAL_MEM,
        SectionType.SHARED_MEM,
        SectionType.PARAM_MEM,
    }
)


class GenerationFlag(enum.IntFlag):
    """CUDBGCoredumpGenerationFlags, as recorded in the metadata section."""

    SKIP_NONRELOCATED_ELF_IMAGES = 1 << 0
    SKIP_GLOBAL_MEMORY = 1 << 1
    SKIP_SHARED_MEMORY = 1 << 2
    SKIP_LOCAL_MEMORY = 1 << 3
    SKIP_ABORT = 1 << 4
    SKIP_CONSTBANK_MEMORY = 1 << 5
    GZIP_COMPRESS = 1 << 6
    FAULTED_CONTEXTS_ONLY = 1 << 7
    NO_ERRBAR_AT_EXIT = 1 << 30
    LOG_ONLY = 1 << 31


def generation_flag_names(flags: int) -> list[str]:
    """Names of the set bits; bits this build does not know are kept as hex, not dropped."""
    names = [flag.name.lower() for flag in GenerationFlag if flags & flag.value and flag.name]
    unknown = flags & ~sum(flag.value for flag in GenerationFlag)
    if unknown:
        names.append(hex(unknown))
    return names
