"""The NVIDIA driver and its GPUs, as /proc/driver/nvidia and nvidia-smi describe them.

/proc is read first: the kernel module fills those files without talking to the GPU, so they
answer on a machine whose GPU is wedged, where nvidia-smi blocks. nvidia-smi adds what only it
knows (the newest CUDA the driver supports, memory, compute capability, its GPU index) when it
answers in time. The layouts are the driver's own: ``information`` files of ``Key: \\t value``
lines (nv-procfs.c in NVIDIA's open-gpu-kernel-modules), nvidia-smi's ``--format=csv,noheader,
nounits`` rows of ``, ``-separated fields in the order asked, and its banner's
``CUDA Version: 12.8``.
"""

from __future__ import annotations

import re

from .host import Host
from .model import Driver, Gpu

#: nvidia-smi --query-gpu fields, in the order the rows give them
QUERY_FIELDS = ("index", "name", "uuid", "pci.bus_id", "driver_version", "memory.total",
                "compute_cap")
QUERY = ["nvidia-smi", f"--query-gpu={','.join(QUERY_FIELDS)}", "--format=csv,noheader,nounits"]

# "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 ..." and the open
# module's "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.86.15  Release Build ..."
_NVRM = re.compile(r"^NVRM version:.*?Kernel Module(?: for \S+)?\s+(?P<version>\d+(?:\.\d+)+)", re.M)
_CUDA_VERSION = re.compile(r"CUDA Version\s*:\s*(?P<version>\d+(?:\.\d+)*)")


def bus_key(bus_id: str) -> str:
    """One spelling of a PCI address: nvidia-smi's ``00000000:18:00.0`` and /proc's
    ``0000:18:00.0`` are ``0000:18:00.0``."""
    parts = bus_id.strip().lower().split(":")
    if len(parts) == 3 and all(parts):
        try:
            return f"{int(parts[0], 16):04x}:{parts[1]}:{parts[2]}"
        except ValueError:
            pass
    return bus_id.strip().lower()


def driver_from_proc(host: Host) -> Driver:
    text = host.read_text(host.proc / "driver" / "nvidia" / "version")
    match = _NVRM.search(text or "")
    line = next((row.strip() for row in (text or "").splitlines() if row.startswith("NVRM")), None)
    return Driver(version=match["version"] if match else None, kernel_module=line)


def gpus_from_proc(host: Host) -> list[Gpu]:
    """One GPU per /proc/driver/nvidia/gpus/<bus>/information, in bus order."""
    folder = host.proc / "driver" / "nvidia" / "gpus"
    try:
        buses = sorted(entry.name for entry in folder.iterdir())
    except OSError:
        return []
    gpus = []
    for bus in buses:
        fields = _information(host.read_text(folder / bus / "information") or "")
        minor = fields.get("Device Minor", "")
        gpus.append(Gpu(index=int(minor) if minor.isdigit() else None, name=fields.get("Model"),
                        bus_id=bus_key(fields.get("Bus Location") or bus),
                        uuid=fields.get("GPU UUID"), vbios=fields.get("Video BIOS"),
                        sources=["/proc"]))
    return gpus


def _information(text: str) -> dict[str, str]:
    fields = {}
    for row in text.splitlines():
        key, colon, value = row.partition(":")
        if colon and key.strip():
            fields[key.strip()] = value.strip()
    return fields


def gpus_from_query(output: str) -> list[Gpu]:
    """The rows of ``QUERY``; a row that does not have every field is skipped."""
    gpus = []
    for row in output.splitlines():
        values = [value.strip() for value in row.split(", ")]
        if len(values) != len(QUERY_FIELDS):
            continue
        fields = {name: (None if value in ("", "[N/A]", "N/A") else value)
                  for name, value in zip(QUERY_FIELDS, values, strict=True)}
        gpus.append(Gpu(index=_integer(fields["index"]), name=fields["name"],
                        bus_id=bus_key(fields["pci.bus_id"]) if fields["pci.bus_id"] else None,
                        uuid=fields["uuid"], memory_total_mib=_integer(fields["memory.total"]),
                        compute_capability=fields["compute_cap"], sources=["nvidia-smi"]))
    return gpus


def query_driver_version(output: str) -> str | None:
    versions = {row.split(", ")[QUERY_FIELDS.index("driver_version")].strip()
                for row in output.splitlines() if len(row.split(", ")) == len(QUERY_FIELDS)}
    return versions.pop() if len(versions) == 1 else None


def cuda_version(banner: str) -> str | None:
    """The newest CUDA the driver supports, from nvidia-smi's banner (or ``-q``)."""
    match = _CUDA_VERSION.search(banner)
    return match["version"] if match else None


def merged(from_proc: list[Gpu], from_smi: list[Gpu]) -> list[Gpu]:
    """The GPUs of both sources, one per PCI address: nvidia-smi's facts over /proc's where both
    have one, /proc's where nvidia-smi has none (its VBIOS, or everything when it did not answer)."""
    by_bus = {gpu.bus_id: gpu for gpu in from_proc}
    out = []
    for gpu in from_smi:
        known = by_bus.pop(gpu.bus_id, None)
        if known is None:
            out.append(gpu)
            continue
        facts = {name: value for name, value in gpu.model_dump().items() if value is not None}
        out.append(known.model_copy(update={**facts, "sources": known.sources + gpu.sources}))
    out += by_bus.values()
    return sorted(out, key=lambda gpu: (gpu.index is None, gpu.index or 0, gpu.bus_id or ""))


def _integer(value: str | None) -> int | None:
    return int(value) if value and value.isdigit() else None
