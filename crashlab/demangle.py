"""C++ (Itanium ABI) demangling of CUDA kernel names.

cxxfilt calls the C++ runtime's own ``__cxa_demangle`` (the demangler behind c++filt), which
keeps up with the language far better than a hand-written one could. Where it cannot (no C++
runtime on the machine, a name it rejects) the mangled name is shown as it is.
"""

from __future__ import annotations

from functools import lru_cache

import cxxfilt


@lru_cache(maxsize=4096)
def demangle(symbol: str) -> str:
    """Readable name of ``symbol``; names that are not mangled come back unchanged.

    A non-inlined device function is named ``$<kernel>$<function>`` in a cubin's symbol table:
    the part after the last ``$`` is the function itself.
    """
    name = symbol.rsplit("$", 1)[-1] if symbol.startswith("$") else symbol
    try:
        return cxxfilt.demangle(name)
    except (cxxfilt.Error, UnicodeError):
        return name
