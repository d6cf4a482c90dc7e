"""Which names a dump may use, and what each becomes instead of being imported or run.

A pickle names classes and functions as ``module.name``, and the stock loader imports and calls
them: that is how a dump runs code (CVE-2026-3989, and the getattr/__import__ bypass of its
deny-list fix). crashlab imports nothing a dump names, so a name alone is harmless; what could
run code is calling it. The rule follows from that:

- classes of SGLang (``sglang.*``) and of the Hugging Face configs a ServerArgs holds
  (``transformers.*``, and ``transformers_modules.*`` for ``--trust-remote-code`` models), and a
  few stdlib data types (``torch.device``, datetime, pathlib): any call of one makes an inert
  record of what it was passed. A class is recognised by its CapWords name (PEP 8): SGLang's
  functions (``dynamic_import``) and attribute paths (``X.__init__.__globals__``) are refused;
- the reconstructors that SGLang's own ``__reduce__`` and the stdlib pickler write
  (``_rebuild_server_args``, msgspec's ``rebuild``, ``copyreg._reconstructor``): accepted only
  with the argument shapes they have in a dump, and then make a record of the class they name;
- Python containers spelled as calls (``set``, ``bytearray``, ``OrderedDict``, ``defaultdict``):
  rebuilt here from checked arguments;
- values a dump refers to but never calls (``torch.bfloat16``);
- every other name is refused where it appears, with the one line the loader prints.

Facts: SGLang's own safe loader (``safe_pickle_load``, since 0.5.10) and the dumps that SGLang 0.5.6.post2,
0.5.12 and 0.5.23 wrote (fixtures/sglang_dumps/real/).
"""

from __future__ import annotations

from dataclasses import dataclass

IO_STRUCT = "sglang.srt.managers.io_struct"
SERVER_ARGS = "sglang.srt.server_args"

#: The request classes; the loader turns each instance into a Request record.
REQUEST_KINDS = {
    (IO_STRUCT, "GenerateReqInput"): "generate",
    (IO_STRUCT, "EmbeddingReqInput"): "embedding",
}

#: Field names of the classes pickled as REDUCE(cls, positional values): msgspec array_like
#: structs (LoRARef in 0.5.23) and enums (their one value).
POSITIONAL_FIELDS = {
    ("sglang.srt.lora.lora_registry", "LoRARef"): ("lora_id", "lora_name", "lora_path", "pinned"),
    ("sglang.srt.managers.schedule_batch", "Modality"): ("value",),
    ("sglang.srt.multimodal.modality", "Modality"): ("value",),
}

#: Functions a dump calls to rebuild an object of a class: ServerArgs.__reduce__ in 0.5.23
#: (``_rebuild_server_args(cls, fields, bookkeeping)``), msgspec's keyword-struct rebuild
#: (``rebuild(cls, fields)``) and the stdlib's ``copyreg._reconstructor(cls, object, None)``.
#: The loader accepts exactly those argument shapes.
BUILDERS = {
    (SERVER_ARGS, "_rebuild_server_args"),
    ("msgspec._utils", "rebuild"),
    ("copyreg", "_reconstructor"),
}

#: Python containers that protocols 2-4 spell as a call (``builtins.bytearray(b"...")``).
#: Each is rebuilt by the loader from checked arguments: ``bytearray(10**12)`` must not allocate
#: a terabyte.
CONTAINERS = {
    ("builtins", "set"),
    ("builtins", "frozenset"),
    ("builtins", "bytearray"),
    ("builtins", "complex"),
    ("collections", "OrderedDict"),
    ("collections", "defaultdict"),
}

#: Packages whose classes a dump holds: SGLang's own, and the Hugging Face configs inside
#: ModelConfig (``transformers_modules`` is where ``--trust-remote-code`` classes live).
CLASS_PACKAGES = ("sglang", "transformers", "transformers_modules")

#: Data classes outside those packages that a dump's configs hold.
DATA_CLASSES = {
    ("torch", "device"), ("torch", "Size"),
    ("datetime", "datetime"), ("datetime", "date"), ("datetime", "time"),
    ("datetime", "timedelta"), ("datetime", "timezone"),
    ("pathlib", "PosixPath"), ("pathlib", "PurePosixPath"), ("pathlib", "Path"),
    ("uuid", "UUID"),
}

#: Names a dump refers to as values and never calls: torch dtypes (ModelConfig.dtype, the HF
#: config's torch_dtype), and the factories a defaultdict names.
VALUES = {("torch", dtype) for dtype in (
    "float32", "float", "float64", "double", "float16", "half", "bfloat16", "float8_e4m3fn",
    "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu", "float4_e2m1fn_x2",
    "int8", "uint8", "int16", "int32", "int64", "bool", "complex64", "complex128")}
VALUES |= {("builtins", name) for name in ("list", "dict", "int", "float", "str", "object")}

@dataclass(frozen=True)
class Global:
    """An allowed ``module.name``: what a GLOBAL opcode pushes in place of the real object."""

    module: str
    name: str
    kind: str  # "class", "builder", "container" or "value"

    @property
    def qualified(self) -> str:
        return f"{self.module}.{self.name}"


def _is_class_name(name: str) -> bool:
    """``CapWords``, ``_Private`` or ``Outer.Inner``: a class by PEP 8, not a function or an
    attribute path (``X.__init__.__globals__``)."""
    return all(part.lstrip("_")[:1].isupper() and part.isidentifier() for part in name.split("."))


def _in_class_package(module: str) -> bool:
    return any(module == package or module.startswith(package + ".") for package in CLASS_PACKAGES)


#: The Python 2 module names that protocols 2 and 3 write for builtins (pickle's fix_imports).
_PYTHON2_MODULES = {"__builtin__": "builtins", "copy_reg": "copyreg"}


def lookup(module: str, name: str) -> Global | None:
    """The record a name becomes, or None when the dump may not use it."""
    module = _PYTHON2_MODULES.get(module, module)
    key = (module, name)
    if key in BUILDERS:
        return Global(module, name, "builder")
    if key in CONTAINERS:
        return Global(module, name, "container")
    if key in VALUES:
        return Global(module, name, "value")
    if key in DATA_CLASSES or (_in_class_package(module) and _is_class_name(name)):
        return Global(module, name, "class")
    return None
