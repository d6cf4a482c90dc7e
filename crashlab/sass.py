"""SASS around a faulting PC: carve the relocated cubin out of the dump, disassemble with nvdisasm.

The dump keeps every loaded module as a relocated cubin whose executable sections carry their
GPU addresses in sh_addr, so the cubin whose ``.text.*`` section holds the PC is the code that
ran. Before nvdisasm sees it, the carved copy is rebased to address 0 (sh_addr and symbol values),
which nvdisasm always accepts and which makes its printed addresses offsets into the section,
whatever the driver did with the symbol values. Line info comes from nvdisasm's ``-gi`` comments,
which give the inline chain innermost first; where there is no listing (no nvdisasm, or
disassembly not asked for) it comes from the cubin's own line table (crashlab.lineinfo), which
gives the same chains, so a report and its signature do not depend on nvdisasm being installed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import io
import os
import re
import subprocess
import tempfile
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path

from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection

from . import sass_cache
from .coredump.constants import SHF_EXECINSTR
from .coredump.core import CoreDump
from .coredump.layouts import SECTION_HEADER, SYMBOL, Field
from .coredump.model import Grid
from .lineinfo import LineTable, LineTableError, SourceLine
from .lineinfo import read as read_line_table
from .toolpath import find_cuda_tool

NVDISASM_TIMEOUT_S = 120
#: A cubin's ``.text.*`` sh_info names its function's symbol; cubins before Hopper also pack the
#: function's register count into the top byte (``(regs << 24) | symbol``), which nvdisasm's
#: ``-fun`` refuses ("No symbol with index 469762087"), so only the low 24 bits are an index.
_TEXT_SYMBOL_BITS = 0xFFFFFF
_SECTION_ADDRESS = SECTION_HEADER.by_name["addr"]
_SYMBOL_VALUE = SYMBOL.by_name["value"]
_INSTRUCTION = re.compile(r"^\s*/\*([0-9a-fA-F]+)\*/\s+(.*?)\s*;?\s*(?:/\*[^*]*\*/\s*)?$")
_LINE_INFO = re.compile(r'//## File "(?P<file>[^"]*)", line (?P<line>\d+)(?P<inlined> inlined at)?')
_LABEL = re.compile(r"^\s*(\.L_x_\d+):\s*$")
_GUARD_AND_OPCODE = re.compile(r"^(?:(@!?U?P\w+)\s+)?(\S+)\s*(.*)$")
_LABEL_USE = re.compile(r"`\((\.L_x_\d+)\)")


@dataclass(frozen=True)
class Instruction:
    """One SASS instruction. In a function's listing ``address`` and ``target`` are offsets into
    its text section; in a SassView they are GPU addresses."""

    address: int
    text: str
    faulting: bool = False
    current: bool = False
    source: tuple[SourceLine, ...] = ()
    #: the opcode with its modifiers (``LDG.E.64``), its guard (``@!P1``) and its operands as
    #: nvdisasm prints them, split at top-level commas (``desc[UR6][R2.64]``, ``R9``)
    opcode: str = ""
    predicate: str | None = None
    operands: tuple[str, ...] = ()
    #: a branch's target, where nvdisasm names one
    target: int | None = None


@dataclass(frozen=True)
class CodeLocation:
    """Where a PC lies in the dump's code: which cubin, which section, which function."""

    image_section: int
    text_section: str
    text_address: int
    function_symbol: int
    function: str | None
    function_offset: int | None
    section_offset: int = 0


@dataclass
class SassView:
    location: CodeLocation | None = None
    instructions: list[Instruction] = field(default_factory=list)
    #: the faulting instruction's inline chain, innermost first
    source: list[SourceLine] = field(default_factory=list)
    unavailable_reason: str | None = None
    tool: str | None = None

    @property
    def function(self) -> str | None:
        return self.location.function if self.location else None


