"""What a call in a pickle (REDUCE, NEWOBJ, NEWOBJ_EX) may make, and nothing runs to make it.

A call on an allowed class makes an inert ``Instance`` record of what was passed; a call
through one of the reconstructors real dumps are written with, in its own argument shape, a
record of the class it names; a call on a Python container rebuilds it from checked
arguments. Anything else is refused (allowlist.py has the names).
"""

from __future__ import annotations

from .allowlist import Global
from .pickled import Instance, unsafe_key


class CallRefused(Exception):
    """Why a call is refused; the interpreter adds where in the pickle it stands."""


def new(cls, args, kwargs, opcode: str) -> Instance:
    """NEWOBJ / NEWOBJ_EX of ``cls``."""
    if type(cls) is not Global or cls.kind != "class":
        raise CallRefused(f"{opcode} on {describe(cls)}, not an allowed class")
    if type(args) is not tuple:
        raise CallRefused(f"{opcode} with arguments that are not a tuple")
    return Instance(cls, opcode, args, kwargs)


def call(function, args: tuple):
    """REDUCE of ``function`` on ``args``."""
    if type(function) is not Global:
        raise CallRefused(f"REDUCE calls {describe(function)}")
    if function.kind == "class":
        return Instance(function, "REDUCE", args)
    if function.kind == "builder":
        return _build_with(function, args)
    if function.kind == "container":
        return _container(function, args)
    raise CallRefused(f"REDUCE calls {function.qualified}, which is a value, not a class")


def _build_with(builder: Global, args: tuple) -> Instance:
    """``_rebuild_server_args(cls, fields, bookkeeping)``, msgspec's ``rebuild(cls, fields)``
    and ``copyreg._reconstructor(cls, base, state)``: an inert record of ``cls``."""
    if builder.name == "_reconstructor":
        shaped = (len(args) == 3 and type(args[0]) is Global and args[0].kind == "class"
                  and type(args[1]) is Global and args[1].qualified == "builtins.object"
                  and args[2] is None)
        if shaped:
            return Instance(args[0], "NEWOBJ", ())
    else:
        arity = 3 if builder.name == "_rebuild_server_args" else 2
        shaped = (len(args) == arity and type(args[0]) is Global and args[0].kind == "class"
                  and all(type(part) is dict for part in args[1:]))
        if shaped:
            return Instance(args[0], "REDUCE", made_by=(builder, args))
    raise CallRefused(f"{builder.qualified} called with arguments of an unexpected shape")


def _container(function: Global, args: tuple):
    """A Python container spelled as a call, rebuilt from arguments of the shapes the stdlib
    pickler writes; refused in any other shape."""
    rebuild = _CONTAINERS.get(function.name)
    made = rebuild(function, args) if rebuild else None
    if made is None:
        raise CallRefused(f"{function.qualified} called with arguments crashlab does not accept")
    return made


# Each rebuilds one container from its arguments, or returns None for a shape it does not take.
def _set(function: Global, args: tuple):
    if len(args) > 1:
        return None
    items = list(args[0]) if args and type(args[0]) in (list, tuple, set) else None
    if args and items is None:
        raise CallRefused(f"{function.qualified} of {describe(args[0])}")
    problem = unsafe_key(items or ())
    if problem:
        raise CallRefused(problem)
    return (set if function.name == "set" else frozenset)(items or ())


def _bytearray(function: Global, args: tuple):
    if not args:
        return bytearray()
    if type(args[0]) is bytes and len(args) == 1:
        return bytearray(args[0])
    if type(args[0]) is str and args[1:] == ("latin-1",):
        return bytearray(args[0], "latin-1")
    return None


def _complex(function: Global, args: tuple):
    if len(args) <= 2 and all(type(part) in (int, float) for part in args):
        return complex(*args)
    return None


def _ordered_dict(function: Global, args: tuple):
    return {} if not args else None


def _defaultdict(function: Global, args: tuple):
    # the factory is a name only; the items follow as SETITEMS
    return {} if len(args) == 1 and type(args[0]) is Global else None


_CONTAINERS = {"set": _set, "frozenset": _set, "bytearray": _bytearray, "complex": _complex,
               "OrderedDict": _ordered_dict, "defaultdict": _defaultdict}


def describe(value) -> str:
    """A value named in a refusal: an allowed name as itself, anything else by its type."""
    if type(value) is Global:
        return value.qualified
    return f"a {type(value).__name__}"
