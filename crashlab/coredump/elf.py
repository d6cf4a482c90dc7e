"""The ELF container of a CUDA coredump: open, check, and index its section headers.

A large dump has over a million sections, so the section header table is not turned into one
Python object per section (what pyelftools does, and what dominated its time on such dumps: see
docs/benchmarks.md's figures). It is mapped and read as columns: zero-copy strided views over the table, one
per header field. Section contents are only read when a caller asks for them.
"""

from __future__ import annotations

import contextlib
import gzip
import mmap
import operator
import os
import shutil
import stat
import sys
import tempfile
import zlib
from pathlib import Path

from ..errors import BadInput, CoreFormatError
from ..vocabulary import PICKLE_PROTO, InputKind
from .constants import (
    EI_ABIVERSION,
    EI_CLASS,
    EI_DATA,
    EI_OSABI,
    ELF_MAGIC,
    ELF_TYPES,
    ELFCLASS64,
    ELFDATA2LSB,
    ELFOSABI_CUDA,
    EM_CUDA,
    ET_CORE,
    GZIP_MAGIC,
    HOST_MACHINES,
    KNOWN_ABI_VERSION,
    LEAF_SECTION_TYPES,
    SHN_XINDEX,
    SHT_NOBITS,
    SectionType,
)
from .layouts import ELF_HEADER, SECTION_HEADER, decoder

_SPOOL_CHUNK = 1 << 20
_E_TYPE, _E_MACHINE = ELF_HEADER.by_name["type"], ELF_HEADER.by_name["machine"]


def is_cuda_core(head: bytes) -> bool:
    """Whether a file's first bytes (up to 4096) are a CUDA coredump's, plain or gzip: how
    another verb's reader tells the user that it was handed a coredump."""
    if head[:2] == GZIP_MAGIC:
        try:
            head = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS).decompress(bytes(head[:4096]), 64)
        except zlib.error:
            return False
    return (len(head) >= _E_MACHINE.end and head[:4] == ELF_MAGIC
            and (_E_TYPE.read(head), _E_MACHINE.read(head)) == (ET_CORE, EM_CUDA))


class SectionColumns:
    """The section header table as columns, one per Elf64_Shdr field of
    crashlab.coredump.layouts.SECTION_HEADER: ``columns.type[i]`` is section i's sh_type."""

    # -- columns of layouts.SECTION_HEADER: written by `python -m tests.declare_records`
    name: memoryview
    type: memoryview
    flags: memoryview
    addr: memoryview
    offset: memoryview
    size: memoryview
    link: memoryview
    info: memoryview
    addralign: memoryview
    entsize: memoryview
    # -- end of layouts.SECTION_HEADER

    def __init__(self, table: memoryview, count: int):
        self.count = count
        for f in SECTION_HEADER.fields:
            setattr(self, f.name, f.column(table, SECTION_HEADER.size))


