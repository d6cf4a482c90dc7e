"""Wheels of a tiny package, ``standin-app``, one per version, for ``crashlab bisect --versions``.
SYNTHETIC: built here by the tests, nothing downloaded. ``python -m standin_app --port P
--starts F`` is tests/bisect_history.py's app (the stand-in SGLang server, failing on request
1000 with the crash line its version was built with); pip installs these as any wheel."""

from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path

from tests.bisect_history import APP, ROOT

NAME = "standin_app"


def _digest(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def wheel(folder: Path, version: str, crash: str | None) -> Path:
    """A py3-none-any wheel of standin-app ``version`` (a RECORD pip can check)."""
    info = f"{NAME}-{version}.dist-info"
    app = APP.format(crash=crash, flaky=False, standin=str(ROOT / "tests" / "sglang_server.py"))
    files = {f"{NAME}/__init__.py": f"VERSION = {version!r}\n", f"{NAME}/__main__.py": app,
             f"{info}/METADATA": f"Metadata-Version: 2.1\nName: standin-app\nVersion: {version}\n",
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: crashlab-tests\n"
                              "Root-Is-Purelib: true\nTag: py3-none-any\n"}
    record = [f"{path},sha256={_digest(text.encode())},{len(text.encode())}"
              for path, text in files.items()]
    files[f"{info}/RECORD"] = "\n".join([*record, f"{info}/RECORD,,"]) + "\n"
    path = folder / f"{NAME}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return path


def install_template(folder: Path) -> str:
    """--install for these wheels: from ``folder`` only, no index."""
    return ("{python} -m pip install --quiet --no-deps --ignore-installed --no-index "
            f"--find-links {folder} standin-app=={{version}}")
