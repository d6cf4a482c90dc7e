"""What the GPUs are doing in a sample: utilisation, clocks, and each process's memory.

A rank that spins in a collective keeps its GPU at 100% with nothing completing; a rank that
never launched its kernel leaves it idle. NVML says which, without touching the CUDA contexts:
through nvidia-ml-py where crashlab's Python can import it, else ``nvidia-smi --query-*`` (the
same library's fields, under the source timeout, since nvidia-smi on a wedged driver can block
forever). One file per sample, for the whole machine.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from ...env.probe import run_tool
from ...hangs.layout import GpuActivity, GpuProcess, NvmlSample, Source, SourceRecord, Status
from .slot import Slot, first_line

NAME: Source = "nvml"
GPU_FIELDS = ("index", "uuid", "name", "utilization.gpu", "utilization.memory", "clocks.sm",
              "clocks.mem", "memory.used", "memory.total")
GPU_KEYS = ("index", "uuid", "name", "utilization_gpu_percent", "utilization_memory_percent",
            "sm_clock_mhz", "memory_clock_mhz", "memory_used_mib", "memory_total_mib")
APP_FIELDS = ("pid", "gpu_uuid", "used_memory")
MIB = 1 << 20


def file_name(sample: int) -> str:
    return f"sample-{sample}/nvml.json"


def _number(text: str) -> int | None:
    text = text.strip()
    try:
        return int(float(text))
    except ValueError:
        return None


def _from_nvml() -> dict | None:
    """The activity through nvidia-ml-py; None where it cannot be imported or NVML not started."""
    try:
        import pynvml  # type: ignore[import-not-found]
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return None
    try:
        gpus, processes = [], []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            uuid = pynvml.nvmlDeviceGetUUID(handle)
            rates = pynvml.nvmlDeviceGetUtilizationRates(handle)
            memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
            gpus.append(dict(zip(GPU_KEYS, (
                index, uuid, pynvml.nvmlDeviceGetName(handle), rates.gpu, rates.memory,
                pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM),
                pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_MEM),
                memory.used // MIB, memory.total // MIB), strict=True)))
            for process in pynvml.nvmlDeviceGetComputeRunningProcesses(handle):
                used = process.usedGpuMemory
                processes.append({"pid": process.pid, "gpu_uuid": uuid,
                                  "used_memory_mib": used // MIB if used else None})
        return {"via": "nvml", "gpus": gpus, "processes": processes}
    except pynvml.NVMLError as exc:
        return {"via": "nvml", "error": str(exc), "gpus": [], "processes": []}
    finally:
        pynvml.nvmlShutdown()


def _rows(output: str, fields: tuple[str, ...]) -> list[list[str]]:
    return [[cell.strip() for cell in line.split(",")] for line in output.splitlines()
            if line.count(",") == len(fields) - 1]


def _from_nvidia_smi(environ: Mapping[str, str], timeout: float) -> dict | tuple[Status, str]:
    """The activity through nvidia-smi, or (status, note) where it gives none."""
    gpus = run_tool(["nvidia-smi", f"--query-gpu={','.join(GPU_FIELDS)}",
                     "--format=csv,noheader,nounits"], timeout=timeout, environ=environ)
    if gpus.status == "missing":
        return "missing", "no GPU activity: neither nvidia-ml-py nor nvidia-smi is here"
    if gpus.status == "timeout":
        return "timeout", f"nvidia-smi gave nothing within {timeout:g} s"
    if not gpus.ok:
        return "failed", f"nvidia-smi: {first_line(gpus.output) or f'exit code {gpus.exit_code}'}"
    apps = run_tool(["nvidia-smi", f"--query-compute-apps={','.join(APP_FIELDS)}",
                     "--format=csv,noheader,nounits"], timeout=timeout, environ=environ)
    return {
        "via": "nvidia-smi",
        "gpus": [{key: (_number(value) if key not in ("uuid", "name") else value)
                  for key, value in zip(GPU_KEYS, row, strict=True)}
                 for row in _rows(gpus.output, GPU_FIELDS)],
        "processes": [{"pid": _number(pid), "gpu_uuid": uuid, "used_memory_mib": _number(used)}
                      for pid, uuid, used in _rows(apps.output, APP_FIELDS)] if apps.ok else [],
    }


def sample(slot: Slot, environ: Mapping[str, str] | None = None) -> SourceRecord:
    activity = _from_nvml() or _from_nvidia_smi(environ if environ is not None else os.environ,
                                                slot.timeout)
    if isinstance(activity, tuple):
        return slot.row(NAME, None, *activity)
    text = as_sample(activity, slot.taken_at).model_dump_json(indent=2) + "\n"
    return slot.keep(NAME, None, file_name(slot.sample), text.encode())


def as_sample(activity: dict, taken_at: str) -> NvmlSample:
    """What NVML or nvidia-smi said, in the capture's shape (hangs.layout): each GPU with the
    processes on it, their memory in bytes (the reader finds a rank's GPU by its pid)."""
    by_gpu: dict[str, list[GpuProcess]] = {}
    for process in activity["processes"]:
        if process["pid"] is None:
            continue
        used = process["used_memory_mib"]
        by_gpu.setdefault(process["gpu_uuid"], []).append(
            GpuProcess(pid=process["pid"], used_memory_bytes=None if used is None else used * MIB))
    return NvmlSample(taken_at=taken_at, gpus=[
        GpuActivity(index=gpu["index"], name=gpu["name"], uuid=gpu["uuid"],
                    utilization_gpu=gpu["utilization_gpu_percent"],
                    utilization_memory=gpu["utilization_memory_percent"],
                    sm_clock_mhz=gpu["sm_clock_mhz"], memory_clock_mhz=gpu["memory_clock_mhz"],
                    processes=by_gpu.get(gpu["uuid"], []))
        for gpu in activity["gpus"] if gpu["index"] is not None])
