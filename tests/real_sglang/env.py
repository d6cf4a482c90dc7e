"""The environment a real SGLang server runs in on this CPU-only machine, built once and cached.

SGLang's wheel pins CUDA kernels that do not install or load here, so it goes in with --no-deps,
followed by ``requirements-0.5.23.txt`` (everything its HTTP server imports, pinned to the
versions that worked). The environment, about 6 GB, lives outside the clone, in a folder named
by a key made from that file, ``make_model.py`` and the Python version: a second build with the
same inputs finds it and does nothing. Beside the interpreter it holds the tiny local model the
tests serve (``model/``) and ``logit_processor.json``, SGLang's own serialised
DisallowedTokensLogitsProcessor (the request-triggered crash needs it).

    python3 tests/real_sglang/env.py build     # what .ci/get-sglang runs; prints the folder
    python3 tests/real_sglang/env.py where     # the folder, built or not

pip runs with this machine's own configuration; nothing here names a package index.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RELEASE = "0.5.23"
REQUIREMENTS = HERE / f"requirements-{RELEASE}.txt"
MAKE_MODEL = HERE / "make_model.py"
#: Written last: a folder without it is a build that did not finish, and is started over.
COMPLETE = ".complete"


def key() -> str:
    digest = hashlib.sha256()
    for part in (REQUIREMENTS.read_bytes(), MAKE_MODEL.read_bytes(),
                 f"{sys.version_info.major}.{sys.version_info.minor}".encode()):
        digest.update(hashlib.sha256(part).digest())
    return digest.hexdigest()[:12]


def cache_root() -> Path:
    explicit = os.environ.get("CRASHLAB_SGLANG_CACHE")
    if explicit:
        return Path(explicit)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "crashlab"


def folder() -> Path:
    return cache_root() / f"sglang-{RELEASE}-py{sys.version_info.major}{sys.version_info.minor}-{key()}"


def ready() -> Path | None:
    """The environment's folder if a build finished there, else None."""
    where = folder()
    return where if (where / COMPLETE).is_file() else None


def _pip(python: Path, *args: str) -> None:
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                    "--no-deps", *args], check=True)


def build() -> Path:
    where = folder()
    if ready():
        return where
    started = time.monotonic()
    shutil.rmtree(where, ignore_errors=True)
    where.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True)
    python = where / "bin" / "python"
    _pip(python, f"sglang=={RELEASE}")
    _pip(python, "-r", str(REQUIREMENTS))
    subprocess.run([str(python), str(MAKE_MODEL), str(where)], check=True)
    seconds = time.monotonic() - started
    size = sum(f.stat().st_size for f in where.rglob("*") if f.is_file() and not f.is_symlink())
    (where / COMPLETE).write_text(f"built in {seconds:.0f} s, {size / 1e9:.1f} GB\n")
    return where


def main(argv: list[str]) -> int:
    if argv[1:] == ["build"]:
        where = build()
        print(f"sglang {RELEASE} environment: {where} ({(where / COMPLETE).read_text().strip()})")
        return 0
    if argv[1:] == ["where"]:
        print(folder())
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