# -- finding the code -----------------------------------------------------------------------
@dataclass
class _Function:
    name: str
    start: int  # offset into its section
    size: int


@dataclass
class _Text:
    index: int
    name: str
    address: int
    size: int
    symbol: int  # its function's symbol index, from sh_info (nvdisasm -fun)
    functions: list[_Function]


@dataclass
class _Cubin:
    section: int
    texts: list[_Text]
    #: (field, file offset of its section header or symbol, value) to write to rebase to 0
    rebase: list[tuple[Field, int, int]]


def _parse_cubin(section: int, data: bytes) -> _Cubin:
    elf = ELFFile(io.BytesIO(data))
    shoff, shentsize = elf["e_shoff"], elf["e_shentsize"]
    addresses = {}
    rebase = []
    texts = []
    for index, sec in enumerate(elf.iter_sections()):
        addresses[index] = sec["sh_addr"]
        if sec["sh_addr"]:
            rebase.append((_SECTION_ADDRESS, shoff + index * shentsize, 0))
        if sec["sh_flags"] & SHF_EXECINSTR and sec["sh_size"]:
            texts.append(_Text(index, sec.name, sec["sh_addr"], sec["sh_size"],
                               sec["sh_info"] & _TEXT_SYMBOL_BITS, []))
    by_index = {text.index: text for text in texts}
    symtab = elf.get_section_by_name(".symtab")
    if isinstance(symtab, SymbolTableSection):
        base, entsize = symtab["sh_offset"], symtab["sh_entsize"]
        for number, symbol in enumerate(symtab.iter_symbols()):
            shndx = symbol["st_shndx"]
            if not isinstance(shndx, int):
                continue
            value, address = symbol["st_value"], addresses.get(shndx, 0)
            relative = value - address if address and value >= address else value
            if relative != value:
                rebase.append((_SYMBOL_VALUE, base + number * entsize, relative))
            text = by_index.get(shndx)
            if text is not None and symbol["st_info"]["type"] == "STT_FUNC":
                text.functions.append(_Function(symbol.name, relative, symbol["st_size"]))
    return _Cubin(section, texts, rebase)


class CodeFinder:
    """Maps PCs to the relocated cubins of one dump, parsing each cubin at most once."""

    def __init__(self, core: CoreDump):
        self.core = core
        self._parsed: dict[int, _Cubin | None] = {}
        #: nvdisasm's listings of each cubin disassembled so far, by text section (or why there
        #: are none): one nvdisasm run per cubin per dump at most, none where the cache has it
        self.listings: dict[int, dict[str, list[Instruction]] | str] = {}
        self._line_tables: dict[int, LineTable | None] = {}
        self.problems: list[str] = []

    def _cubin(self, section: int) -> _Cubin | None:
        if section not in self._parsed:
            try:
                self._parsed[section] = _parse_cubin(section, self.core.image_bytes(section))
            except Exception as exc:  # pyelftools raises many types on a damaged image
                self.problems.append(f"relocated cubin in section {section} is unreadable: {exc}")
                self._parsed[section] = None
        return self._parsed[section]

    def line_table(self, section: int) -> LineTable | None:
        """The line table of the relocated cubin in ``section``, read once; None where it has
        none or it is unreadable (then ``problems`` says why)."""
        if section not in self._line_tables:
            try:
                table = self._line_tables[section] = read_line_table(self.core.image_bytes(section))
                self.problems += [f"relocated cubin in section {section}: {problem}"
                                  for problem in (table.problems if table else [])]
            except LineTableError as exc:
                self.problems.append(f"the line table of the relocated cubin in section {section} "
                                     f"is unreadable ({exc}); its source lines are left out")
                self._line_tables[section] = None
        return self._line_tables[section]

    def source_lines(self, location: CodeLocation) -> list[SourceLine]:
        """The inline chain at ``location``, innermost first, from the cubin's line table."""
        table = self.line_table(location.image_section)
        return list(table.chain(location.text_section, location.section_offset)) if table else []

    @cached_property
    def _images(self):
        return self.core.relocated_images()

    def _candidates(self, grid: Grid | None):
        """The faulting grid's own module first, then the rest of its device, then all."""
        seen = set()
        everything = self._images
        if grid is not None:
            ordered = [s for s, m in everything if m.module_handle == grid.module_handle
                       and m.context.device is grid.device]
            ordered += [s for s, m in everything if m.context.device is grid.device]
        else:
            ordered = []
        ordered += [s for s, _ in everything]
        for section in ordered:
            if section not in seen:
                seen.add(section)
                yield section

    def locate(self, pc: int, grid: Grid | None = None) -> tuple[CodeLocation, _Cubin] | None:
        for section in self._candidates(grid):
            cubin = self._cubin(section)
            if cubin is None:
                continue
            for text in cubin.texts:
                if text.address <= pc < text.address + text.size:
                    return _location(section, text, pc - text.address), cubin
        return None


