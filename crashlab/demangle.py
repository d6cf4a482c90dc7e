"""C++ (Itanium ABI) demangling of CUDA kernel names.

cxxfilt calls the C++ runtime's own ``__cxa_demangle``: libiberty's demangler, the one behind
c++filt and cuda-gdb, so a name reads exactly as those tools print it. libiberty refuses every
name longer than 1,024 characters (a guard against running out of stack, which c++filt's
``--no-recurse-limit`` lifts but ``__cxa_demangle`` cannot), and CUTLASS 3.x kernel names run to
1,400-1,800. Those go to cpp_demangle (the gimli project's Rust demangler), whose guard is a
nesting depth, not a length. Where neither can read a name it is shown as it is.
"""

from __future__ import annotations

from functools import lru_cache

import cxxfilt

try:
    import cpp_demangle
except ImportError:  # no wheel for Linux on ARM (GH200, GB200): long names stay mangled there
    cpp_demangle = None


@lru_cache(maxsize=4096)
def demangle(symbol: str) -> str:
    """Readable name of ``symbol``; names that are not mangled come back unchanged.

    A non-inlined device function is named ``$<kernel>$<function>`` or
    ``$__internal_<n>_$<function>`` in a cubin's symbol table: the part after the last ``$`` is
    the function itself.
    """
    name = symbol.rsplit("$", 1)[-1] if symbol.startswith("$") else symbol
    try:
        return cxxfilt.demangle(name)
    except (cxxfilt.Error, UnicodeError):
        pass
    if cpp_demangle is not None and name.startswith("_Z"):
        try:
            return cpp_demangle.demangle(name)
        except ValueError:
            pass
    return name
