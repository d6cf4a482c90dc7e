"""A constructed machine for the crashlab env tests: /proc, /etc and a site-packages in a temporary
folder, laid out as the kernel, the NVIDIA driver and pip lay them out.

The /proc/driver/nvidia files follow the driver's own layouts (nv-procfs.c: ``Key: \\t value``
lines; the NVRM banner of the open kernel module), the values are those of the 8 x H100 node the
stand-in nvidia-smi (tests/standin_tools/nvidia-smi) describes, so the two sources can be merged.
"""

from __future__ import annotations

import os
from pathlib import Path

from crashlab.env.host import Host

ROOT = Path(__file__).resolve().parent.parent
STANDIN_TOOLS = ROOT / "tests" / "standin_tools"
BUSES = ("18", "2a", "3a", "5d", "9a", "ab", "ba", "db")
NVRM = ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  565.57.01  Release Build  "
        "(dvs-builder@U16-I3-D08-1-2)  Thu Oct 10 12:29:05 UTC 2024")

OS_RELEASE = '''PRETTY_NAME="Ubuntu 22.04.4 LTS"
NAME="Ubuntu"
VERSION_ID="22.04"
VERSION="22.04.4 LTS (Jammy Jellyfish)"
ID=ubuntu
ID_LIKE=debian
'''

TORCH_VERSION_PY = '''from typing import Optional

__all__ = ['__version__', 'debug', 'cuda', 'git_version', 'hip', 'xpu']
__version__ = '2.8.0a0+gitba56102'
debug = False
cuda: Optional[str] = '12.8'
git_version = 'ba56102387ef21a3b04b357e5b183d48f0afefc7'
hip: Optional[str] = None
xpu: Optional[str] = None
'''

DISTRIBUTIONS = {"torch": "2.8.0a0+gitba56102", "sgl_kernel": "0.3.9.post2",
                 "flashinfer_python": "0.4.1", "nvidia_nccl_cu12": "2.27.3",
                 "transformers": "4.57.1", "sglang": "0.5.4"}


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def site_packages(root: Path, marker: Path | None = None) -> Path:
    """A site-packages with crafted METADATA; its torch/__init__.py writes ``marker`` when
    imported (nothing of crashlab env may import it)."""
    site = root / "site-packages"
    for name, version in DISTRIBUTIONS.items():
        write(site / f"{name}-{version}.dist-info" / "METADATA",
              f"Metadata-Version: 2.1\nName: {name.replace('_', '-')}\nVersion: {version}\n"
              "Requires-Dist: torch==2.8.0\n")
    write(site / "torch" / "version.py", TORCH_VERSION_PY)
    write(site / "torch" / "__init__.py",
          f"open({str(marker)!r}, 'w').write('imported')\n" if marker else "")
    return site


def machine(root: Path, *, gpus: bool = True, path: str = "", marker: Path | None = None,
            **environ: str) -> Host:
    proc, etc = root / "proc", root / "etc"
    write(etc / "os-release", OS_RELEASE)
    write(proc / "sys" / "kernel" / "osrelease", "5.15.0-122-generic\n")
    write(proc / "sys" / "kernel" / "hostname", "gpu-node-7\n")
    write(proc / "sys" / "kernel" / "arch", "x86_64\n")
    if gpus:
        write(proc / "driver" / "nvidia" / "version",
              f"{NVRM}\nGCC version:  gcc version 12.3.0 (Ubuntu 12.3.0-1ubuntu1~22.04)\n")
        for minor, bus in enumerate(BUSES):
            write(proc / "driver" / "nvidia" / "gpus" / f"0000:{bus}:00.0" / "information",
                  "Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 583\n"
                  f"GPU UUID: \t GPU-{minor:08x}-ffdd-8720-1df0-98bd8cdc05b1\n"
                  "Video BIOS: \t 96.00.74.00.01\nBus Type: \t PCIe\nDMA Size: \t 52 bits\n"
                  f"DMA Mask: \t 0xfffffffffffff\nBus Location: \t 0000:{bus}:00.0\n"
                  f"Device Minor: \t {minor}\nGPU Firmware: \t 565.57.01\nGPU Excluded:\t No\n")
    site = site_packages(root, marker)
    return Host(proc=proc, sys=root / "sys", etc=etc, site_paths=(str(site),),
                environ={"PATH": path, **environ})


def standin_path(*more: str) -> str:
    """PATH with the stand-in nvidia-smi first, then python3 for its shebang."""
    return os.pathsep.join([str(STANDIN_TOOLS), *more, os.environ.get("PATH", os.defpath)])
