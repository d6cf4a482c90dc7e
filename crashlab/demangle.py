"""C++ (Itanium ABI) demangling of CUDA kernel names.

The C++ runtime's own ``__cxa_demangle`` (libstdc++'s, libiberty's demangler: the one behind
c++filt and cuda-gdb), called through ctypes, so a name reads exactly as those tools print it.
The runtime is opened by its soname, as the dynamic loader finds it: cxxfilt, which wraps the same
call, asks ``ldconfig -p`` for it at import, two processes on every command. libiberty refuses every
name longer than 1,024 characters (a guard against running out of stack, which c++filt's
``--no-recurse-limit`` lifts but ``__cxa_demangle`` cannot), and CUTLASS 3.x kernel names run to
1,400-1,800. Those go to cpp_demangle (the gimli project's Rust demangler), whose guard is a
nesting depth, not a length. Where neither can read a name it is shown as it is.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Iterator
from functools import cache, lru_cache

try:
    import cpp_demangle
except ImportError:  # no wheel for Linux on ARM (GH200, GB200): long names stay mangled there
    cpp_demangle = None

#: The C++ runtimes that carry ``__cxa_demangle``, by soname (GNU's, then LLVM's).
RUNTIMES = ("libstdc++.so.6", "libc++.so.1")


@lru_cache(maxsize=4096)
def demangle(symbol: str) -> str:
    """Readable name of ``symbol``; names that are not mangled come back unchanged.

    A non-inlined device function is named ``$<kernel>$<function>`` or
    ``$__internal_<n>_$<function>`` in a cubin's symbol table: the part after the last ``$`` is
    the function itself.
    """
    name = symbol.rsplit("$", 1)[-1] if symbol.startswith("$") else symbol
    if not name.startswith("_Z"):
        return name
    readable = _runtime_demangled(name)
    if readable is not None:
        return readable
    if cpp_demangle is not None:
        try:
            return cpp_demangle.demangle(name)
        except ValueError:
            pass
    return name


def _runtime_demangled(name: str) -> str | None:
    """``__cxa_demangle``'s reading of ``name``; None where it refuses it or there is no runtime."""
    call = _cxa_demangle()
    if call is None:
        return None
    status = ctypes.c_int()
    result = call(name.encode(), None, None, ctypes.byref(status))
    if not result:
        return None
    try:
        return ctypes.string_at(result).decode() if status.value == 0 else None
    except UnicodeError:
        return None
    finally:
        _free()(result)


@cache
def _cxa_demangle() -> Callable | None:
    for soname in _runtimes():
        try:
            runtime = ctypes.CDLL(soname)
        except OSError:
            continue
        if hasattr(runtime, "__cxa_demangle"):
            call = runtime.__cxa_demangle
            call.restype = ctypes.c_void_p
            call.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p,
                             ctypes.POINTER(ctypes.c_int)]
            return call
    return None


def _runtimes() -> Iterator[str]:
    """The sonames to try; the loader's cache is asked (a process) only where none of them opens."""
    yield from RUNTIMES
    import ctypes.util  # runs ldconfig or a compiler: only where no soname opened

    found = ctypes.util.find_library("stdc++")
    if found:
        yield found


@cache
def _free() -> Callable:
    """libc's free, for the buffer ``__cxa_demangle`` allocates."""
    free = ctypes.CDLL(None).free
    free.argtypes = [ctypes.c_void_p]
    return free
