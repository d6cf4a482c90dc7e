"""Which torch symbols an extension module needs and whether torch's libraries define them,
read from the ELF files (as ``nm -D`` would), never by loading them.

An extension built against another torch fails at import with ``undefined symbol:
_ZN3c104cuda9SetDeviceEi`` (sglang#5100, #5247): the dynamic linker looks up every undefined
symbol of the .so in the libraries it needs. The same lookup is done here in the libraries'
own hash tables (``.gnu.hash`` or ``.hash``, as ld.so does), so a 480 MB libtorch_cuda.so costs
a few page reads per symbol rather than a walk of its 100,000-entry symbol table.
"""

from __future__ import annotations

import re
import struct
from contextlib import ExitStack
from pathlib import Path

from elftools.common.exceptions import ELFError, ELFParseError
from elftools.elf.elffile import ELFFile
from elftools.elf.hash import ELFHashSection, GNUHashSection
from elftools.elf.sections import SymbolTableSection

#: A mangled name in torch's C++ namespaces (c10, at, torch, caffe2), a member, a const member,
#: or its vtable / typeinfo; or a function of torch's stable C ABI (``aoti_torch_*``,
#: ``torch_*``, what torchvision's ``_C_stable.so`` calls): the symbols only torch defines.
TORCH_SYMBOL = re.compile(r"^(?:_Z(?:T[VIS])?N[rVKRO]*(?:3c10|2at|5torch|6caffe2)\d|aoti_torch_|torch_)")


class Unreadable(Exception):
    """A shared library that cannot be read as ELF (truncated, not ELF, unreadable)."""

    def __init__(self, path: Path, problem: Exception):
        super().__init__(f"{path}: {problem}")
        self.path, self.problem = path, problem


#: What pyelftools raises on a file that is not ELF or is cut short, and what reading it may.
_BROKEN = (OSError, ELFError, ELFParseError, struct.error)


def undefined_torch_symbols(path: Path) -> list[str]:
    """The torch symbols ``path`` needs from another library (weak ones are optional)."""
    try:
        with open(path, "rb") as handle:
            table = ELFFile(handle).get_section_by_name(".dynsym")
            if not isinstance(table, SymbolTableSection):
                return []
            return sorted({symbol.name for symbol in table.iter_symbols()
                           if symbol["st_shndx"] == "SHN_UNDEF"
                           and symbol["st_info"]["bind"] == "STB_GLOBAL"
                           and TORCH_SYMBOL.match(symbol.name)})
    except _BROKEN as problem:
        raise Unreadable(path, problem) from None


def missing_from(libraries: list[Path], names: list[str]) -> list[str]:
    """Those of ``names`` that none of ``libraries`` defines; Unreadable when one of them cannot
    be read, since a library that could not be read defines what it defines all the same."""
    with ExitStack() as stack:
        tables = []
        for library in libraries:
            try:
                tables.append((library, _hash_table(ELFFile(stack.enter_context(open(library, "rb"))))))
            except _BROKEN as problem:
                raise Unreadable(library, problem) from None
        return [name for name in names if not any(_defines(library, table, name)
                                                  for library, table in tables)]


def _hash_table(elf: ELFFile):
    for section in elf.iter_sections():
        if isinstance(section, (GNUHashSection, ELFHashSection)):
            return section
    return elf.get_section_by_name(".dynsym")


def _defines(library: Path, table, name: str) -> bool:
    if table is None:
        return False
    try:
        if isinstance(table, SymbolTableSection):  # no hash section: the slow walk
            found = next((s for s in table.iter_symbols() if s.name == name), None)
        else:
            found = table.get_symbol(name)
    except _BROKEN as problem:
        raise Unreadable(library, problem) from None
    return found is not None and found["st_shndx"] != "SHN_UNDEF"
