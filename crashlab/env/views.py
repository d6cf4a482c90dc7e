"""An Environment as people read it: ``key: value`` lines laid out like ``sglang.check_env``'s
output, in the terminal or as a fenced Markdown block for an issue (``crashlab report`` embeds
:func:`markdown`). Every value came from outside crashlab and is shown as itself.

The Markdown block leaves out the host name and the GPUs' UUIDs, which an issue does not need;
the JSON keeps them.
"""

from __future__ import annotations

from rich.console import Console

from ..console import line, wrapped
from ..report import markdown_escape
from .model import Environment, Gpu, Package

#: (key, value lines): one line for most facts, several for the topology and the variables
Entry = tuple[str, list[str]]
#: entries shown as a block under their key, even when they hold one line
BLOCKS = frozenset({"NVIDIA Topology", "Environment variables", "Not answered"})


def _version_or_status(package: Package) -> str:
    """An installed package's version, else what is known of it (absent, unknown)."""
    if package.status == "installed" and package.version is not None:
        return package.version
    return package.status


def entries(env: Environment, *, public: bool = False) -> list[Entry]:
    """check_env's rows, in its order: the host, the driver and GPUs, CUDA, PyTorch, the
    packages, then the multi-line blocks (BLOCKS)."""
    return (_host(env, public) + [("NVIDIA driver", [env.driver.version or "not found"]),
                                  ("Driver CUDA version", [env.driver.cuda_version or "unknown"])]
            + _gpus(env.gpus, public) + _cuda(env) + _torch(env)
            + [(package.name, [_version_or_status(package)]) for package in env.packages]
            + _blocks(env))


def _host(env: Environment, public: bool) -> list[Entry]:
    """Python, the OS and, outside public views, the host's name."""
    os_name = env.os.name or "unknown"
    out: list[Entry] = [("Python", [(env.python.version or "unknown").replace("\n", " ")]),
                        ("Python executable", [env.python.executable]),
                        ("OS", [f"{os_name} ({env.os.arch})" if env.os.arch else os_name]),
                        ("Kernel", [env.os.kernel or "unknown"])]
    if not public:
        out.append(("Host", [env.host_name or "unknown"]))
    return out


def _cuda(env: Environment) -> list[Entry]:
    """CUDA_HOME and nvcc, with where each was found."""
    nvcc = env.cuda.nvcc
    return [("CUDA_HOME", [f"{env.cuda.home} (from {env.cuda.home_from})" if env.cuda.home
                           else "not found"]),
            ("NVCC", [f"{nvcc.path}: release {nvcc.release}, V{nvcc.version}" if nvcc and nvcc.version
                      else f"{nvcc.path}: version unknown" if nvcc else "not found"])]


def _torch(env: Environment) -> list[Entry]:
    """PyTorch's version and what it was built with; no row where it is not installed."""
    torch = env.torch
    if torch is None:
        return []
    built = ", ".join(part for part in (f"CUDA {torch.cuda}" if torch.cuda else "",
                                        f"HIP {torch.hip}" if torch.hip else "",
                                        f"git {torch.git_version}" if torch.git_version else "",
                                        "debug build" if torch.debug else "") if part)
    return [("PyTorch build", [f"{torch.version} ({built})" if built else str(torch.version)])]


def _blocks(env: Environment) -> list[Entry]:
    """The multi-line rows (BLOCKS), each only where it has something to show."""
    out: list[Entry] = []
    if env.topology:
        out.append(("NVIDIA Topology", env.topology.expandtabs().splitlines()))
    if env.variables:
        out.append(("Environment variables", [f"{name}={value}" for name, value in env.variables.items()]))
    trouble = [probe.describe() for probe in env.probes if probe.status != "ok"]
    if trouble:
        out.append(("Not answered", trouble))
    return out


def _gpus(gpus: list[Gpu], public: bool) -> list[Entry]:
    """check_env's grouping: ``GPU 0,1,2,3: NVIDIA H100 80GB HBM3`` and the same for compute
    capability; per GPU (bus, memory, UUID) outside public views."""
    if not gpus:
        return [("GPUs", ["none found"])]
    out = []
    for key, value_of in (("", lambda gpu: gpu.name or "unknown"),
                          (" Compute Capability", lambda gpu: gpu.compute_capability)):
        groups: dict[str, list[str]] = {}
        for position, gpu in enumerate(gpus):
            value = value_of(gpu)
            if value:
                groups.setdefault(value, []).append(str(gpu.index if gpu.index is not None else position))
        out += [(f"GPU {','.join(ids)}{key}", [value]) for value, ids in groups.items()]
    if not public:
        for position, gpu in enumerate(gpus):
            facts = [gpu.bus_id, f"{gpu.memory_total_mib} MiB" if gpu.memory_total_mib else None,
                     gpu.uuid, f"VBIOS {gpu.vbios}" if gpu.vbios else None,
                     "from " + " and ".join(gpu.sources)]
            out.append((f"GPU {gpu.index if gpu.index is not None else position} details",
                        [", ".join(fact for fact in facts if fact)]))
    return out


def text_lines(env: Environment, *, public: bool = False) -> list[str]:
    """``key: value``; a value of several lines starts on the next line, as check_env prints
    the topology."""
    out = []
    for key, values in entries(env, public=public):
        if key not in BLOCKS:
            out.append(f"{key}: {values[0]}")
        else:
            out += [f"{key}:", *(f"  {value}" for value in values)]
    return out


def markdown(env: Environment) -> str:
    """A fenced block of check_env-style lines, fit for an issue body."""
    return markdown_escape.join(markdown_escape.fenced(text_lines(env, public=True)))


def render(env: Environment, console: Console) -> None:
    for key, values in entries(env):
        if key not in BLOCKS:
            style = "yellow" if values[0] in ("absent", "unknown", "not found") else ""
            console.print(wrapped(line((key, "bold"), ": ", (values[0], style)), indent=2))
        else:
            console.print(line((key, "bold"), ":"))
            style = "yellow" if key == "Not answered" else ""
            for value in values:
                if key == "NVIDIA Topology":  # a matrix: its rows stay whole, as nvidia-smi's
                    console.print(line("  ", (value, style)), soft_wrap=True)
                else:
                    console.print(wrapped(line("  ", (value, style)), indent=4))