def _location(section: int, text: _Text, offset: int) -> CodeLocation:
    # A kernel's symbol can span the non-inlined callees nvcc places after it in its section
    # ($__internal_0_$__cuda_sm20_div_u64 and the like): the innermost holder names the PC.
    holders = [f for f in text.functions if f.start <= offset < f.start + max(f.size, 1)]
    holder = max(holders, key=lambda f: f.start, default=None)
    return CodeLocation(
        image_section=section,
        text_section=text.name,
        text_address=text.address,
        function_symbol=text.symbol,
        function=holder.name if holder else None,
        function_offset=offset - holder.start if holder else None,
        section_offset=offset,
    )


# -- disassembling --------------------------------------------------------------------------
def find_nvdisasm() -> tuple[str | None, str]:
    """Path of nvdisasm, or None and a sentence saying where it was looked for."""
    found, problem = find_cuda_tool("nvdisasm", "CRASHLAB_NVDISASM")
    if found or problem:
        return found, problem
    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations or []) if spec else []:
        for candidate in sorted(Path(root).glob("cu*/bin/nvdisasm"), reverse=True):
            if os.access(candidate, os.X_OK):
                return str(candidate), ""
    return None, (
        "nvdisasm not found (looked on PATH, under CUDA_HOME and /usr/local/cuda, and for the "
        "nvidia-cuda-nvdisasm wheel); install it with: pip install 'nvidia-cuda-nvdisasm' (crashlab's [sass] extra)"
    )


@lru_cache(maxsize=8)
def nvdisasm_version(path: str) -> str:
    return sass_cache.tool_version(path, lambda: _ask_version(path))


def _ask_version(path: str) -> str:
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, errors="replace",
                             timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return "nvdisasm (version unknown)"
    release = re.search(r"release ([\d.]+), (V[\d.]+)", out)
    return f"nvdisasm {release.group(2)}" if release else "nvdisasm (version unknown)"


def split_operands(text: str) -> tuple[str, ...]:
    """Operands as nvdisasm prints them, split at the commas outside brackets."""
    operands, depth, begin = [], 0, 0
    for at, char in enumerate(text):
        depth += {"[": 1, "]": -1}.get(char, 0)
        if char == "," and depth == 0:
            operands.append(text[begin:at].strip())
            begin = at + 1
    last = text[begin:].strip()
    return tuple(operands + [last] if last else operands)


def _decoded(address: int, text: str, chain: tuple[SourceLine, ...]) -> Instruction:
    match = _GUARD_AND_OPCODE.match(text)
    guard, opcode, rest = match.groups() if match else (None, text, "")
    return Instruction(address, text, source=chain, opcode=opcode, predicate=guard,
                       operands=split_operands(rest))


