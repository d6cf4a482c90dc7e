"""What a command imports, counted: a module a command does not need costs every run of it, and
a count, unlike a time, does not move with the load of the machine the tests run on (the times
are benchmarks/bench_vs_cuda_gdb.py's and bench_startup.py's, in docs/benchmarks.md).

The ceilings are the counts after the terminal view of inspect was made to import only what it
prints with (2026-12), with a few modules of room: a change that needs more raises the ceiling
here, on purpose, and says why in its commit (85 -> 91: every report carries its advice, whose
model, its package, rules and dump reader are four modules, and its kernel_log, whose model and
wording are two; the Xid reader is imported only with --kernel-log).
"""

from __future__ import annotations

import sys

import pytest

from tests.conftest import ROOT, imported_modules

CORE = ROOT / "fixtures" / "synthetic" / "moe_align_out_of_range.nvcudmp"
REAL = ROOT / "fixtures" / "gpu" / "h200" / "null_argument.explain" / "core.1116.nvcudmp"
#: Modules of crashlab and of the libraries it depends on, at most, in the terminal view of a
#: dump (SASS and the explanation included); the standard library's are not counted. 109 library
#: modules since crashlab.cubin reads cubins without pyelftools (158 before); 91 of crashlab's
#: since the report carries a decoded kernel log (its model and its lines, two modules) and its
#: advice (four modules).
MOST_CRASHLAB, MOST_THIRD_PARTY = 91, 120
#: What the terminal view of a dump has no use for: other views and verbs, the environment
#: reader (importlib.metadata's package scan), the debugger driver, HTTP, process watching,
#: cxxfilt (it runs ldconfig at import) and pyelftools (crashlab.cubin reads a cubin with struct;
#: pyelftools and its construct package, which imports pdb, cost more than the reading).
NOT_FOR_THE_TERMINAL_VIEW = ("crashlab.report.markdown", "crashlab.report.run", "crashlab.env",
                             "crashlab.index", "crashlab.gdb", "crashlab.replay",
                             "crashlab.supervise", "crashlab.issue", "cxxfilt", "pexpect",
                             "requests", "psutil", "elftools", "pdb")


def counted(modules: set[str]) -> tuple[set[str], set[str]]:
    """(crashlab's modules, the libraries' modules) of ``modules``; the standard library's and
    the interpreter's start-up hooks (site's .pth files) are left out."""
    ours = {name for name in modules if name.split(".")[0] == "crashlab"}
    libraries = {name for name in modules - ours
                 if name.split(".")[0] not in sys.stdlib_module_names
                 and not name.startswith(("_", "sitecustomize", "__editable__"))}
    return ours, libraries


def _top(names: set[str]) -> list[str]:
    return sorted({name.split(".")[0] for name in names})


@pytest.mark.parametrize("dump", [CORE, REAL], ids=["bundled synthetic", "real H200"])
def test_the_terminal_view_of_a_dump_imports_a_bounded_set(dump):
    imported = imported_modules("inspect", dump)
    assert "crashlab.report.terminal" in imported and "crashlab.explain.engine" in imported
    ours, libraries = counted(imported)
    assert len(ours) <= MOST_CRASHLAB, sorted(ours)
    assert len(libraries) <= MOST_THIRD_PARTY, _top(libraries)
    assert sorted(name for name in imported if name.startswith(NOT_FOR_THE_TERMINAL_VIEW)) == []


def test_json_imports_no_renderer():
    imported = imported_modules("inspect", "--json", CORE)
    assert "crashlab.report.model" in imported
    assert sorted(name for name in imported
                  if name.startswith(("rich", "crashlab.console", "crashlab.report.terminal",
                                      *NOT_FOR_THE_TERMINAL_VIEW))) == []


def test_help_imports_click_and_the_verb_table_only():
    """``crashlab --help``: its crashlab modules are the command line's own, and of the libraries
    only click (tests/test_cli.py holds every verb's --help to the same)."""
    ours, libraries = counted(imported_modules("--help"))
    assert ours <= {"crashlab", "crashlab.version", "crashlab.vocabulary", "crashlab.errors",
                    "crashlab.escape", "crashlab.wrongverb", "crashlab.guard", "crashlab.cli",
                    "crashlab.helpformat"}, \
        sorted(ours)
    assert _top(libraries) == ["click"]
