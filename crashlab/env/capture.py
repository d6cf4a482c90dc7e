"""``capture()``: the machine's Environment in about one tool timeout, without touching CUDA.

Files are read in the calling thread while every tool (nvidia-smi three times, nvcc, the
server's Python) runs at once in a thread of its own, each under the timeout, so a wedged GPU
costs the timeout once, not once per question.
"""

from __future__ import annotations

import math
import re
import shutil
import sys
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path

from ..errors import BadInput
from ..privacy.redact import Redactor
from ..report.model import Tool
from ..version import __version__
from . import nvidia, toolkit
from .host import Host
from .interpreter import ask
from .model import (
    Cuda,
    Driver,
    Environment,
    Nvcc,
    OperatingSystem,
    Package,
    Probe,
    Python,
    Torch,
)
from .packages import Distributions, torch_build
from .probe import ToolRun, run_tool

#: Distributions reported, each group under the names it is published as (first found wins the
#: group's place; every one found is listed).
PACKAGES: tuple[tuple[str, ...], ...] = (
    ("torch",), ("torchvision",), ("triton", "pytorch-triton"), ("sglang",),
    ("sglang-kernel", "sgl-kernel"), ("flashinfer-python",), ("flashinfer-cubin",),
    ("flashinfer-jit-cache",), ("deep-ep",), ("deep-gemm",),
    ("nvidia-nccl-cu12", "nvidia-nccl-cu13"), ("nvidia-nvshmem-cu12", "nvidia-nvshmem-cu13"),
    ("transformers",), ("vllm",), ("xformers",))

#: Variables that steer the CUDA stack, collectives, torch and the servers (vLLM's collect_env
#: reports the same families).
VARIABLE_PREFIXES = ("CUDA_", "NCCL_", "NVSHMEM_", "NVIDIA_", "SGLANG_", "SGL_", "TORCH_",
                     "PYTORCH_", "TORCHINDUCTOR_", "TRITON_", "FLASHINFER_", "CUBLAS_", "CUDNN_",
                     "VLLM_", "HF_", "GLOO_", "UCX_", "OMP_", "MKL_")
#: The environment variable that sets the seconds each tool may take where no --timeout says:
#: doctor's and serve's captures, and env's default.
TIMEOUT_VARIABLE = "CRASHLAB_TOOL_TIMEOUT"
#: Seconds each tool may take where neither --timeout nor TIMEOUT_VARIABLE says: enough for a
#: healthy nvidia-smi, short enough that a hung one delays serve's launch little.
DEFAULT_TIMEOUT = 2.0
VARIABLES = ("LD_LIBRARY_PATH", "LD_PRELOAD", "CUDA_HOME", "CUDA_PATH", "MASTER_ADDR",
             "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK")


def tool_timeout(environ: Mapping[str, str]) -> float:
    """The seconds each tool may take: TIMEOUT_VARIABLE's (a loaded machine, or a slow disk under
    a venv, can take longer than DEFAULT_TIMEOUT to start a healthy Python), else the default."""
    value = environ.get(TIMEOUT_VARIABLE, "").strip()
    if not value:
        return DEFAULT_TIMEOUT
    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds > 0):
        raise BadInput(f"{TIMEOUT_VARIABLE}={value}: not a number of seconds above 0")
    return seconds


def capture(host: Host | None = None, *, python: str | None = None,
            timeout: float | None = None) -> Environment:
    """The environment of ``host`` (this machine by default), with the packages of ``python``
    (an interpreter to ask for its sys.path; crashlab's own, read in process, by default), each
    tool under ``timeout`` seconds (None: the host's TIMEOUT_VARIABLE, else DEFAULT_TIMEOUT)."""
    host = host or Host()
    if timeout is None:
        timeout = tool_timeout(host.environ)
    home, home_from = toolkit.cuda_home(host)
    nvcc = toolkit.nvcc_path(host, home)
    run = _Runner(host, timeout)
    with ThreadPoolExecutor(max_workers=6) as pool:
        smi = {name: pool.submit(run, argv) for name, argv in (
            ("query", nvidia.QUERY), ("banner", ["nvidia-smi"]),
            ("topology", ["nvidia-smi", "topo", "-m"]))}
        nvcc_run = pool.submit(run, [nvcc, "--version"], "nvcc --version") if nvcc else None
        answer = pool.submit(ask, python, host.environ, timeout) if python else None
        driver, proc_gpus = nvidia.driver_from_proc(host), nvidia.gpus_from_proc(host)
        operating_system = _operating_system(host)
        host_name = (host.read_text(host.proc / "sys" / "kernel" / "hostname") or "").strip() or None
        variables = _variables(host.environ)
        query, banner, topology = (future.result() for future in smi.values())
        nvcc_done = nvcc_run.result() if nvcc_run else None
        asked = answer.result() if answer else None
    if asked is not None:
        run.probes.append(_probe(f"{python} -c <sys.path>", asked.run))
        interpreter = Python(executable=asked.executable or python, version=asked.version,
                             site_paths=list(asked.path), asked=True)
        readable = asked.run.ok
    else:
        interpreter = Python(executable=sys.executable, version=sys.version,
                             site_paths=list(host.site_paths), asked=False)
        readable = True
    distributions = Distributions(interpreter.site_paths)
    return Environment(
        tool=Tool(version=__version__),
        captured_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        host_name=host_name, os=operating_system, python=interpreter,
        driver=_driver(driver, query, banner),
        gpus=nvidia.merged(proc_gpus, nvidia.gpus_from_query(query.output) if query.ok else []),
        cuda=Cuda(home=home, home_from=home_from, nvcc=_nvcc(nvcc, nvcc_done)),
        torch=_torch(distributions) if readable else None,
        packages=_packages(distributions, readable),
        topology=(topology.output.rstrip() or None) if topology.ok else None,
        variables=variables, probes=sorted(run.probes, key=lambda probe: probe.tool))


