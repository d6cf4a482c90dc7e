"""What a pickle read by crashlab is made of: plain data, and ``Instance`` records of the
objects of allowed classes (none of their code runs); and which values may key a dict or set.
"""

from __future__ import annotations

from .allowlist import POSITIONAL_FIELDS, Global


class Instance:
    """An object of an allowed class as the pickle described it; none of its code ran.

    ``how`` is the opcode that made it (NEWOBJ, NEWOBJ_EX or REDUCE), ``args``/``kwargs`` what
    that opcode passed, ``state`` what BUILD passed, and ``made_by`` the builder call (function
    and arguments) for objects rebuilt through one. Kept so that a dump can be written back.
    """

    __slots__ = ("cls", "how", "args", "kwargs", "state", "made_by")

    def __init__(self, cls: Global, how: str, args: tuple = (), kwargs: dict | None = None,
                 made_by: tuple[Global, tuple] | None = None):
        self.cls = cls
        self.how = how
        self.args = args
        self.kwargs = kwargs
        self.state = None
        self.made_by = made_by

    def __repr__(self) -> str:
        return f"<{self.cls.qualified} (from a pickle)>"

    def fields(self) -> dict:
        """Field name -> value, however the pickle spelled the object.

        Dataclasses and plain classes: the BUILD dict (or the ``(dict, slots)`` pair); pydantic
        models: the ``__dict__`` entry of theirs; msgspec structs and enums: their positional
        values, named where allowlist.POSITIONAL_FIELDS knows the names, an enum's one value as
        ``value``.
        """
        if self.made_by:
            return dict(self.made_by[1][1])
        state, slots = self.state, None
        if type(state) is tuple and len(state) == 2:
            state, slots = state
        if type(state) is dict and type(state.get("__dict__")) is dict:
            state = state["__dict__"]  # pydantic v2 (__dict__, __pydantic_extra__, ...)
        found: dict[object, object] = dict(state) if type(state) is dict else {}
        if type(slots) is dict:
            found.update(slots)
        names = POSITIONAL_FIELDS.get((self.cls.module, self.cls.name), ())
        if self.args and len(self.args) <= len(names):
            found.update(zip(names, self.args, strict=False))
        elif len(self.args) == 1 and self.how == "REDUCE" and self.state is None:
            found["value"] = self.args[0]
        elif self.args:
            found["args"] = list(self.args)
        if self.kwargs:
            found.update(self.kwargs)
        return found


#: Keys a file cannot make collide: str and bytes hash with a per-process secret (SipHash), small
#: ints hash to themselves, stand-ins by identity. Bigger ints and floats hash by value, and so
#: does a tuple of ints (each step of the tuple hash can be inverted to aim at a chosen value); a
#: tuple of strings, like ServerArgs' ``_cuda_graph_config_locked`` entries, is keyed by the secret.
_SMALL_INT = 1 << 60


def _secret_hashed(key) -> bool:
    kind = type(key)
    if kind is str or kind is bytes or kind is bool or key is None or kind is Instance:
        return True
    return kind is tuple and all(_secret_hashed(member) for member in key)


def _safe_key(key) -> bool:
    if _secret_hashed(key):
        return True
    return type(key) is int and -_SMALL_INT < key < _SMALL_INT


def unsafe_key(keys) -> str | None:
    """Why one of ``keys`` may not key a dict or be a set member; None when all may."""
    for key in keys:
        if type(key) is not str and not _safe_key(key):
            return (f"a {type(key).__name__} used as a dict key or set member; SGLang dumps key "
                    "by strings, and such keys could be chosen to collide and stall loading")
    return None