def parse_listing(listing: str) -> list[Instruction]:
    """Instructions of an ``nvdisasm -c -gi`` listing, each with the inline chain in force and
    a branch's label resolved to the offset it names."""
    instructions = []
    labels: dict[str, int] = {}
    pending: list[str] = []
    chain: list[SourceLine] = []
    closed = True
    for line in listing.splitlines():
        info = _LINE_INFO.search(line)
        if info:
            if closed:
                chain = []
            chain.append(SourceLine(info["file"], int(info["line"])))
            closed = info["inlined"] is None
            continue
        label = _LABEL.match(line)
        if label:
            pending.append(label[1])
            continue
        match = _INSTRUCTION.match(line)
        if match:
            address = int(match[1], 16)
            labels.update((name, address) for name in pending)
            pending = []
            instructions.append(_decoded(address, match[2], tuple(chain)))
    labels.update((name, instructions[-1].address + 16) for name in pending if instructions)
    return [_with_target(ins, labels) for ins in instructions]


def _with_target(ins: Instruction, labels: dict[str, int]) -> Instruction:
    used = _LABEL_USE.search(ins.text)
    if used is None or used[1] not in labels:
        return ins
    return dataclasses.replace(ins, target=labels[used[1]])


def _rebased_copy(data: bytes, cubin: _Cubin) -> bytes:
    """pyelftools reads ELF but does not write it (its struct builders drop the CUDA bits of
    st_other), so the sh_addr and st_value fields are patched in place."""
    image = bytearray(data)
    for f, start, value in cubin.rebase:
        f.write(image, start, value)
    return bytes(image)


def _listing(finder: CodeFinder, location: CodeLocation, cubin: _Cubin) -> list[Instruction] | str:
    """nvdisasm's listing of the text section holding ``location`` (offsets into it), or why
    there is none."""
    section = location.image_section
    if section not in finder.listings:
        finder.listings[section] = _disassembled(finder, cubin)
    listings = finder.listings[section]
    if isinstance(listings, str):
        return listings
    return listings.get(location.text_section) or (
        f"nvdisasm's listing has no section {location.text_section}")


def _disassembled(finder: CodeFinder, cubin: _Cubin) -> dict[str, list[Instruction]] | str:
    return cubin_listings(_rebased_copy(finder.core.image_bytes(cubin.section), cubin))


def cubin_listings(data: bytes) -> dict[str, list[Instruction]] | str:
    """Every text section's listing of one cubin (offsets into each section), or why there is
    none: from the cache where it has these bytes, else from one nvdisasm run, stored for the
    next inspect."""
    tool, why = find_nvdisasm()
    if tool is None:
        return why
    version = nvdisasm_version(tool)
    key = hashlib.sha256(data).hexdigest()
    stored = sass_cache.load(key, version)
    if stored is not None:
        try:
            return {name: [sass_cache.decode(row, Instruction) for row in rows]
                    for name, rows in stored.items()}
        except (KeyError, TypeError, ValueError):
            pass  # a damaged entry: disassemble again and rewrite it
    made = _run_nvdisasm(data, tool)
    if not isinstance(made, str):
        sass_cache.store(key, version, {name: [sass_cache.encode(ins) for ins in listing]
                                        for name, listing in made.items()})
    return made


