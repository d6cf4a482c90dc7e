"""nvdisasm's listings of a cubin's text sections: found in the on-disk cache (crashlab.sass.cache)
one section at a time, or made by nvdisasm and stored for the next inspect: one run over the whole
cubin, or, for a cubin with much code, one run per text section asked for (``-fun``).

The cubin handed here is at address 0 (crashlab.cubin.Cubin.rebased: sh_addr and symbol values
rebased), which nvdisasm always accepts and which makes its printed addresses offsets into the
section, whatever the driver did with the symbol values. Line info comes from nvdisasm's ``-gi``
comments, which give the inline chain innermost first. Branch labels are renamed by their first use
in their section: nvdisasm numbers them across the whole cubin, and otherwise under ``-fun``, so a
function's listing reads the same however it was made.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import subprocess
import tempfile
from collections.abc import Iterable
from dataclasses import replace
from functools import cached_property, lru_cache
from pathlib import Path

from ..cubin.image import Text
from ..cubin.lines import SourceLine
from ..toolpath import find_cuda_tool
from . import cache
from .instruction import Instruction

NVDISASM_TIMEOUT_S = 120
#: Code bytes past which a cubin is disassembled one text section at a time, as each is asked
#: for. nvdisasm's start-up is most of a small cubin's run (0.3 s of CPU for 2 KB or 100 KB on the
#: development VM) and its run grows with the code past that (2.2 s for the 1.2 MB of PyTorch's
#: flash-attention cubin, 0.6 s with ``-fun`` for the one function a fault needs).
ONE_AT_A_TIME_BYTES = 256 * 1024
_INSTRUCTION = re.compile(r"^\s*/\*([0-9a-fA-F]+)\*/\s+(.*?)\s*;?\s*(?:/\*[^*]*\*/\s*)?$")
_LINE_INFO = re.compile(r'//## File "(?P<file>[^"]*)", line (?P<line>\d+)(?P<inlined> inlined at)?')
_LABEL = re.compile(r"^\s*(\.L_x_\d+):\s*$")
_LABEL_USE = re.compile(r"`\((\.L_x_\d+)\)")
_SECTION_HEADER = re.compile(r"^//-+ (\.text\.\S+) +-+$", re.M)

Listings = dict[str, list[Instruction]]


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
    return cache.tool_version(path, lambda: _ask_version(path))


def _ask_version(path: str) -> str:
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, errors="replace",
                             timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return "nvdisasm (version unknown)"
    release = re.search(r"release ([\d.]+), (V[\d.]+)", out)
    return f"nvdisasm {release.group(2)}" if release else "nvdisasm (version unknown)"


def parse_listing(listing: str) -> list[Instruction]:
    """Instructions of an ``nvdisasm -c -gi`` listing of one section, each with the inline chain
    in force and a branch's label resolved to the offset it names and renamed by its first use
    in the section (``.L_x_0`` the first label an instruction names, as nvdisasm numbers them in
    the first section of a cubin)."""
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
            instructions.append(Instruction(address, match[2], source=tuple(chain)))
    labels.update((name, instructions[-1].address + 16) for name in pending if instructions)
    names: dict[str, str] = {}
    for ins in instructions:
        for used in _LABEL_USE.findall(ins.text):
            if used in labels and used not in names:
                names[used] = f".L_x_{len(names)}"
    return [_with_target(ins, labels, names) for ins in instructions]


def _with_target(ins: Instruction, labels: dict[str, int], names: dict[str, str]) -> Instruction:
    used = _LABEL_USE.search(ins.text)
    if used is None or used[1] not in labels:
        return ins
    text = _LABEL_USE.sub(lambda label: f"`({names.get(label[1], label[1])})", ins.text)
    return replace(ins, text=text, target=labels[used[1]])


def split_listing(listing: str) -> Listings:
    """A whole cubin's ``nvdisasm -c -gi`` listing, split at its text sections' headers."""
    parts = _SECTION_HEADER.split(listing)
    return {name: parse_listing(body) for name, body in zip(parts[1::2], parts[2::2], strict=True)}


def _run_nvdisasm(data: bytes, tool: str, symbol: int | None = None) -> Listings | str:
    """One nvdisasm run over the whole cubin, or over the text section of function ``symbol``
    alone. The text listing, not ``-json`` (13.x): the JSON prints branch and call targets as
    bare offsets and symbols (``BRA 0x1c0``, ``RET.REL.NODEC R2,sym``) where the text listing,
    which users and the views know, has labels (`(.L_x_5)), and it carries no line info; the
    text listing's -gi comments give the inline chains."""
    with tempfile.TemporaryDirectory(prefix="crashlab-sass-") as scratch:
        path = Path(scratch, "carved.cubin")
        path.write_bytes(data)
        command = [tool, "-c", "-gi", "-ndf", *(["-fun", str(symbol)] if symbol is not None else []),
                   str(path)]
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


class CubinListings:
    """The listings of one cubin (its bytes at address 0), each text section's read on first use:
    from the cache entry where it has these bytes (that section alone decoded), else made by
    nvdisasm and stored for the next inspect: the whole cubin in one run, or, where its code
    ``texts`` (their names, function symbols and sizes) pass ONE_AT_A_TIME_BYTES, the one
    section asked for."""

    def __init__(self, data: bytes, texts: Iterable[Text] = ()):
        self.data = data
        texts = list(texts)
        self._symbols = {text.name: text.symbol for text in texts} \
            if len(texts) > 1 and sum(text.size for text in texts) > ONE_AT_A_TIME_BYTES else {}
        self._made: Listings | str | None = None
        self._parts: Listings = {}

    @cached_property
    def tool(self) -> tuple[str | None, str]:
        """(nvdisasm's version, "") or (None, why there is no nvdisasm)."""
        path, why = find_nvdisasm()
        return (nvdisasm_version(path), "") if path else (None, why)

    @cached_property
    def _entry(self) -> cache.Entry | None:
        version = self.tool[0]
        return None if version is None else cache.open_entry(self._key, version)

    @cached_property
    def _key(self) -> str:
        return hashlib.sha256(self.data).hexdigest()

    def section(self, name: str) -> list[Instruction] | str:
        """The listing of text section ``name`` (offsets into it), or why there is none."""
        entry = self._entry
        if name in self._parts:
            return self._parts[name]
        if entry is not None and self._made is None:
            if name in entry.sections:
                stored = entry.listing(name)
                if stored is not None:
                    return stored
            elif entry.whole:
                return f"nvdisasm's listing has no section {name}"
        if self._made is None and name in self._symbols:
            alone = self._disassembled_alone(name)
            if alone is not None:
                return alone
        made = self._disassembled()
        if isinstance(made, str):
            return made
        return made.get(name) or f"nvdisasm's listing has no section {name}"

    def every(self) -> Listings | str:
        """Every text section's listing, or why there are none."""
        entry = self._entry
        if entry is not None and entry.whole and self._made is None:
            stored = {name: entry.listing(name) for name in entry.sections}
            if all(listing is not None for listing in stored.values()):
                return {name: listing for name, listing in stored.items() if listing is not None}
        return self._disassembled()

    def _disassembled_alone(self, name: str) -> list[Instruction] | None:
        """Section ``name`` alone by ``nvdisasm -fun``, added to the cache entry; None where that
        run did not give it (the whole cubin is disassembled then)."""
        path, _ = find_nvdisasm()
        version = self.tool[0]
        if path is None or version is None:
            return None
        made = _run_nvdisasm(self.data, path, self._symbols[name])
        if isinstance(made, str) or not made.get(name):
            return None
        self._parts[name] = made[name]
        # the entry as read at the start, and every section made since (this one included)
        cache.store(self._key, version, self._parts, whole=False, keep=self._entry)
        return made[name]

    def _disassembled(self) -> Listings | str:
        if self._made is None:
            path, why = find_nvdisasm()
            version = self.tool[0]
            if path is None or version is None:
                self._made = why
            else:
                self._made = _run_nvdisasm(self.data, path)
                if not isinstance(self._made, str):
                    cache.store(self._key, version, self._made)
        return self._made


def cubin_listings(data: bytes) -> Listings | str:
    """Every text section's listing of one cubin at address 0 (offsets into each section), or
    why there is none."""
    return CubinListings(data).every()
