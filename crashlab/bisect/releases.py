"""One environment per release (``--versions``), kept between bisects.

Each is a venv whose own site-packages take the release, on top of a base interpreter's packages
(the server's dependencies, which a ``--no-deps`` install leaves out): a release costs one
install of one package, not a whole stack of CUDA wheels. The base's site-packages come in
through a .pth line that calls ``site.addsitedir``, so the base's own .pth files (editable
installs among them) work too; the venv's site-packages come first, so the release wins.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from ..errors import BadInput, EnvironmentProblem
from ..privacy.redact import Redactor

#: what --versions accepts: PEP 440's characters, nothing a shell reads
VERSION = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+!-]*\Z")
#: written last in an environment: one without it is an install that did not finish
COMPLETE = ".crashlab-release"
#: the base's site-packages, as the interpreter itself lists them
_SITE_PACKAGES = "import json, site; print(json.dumps(site.getsitepackages()))"


def parse_versions(text: str) -> list[str]:
    """--versions' list, oldest first: at least two, each a version, none twice."""
    versions = [part.strip() for part in text.split(",") if part.strip()]
    for version in versions:
        if not VERSION.match(version):
            raise BadInput(f"--versions: {version!r} is not a version")
    if len(versions) < 2:
        raise BadInput("--versions: give at least two, oldest first (the first good, the last bad)")
    if len(set(versions)) != len(versions):
        raise BadInput("--versions: a version is listed twice")
    return versions


def default_root() -> Path:
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache) / "crashlab" / "bisect-releases"


@dataclass(frozen=True)
class Installed:
    python: Path
    ok: bool
    seconds: float
    reused: bool
    why: str = ""


class Environments:
    """The environments of one base interpreter and one install template, made on demand."""

    def __init__(self, root: Path, base_python: str, template: str):
        if "{version}" not in template:
            raise BadInput("--install: the template must name {version}")
        self.root = root
        self.base_python = shutil.which(base_python) or base_python
        self.template = template
        self.base_paths = self._base_site_packages()
        key = hashlib.sha256(f"{os.path.realpath(self.base_python)}\n{template}".encode())
        self.key = key.hexdigest()[:10]

    def _base_site_packages(self) -> list[str]:
        try:
            done = subprocess.run([self.base_python, "-c", _SITE_PACKAGES], capture_output=True,
                                  text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as problem:
            raise BadInput(f"--base-python {self.base_python}: {problem}") from None
        try:
            listed = json.loads(done.stdout) if done.returncode == 0 else None
        except ValueError:
            listed = None
        if not isinstance(listed, list):
            raise BadInput(f"--base-python {self.base_python}: not a Python interpreter (it did "
                           "not list its site-packages)")
        return [path for path in listed if isinstance(path, str) and Path(path).is_dir()]

    def folder(self, version: str) -> Path:
        return self.root / f"{version}-{self.key}"

    def python(self, version: str) -> Path:
        return self.folder(version) / "bin" / "python"

    def command(self, version: str) -> str:
        """The install template for ``version``: {python} quoted, {version} checked by VERSION."""
        return (self.template.replace("{python}", shlex.quote(str(self.python(version))))
                .replace("{version}", version))

    def shown_command(self, version: str) -> str:
        """The install command as a report may show it: secrets in it masked."""
        command = self.command(version)
        return Redactor.for_launch(shlex.split(command), dict(os.environ)).text(command)

    def install(self, version: str, log: Path) -> Installed:
        """The release's environment: kept from before, or made now (a failed install is
        removed, so the next bisect tries again)."""
        folder, python = self.folder(version), self.python(version)
        if (folder / COMPLETE).is_file():
            return Installed(python=python, ok=True, seconds=0.0, reused=True)
        started = time.monotonic()
        shutil.rmtree(folder, ignore_errors=True)
        self._make(folder)
        with open(log, "wb") as out:
            done = subprocess.run(self.command(version), shell=True, stdout=out,
                                  stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        seconds = round(time.monotonic() - started, 3)
        if done.returncode != 0:
            shutil.rmtree(folder, ignore_errors=True)
            return Installed(python=python, ok=False, seconds=seconds, reused=False,
                             why=f"the install exited with code {done.returncode} (its output: {log})")
        (folder / COMPLETE).write_text(self.shown_command(version) + "\n")
        return Installed(python=python, ok=True, seconds=seconds, reused=False)

    def _make(self, folder: Path) -> None:
        folder.parent.mkdir(parents=True, exist_ok=True)
        made = subprocess.run([self.base_python, "-m", "venv", "--without-pip", str(folder)],
                              capture_output=True, text=True)
        if made.returncode != 0:
            raise EnvironmentProblem(f"{self.base_python} -m venv {folder}: "
                                     f"{(made.stderr.strip().splitlines() or ['failed'])[-1]}")
        asked = subprocess.run([str(folder / "bin" / "python"), "-c",
                                "import sysconfig; print(sysconfig.get_path('purelib'))"],
                               capture_output=True, text=True)
        site = asked.stdout.strip()
        if asked.returncode != 0 or not Path(site).is_dir():
            raise EnvironmentProblem(f"{folder}: the new environment's Python does not start "
                                     f"(exit code {asked.returncode})")
        lines = [f"import site; site.addsitedir({path!r})" for path in self.base_paths]
        (Path(site) / "crashlab-base.pth").write_text("\n".join(lines) + "\n")
