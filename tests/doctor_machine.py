"""Machines built in a test folder for crashlab doctor's checks: a site-packages with crafted
METADATA, real ELF libraries built with gcc, a fake /proc, and a fake CUDA toolkit whose nvcc
is a stand-in script (it answers --version and --dryrun as nvcc does; it compiles nothing)."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from crashlab.env.checks import Machine
from crashlab.env.host import Host
from crashlab.env.packages import Distributions

STANDIN_NVCC = """#!/bin/sh
# stand-in for NVIDIA's nvcc (a crashlab test): answers --version and --dryrun, compiles nothing
for arg in "$@"; do
  case "$arg" in
    --version) echo "nvcc: NVIDIA (R) Cuda compiler driver"
               echo "Cuda compilation tools, release {release}, V{release}.99" ;;
    --dryrun) echo "#\\$ _HERE_={here}" >&2 ;;
  esac
done
"""

#: host_config.h's own words, as CUDA 12.4's holds them (with the limit a test chooses)
HOST_CONFIG = """#if defined(__GNUC__)
#if __GNUC__ > {gcc}
#error -- unsupported GNU version! gcc versions later than {gcc} are not supported! The nvcc flag '-allow-unsupported-compiler' can be used to override this version check; however, using an unsupported host compiler may cause compilation failure or incorrect run time execution. Use at your own risk.
#endif /* __GNUC__ > {gcc} */
#endif /* __GNUC__ */
"""


def distribution(site: Path, name: str, version: str, requires: tuple[str, ...] = ()) -> Path:
    folder = site / f"{name.replace('-', '_')}-{version}.dist-info"
    folder.mkdir(parents=True)
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}",
             *(f"Requires-Dist: {r}" for r in requires)]
    (folder / "METADATA").write_text("\n".join(lines) + "\n")
    (folder / "RECORD").write_text("")
    return folder


def shared_library(path: Path, source: str) -> Path:
    """A real ELF shared object built by gcc from C ``source`` (mangled C++ names are valid C
    identifiers, so a test can define or need any torch symbol)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    c_file = path.with_suffix(".c")
    c_file.write_text(source)
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(path), str(c_file)], check=True)
    c_file.unlink()
    return path


def torch(site: Path, version: str = "2.8.0", cuda: str | None = "12.8",
          defines: tuple[str, ...] = ("_ZN3c104cuda9SetDeviceEi",)) -> None:
    """torch's metadata, its torch/version.py, and a torch/lib/libc10.so defining ``defines``."""
    distribution(site, "torch", version)
    (site / "torch").mkdir()
    (site / "torch" / "version.py").write_text(
        f"__version__ = {version!r}\ncuda = {cuda!r}\ngit_version = 'abc'\nhip = None\n")
    shared_library(site / "torch" / "lib" / "libc10.so",
                   "".join(f"void {name}(int x) {{}}\n" for name in defines))


def extension(path: Path, needs: tuple[str, ...]) -> Path:
    """An extension module that calls ``needs`` without linking them: undefined in its .dynsym."""
    body = "".join(f"extern void {name}(int);\n" for name in needs)
    calls = "".join(f"  {name}(0);\n" for name in needs)
    return shared_library(path, f"{body}void entry(void) {{\n{calls}}}\n")


@dataclass
class Tree:
    """A machine under ``root``: ``site`` (site-packages), ``proc`` (a fake /proc)."""

    root: Path
    environ: dict[str, str] = field(default_factory=dict)

    def __post_init__(self):
        self.site.mkdir(parents=True, exist_ok=True)
        self.proc.mkdir(parents=True, exist_ok=True)
        self.environ.setdefault("PATH", os.environ["PATH"])
        self.environ.setdefault("HOME", str(self.root / "home"))

    @property
    def site(self) -> Path:
        return self.root / "site-packages"

    @property
    def proc(self) -> Path:
        return self.root / "proc"

    def proc_file(self, relative: str, text: str) -> None:
        path = self.proc / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

    def host(self) -> Host:
        return Host(proc=self.proc, sys=self.root / "sys", etc=self.root / "etc",
                    environ=self.environ, site_paths=(str(self.site),))

    def machine(self, **options) -> Machine:
        return Machine(host=self.host(), distributions=Distributions([str(self.site)]),
                       python="the test's Python", **options)

    def toolkit(self, release: str = "12.8", gcc_limit: int = 15, name: str = "cuda") -> Path:
        """A CUDA toolkit folder: include/cuda_runtime.h, include/crt/host_config.h, and a
        stand-in bin/nvcc."""
        home = self.root / name
        (home / "include" / "crt").mkdir(parents=True)
        (home / "include" / "cuda_runtime.h").write_text("/* a test's toolkit */\n")
        (home / "include" / "crt" / "host_config.h").write_text(HOST_CONFIG.format(gcc=gcc_limit))
        nvcc = home / "bin" / "nvcc"
        nvcc.parent.mkdir()
        nvcc.write_text(STANDIN_NVCC.format(release=release, here=home / "bin"))
        nvcc.chmod(0o755)
        return home
