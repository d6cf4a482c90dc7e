"""The only globals an SGLang crash dump may name, and what each becomes instead of being run.

A pickle names classes and functions as ``module.name`` and the stock loader imports and calls
them: that is how a dump runs code (CVE-2026-3989, and the getattr/__import__ bypass of its
deny-list fix). crashlab imports nothing a dump names. Each allowed name maps to a stand-in that
only stores what the pickle hands it; every other name is refused by the loader. The list is
exact (no prefixes, no dotted attribute paths), from SGLang 0.5.6, 0.5.12 and 0.5.23: see
shared/reference/sglang-crash-dump.md section 3 and fixtures/sglang_dumps/PROVENANCE.md.
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

#: Plain-data classes that a request or ServerArgs holds. Pickled as NEWOBJ+BUILD (dataclasses),
#: REDUCE with positional values (msgspec array_like structs, enums) or through a builder below.
HELD_CLASSES = {
    (SERVER_ARGS, "ServerArgs"),
    ("sglang.srt.lora.lora_registry", "LoRARef"),
    ("sglang.srt.utils.common", "ImageData"),
    ("sglang.srt.utils.common", "VideoData"),
    ("sglang.srt.managers.schedule_batch", "Modality"),
    ("sglang.srt.multimodal.modality", "Modality"),
    (IO_STRUCT, "SessionParams"),
    ("sglang.srt.sampling.watermarking.core", "WatermarkRequestConfig"),
    ("sglang.srt.sampling.watermarking.config", "WatermarkServerConfig"),
}

#: Field names of the classes pickled as REDUCE(cls, positional values): msgspec array_like
#: structs (LoRARef in 0.5.23) and enums (their one value).
POSITIONAL_FIELDS = {
    ("sglang.srt.lora.lora_registry", "LoRARef"): ("lora_id", "lora_name", "lora_path", "pinned"),
    ("sglang.srt.managers.schedule_batch", "Modality"): ("value",),
    ("sglang.srt.multimodal.modality", "Modality"): ("value",),
}

#: Functions a dump calls to rebuild one of the classes above: ServerArgs.__reduce__ in 0.5.23
#: (``_rebuild_server_args(cls, fields, bookkeeping)``) and msgspec's keyword-struct rebuild
#: (``rebuild(cls, fields)``). The stand-in accepts exactly those argument shapes.
BUILDERS = {
    (SERVER_ARGS, "_rebuild_server_args"),
    ("msgspec._utils", "rebuild"),
}

#: Python containers that protocols 2-4 spell as a call (``builtins.bytearray(b"...")``).
#: Each stand-in checks its arguments: ``bytearray(10**12)`` must not allocate a terabyte.
CONTAINERS = {
    ("builtins", "set"),
    ("builtins", "frozenset"),
    ("builtins", "bytearray"),
    ("builtins", "complex"),
    ("collections", "OrderedDict"),
}


@dataclass(frozen=True)
class Global:
    """An allowed ``module.name``: what a GLOBAL opcode pushes in place of the real object."""

    module: str
    name: str
    kind: str  # "request", "held", "builder" or "container"

    @property
    def qualified(self) -> str:
        return f"{self.module}.{self.name}"


def lookup(module: str, name: str) -> Global | None:
    key = (module, name)
    if key in REQUEST_KINDS:
        return Global(module, name, "request")
    if key in HELD_CLASSES:
        return Global(module, name, "held")
    if key in BUILDERS:
        return Global(module, name, "builder")
    if key in CONTAINERS:
        return Global(module, name, "container")
    return None
