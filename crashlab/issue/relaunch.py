"""The launch command a maintainer can run, made from the one a request dump recorded.

SGLang records its launch as ``" ".join(sys.argv)``; under ``python -m sglang.launch_server``
the first word is the module's file (``.../site-packages/sglang/launch_server.py``), which is not
executable (a shell says exit 126) and, run by path, would not import as the package does. A
file inside a site folder becomes that installation's interpreter with ``-m`` and the module's
name; any other ``.py`` file is given to ``python3``; anything else (a console script such as
``sglang``, an interpreter already first) is left as recorded. serve's launch line needs none of
this: it is the argv that was run.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

#: ``<prefix>/lib/python3.11/site-packages/`` (a venv, conda, /usr/local) or Debian's
#: ``/usr/lib/python3/dist-packages/``; the interpreter is ``<prefix>/bin/python3.11``.
_SITE = re.compile(r"^(?P<prefix>.*)/lib/(?P<python>python\d+(?:\.\d+)?)/(?:site|dist)-packages/"
                   r"(?P<module>.+)\.py$")
FALLBACK_INTERPRETER = "python3"


def runnable(argv: list[str]) -> list[str]:
    """``argv`` as a command that runs: see the module's docstring."""
    if not argv or not argv[0].endswith(".py"):
        return argv
    script, arguments = argv[0], argv[1:]
    site = _SITE.match(script)
    if site:
        module = site["module"].replace("/", ".").removesuffix(".__main__")
        return [f"{site['prefix']}/bin/{site['python']}", "-m", module, *arguments]
    path = PurePosixPath(script)
    if path.parent.name == "sglang":  # sglang imported from a source checkout
        return [FALLBACK_INTERPRETER, "-m", f"sglang.{path.stem}", *arguments]
    return [FALLBACK_INTERPRETER, script, *arguments]