class ElfImage:
    """A mapped coredump file (gunzipped to a temporary file first when compressed)."""

    def __init__(self, path: str | os.PathLike):
        self.path = os.fspath(path)
        self.warnings: list[str] = []
        self.compressed = False
        self._file, self.file_size = self._open_file()
        self._map = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ)
        self.size = len(self._map)
        self._view = memoryview(self._map)
        try:
            self._read_header()
        except BaseException:
            self.close()
            raise

    # -- opening -------------------------------------------------------------------------
    def _open_file(self):
        """(seekable file with the plain ELF bytes, size of the input as given)."""
        source = self.path
        try:
            info = os.stat(source) if source != "-" else os.fstat(sys.stdin.fileno())
        except FileNotFoundError:
            raise BadInput(f"{source}: no such file") from None
        except OSError as exc:
            raise BadInput(f"{source}: cannot open ({exc.strerror})") from None
        if stat.S_ISDIR(info.st_mode):
            if Path(source, "manifest.json").is_file():
                raise BadInput(f"{source}: a crashlab serve run directory, not a coredump",
                               InputKind.RUN_DIRECTORY, source)
            raise BadInput(f"{source}: is a directory, not a coredump file")
        try:  # the stream is returned: the image maps it and its close() closes it
            if source == "-":
                stream = open(sys.stdin.fileno(), "rb", closefd=False)  # noqa: SIM115
            else:
                stream = open(source, "rb")  # noqa: SIM115
        except OSError as exc:
            raise BadInput(f"{source}: cannot open ({exc.strerror})") from None
        try:
            if stat.S_ISREG(info.st_mode):
                if info.st_size == 0:
                    raise BadInput(f"{source}: empty file (0 bytes), not a coredump")
                plain, size = stream, info.st_size
            else:
                # A pipe or stdin cannot be mapped: copy it to an unlinked temporary file.
                plain = self._copy_to_temp(stream)
                size = plain.tell()
                stream.close()
            plain.seek(0)
            if plain.read(2) == GZIP_MAGIC:
                plain.seek(0)
                self.compressed = True
                unpacked = self._copy_to_temp(gzip.GzipFile(fileobj=plain))
                plain.close()
                plain = unpacked
            return plain, size
        except BaseException:
            stream.close()
            raise

    def _copy_to_temp(self, reader):
        """Copy a stream into an unlinked temporary file, refusing to fill the disk."""
        spool = tempfile.TemporaryFile()  # noqa: SIM115 (returned: the image's file)
        try:
            if copy_within_room(reader, spool, tempfile.gettempdir(), self.path) == 0:
                raise BadInput(f"{self.path}: empty input, not a coredump")
        except BaseException:
            spool.close()
            raise
        spool.flush()
        return spool

    # -- checking ------------------------------------------------------------------------
    def _read_header(self) -> None:
        """Check that the file is a CUDA coredump and map its section header table."""
        self._check_magic()
        header = decoder(ELF_HEADER, ELF_HEADER.size).decode(self._map)
        self._check_identity(header["ident"])
        self._check_kind(header["type"], header["machine"])
        self._check_abi(header["ident"])
        start, count, names = self._section_table(header)
        self.section_count = count
        self.sections = SectionColumns(
            self._view[start : start + count * SECTION_HEADER.size], count
        )
        self._check_bounds()
        self._shstrtab = names

    def _check_magic(self) -> None:
        where, head = self.path, self._map[:len(ELF_MAGIC)]
        if head != ELF_MAGIC:
            if len(head) >= 2 and head[0] == PICKLE_PROTO and 2 <= head[1] <= 5:
                raise CoreFormatError(f"{where}: an SGLang crash dump (a pickle), not a CUDA "
                                      "coredump", InputKind.PICKLE, where)
            raise CoreFormatError(
                f"{where}: not an ELF file (starts with {head.hex(' ') or 'nothing'}), so not "
                "a CUDA coredump"
            )
        if self.size < ELF_HEADER.size:
            raise CoreFormatError(
                f"{where}: truncated ELF header ({self.size} of {ELF_HEADER.size} bytes)"
            )

    def _check_identity(self, ident: bytes) -> None:
        if ident[EI_CLASS] != ELFCLASS64 or ident[EI_DATA] != ELFDATA2LSB:
            raise CoreFormatError(f"{self.path}: not a 64-bit little-endian ELF file")

    def _check_kind(self, e_type: int, machine: int) -> None:
        """A core file for EM_CUDA; anything else is named (a host core, a cubin) in the refusal."""
        where = self.path
        kind = ELF_TYPES.get(e_type, f"type {e_type}")
        if machine != EM_CUDA:
            arch = HOST_MACHINES.get(machine, f"machine {machine}")
            if e_type == ET_CORE:
                raise CoreFormatError(
                    f"{where}: a host (CPU) core dump for {arch}, not a CUDA GPU coredump; "
                    "open it with gdb"
                )
            raise CoreFormatError(f"{where}: an {kind} ELF file for {arch}, not a CUDA coredump")
        if e_type != ET_CORE:
            hint = " (a cubin?)" if e_type in (1, 2) else ""
            raise CoreFormatError(f"{where}: a CUDA ELF file of type {kind}{hint}, not a coredump")

    def _check_abi(self, ident: bytes) -> None:
        """ELFOSABI_CUDA is required; an ABI version other than the known one only warns
        (cuda-gdb's libcudacore refuses it, but the row layouts say which fields exist)."""
        if ident[EI_OSABI] != ELFOSABI_CUDA:
            raise CoreFormatError(
                f"{self.path}: ELF OS/ABI is {ident[EI_OSABI]:#x}, a CUDA coredump has "
                f"{ELFOSABI_CUDA:#x}"
            )
        self.abi_version = ident[EI_ABIVERSION]
        if self.abi_version != KNOWN_ABI_VERSION:
            self.warnings.append(
                f"ELF ABI version {self.abi_version} differs from the {KNOWN_ABI_VERSION} this "
                "crashlab was written for; reading it anyway"
            )

    def _section_table(self, header: dict) -> tuple[int, int, int]:
        """(file offset, entry count, index of the section name table) of the section header
        table, each checked against the file."""
        where, size, entry = self.path, self.size, SECTION_HEADER.size
        start = header["shoff"]
        if header["shentsize"] != entry:
            raise CoreFormatError(
                f"{where}: section header size is {header['shentsize']}, expected {entry}"
            )
        if start == 0:
            raise CoreFormatError(f"{where}: the ELF header gives no section header table (e_shoff 0)")
        if start > size - entry:
            raise CoreFormatError(_cut_table(where))
        count, names = self._extended_numbering(start, header["shnum"], header["shstrndx"])
        if count == 0:
            raise CoreFormatError(f"{where}: the section header table at {start:#x} has no entries")
        if start + count * entry > size:
            raise CoreFormatError(_cut_table(where, (size - start) // entry, count))
        if names >= count:
            raise CoreFormatError(f"{where}: section name table index {names} out of range")
        return start, count, names

    def _extended_numbering(self, start: int, count: int, names: int) -> tuple[int, int]:
        """(section count, name table index): a dump of 65,280 sections or more keeps them in
        section 0, the count in sh_size (e_shnum 0) and the index in sh_link (e_shstrndx
        SHN_XINDEX), as the ELF gABI specifies."""
        if count and names != SHN_XINDEX:
            return count, names
        first = decoder(SECTION_HEADER, SECTION_HEADER.size).decode(self._map, start)
        return (count or first["size"],
                first["link"] if names == SHN_XINDEX else names)

    def _check_bounds(self) -> None:
        """Every section's bytes must lie inside the file, or the section is set aside.

        The common case is one C-level pass (map/max over the columns); only a file that fails it
        is walked in Python. A dump cut short (a full disk) loses its last sections: a section
        nothing links to (memory, registers, a backtrace, a cubin) is listed in ``beyond_end``
        and skipped by the reader, with a warning; a table the others hang from cannot be
        skipped, and the dump is refused.
        """
        self.beyond_end: frozenset[int] = frozenset()
        columns, size = self.sections, self.size
        if max(map(operator.add, columns.offset, columns.size), default=0) <= size:
            return
        skipped: dict[int, list[int]] = {}
        for index, (kind, offset, length) in enumerate(
            zip(columns.type, columns.offset, columns.size, strict=True)
        ):
            if offset + length <= size or kind == SHT_NOBITS:
                continue
            if kind not in LEAF_SECTION_TYPES:
                raise CoreFormatError(
                    f"{self.path}: section {index} claims bytes {offset:#x}..{offset + length:#x} "
                    f"but the file has {size} bytes; truncated or damaged"
                )
            skipped.setdefault(kind, []).append(index)
        self.beyond_end = frozenset(i for found in skipped.values() for i in found)
        for kind, found in skipped.items():
            self.warnings.append(
                f"{len(found)} {SectionType(kind).name} section(s) run past the end of the file "
                f"({size} bytes; first: section {found[0]}): skipped, the rest is read "
                "(a dump cut short?)"
            )

    # -- access --------------------------------------------------------------------------
    def data(self, index: int, limit: int | None = None, offset: int = 0) -> bytes:
        """Bytes of section ``index`` from ``offset`` on (at most ``limit`` of them).

        Read with pread, not through the mapping: tables are a few KiB scattered between
        megabytes of register sections, and the kernel maps the neighbours of every page touched
        in a mapping (fault-around), which made a million-section dump cost gigabytes of RSS.
        """
        columns = self.sections
        if columns.type[index] == SHT_NOBITS:
            return b""
        available = max(0, columns.size[index] - offset)
        length = available if limit is None else min(limit, available)
        return os.pread(self._file.fileno(), length, columns.offset[index] + offset)

    def string_at(self, section: int, offset: int, what: str) -> str:
        """A NUL-terminated string from a string table section."""
        columns = self.sections
        size = columns.size[section]
        if offset >= size:
            raise CoreFormatError(
                f"{self.path}: {what} points at string offset {offset:#x}, beyond the "
                f"{size}-byte string table (section {section})"
            )
        start = columns.offset[section] + offset
        end = self._map.find(b"\0", start, columns.offset[section] + size)
        if end < 0:
            raise CoreFormatError(f"{self.path}: unterminated string in section {section}")
        return bytes(self._view[start:end]).decode("utf-8", "replace")

    def section_name(self, index: int) -> str:
        return self.string_at(self._shstrtab, self.sections.name[index], f"section {index}'s name")

    def close(self) -> None:
        view = getattr(self, "_view", None)
        if view is not None:
            vars(self).pop("sections", None)  # its columns are views of the map: drop them first
            view.release()
        # A caller still holding a view keeps the mapping; it goes when that view does.
        with contextlib.suppress(BufferError):
            self._map.close()
        self._file.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _cut_table(where: str, whole: int = 0, count: int = 0) -> str:
    """What is lost when a dump ends before or inside its section header table. The table is
    written last, so the sections' bytes before it may be intact, but only the table says where
    each section lies, its row size, and which device, SM, CTA, warp or lane row it hangs from.
    Section names are no substitute (they are not unique), rows of one table type cannot be told
    apart by their shape from another SM's or warp's, and the bytes after the ELF header are
    sections' contents without their addresses (the H200's cuts stop inside the global memory
    its progress lines say it was writing, before any table): nothing past the ELF header is
    read soundly, and no fault is located by scanning. cuda-gdb cannot open such a file either.

    The refusal fits two lines of an 80-column terminal (the guard folds it at word boundaries):
    the file's name, not its path, and the next step. The H200's driver cut four dumps before
    the table, all written with the constant banks kept; with skip_constbank_memory added
    (SGLang's default flags) it wrote the same fault whole (fixtures/gpu/PROVENANCE.md)."""
    name = Path(where).name
    if whole:
        return (f"{name}: the driver stopped inside its section table ({whole:,} of {count:,} "
                "entries): nothing readable")
    return (f"{name}: the driver stopped before its section table: nothing readable; add "
            "skip_constbank_memory to CUDA_COREDUMP_GENERATION_FLAGS")


def copy_within_room(reader, target, directory: str, source: str) -> int:
    """Copy ``reader`` (a plain or gunzipping stream) into ``target`` on ``directory``'s disk.

    A few KiB of gzip can unpack to terabytes: the copy stops with one clear sentence before the
    disk is full, and a damaged stream is a CoreFormatError, not a traceback. Returns the bytes
    copied.
    """
    room = shutil.disk_usage(directory).free
    written = 0
    try:
        while chunk := reader.read(_SPOOL_CHUNK):
            written += len(chunk)
            if written > room:
                raise BadInput(
                    f"{source}: unpacks to more than the {room >> 20} MiB free in {directory}; "
                    "set TMPDIR to a larger disk"
                )
            target.write(chunk)
    except (OSError, EOFError, zlib.error) as exc:
        raise CoreFormatError(f"{source}: cannot read or unpack it ({exc})") from None
    return written


def text_sections(cubin: bytes) -> list[tuple[str, int]]:
    """(kernel, load address) of each ``.text.<kernel>`` section of a relocated cubin; nothing
    when the image is not a readable 64-bit little-endian ELF file (a stranger's dump may hold
    anything there). Read from the section headers alone: every image of a dump is read for its
    kernels' entries, and a parse of each by pyelftools was a third of inspecting a small dump."""
    entry = SECTION_HEADER.size
    if len(cubin) < ELF_HEADER.size or cubin[:len(ELF_MAGIC)] != ELF_MAGIC:
        return []
    header = decoder(ELF_HEADER, ELF_HEADER.size).decode(cubin)
    ident, start = header["ident"], header["shoff"]
    if ident[EI_CLASS] != ELFCLASS64 or ident[EI_DATA] != ELFDATA2LSB or \
            header["shentsize"] != entry or not 0 < start <= len(cubin) - entry:
        return []
    rows = decoder(SECTION_HEADER, entry)
    count, names = header["shnum"], header["shstrndx"]
    if not count or names == SHN_XINDEX:  # extended numbering: section 0 holds them
        first = rows.decode(cubin, start)
        count, names = count or first["size"], first["link"] if names == SHN_XINDEX else names
    if names >= count or start + count * entry > len(cubin):
        return []
    table = rows.decode_all(memoryview(cubin)[start:start + count * entry])
    strings = table[names]
    if strings["offset"] + strings["size"] > len(cubin):
        return []
    found = []
    for section in table:
        name = _string(cubin, strings["offset"], strings["size"], section["name"])
        if name is not None and name.startswith(".text."):
            found.append((name.removeprefix(".text."), section["addr"]))
    return found


def _string(data: bytes, table: int, size: int, offset: int) -> str | None:
    """The NUL-terminated string at ``offset`` of the string table at ``table``; None where it
    does not lie inside the table."""
    if offset >= size:
        return None
    end = data.find(b"\0", table + offset, table + size)
    if end < 0:
        return None
    return data[table + offset:end].decode("utf-8", "replace")