def capture_of(python: str | None, host: Host | None = None,
               timeout: float | None = None) -> Environment:
    """capture() for a command's --python (the server's interpreter): one that is not there, or
    does not answer, is refused (BadInput) rather than described with no packages."""
    if python is not None and not Path(python).is_file() and shutil.which(python) is None:
        raise BadInput(f"--python {python}: no such interpreter")
    environment = capture(host, python=python, timeout=timeout)
    if python and not environment.python.site_paths:
        raise BadInput(f"--python {python}: not a Python interpreter that answers")
    return environment


class _Runner:
    """Runs a tool under the timeout and keeps its probe record; nvidia-smi, asked three things,
    is looked for once and said missing once."""

    def __init__(self, host: Host, timeout: float):
        self.host, self.timeout = host, timeout
        self.probes: list[Probe] = []
        self._lock = threading.Lock()

    def __call__(self, argv: Sequence[str], name: str | None = None) -> ToolRun:
        done = run_tool(argv, timeout=self.timeout, environ=self.host.environ,
                        search_path=self.host.search_path)
        tool = argv[0] if done.status == "missing" else name or " ".join(argv)
        with self._lock:
            if not any(probe.tool == tool for probe in self.probes):
                self.probes.append(_probe(tool, done))
        return done


def _probe(tool: str, done: ToolRun) -> Probe:
    return Probe(tool=tool, status=done.status, seconds=round(done.seconds, 3),
                 exit_code=done.exit_code)


def _operating_system(host: Host) -> OperatingSystem:
    release = _os_release(host.read_text(host.etc / "os-release") or "")
    kernel = (host.read_text(host.proc / "sys" / "kernel" / "osrelease") or "").strip()
    arch = (host.read_text(host.proc / "sys" / "kernel" / "arch") or "").strip()
    return OperatingSystem(name=release.get("PRETTY_NAME") or release.get("NAME"),
                           id=release.get("ID"), version_id=release.get("VERSION_ID"),
                           kernel=kernel or None, arch=arch or host.machine)


_OS_RELEASE_LINE = re.compile(r"""^(?P<key>[A-Z0-9_]+)=(?P<value>"[^"]*"|'[^']*'|\S*)""", re.M)


def _os_release(text: str) -> dict[str, str]:
    """os-release(5): KEY=value lines, the value quoted or not."""
    return {match["key"]: match["value"].strip("\"'") for match in _OS_RELEASE_LINE.finditer(text)}


def _driver(from_proc: Driver, query: ToolRun, banner: ToolRun) -> Driver:
    version = from_proc.version or (nvidia.query_driver_version(query.output) if query.ok else None)
    return from_proc.model_copy(update={
        "version": version, "cuda_version": nvidia.cuda_version(banner.output) if banner.ok else None})


def _nvcc(path: str | None, done: ToolRun | None) -> Nvcc | None:
    if path is None:
        return None
    release, version = toolkit.nvcc_version(done.output) if done and done.ok else (None, None)
    return Nvcc(path=path, release=release, version=version)


def _torch(distributions: Distributions) -> Torch | None:
    build = torch_build(distributions)
    if build is None:
        return None
    return Torch(version=build.version, cuda=build.cuda, hip=build.hip,
                 git_version=build.git_version, debug=build.debug)


def _packages(distributions: Distributions, readable: bool) -> list[Package]:
    if not readable:
        return [Package(name="/".join(names), status="unknown") for names in PACKAGES]
    packages = []
    for names in PACKAGES:
        found = [item for item in map(distributions.get, names) if item is not None]
        packages += [Package(name=item.name, status="installed", version=item.version,
                             location=str(item.location)) for item in found]
        if not found:
            packages.append(Package(name="/".join(names), status="absent"))
    return packages


def is_reported_variable(name: str) -> bool:
    """Whether the environment capture reports this variable (its family steers the stack)."""
    return name.startswith(VARIABLE_PREFIXES) or name in VARIABLES


def _variables(environ: Mapping[str, str]) -> dict[str, str]:
    chosen = {name: value for name, value in environ.items() if is_reported_variable(name)}
    return dict(sorted(Redactor.for_launch([], dict(environ)).environment(chosen).items()))
