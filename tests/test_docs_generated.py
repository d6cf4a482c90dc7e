"""The manual's reference pages are generated from the code (docs/generate.py): a change to a
schema, a signature rule or a command that is not regenerated leaves a stale page, and this test
names it and the command that fixes it."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
_SPEC = importlib.util.spec_from_file_location("docs_generate", DOCS / "generate.py")
_GENERATOR = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(_GENERATOR)
#: What the generator writes, relative to docs/ (its own list).
GENERATED = _GENERATOR.GENERATED
FIX = "run `python docs/generate.py` and commit docs/"


def files_under(folder: Path) -> dict[str, bytes]:
    found = {}
    for generated in GENERATED:
        path = folder / generated
        paths = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        found.update({p.relative_to(folder).as_posix(): p.read_bytes() for p in paths if p.exists()})
    return found


def differences(fresh: Path, committed: Path) -> list[str]:
    """One line per generated file that is missing, left over or stale in ``committed``."""
    made, kept = files_under(fresh), files_under(committed)
    return ([f"docs/{name} is generated but not committed" for name in sorted(set(made) - set(kept))]
            + [f"docs/{name} is no longer generated" for name in sorted(set(kept) - set(made))]
            + [f"docs/{name} differs from what the code generates" for name in sorted(set(made) & set(kept))
               if made[name] != kept[name]])


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("docs")
    done = subprocess.run([sys.executable, str(DOCS / "generate.py"), "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return out


def test_committed_reference_pages_are_what_the_code_generates(generated):
    assert {"reference/schemas/triage.md", "reference/cli.md", "man/crashlab-inspect.1"} <= set(files_under(generated))
    found = differences(generated, DOCS)
    assert not found, f"{found[0]} ({len(found)} in all): {FIX}"


def test_a_changed_page_and_a_page_no_longer_generated_are_named(generated, tmp_path):
    copy = tmp_path / "docs"
    shutil.copytree(generated, copy)
    rules = copy / "reference" / "signature-rules.md"
    rules.write_text(rules.read_text(encoding="utf-8").replace("clone-suffix", "clone-sufix"), encoding="utf-8")
    (copy / "man" / "crashlab-frobnicate.1").write_text(".TH CRASHLAB-FROBNICATE 1\n", encoding="utf-8")
    assert differences(generated, copy) == ["docs/man/crashlab-frobnicate.1 is no longer generated",
                                            "docs/reference/signature-rules.md differs from what the code generates"]