def _run_nvdisasm(data: bytes, tool: str) -> dict[str, list[Instruction]] | str:
    """One nvdisasm run over the whole cubin. The text listing, not ``-json`` (13.x): the JSON
    prints branch and call targets as bare offsets and symbols (``BRA 0x1c0``, ``RET.REL.NODEC
    R2,sym``) where the text listing, which users and the views know, has labels (`(.L_x_5)),
    and it carries no line info; the text listing's -gi comments give the inline chains."""
    with tempfile.TemporaryDirectory(prefix="crashlab-sass-") as scratch:
        path = Path(scratch, "carved.cubin")
        path.write_bytes(data)
        command = [tool, "-c", "-gi", "-ndf", str(path)]
        try:
            done = subprocess.run(command, capture_output=True, text=True, errors="replace",
                                  timeout=NVDISASM_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return f"nvdisasm took longer than {NVDISASM_TIMEOUT_S} s"
        except OSError as exc:
            return f"nvdisasm could not run: {exc.strerror}"
    if done.returncode != 0:
        first = (done.stderr.strip().splitlines() or ["no message"])[0]
        return f"nvdisasm failed: {first}"
    return split_listing(done.stdout)


_SECTION_HEADER = re.compile(r"^//-+ (\.text\.\S+) +-+$", re.M)


def split_listing(listing: str) -> dict[str, list[Instruction]]:
    """A whole cubin's ``nvdisasm -c -gi`` listing, split at its text sections' headers."""
    parts = _SECTION_HEADER.split(listing)
    return {name: parse_listing(body) for name, body in zip(parts[1::2], parts[2::2], strict=True)}


def function_listing(finder: CodeFinder, pc: int,
                     grid: Grid | None = None) -> tuple[CodeLocation, list[Instruction]] | str:
    """Every instruction of the function holding ``pc``, addresses and branch targets as
    offsets into its text section (add ``location.text_address`` for GPU addresses), or why
    there is no listing."""
    found = finder.locate(pc, grid)
    if found is None:
        return "no relocated cubin in the dump holds this PC"
    location, cubin = found
    listing = _listing(finder, location, cubin)
    return listing if isinstance(listing, str) else (location, listing)


def _index_at(listing: list[Instruction], offset: int) -> int | None:
    return next((i for i, ins in enumerate(listing) if ins.address <= offset < ins.address + 16), None)


def disassemble(
    finder: CodeFinder,
    pc: int,
    *,
    grid: Grid | None = None,
    current_pc: int | None = None,
    context: int = 8,
) -> SassView:
    """A window of ``context`` instructions either side of ``pc``, the faulting one marked."""
    found = finder.locate(pc, grid)
    if found is None:
        reason = "no relocated cubin in the dump holds this PC"
        if finder.problems:
            reason += f" ({finder.problems[0]})"
        return SassView(unavailable_reason=reason)
    location, cubin = found
    view = SassView(location=location)
    tool, _ = find_nvdisasm()
    view.tool = nvdisasm_version(tool) if tool else None
    listing = _listing(finder, location, cubin)
    base = location.text_address
    offset = pc - base
    at = None if isinstance(listing, str) else _index_at(listing, offset)
    if isinstance(listing, str) or at is None:
        view.unavailable_reason = listing if isinstance(listing, str) else (
            f"nvdisasm's listing has no instruction at offset {offset:#x}")
        view.source = finder.source_lines(location)
        return view
    window = listing[max(0, at - context) : at + context + 1]
    view.instructions = [
        Instruction(
            address=base + ins.address,
            text=ins.text,
            faulting=ins is listing[at],
            current=current_pc is not None and base + ins.address == current_pc,
            source=ins.source,
        )
        for ins in window
    ]
    view.source = list(listing[at].source)
    return view


def instruction_at(finder: CodeFinder, pc: int, grid: Grid | None = None, *,
                   sass: bool = True) -> Instruction | None:
    """The instruction at ``pc`` with its inline chain, as a fault's SASS window gives it: where
    warps stand in a dump with no fault. Without nvdisasm's listing (or with ``sass`` False) its
    text is empty and its chain comes from the line table; None where the code is missing."""
    found = finder.locate(pc, grid)
    if found is None:
        return None
    location, cubin = found
    listing = _listing(finder, location, cubin) if sass else "disassembly not requested"
    at = None if isinstance(listing, str) else _index_at(listing, pc - location.text_address)
    if isinstance(listing, str) or at is None:
        return Instruction(address=pc, text="", source=tuple(finder.source_lines(location)))
    ins = listing[at]
    return Instruction(address=location.text_address + ins.address, text=ins.text, source=ins.source)
