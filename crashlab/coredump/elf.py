"""The ELF container of a CUDA coredump: open, check, and index its section headers.

A large dump has over a million sections, so the section header table is not turned into one
Python object per section (what pyelftools does, and what dominated its time on such dumps: see
README's figures). It is mapped and read as columns: zero-copy strided views over the table, one
per header field. Section contents are only read when a caller asks for them.
"""

from __future__ import annotations

import gzip
import mmap
import operator
import os
import shutil
import stat
import struct
import sys
import tempfile
import zlib

from ..errors import BadInput, CoreFormatError
from .constants import (
    ELF_HEADER_SIZE,
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
    SECTION_HEADER_SIZE,
    SHN_XINDEX,
    SHT_NOBITS,
    SectionType,
)

if sys.byteorder != "little":  # pragma: no cover - every CUDA host is little-endian
    raise ImportError("crashlab reads coredumps through native little-endian views")

_ELF_HEADER = struct.Struct("<16sHHIQQQIHHHHHH")
_SPOOL_CHUNK = 1 << 20


class SectionColumns:
    """The section header table as columns: ``columns.type[i]`` is section i's sh_type."""

    def __init__(self, table: memoryview, count: int):
        words = table.cast("I")
        quads = table.cast("Q")
        self.count = count
        self.name = words[0::16]
        self.type = words[1::16]
        self.flags = quads[1::8]
        self.addr = quads[2::8]
        self.offset = quads[3::8]
        self.size = quads[4::8]
        self.link = words[10::16]
        self.info = words[11::16]
        self.entsize = quads[7::8]


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
            from ..wrongverb import for_inspect_directory

            raise BadInput(for_inspect_directory(source)
                           or f"{source}: is a directory, not a coredump file")
        try:
            if source == "-":
                stream = open(sys.stdin.fileno(), "rb", closefd=False)
            else:
                stream = open(source, "rb")
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
        spool = tempfile.TemporaryFile()
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
        where = self.path
        if self.size < 4 or self._map[:4] != ELF_MAGIC:
            from ..wrongverb import for_inspect

            head = self._map[:4].hex(" ")
            raise CoreFormatError(
                for_inspect(where, self._map[:4])
                or f"{where}: not an ELF file (starts with {head or 'nothing'}), so not a CUDA coredump"
            )
        if self.size < ELF_HEADER_SIZE:
            raise CoreFormatError(f"{where}: truncated ELF header ({self.size} of 64 bytes)")
        (ident, e_type, machine, _version, _entry, _phoff, shoff, _flags, _ehsize, _phentsize,
         _phnum, shentsize, shnum, shstrndx) = _ELF_HEADER.unpack_from(self._map, 0)
        if ident[4] != ELFCLASS64 or ident[5] != ELFDATA2LSB:
            raise CoreFormatError(f"{where}: not a 64-bit little-endian ELF file")
        if machine != EM_CUDA:
            kind = ELF_TYPES.get(e_type, f"type {e_type}")
            arch = HOST_MACHINES.get(machine, f"machine {machine}")
            if e_type == ET_CORE:
                raise CoreFormatError(
                    f"{where}: a host (CPU) core dump for {arch}, not a CUDA GPU coredump; "
                    "open it with gdb"
                )
            raise CoreFormatError(f"{where}: an {kind} ELF file for {arch}, not a CUDA coredump")
        if e_type != ET_CORE:
            kind = ELF_TYPES.get(e_type, f"type {e_type}")
            hint = " (a cubin?)" if e_type in (1, 2) else ""
            raise CoreFormatError(f"{where}: a CUDA ELF file of type {kind}{hint}, not a coredump")
        if ident[7] != ELFOSABI_CUDA:
            raise CoreFormatError(
                f"{where}: ELF OS/ABI is {ident[7]:#x}, a CUDA coredump has {ELFOSABI_CUDA:#x}"
            )
        self.abi_version = ident[8]
        if self.abi_version != KNOWN_ABI_VERSION:
            self.warnings.append(
                f"ELF ABI version {self.abi_version} differs from the {KNOWN_ABI_VERSION} this "
                "crashlab was written for; reading it anyway"
            )
        if shentsize != SECTION_HEADER_SIZE:
            raise CoreFormatError(f"{where}: section header size is {shentsize}, expected 64")
        if shoff == 0 or shoff > self.size - SECTION_HEADER_SIZE:
            raise CoreFormatError(
                f"{where}: section header table at {shoff:#x} is outside the file "
                f"({self.size} bytes); truncated?"
            )
        if shnum == 0 or shstrndx == SHN_XINDEX:
            # Extended numbering: section 0 holds the real count (sh_size) and index (sh_link).
            _, _, _, _, _, real_count, real_strndx, _, _, _ = struct.unpack_from(
                "<IIQQQQIIQQ", self._map, shoff
            )
            shnum = real_count if shnum == 0 else shnum
            shstrndx = real_strndx if shstrndx == SHN_XINDEX else shstrndx
        end = shoff + shnum * SECTION_HEADER_SIZE
        if shnum == 0 or end > self.size:
            raise CoreFormatError(
                f"{where}: section header table ({shnum} entries at {shoff:#x}) runs past the "
                f"end of the file ({self.size} bytes); truncated?"
            )
        if shstrndx >= shnum:
            raise CoreFormatError(f"{where}: section name table index {shstrndx} out of range")
        self.section_count = shnum
        self.sections = SectionColumns(self._view[shoff:end], shnum)
        self._check_bounds()
        self._shstrtab = shstrndx

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
            zip(columns.type, columns.offset, columns.size)
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
            self.sections = None
            view.release()
        try:
            self._map.close()
        except BufferError:
            pass  # a caller still holds a view; the mapping goes when that view does
        self._file.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


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
