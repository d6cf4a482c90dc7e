"""A kernel's parameters as the report gives them: the dump's parameter buffer split by the
cubin's layout, each value typed by the demangled kernel signature where that can be trusted.

The signature's types are taken only where its argument count equals the cubin's parameter
count: a mismatch (a name that did not demangle, a compiler that split a parameter) would put
types on the wrong values, so then none is given.
"""

from __future__ import annotations

import struct

from ..coredump.model import ParamBlock
from ..cubin.nvinfo import ParamLayout
from . import model

#: Bytes of a struct parameter the views print; the JSON report has all of them.
STRUCT_BYTES_SHOWN = 16
_OPENERS, _CLOSERS = "(<[{", ")>]}"
QUALIFIERS = ("const", "volatile", "__restrict__", "__restrict", "restrict")
_SIGNED = {"signed char", "char", "short", "int", "long", "long long", "__int128", "wchar_t"}
_UNSIGNED = {"unsigned char", "unsigned short", "unsigned int", "unsigned long",
             "unsigned long long", "unsigned __int128", "char8_t", "char16_t", "char32_t"}
_FLOATS = {("float", 4): "<f", ("double", 8): "<d"}


def argument_types(signature: str) -> list[str] | None:
    """The parameter types of a demangled function name, split at top-level commas:
    ``k<int, 2>(int const*, Pair<int, int>)`` gives ``["int const*", "Pair<int, int>"]``.
    None where the name has no argument list (it did not demangle)."""
    if not signature.endswith(")"):
        return None
    depth = 0
    for start in range(len(signature) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(signature[start], 0)
        if depth == 0:
            break
    else:
        return None
    inner = signature[start + 1 : -1]
    if not inner.strip():
        return []
    types, depth, begin = [], 0, 0
    for at, char in enumerate(inner):
        if char in _OPENERS:
            depth += 1
        elif char in _CLOSERS:
            depth = max(0, depth - 1)
        elif char == "," and depth == 0:
            types.append(inner[begin:at].strip())
            begin = at + 1
    types.append(inner[begin:].strip())
    return types


def _base(type_name: str) -> str:
    """The type with its trailing cv/restrict qualifiers taken off: ``int* const`` -> ``int*``."""
    words = type_name.split()
    while len(words) > 1 and words[-1] in QUALIFIERS:
        words.pop()
    return " ".join(words)


def _float(raw: bytes, code: str) -> str:
    """The shortest decimal that reads back as the same float (9 digits always do for a float,
    17 for a double)."""
    value = struct.unpack(code, raw)[0]
    for digits in range(1, 18):
        text = f"{value:.{digits}g}"
        if struct.pack(code, float(text)) == raw:
            return text
    return repr(value)


def is_integer(type_name: str | None, size: int) -> bool:
    """Whether a parameter holds an integer: by its type where the signature gives one, else
    by its size (4 bytes; 8 could as well be a pointer)."""
    if type_name is None:
        return size == 4
    base = _base(type_name)
    return base in _SIGNED or base in _UNSIGNED


def shown(raw: bytes | None, size: int, type_name: str | None) -> str:
    """One parameter's value as the views print it."""
    if raw is None:
        return "not in the dump (the buffer ends before it)"
    if size not in (1, 2, 4, 8):
        more = "…" if size > STRUCT_BYTES_SHOWN else ""
        return f"{size} bytes {raw[:STRUCT_BYTES_SHOWN].hex()}{more}"
    unsigned = int.from_bytes(raw, "little")
    base = _base(type_name) if type_name else ""
    if base.endswith(("*", "&")):
        return f"{unsigned:#x}"
    if (base, size) in _FLOATS:
        return _float(raw, _FLOATS[base, size])
    if base == "bool" and unsigned in (0, 1):
        return "true" if unsigned else "false"
    if base in _SIGNED:
        return str(int.from_bytes(raw, "little", signed=True))
    if base in _UNSIGNED or size < 8:
        return str(unsigned)
    return f"{unsigned:#x}"


def kernel_params(block: ParamBlock, layout: ParamLayout | None, why: str,
                  signature: str) -> model.Params:
    """The report's Params: the buffer, and each parameter's slice of it where a layout is known
    (made without running validators, as report.coredump makes the rest of the report)."""
    params = model.Params.model_construct(address=f"{block.address:#x}", size=block.size, hex=block.data.hex())
    if layout is None:
        params.layout_unavailable = why or "no parameter layout for this kernel"
        return params
    if not layout.params and layout.area_size:
        params.layout_unavailable = (f"the cubin gives a {layout.area_size}-byte parameter area but "
                                     "no EIATTR_KPARAM_INFO record in it")
        return params
    types = argument_types(signature)
    if types is not None and [p.ordinal for p in layout.params] != list(range(len(types))):
        types = None
    for position, param in enumerate(layout.params):
        end = param.offset + param.size
        raw = block.data[param.offset : end] if end <= len(block.data) else None
        type_name = types[position] if types is not None else None
        params.values.append(model.Param.model_construct(
            ordinal=param.ordinal, offset=param.offset, size=param.size, type=type_name,
            value=int.from_bytes(raw, "little") if raw is not None and param.size in (1, 2, 4, 8)
            else None,
            hex=raw.hex() if raw is not None else None,
            shown=shown(raw, param.size, type_name)))
    return params
