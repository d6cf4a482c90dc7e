"""The verb table behind ``crashlab``: --help lists exactly its verbs without importing them, each
entry names a command its module defines, and the options declared once behave the same on every
verb that uses them."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import click
import pytest

from crashlab.cli import VERBS, main
from crashlab.cli.serve import COREDUMP_MODES
from crashlab.hardening import PROFILES
from crashlab.supervise import CoredumpMode
from tests.conftest import ROOT, run_cli

DUMP = ROOT / "fixtures" / "sglang_dumps" / "crash_dump_0.5.23.pkl"
VERB_MODULES = {verb.module for verb in VERBS.values()}


def _listed(help_text: str) -> list[str]:
    """The verbs in the Commands section of crashlab --help: the first word of each entry."""
    section = help_text.split("Commands:", 1)[1]
    return [line.split()[0] for line in section.splitlines()
            if line.startswith("  ") and not line.startswith("   ")]


def test_help_lists_exactly_the_verbs_of_the_table_with_their_summaries():
    done = run_cli("--help")
    assert done.returncode == 0, done.stderr
    text = done.stdout.decode()
    assert _listed(text) == sorted(VERBS)
    listed = " ".join(text.split("Commands:", 1)[1].split())
    assert [name for name, verb in VERBS.items() if f"{name} {verb.summary}" not in listed] == []


@pytest.mark.parametrize("name", sorted(VERBS))
def test_each_entry_names_a_command_its_module_defines(name):
    verb = VERBS[name]
    command = getattr(importlib.import_module(verb.module), verb.attribute)
    assert isinstance(command, click.Command)
    assert command.name == name
    # the table's summary is the line click would make of the command's own help
    assert command.get_short_help_str() == verb.summary
    assert main.commands[name] is command


#: Runs crashlab with the given arguments and, at exit, prints the crashlab.cli modules loaded.
_LOADED = ("import atexit, json, sys\n"
           "atexit.register(lambda: print(json.dumps(sorted(m for m in sys.modules "
           "if m.startswith('crashlab.cli.'))), file=sys.stderr))\n"
           "from crashlab.cli import main\n"
           "main(sys.argv[1:], prog_name='crashlab')")


def _verb_modules_loaded(*args: str) -> set[str]:
    """The verb modules a fresh ``crashlab ARGS`` process loaded (seen in sys.modules at exit:
    -X importtime does not see importlib.import_module)."""
    done = subprocess.run([sys.executable, "-c", _LOADED, *args], capture_output=True, cwd=ROOT,
                          timeout=120)
    return VERB_MODULES & set(json.loads(done.stderr.decode().splitlines()[-1]))


def test_help_imports_no_verb_and_a_verb_only_its_own_module():
    assert _verb_modules_loaded("--help") == set()
    assert _verb_modules_loaded("inspect", "--help") == {"crashlab.cli.inspect"}
    assert _verb_modules_loaded("list", "--help") == {"crashlab.cli.index"}


def test_an_unknown_verb_is_not_looked_up_in_any_module():
    done = run_cli("inspekt", "core")
    assert done.returncode == 2 and b"No such command 'inspekt'" in done.stderr
    assert main.get_command(click.Context(main), "inspekt") is None


def test_harden_offers_the_profiles_it_names():
    harden = next(param for param in main.commands["replay"].params if param.name == "harden")
    assert isinstance(harden.type, click.Choice)
    assert list(harden.type.choices) == list(PROFILES)


def test_serve_offers_the_coredump_modes_of_the_supervisor():
    assert list(COREDUMP_MODES) == [mode.value for mode in CoredumpMode]


@pytest.mark.parametrize("args, out", [
    (["--out", "a.pkl"], "a.pkl"), (["-o", "a.pkl"], "a.pkl"), (["--output", "b.pkl"], "b.pkl"),
    (["--output", "b.pkl", "--out", "a.pkl"], "a.pkl"), (["--out", "a.pkl", "--output", "b.pkl"], "a.pkl"),
    ([], None),
])
def test_out_and_its_former_name_fill_one_parameter(args, out):
    """--out (-o) and its unlisted former name --output are one option: --out wins over it."""
    for verb, name in (("replay", "output"), ("report", "out")):
        context = main.commands[verb].make_context(verb, [str(DUMP), *args])
        given = context.params[name]
        assert (str(given) if given is not None else None) == out
        assert "output_alias" not in context.params


def test_a_verb_is_added_to_the_table_not_to_the_group():
    with pytest.raises(TypeError, match="crashlab.cli.VERBS"):
        main.add_command(click.Command("extra"))
    assert "extra" not in main.commands
